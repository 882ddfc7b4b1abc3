//! The bodies the real-kernel tests share: run a script around events the
//! test makes, check what a run must (and must not) have printed, and run
//! table-driven cases where tests differ only by script, events and
//! expected text, each failure naming its case.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use super::{assert_clean_error, fill, hist_row, run, tid, Outcome, Tracer, Zero, EXIT_TIMEOUT};

/// `Lost N control messages ... on probe P` lines (the kernel's count), as (N, P).
pub fn kernel_control_losses(stderr: &str) -> Vec<(u64, String)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Lost ")?;
            let (n, rest) = rest.split_once(" control messages (print/clear/zero, action audits) on probe ")?;
            let probe = rest.strip_suffix(": the control ring was full")?;
            Some((n.parse().ok()?, probe.to_string()))
        })
        .collect()
}

/// `rtrace: warning: lost N control message(s) ...`: those userspace dropped.
pub fn dropped_controls(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("rtrace: warning: lost ")?.split_once(" control message(s)")?.0.parse::<u64>().ok()
        })
        .sum()
}

/// Start `rtrace -e src`, wait until attached, make the events, end with
/// SIGINT; the run must exit 0.
pub fn trace(src: &str, events: impl FnOnce()) -> Outcome {
    let mut t = Tracer::start(&["-e", src]);
    t.wait_attached();
    events();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    out
}

/// [`trace`], but before SIGINT wait until rtrace has printed the line `line`.
pub fn trace_until(src: &str, events: impl FnOnce(), line: &str) -> Outcome {
    let mut t = Tracer::start(&["-e", src]);
    t.wait_attached();
    events();
    t.wait_line(&format!("the line {line:?}"), EXIT_TIMEOUT, |l| l == line);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    out
}

/// Start `rtrace ARGS...` (with `env`), wait until attached, make the
/// events, and let the run end by itself (`exit()`, `-d`, an error) within
/// `within`.
pub fn run_to_end(args: &[&str], env: &[(&str, &str)], events: impl FnOnce(), within: Duration) -> Outcome {
    let mut t = Tracer::start_env(args, env);
    t.wait_attached();
    events();
    t.finish_within(within)
}

/// Run `run` for every row; a failing row panics with its name first.
pub fn each_case<T>(rows: &[T], name: impl Fn(&T) -> &str, run: impl Fn(&T)) {
    for row in rows {
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| run(row))) {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("case `{}` failed: {why}", name(row));
        }
    }
}

// ---------------------------------------------------------------------------
// What a run printed

/// Printed output one check expects.
pub enum Want {
    /// The lines of map `name` ([`Outcome::map_lines`]), exactly and in order.
    Map(&'static str, Vec<String>),
    /// The rows of the histogram under `header` ([`Outcome::hist_rows`]).
    Hist(&'static str, Vec<String>),
}

impl Want {
    /// `Want::Map` from string slices.
    pub fn map(name: &'static str, lines: &[&str]) -> Want {
        Want::Map(name, lines.iter().map(|l| l.to_string()).collect())
    }

    /// `Want::Hist` from (label, count, bar length) rows ([`hist_row`]).
    pub fn hist(header: &'static str, rows: &[(&str, u64, usize)]) -> Want {
        Want::Hist(header, rows.iter().map(|&(label, count, bar)| hist_row(label, count, bar)).collect())
    }

    pub fn check(&self, out: &Outcome) {
        match self {
            Want::Map(name, lines) => assert_eq!(&out.map_lines(name), lines, "map @{name}\n{out}"),
            Want::Hist(header, rows) => assert_eq!(&out.hist_rows(header), rows, "histogram {header}\n{out}"),
        }
    }
}

/// How a run must have ended and what it must (not) have printed.
#[derive(Default)]
pub struct Expect {
    /// The exit status.
    pub code: i32,
    /// Lines stdout must hold (each equal to a whole line).
    pub lines: Vec<String>,
    /// Lines stdout must not hold.
    pub no_lines: Vec<String>,
    /// Text stdout must not contain anywhere.
    pub stdout_lacks: Vec<String>,
    /// Text stderr must contain.
    pub stderr_has: Vec<String>,
    /// Text stderr must not contain.
    pub stderr_lacks: Vec<String>,
    /// The run must have ended sooner than this (its own end, not `-d`).
    pub within: Option<Duration>,
}

impl Expect {
    pub fn check(&self, out: &Outcome) {
        assert_eq!(out.code, Some(self.code), "{out}");
        for l in &self.lines {
            assert!(out.line_index(l).is_some(), "stdout lacks the line {l:?}\n{out}");
        }
        for l in &self.no_lines {
            assert!(out.line_index(l).is_none(), "stdout has the line {l:?}\n{out}");
        }
        for t in &self.stdout_lacks {
            assert!(!out.stdout.contains(t.as_str()), "stdout has {t:?}\n{out}");
        }
        for t in &self.stderr_has {
            assert!(out.stderr.contains(t.as_str()), "stderr lacks {t:?}\n{out}");
        }
        for t in &self.stderr_lacks {
            assert!(!out.stderr.contains(t.as_str()), "stderr has {t:?}\n{out}");
        }
        if let Some(d) = self.within {
            assert!(out.elapsed < d, "the run took {:?}, more than {d:?}\n{out}", out.elapsed);
        }
    }
}

/// Each `rtrace ARGS...` is a usage error (exit 2) reported in one clean
/// line ([`assert_clean_error`]) that contains every one of its texts.
pub fn assert_usage_errors(cases: &[(&[&str], &[&str])]) {
    for (args, wants) in cases {
        let out = run(args);
        let line = assert_clean_error(&out);
        assert_eq!(out.code, Some(2), "{args:?}\n{out}");
        for want in *wants {
            assert!(line.contains(want), "{args:?}: {line:?} lacks {want:?}");
        }
    }
}

/// Owned strings from slices (for [`Expect`] fields).
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------
// Reads of /dev/zero: the events most map and filter tests make

/// A script whose one probe runs `body` for each read(2) this thread makes
/// on `fd`, after the top-level lines `prelude` (map declarations).
pub fn reads_script(prelude: &str, body: &str, fd: i32) -> String {
    fill(
        r#"
let me = __ME__;
__PRELUDE__
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        __BODY__
    }
});
"#,
        &[("ME", &tid()), ("FD", &fd), ("PRELUDE", &prelude), ("BODY", &body)],
    )
}

/// A script whose one probe runs `body` for each getppid(2) this thread
/// makes, after the top-level lines `prelude`.
pub fn getppid_script(prelude: &str, body: &str) -> String {
    fill(
        r#"
let me = __ME__;
__PRELUDE__
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me {
        __BODY__
    }
});
"#,
        &[("ME", &tid()), ("PRELUDE", &prelude), ("BODY", &body)],
    )
}

/// One run of a [`reads_script`]: reads of these sizes, then these checks.
pub struct ReadCase {
    pub name: &'static str,
    pub prelude: &'static str,
    pub body: &'static str,
    pub sizes: &'static [usize],
    pub want: Vec<Want>,
}

/// Trace each case's reads of a fresh /dev/zero and check what it printed.
pub fn run_read_cases(cases: &[ReadCase]) {
    each_case(
        cases,
        |c| c.name,
        |c| {
            let mut z = Zero::open();
            let src = reads_script(c.prelude, c.body, z.fd);
            let out = trace(&src, || z.reads(c.sizes));
            for w in &c.want {
                w.check(&out);
            }
        },
    );
}
