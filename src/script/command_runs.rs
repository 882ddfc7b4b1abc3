//! The `-c` command's runs (one, or `--repeat N`), as `command_runs()`
//! gives them to a script: each run's exit status, wall and CPU time, peak
//! memory and, where the machine has a hardware PMU, the instructions it
//! retired. These are the measures that don't depend on how busy the
//! machine is: a budget or `regression()` on CPU time or instructions
//! flakes far less than one on wall time. Each run is also a testcase of
//! its own in the reports.

use std::sync::Mutex;

use rhai::{Array, Dynamic, Engine, Map};

use crate::output::junit::CommandEnd;

/// One finished run of the `-c` command.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandRun {
    pub pid: i32,
    pub end: CommandEnd,
    /// From release to exit.
    pub seconds: f64,
    /// CPU time in user and kernel mode, of the command and the children it waited for.
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Peak resident memory of the largest of them, in KiB.
    pub max_rss_kb: u64,
    /// User-mode instructions retired by the command and everything it
    /// started, or why they could not be counted.
    pub instructions: Result<u64, String>,
}

static RUNS: Mutex<Vec<CommandRun>> = Mutex::new(Vec::new());

/// A run ended: keep it for `command_runs()` and report it as a testcase
/// (`command`, or `command run K of N` with `--repeat`).
pub fn record(command: &str, run: CommandRun, of: u32) {
    let mut runs = RUNS.lock().unwrap();
    let k = runs.len() as u32 + 1;
    super::checks::record_command(command, run.end, run.seconds, (of > 1).then_some((k, of)));
    runs.push(run);
}

pub fn install(engine: &mut Engine) {
    engine.register_fn("command_runs", || -> Array { RUNS.lock().unwrap().iter().map(as_rhai).collect() });
}

/// `#{run, pid, status, signal, wall_ns, cpu_ns, user_ns, sys_ns,
/// max_rss_kb, instructions, unmeasured}`: `status` is `()` when rtrace
/// ended the command, `signal` when no signal did; `instructions` is `()`
/// where they could not be counted, and `unmeasured.instructions` says why.
fn as_rhai(run: &CommandRun) -> Dynamic {
    let int = |v: u64| Dynamic::from(v.min(i64::MAX as u64) as i64);
    let mut m = Map::new();
    m.insert("pid".into(), Dynamic::from(run.pid as i64));
    let (status, signal) = match run.end {
        CommandEnd::Exited(code) => (Dynamic::from(code as i64), Dynamic::UNIT),
        CommandEnd::Killed(sig) => (Dynamic::from(128 + sig as i64), Dynamic::from(sig as i64)),
        CommandEnd::EndedByRtrace => (Dynamic::UNIT, Dynamic::UNIT),
    };
    m.insert("status".into(), status);
    m.insert("signal".into(), signal);
    m.insert("wall_ns".into(), int((run.seconds * 1e9).round() as u64));
    m.insert("cpu_ns".into(), int(run.user_ns + run.sys_ns));
    m.insert("user_ns".into(), int(run.user_ns));
    m.insert("sys_ns".into(), int(run.sys_ns));
    m.insert("max_rss_kb".into(), int(run.max_rss_kb));
    let mut unmeasured = Map::new();
    match &run.instructions {
        Ok(n) => {
            m.insert("instructions".into(), int(*n));
        }
        Err(why) => {
            m.insert("instructions".into(), Dynamic::UNIT);
            unmeasured.insert("instructions".into(), Dynamic::from(why.clone()));
        }
    }
    m.insert("unmeasured".into(), Dynamic::from(unmeasured));
    Dynamic::from(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_as_a_script_sees_it() {
        let run = CommandRun {
            pid: 42,
            end: CommandEnd::Killed(11),
            seconds: 0.25,
            user_ns: 3_000,
            sys_ns: 500,
            max_rss_kb: 1024,
            instructions: Err("no PMU".into()),
        };
        let m = as_rhai(&run).cast::<Map>();
        assert_eq!(m["status"].as_int(), Ok(139));
        assert_eq!(m["signal"].as_int(), Ok(11));
        assert_eq!(m["wall_ns"].as_int(), Ok(250_000_000));
        assert_eq!(m["cpu_ns"].as_int(), Ok(3_500));
        assert!(m["instructions"].is_unit());
        let why = m["unmeasured"].clone().cast::<Map>();
        assert_eq!(why["instructions"].clone().into_string().unwrap(), "no PMU");
        let ok = CommandRun { end: CommandEnd::Exited(0), instructions: Ok(7), ..run };
        let m = as_rhai(&ok).cast::<Map>();
        assert_eq!((m["status"].as_int(), m["signal"].is_unit(), m["instructions"].as_int()), (Ok(0), true, Ok(7)));
        assert!(m["unmeasured"].clone().cast::<Map>().is_empty());
    }
}
