//! Running the commands of `system()` and `exec()`: off the event path, one
//! at a time, on a worker thread fed by a bounded queue ([`QUEUE`]).
//!
//! What keeps a hook safe to leave running lives here: a command that runs
//! past `--command-timeout` is killed (its whole process group); each call
//! site starts at most `--command-rate` commands a second (a token bucket,
//! bursts up to the same number), the calls over it counted, not run; a full
//! queue drops and counts. Every command is audited when it ends (ran, its
//! failure, or the timeout), and every call that did not run is counted per
//! call site and reported at exit (and on `/metrics` as `rtrace_actions`).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use rhai::Position;

use crate::output::{audit, sink};

/// Commands waiting to run; more are dropped (and counted).
pub const QUEUE: usize = 256;
/// How long rtrace waits at exit for queued commands.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);
/// `--command-timeout`'s default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What to run: a `/bin/sh -c` script with its values as positional
/// parameters (`system()`), or an argument vector run without a shell
/// (`exec()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    Shell(ShellCommand),
    Argv(Vec<String>),
}

/// A command for `/bin/sh -c`: the script, and the values it reads as its
/// positional parameters (`"${1}"`...). The values never become shell code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellCommand {
    pub script: String,
    pub values: Vec<String>,
    /// As the user would read it (the values in place), for messages.
    pub shown: String,
}

impl Job {
    /// The call as the audit shows it: `system("kill -9 42")`, `exec(["logger", "x"])`.
    pub fn shown(&self) -> String {
        match self {
            Job::Shell(c) => format!("system({:?})", c.shown),
            Job::Argv(argv) => format!("exec({argv:?})"),
        }
    }

    /// `system` or `exec`.
    pub fn name(&self) -> &'static str {
        match self {
            Job::Shell(_) => "system",
            Job::Argv(_) => "exec",
        }
    }

    fn command(&self) -> Command {
        match self {
            Job::Shell(c) => {
                let mut cmd = Command::new("/bin/sh");
                cmd.arg("-c").arg(&c.script).arg("rtrace").args(&c.values);
                cmd
            }
            Job::Argv(argv) => {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                cmd
            }
        }
    }
}

/// `--command-rate` and `--command-timeout`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Commands a call site may start per second (None: no limit).
    pub rate: Option<f64>,
    /// How long a command may run (None: no limit).
    pub timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { rate: None, timeout: Some(DEFAULT_TIMEOUT) }
    }
}

static LIMITS: Mutex<Limits> = Mutex::new(Limits { rate: None, timeout: Some(DEFAULT_TIMEOUT) });

/// Set before the script runs.
pub fn set_limits(limits: Limits) {
    *LIMITS.lock().unwrap_or_else(|e| e.into_inner()) = limits;
}

fn limits() -> Limits {
    *LIMITS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why calls at one site did not run, counted for the report at exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NotRun {
    /// Over `--command-rate`.
    RateLimited,
    /// The queue was full.
    Dropped,
    /// Still queued or running when rtrace stopped waiting at exit.
    Unfinished,
}

impl NotRun {
    /// The outcome label on `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            NotRun::RateLimited => "rate_limited",
            NotRun::Dropped => "dropped",
            NotRun::Unfinished => "unfinished",
        }
    }
}

/// A call site: (line, col) and the function's name.
type Site = (usize, usize, &'static str);

fn site(pos: Position, name: &'static str) -> Site {
    (pos.line().unwrap_or(0), pos.position().unwrap_or(0), name)
}

static NOT_RUN: Mutex<BTreeMap<(Site, NotRun), u64>> = Mutex::new(BTreeMap::new());

fn not_run(site: Site, why: NotRun) {
    *NOT_RUN.lock().unwrap_or_else(|e| e.into_inner()).entry((site, why)).or_default() += 1;
    audit::count(site.2, why.label());
}

/// One call site's token bucket for `--command-rate`.
struct Bucket {
    tokens: f64,
    at: Instant,
}

static BUCKETS: Mutex<BTreeMap<Site, Bucket>> = Mutex::new(BTreeMap::new());

/// Whether a command may start now at `site` under `rate` per second.
fn admit(site: Site, rate: f64, now: Instant) -> bool {
    let mut buckets = BUCKETS.lock().unwrap_or_else(|e| e.into_inner());
    let burst = rate.max(1.0);
    let b = buckets.entry(site).or_insert(Bucket { tokens: burst, at: now });
    b.tokens = (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate).min(burst);
    b.at = now;
    if b.tokens >= 1.0 {
        b.tokens -= 1.0;
        true
    } else {
        false
    }
}

/// Whether a call at `pos` may go ahead under `--command-rate` (also under
/// `--monitor`, so what it shows is what a real run would do); a call
/// over the rate is counted.
pub fn within_rate(pos: Position, name: &'static str) -> bool {
    let Some(rate) = limits().rate else { return true };
    let site = site(pos, name);
    let ok = admit(site, rate, Instant::now());
    if !ok {
        not_run(site, NotRun::RateLimited);
    }
    ok
}

static ABANDON: AtomicBool = AtomicBool::new(false);
/// Process group of the command running now (0: none).
static RUNNING: AtomicI32 = AtomicI32::new(0);

struct Worker {
    jobs: Option<Sender<(Job, Position)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

static WORKER: OnceLock<Mutex<Worker>> = OnceLock::new();

fn worker() -> &'static Mutex<Worker> {
    WORKER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded::<(Job, Position)>(QUEUE);
        let thread = std::thread::Builder::new().name("rtrace-system".into()).spawn(move || {
            for (job, pos) in rx {
                if ABANDON.load(Ordering::SeqCst) {
                    not_run(site(pos, job.name()), NotRun::Unfinished);
                    continue;
                }
                let (outcome, result) = run_one(&job, limits().timeout);
                audited(pos, job.shown(), outcome, result);
            }
        });
        Mutex::new(Worker { jobs: Some(tx), thread: thread.ok() })
    })
}

/// Queue `job` (from the call at `pos`); a full queue drops it, counted.
pub fn submit(job: Job, pos: Position) {
    let name = job.name();
    let Ok(w) = worker().lock() else { return };
    let queued = w.jobs.as_ref().is_some_and(|tx| match tx.try_send((job, pos)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
    });
    if !queued {
        not_run(site(pos, name), NotRun::Dropped);
    }
}

/// The audit line of an action of userspace code at `pos`.
pub fn audited(pos: Position, action: String, outcome: audit::Outcome, result: String) {
    let pos = pos.line().map(|l| crate::diag::Pos { line: l as u32, col: pos.position().unwrap_or(1) as u32 });
    sink::action(&audit::ActionRecord::userspace(pos, action, outcome, result));
}

/// Run one command, killing it after `timeout`; what became of it.
fn run_one(job: &Job, timeout: Option<Duration>) -> (audit::Outcome, String) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let child = job.command().stdin(Stdio::null()).stdout(Stdio::piped()).process_group(0).spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let what = match job {
                Job::Shell(_) => "/bin/sh".to_string(),
                Job::Argv(argv) => argv[0].clone(),
            };
            return (audit::Outcome::Failed, format!("cannot start {what}: {e}"));
        }
    };
    let pgid = child.id() as i32;
    RUNNING.store(pgid, Ordering::SeqCst);
    // The output is read beside the wait, so a chatty command can't block on a full pipe.
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut out);
        }
        out
    });
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut pause = Duration::from_micros(200);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            RUNNING.store(0, Ordering::SeqCst);
            let _ = reader.join();
            let t = timeout.unwrap_or_default();
            return (audit::Outcome::TimedOut, format!("killed after {} (--command-timeout)", shown_duration(t)));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    // The command's own background children may hold the pipe: don't wait for them.
    let out = if status.is_ok() { reader.join().unwrap_or_default() } else { Vec::new() };
    RUNNING.store(0, Ordering::SeqCst);
    if !out.is_empty() {
        crate::output::records::text_record("syscall", &String::from_utf8_lossy(&out));
        sink::flush();
    }
    match status {
        Ok(s) if s.success() => (audit::Outcome::Done, "ran".to_string()),
        Ok(s) => (audit::Outcome::Failed, describe(s)),
        Err(e) => (audit::Outcome::Failed, e.to_string()),
    }
}

fn shown_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("the command failed with exit status {c}"),
        (None, Some(s)) => format!("the command was killed by signal {s}"),
        _ => "the command failed".to_string(),
    }
}

/// At exit: wait up to [`EXIT_WAIT`] for the queued commands, then stop
/// waiting (killing the one running); report, per call site, the calls
/// that did not run and why.
pub fn finish(file: &str) {
    if let Some(worker) = WORKER.get() {
        let thread = {
            let mut w = worker.lock().unwrap_or_else(|e| e.into_inner());
            w.jobs = None;
            w.thread.take()
        };
        if let Some(t) = thread {
            let deadline = Instant::now() + EXIT_WAIT;
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if !t.is_finished() {
                ABANDON.store(true, Ordering::SeqCst);
                let pgid = RUNNING.load(Ordering::SeqCst);
                if pgid > 0 {
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
            }
            let _ = t.join();
        }
    }
    let rate = limits().rate.unwrap_or(0.0);
    for (((line, col, name), why), n) in std::mem::take(&mut *NOT_RUN.lock().unwrap_or_else(|e| e.into_inner())) {
        let why = match why {
            NotRun::RateLimited => format!("over --command-rate {rate}/s, not run"),
            NotRun::Dropped => format!("dropped: more than {QUEUE} commands were waiting to run"),
            NotRun::Unfinished => {
                format!("did not finish: rtrace waits at most {}s for commands at exit", EXIT_WAIT.as_secs())
            }
        };
        sink::warn(format!("{file}:{line}:{col}: {n} {name}() call(s) {why}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_site_starts_at_most_rate_commands_a_second() {
        let site = (1, 1, "system");
        let t0 = Instant::now();
        // A burst of the rate, then one per 1/rate seconds.
        let first: usize = (0..100).filter(|_| admit(site, 5.0, t0)).count();
        assert_eq!(first, 5);
        assert!(!admit(site, 5.0, t0 + Duration::from_millis(100)));
        assert!(admit(site, 5.0, t0 + Duration::from_millis(300)));
        // A flood of 100,000 calls over 10 s: 5 + 5 * 10 run.
        let site = (2, 1, "exec");
        let ran = (0..100_000).filter(|i| admit(site, 5.0, t0 + Duration::from_micros(i * 100))).count();
        assert_eq!(ran, 5 + 50 - 1, "the last call comes at 9.9999 s");
        // Another site has its own bucket.
        assert!(admit((3, 1, "system"), 5.0, t0));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_its_children() {
        let dir = std::env::temp_dir().join(format!("rtrace-timeout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mark = dir.join("late");
        let script = format!("(sleep 1; touch {}) & sleep 30", mark.display());
        let job = Job::Shell(ShellCommand { script: script.clone(), values: vec![], shown: script });
        let (outcome, result) = run_one(&job, Some(Duration::from_millis(100)));
        assert_eq!(outcome, audit::Outcome::TimedOut);
        assert_eq!(result, "killed after 100ms (--command-timeout)");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!mark.exists(), "the command's child ran on");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn exec_runs_its_argv_without_a_shell() {
        let dir = std::env::temp_dir().join(format!("rtrace-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let x = dir.join("X");
        let hostile = format!("a;touch {0} $(touch {0}) `touch {0}`\ntouch {0}", x.display());
        let job = Job::Argv(vec!["test".into(), "-e".into(), hostile]);
        let (outcome, result) = run_one(&job, None);
        assert_eq!((outcome, result.as_str()), (audit::Outcome::Failed, "the command failed with exit status 1"));
        assert!(!x.exists(), "a shell read the argument");
        let job = Job::Argv(vec!["/nonexistent/prog".into()]);
        let (outcome, result) = run_one(&job, None);
        assert_eq!(outcome, audit::Outcome::Failed);
        assert!(result.starts_with("cannot start /nonexistent/prog: "), "{result}");
        assert_eq!(Job::Argv(vec!["logger".into(), "a b".into()]).shown(), r#"exec(["logger", "a b"])"#);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
