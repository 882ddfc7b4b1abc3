//! Every setting, resolved once: the command-line flags and the `RTRACE_*`
//! environment variables are parsed and range-checked here into one
//! [`Config`], which the rest of rtrace reads. No other file reads the
//! environment (except `symbols`, for `PATH`).

use std::time::Duration;

use anyhow::{bail, Result};

/// The process being traced: `-p PID`, or the command `-c` started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Uprobes attach to it only and every probe filters on it.
    pub pid: Option<i32>,
    /// `-c`: processes the command starts (at any depth) are traced too.
    pub follow_children: bool,
}

/// The settings of one run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Default `str()` length (env `RTRACE_STRLEN`, 1 to 200, default 64).
    pub str_max: u32,
    /// Size of the data ring buffer in bytes, a power of two from 4 KiB to
    /// 1 GiB (`--ring-size`, else env `RTRACE_RING_SIZE`, default 1 MiB).
    pub ring_size: u32,
    /// Frames kept per stack when the script gives no limit (env
    /// `RTRACE_STACK_DEPTH`, 1 to 127, default 127).
    pub stack_depth: u32,
    /// Entries of each stack map (env `RTRACE_STACK_ENTRIES`, 16 to 2^20;
    /// default: sized from the depth).
    pub stack_entries: Option<u32>,
    /// Strings read from a `char **` tracepoint field for `join()` (env
    /// `RTRACE_JOIN_MAX`, 1 to 16, default 6).
    pub join_max: u32,
    /// With `--keep-going`: how many runtime errors are shown (the rest are counted).
    pub errors_shown: u64,
    /// The most probes one script may attach after wildcard expansion (env
    /// `RTRACE_MAX_PROBES`, 1 to 2^20, default 1024).
    pub max_probes: usize,
    /// The fewest syscall tracepoints of one direction, in one probe(), that
    /// go on one `raw_syscalls` program dispatching on the syscall number
    /// (env `RTRACE_SYSCALL_DISPATCH`, 0 to 2^20, default 8; 0: never).
    /// Fewer keep a tracepoint each: the `raw_syscalls` program runs on
    /// every syscall, a syscall tracepoint's only on its own
    /// (docs/probes-kernel.md gives the figures).
    pub syscall_dispatch: usize,
    /// Print the verifier's whole log when it refuses a program (env
    /// `RTRACE_VERIFIER_LOG` set).
    pub verifier_log: bool,
    /// Report why symbolization failed (env `RTRACE_DEBUG_SYMBOLS` set).
    pub debug_symbols: bool,
    /// CLOCK_MONOTONIC at start, for `e.elapsed`.
    pub start_ns: i64,
    pub trace: Trace,
    /// `-d`: stop after this long.
    pub duration: Option<Duration>,
    /// `-q`: no "Attaching N probes..." line.
    pub quiet: bool,
    /// `--dry-run`: load through the verifier, attach nothing.
    pub dry_run: bool,
    /// `--keep-going`: count errors in userspace statements instead of stopping.
    pub keep_going: bool,
    /// `--no-split`: every probe closure runs whole in userspace.
    pub no_split: bool,
    /// `--serve ADDR:PORT`: serve maps as metrics there.
    pub serve: Option<String>,
    /// `--metrics-prefix`: the prefix of map metric names.
    pub metrics_prefix: String,
    /// `-v`: per-probe overhead at exit.
    pub verbose: bool,
    /// `--exporter`: no map dump at exit; SIGHUP ends the run for a reload.
    pub exporter: bool,
    /// `-k` (1): count failed map updates and deletes per statement; `-kk`
    /// (2): failed memory reads too; 0: no checks.
    pub check_helpers: u8,
    /// `--unsafe`: scripts may act (run commands, send signals).
    pub allow_unsafe: bool,
    /// `--monitor`: every action is audited but none is taken.
    pub monitor: bool,
    /// What a point of a wildcard probe that can't be attached does
    /// (`--missing-probes`, else env `RTRACE_MISSING_PROBES`, default warn).
    pub missing_probes: MissingProbes,
}

/// bpftrace's `missing_probes` setting: what becomes of an attach point of a
/// probe with several (a wildcard, a list) that the kernel refuses. A probe
/// with one point, or none of whose points attach, is always an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingProbes {
    /// The run fails, naming the point.
    Error,
    /// One warning per point, the run goes on with the rest.
    #[default]
    Warn,
    /// Skipped silently.
    Ignore,
}

impl MissingProbes {
    /// `error`, `warn` or `ignore`.
    pub fn parse(text: &str) -> Option<MissingProbes> {
        match text.trim() {
            "error" => Some(MissingProbes::Error),
            "warn" => Some(MissingProbes::Warn),
            "ignore" => Some(MissingProbes::Ignore),
            _ => None,
        }
    }
}

/// Where settings come from: the environment in a run, a map in tests.
pub trait Env {
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    }
}

impl Config {
    /// The settings from the environment, with `ring_size_flag` (`--ring-size`)
    /// taking precedence over `RTRACE_RING_SIZE`; flags default to off.
    pub fn from_env(env: &dyn Env, ring_size_flag: Option<&str>) -> Result<Config> {
        let ring_text = ring_size_flag.map(str::to_string).or_else(|| env.get("RTRACE_RING_SIZE"));
        Ok(Config {
            str_max: number(env, "RTRACE_STRLEN", 64, 1, 200)?,
            ring_size: match ring_text {
                Some(t) => ring_size(&t)?,
                None => 1 << 20,
            },
            stack_depth: number(env, "RTRACE_STACK_DEPTH", 127, 1, 127)?,
            stack_entries: match env.get("RTRACE_STACK_ENTRIES") {
                Some(_) => Some(number(env, "RTRACE_STACK_ENTRIES", 0, 16, 1 << 20)?),
                None => None,
            },
            join_max: number(env, "RTRACE_JOIN_MAX", 6, 1, 16)?,
            errors_shown: number(env, "RTRACE_ERRORS_SHOWN", 1, 0, u32::MAX)? as u64,
            max_probes: number(env, "RTRACE_MAX_PROBES", 1024, 1, 1 << 20)? as usize,
            syscall_dispatch: number(env, "RTRACE_SYSCALL_DISPATCH", 8, 0, 1 << 20)? as usize,
            verifier_log: env.get("RTRACE_VERIFIER_LOG").is_some(),
            debug_symbols: env.get("RTRACE_DEBUG_SYMBOLS").is_some(),
            start_ns: monotonic_ns(),
            trace: Trace::default(),
            duration: None,
            quiet: false,
            dry_run: false,
            keep_going: false,
            no_split: env.get("RTRACE_NO_SPLIT").is_some_and(|v| !v.is_empty() && v != "0"),
            serve: None,
            metrics_prefix: String::new(),
            verbose: false,
            exporter: false,
            check_helpers: 0,
            allow_unsafe: false,
            monitor: false,
            missing_probes: match env.get("RTRACE_MISSING_PROBES") {
                Some(v) => match MissingProbes::parse(&v) {
                    Some(m) => m,
                    None => bail!("RTRACE_MISSING_PROBES={v}: must be error, warn or ignore"),
                },
                None => MissingProbes::Warn,
            },
        })
    }

    /// The defaults, with no environment (tests).
    #[cfg(test)]
    pub fn defaults() -> Config {
        struct NoSettings;
        impl Env for NoSettings {
            fn get(&self, _name: &str) -> Option<String> {
                None
            }
        }
        let mut c = Config::from_env(&NoSettings, None).expect("the defaults are in range");
        c.start_ns = 0;
        c
    }

    /// Pending bytes in the data ring that wake the reader.
    pub fn wake_bytes(&self) -> u32 {
        (self.ring_size / 8).max(64)
    }
}

/// A numeric setting within [lo, hi], `default` when unset.
fn number(env: &dyn Env, name: &str, default: u32, lo: u32, hi: u32) -> Result<u32> {
    match env.get(name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => bail!("{name}={v}: must be a number from {lo} to {hi}"),
        },
    }
}

/// A ring size such as `4M`, `512K` or `65536`, from 4 KiB to 1 GiB,
/// rounded up to a power of two (the kernel requires it).
pub fn ring_size(text: &str) -> Result<u32> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1u64 << 20),
        _ => (t, 1u64),
    };
    let bytes =
        num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)).filter(|&n| (4096..=(1u64 << 30)).contains(&n));
    match bytes {
        Some(b) => Ok(b.next_power_of_two() as u32),
        None => bail!("ring size '{text}': give a size from 4K to 1G, e.g. 4M"),
    }
}

/// CLOCK_MONOTONIC now, as BPF's ktime_get_ns sees it.
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    impl Env for HashMap<&str, &str> {
        fn get(&self, name: &str) -> Option<String> {
            HashMap::get(self, name).map(|v| v.to_string())
        }
    }

    #[test]
    fn defaults_without_settings() {
        let c = Config::from_env(&HashMap::new(), None).unwrap();
        assert_eq!((c.str_max, c.ring_size, c.stack_depth, c.stack_entries), (64, 1 << 20, 127, None));
        assert_eq!((c.join_max, c.max_probes, c.verifier_log, c.debug_symbols), (6, 1024, false, false));
        assert_eq!(c.wake_bytes(), (1 << 20) / 8);
    }

    #[test]
    fn settings_are_range_checked_once() {
        let env = HashMap::from([("RTRACE_STRLEN", "200"), ("RTRACE_RING_SIZE", "5K"), ("RTRACE_VERIFIER_LOG", "")]);
        let c = Config::from_env(&env, None).unwrap();
        assert_eq!((c.str_max, c.ring_size, c.verifier_log), (200, 8192, true));
        assert_eq!(Config::from_env(&env, Some("4M")).unwrap().ring_size, 4 << 20);
        for (name, bad) in [
            ("RTRACE_STRLEN", "0"),
            ("RTRACE_STACK_DEPTH", "128"),
            ("RTRACE_STACK_ENTRIES", "8"),
            ("RTRACE_JOIN_MAX", "x"),
            ("RTRACE_MAX_PROBES", "0"),
        ] {
            let e = Config::from_env(&HashMap::from([(name, bad)]), None).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{name}={bad}: must be a number from")), "{e}");
        }
        let e = Config::from_env(&HashMap::new(), Some("1K")).unwrap_err().to_string();
        assert_eq!(e, "ring size '1K': give a size from 4K to 1G, e.g. 4M");
    }

    #[test]
    fn missing_probes_setting() {
        assert_eq!(Config::from_env(&HashMap::new(), None).unwrap().missing_probes, MissingProbes::Warn);
        let c = Config::from_env(&HashMap::from([("RTRACE_MISSING_PROBES", "ignore")]), None).unwrap();
        assert_eq!(c.missing_probes, MissingProbes::Ignore);
        let e = Config::from_env(&HashMap::from([("RTRACE_MISSING_PROBES", "skip")]), None).unwrap_err().to_string();
        assert_eq!(e, "RTRACE_MISSING_PROBES=skip: must be error, warn or ignore");
    }
}
