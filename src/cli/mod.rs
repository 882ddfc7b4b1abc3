//! Command line: parse options, load the script, compile, then explain,
//! dry-run or run it. Errors come back as one line; the exit status follows
//! design.md §1.

mod args;
pub mod explain;
mod info;
pub mod list;
mod source;
mod usage;

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use usage::usage;

use crate::compile::{self, Options};
use crate::output::sink;
use crate::runtime::target::TracedProcess;
use crate::runtime::{self, RunOptions};
use crate::script::{parse_duration, Session};

pub use args::Cli;

/// Run the command line; returns the process exit status.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = run(cli);
    crate::output::sink::flush_all();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", one_line(&e));
            usage::exit_status(&e)
        }
    }
}

fn one_line(e: &anyhow::Error) -> String {
    let msg = format!("{e:#}");
    let first = without_errno_numbers(msg.lines().next().unwrap_or(""));
    if first.starts_with("rtrace") || first.contains(": error:") {
        first
    } else {
        format!("rtrace: error: {first}")
    }
}

/// Drop the ` (os error N)` that system errors carry: the text before it
/// already says what went wrong.
fn without_errno_numbers(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " (os error ".len()..];
        match tail.find(')') {
            Some(close) if tail[..close].chars().all(|c| c.is_ascii_digit()) => rest = &tail[close + 1..],
            _ => {
                out.push_str(" (os error ");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn run(cli: Cli) -> Result<i32> {
    sink::set_no_warnings(cli.no_warnings);
    if cli.info {
        return info::run();
    }
    if cli.list {
        return list::run(cli.rest.first().map(String::as_str), cli.verbose);
    }
    let (file_name, source, args) = match &cli.source {
        Some(src) => ("-e".to_string(), src.clone(), cli.rest.clone()),
        None => {
            let Some(path) = cli.rest.first() else {
                return Err(usage(
                    "rtrace: error: no script given: run `rtrace SCRIPT.rhai`, `rtrace -e 'SOURCE'` or `rtrace -` (see --help)",
                ));
            };
            let (name, text) = source::read(path)?;
            (name, text, cli.rest[1..].to_vec())
        }
    };
    let format = match cli.format.as_str() {
        "text" => sink::Format::Text,
        "json" => sink::Format::Json,
        other => return Err(usage(format!("rtrace: error: unknown output format '{other}' (use text or json)"))),
    };
    sink::set_buffering(match cli.buffering.as_deref() {
        Some("none") => sink::Buffering::None,
        Some("line") => sink::Buffering::Line,
        Some("full") => sink::Buffering::Full,
        _ => sink::Buffering::Batch,
    });
    sink::init(format, cli.output.as_deref()).map_err(|e| anyhow!("cannot open output: {e}"))?;
    let duration: Option<Duration> = match &cli.duration {
        Some(d) => Some(
            parse_duration(d)
                .ok_or_else(|| usage(format!("rtrace: error: -d {d}: not a duration; write e.g. 5s or 100ms")))?,
        ),
        None => None,
    };

    let mut session = Session::new(&file_name, &source, &args)?;
    session.run_top_level()?;
    if let Some(code) = session.registry.lock().unwrap().exit_code {
        // exit() at the top level: nothing gets attached.
        return Ok(code);
    }
    if !cli.allow_unsafe {
        if let Some(pos) = crate::script::userlib::find_system_call(&session.ast) {
            bail!(
                "{file_name}:{}: error: system() runs commands and needs --unsafe",
                crate::script::position_text(pos)
            );
        }
    }
    let ring_size = ring_size(cli.ring_size.as_deref())?;
    if cli.pid.is_some() && cli.command.is_some() {
        return Err(usage("rtrace: error: -p and -c can't be used together"));
    }
    let mut traced = match (&cli.pid, &cli.command) {
        (Some(pid), _) => Some(TracedProcess::existing(*pid)?),
        (_, Some(cmd)) if !cli.explain && !cli.dry_run => Some(TracedProcess::spawn_held(cmd)?),
        _ => None,
    };
    if let Some(t) = &traced {
        crate::attach::set_target_pid(t.pid);
        if cli.command.is_some() {
            crate::attach::set_follow_children();
        }
    }
    let stack_depth = env_number("RTRACE_STACK_DEPTH", 127, 1, 127)?;
    let opts = Options { str_max: str_max()?, start_ns: monotonic_ns(), ring_size, stack_depth };
    let plan = compile::compile(&session, &opts)?;
    if cli.explain {
        explain::print(&session, &plan, &source);
        return Ok(0);
    }
    check_privileges()?;
    let run_opts = RunOptions {
        duration,
        quiet: cli.quiet,
        dry_run: cli.dry_run,
        keep_going: cli.keep_going,
        ring_size,
        verbose: cli.verbose,
    };
    let result = runtime::run(&session, &plan, &run_opts, traced.as_mut());
    if let Some(t) = traced.as_mut() {
        t.stop();
    }
    let code = result?;
    Ok(code)
}

/// Data ring size: `--ring-size`, else env RTRACE_RING_SIZE, else 1 MiB;
/// rounded up to a power of two (the kernel requires it).
fn ring_size(flag: Option<&str>) -> Result<u32> {
    let text = match flag {
        Some(t) => t.to_string(),
        None => match std::env::var("RTRACE_RING_SIZE") {
            Ok(v) => v,
            Err(_) => return Ok(1 << 20),
        },
    };
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1u64 << 20),
        _ => (t, 1u64),
    };
    let bytes = num.parse::<u64>().ok().map(|n| n * mult).filter(|&n| (4096..=(1u64 << 30)).contains(&n));
    match bytes {
        Some(b) => Ok(b.next_power_of_two() as u32),
        None => Err(usage(format!("rtrace: error: ring size '{text}': give a size from 4K to 1G, e.g. 4M"))),
    }
}

/// A numeric setting from the environment, within [lo, hi].
pub fn env_number(name: &str, default: u32, lo: u32, hi: u32) -> Result<u32> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.parse::<u32>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => bail!("{name}={v}: must be a number from {lo} to {hi}"),
        },
    }
}

/// `str()`'s default maximum length: env RTRACE_STRLEN (1..=200), default 64.
fn str_max() -> Result<u32> {
    match std::env::var("RTRACE_STRLEN") {
        Err(_) => Ok(64),
        Ok(v) => match v.parse::<u32>() {
            Ok(n) if (1..=200).contains(&n) => Ok(n),
            _ => bail!("RTRACE_STRLEN={v}: must be a number from 1 to 200"),
        },
    }
}

/// CLOCK_MONOTONIC now, as BPF's ktime_get_ns sees it.
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN).
pub(crate) fn check_privileges() -> Result<()> {
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("tracing needs root, or the CAP_BPF and CAP_PERFMON capabilities: run with sudo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_numbers_are_dropped() {
        assert_eq!(
            without_errno_numbers("cannot open x: No such file or directory (os error 2); use y (os error 13)"),
            "cannot open x: No such file or directory; use y"
        );
        assert_eq!(without_errno_numbers("keep (os error here)"), "keep (os error here)");
    }
}
