//! Attaching the loaded programs to their points: what a point the kernel
//! refuses does (`--missing-probes`), progress on stderr while many points
//! attach, and Ctrl-C / SIGTERM while attaching (stop there; the caller
//! detaches what was attached and ends the run as after Ctrl-C).

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::{Config, MissingProbes};
use crate::diag::Diagnostic;
use crate::kernel::link::{self, Attachment};
use crate::kernel::LiveKernel;
use crate::output::sink;
use crate::plan::Plan;
use crate::script::Session;

use super::load::{probe_position, Loaded};
use super::signals;

/// What attaching left: the attachments, and whether a signal stopped it
/// before every point was attached.
pub struct Attached {
    pub attachments: Vec<Attachment>,
    pub interrupted: bool,
}

/// Attach every program to its points, in the plan's order. A point of a
/// probe that has several (a wildcard, a list) and can't be attached is
/// skipped with a warning (`--missing-probes warn`, bpftrace's default),
/// silently (`ignore`) or ends the run (`error`); a probe with one point that
/// can't be attached, or none of whose points can, is an error. On an error
/// everything attached so far is detached.
pub fn attach_all(session: &Session, plan: &Plan, loaded: &Loaded, opts: &Config) -> Result<Attached> {
    let order = plan.attach_order();
    let points_of_probe = points_per_probe(plan);
    // Per probe: the points skipped, with the reason.
    let mut skipped: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
    let mut attachments: Vec<Attachment> = Vec::with_capacity(order.len());
    let mut progress = Progress::new(plan.attach_count(), order.len(), opts.quiet);
    for (n, (i, point)) in order.iter().enumerate() {
        if signals::interrupted() {
            progress.finish(false);
            return Ok(Attached { attachments, interrupted: true });
        }
        progress.show(n);
        let (prog, fd) = (&plan.programs[*i], &loaded.programs[*i]);
        let e = match prog.probe_type.attach(point, fd.as_fd()) {
            Ok(a) => {
                attachments.push(a);
                continue;
            }
            Err(e) => e,
        };
        let several = points_of_probe[&prog.probe] > 1 && !prog.internal;
        if e.downcast_ref::<Diagnostic>().is_some() {
            progress.finish(false);
            link::detach_all(attachments);
            return Err(e);
        }
        let reason = refusal(&point.name, &format!("{e:#}"));
        if !several || opts.missing_probes == MissingProbes::Error {
            progress.finish(false);
            link::detach_all(attachments);
            return Err(point_error(session, plan, *i, &point.name, &reason, several).into());
        }
        skipped.entry(prog.probe).or_default().push((point.name.clone(), reason));
    }
    progress.finish(true);
    for (&probe, points) in &skipped {
        let total = points_of_probe[&probe];
        if points.len() == total {
            link::detach_all(attachments);
            let (first, reason) = &points[0];
            return Err(none_attached(session, plan, probe, total, first, reason).into());
        }
    }
    if opts.missing_probes == MissingProbes::Warn {
        for (&probe, points) in &skipped {
            let prog = plan.programs.iter().find(|p| p.probe == probe).expect("a program of the probe");
            let at = probe_position(plan, prog);
            for (point, reason) in points {
                let msg = format!("{point} can't be attached, skipped: {reason}");
                sink::report(&Diagnostic::at(&session.file_name, at, msg).warning());
            }
        }
    }
    Ok(Attached { attachments, interrupted: false })
}

/// The error for one point that can't be attached, at its `probe()` call
/// (`several`: its probe has other points, so the setting is the way out).
fn point_error(session: &Session, plan: &Plan, prog: usize, point: &str, reason: &str, several: bool) -> Diagnostic {
    let at = probe_position(plan, &plan.programs[prog]);
    let d = Diagnostic::at(&session.file_name, at, format!("cannot attach {point}: {reason}"));
    match several {
        true => d.hint("--missing-probes warn skips the points that can't be attached"),
        false => d,
    }
}

/// The error for a probe none of whose `total` points could be attached.
fn none_attached(session: &Session, plan: &Plan, probe: usize, total: usize, first: &str, reason: &str) -> Diagnostic {
    let prog = plan.programs.iter().find(|p| p.probe == probe).expect("a program of the probe");
    let msg = format!(
        "none of the {total} points of {} could be attached (the first, {first}: {reason})",
        plan.probes[probe]
    );
    Diagnostic::at(&session.file_name, probe_position(plan, prog), msg)
}

/// Points per probe, counted over the plan's attach order.
fn points_per_probe(plan: &Plan) -> HashMap<usize, usize> {
    let mut points_of_probe: HashMap<usize, usize> = HashMap::new();
    for (i, _) in plan.attach_order() {
        *points_of_probe.entry(plan.programs[i].probe).or_default() += 1;
    }
    points_of_probe
}

/// `--dry-run`: fail as the run would where that is known without
/// attaching: a kernel-function probe this kernel can't attach at all (no
/// kprobes, no trampolines), with the run's one-line error.
pub fn check_without_attaching(session: &Session, plan: &Plan, opts: &Config) -> Result<()> {
    let points_of_probe = points_per_probe(plan);
    let mut seen = std::collections::HashSet::new();
    for (i, point) in plan.attach_order() {
        let prog = &plan.programs[i];
        if prog.internal || !seen.insert(prog.probe) {
            continue;
        }
        let Some(problem) = crate::probes::check::attach_problem(&plan.probes[prog.probe], &opts.trace, &LiveKernel)
        else {
            continue;
        };
        let reason = refusal(&point.name, &problem);
        let total = points_of_probe[&prog.probe];
        return Err(match total {
            1 => point_error(session, plan, i, &point.name, &reason, false),
            _ if opts.missing_probes == MissingProbes::Error => {
                point_error(session, plan, i, &point.name, &reason, true)
            }
            _ => none_attached(session, plan, prog.probe, total, &point.name, &reason),
        }
        .into());
    }
    Ok(())
}

/// Why the kernel refused a point, in words: the probe type's message
/// without the point's name (the line names it) and with the system error's
/// name instead of its number.
pub fn refusal(point: &str, message: &str) -> String {
    let mut text = message;
    for prefix in [format!("cannot attach {point}: "), format!("cannot open {point}: "), format!("{point}: ")] {
        if let Some(rest) = text.strip_prefix(prefix.as_str()) {
            text = rest;
        }
    }
    // A probe type's own explanation (the system error inside it) is kept;
    // a bare system error at the end gets words.
    let Some(errno) = os_error(text).filter(|n| text.trim_end().ends_with(&format!("(os error {n})"))) else {
        return text.to_string();
    };
    let errno = Some(errno);
    let root = unsafe { libc::geteuid() } == 0;
    let words = match errno {
        // A tracepoint the kernel keeps from perf events (irq_vectors:irq_work_exit:
        // sampling it would raise itself again).
        Some(libc::EPERM) | Some(libc::EACCES) if root => "the kernel does not allow BPF programs here",
        Some(libc::ENOENT) | Some(libc::ENODEV) => "not present in the running kernel (or binary)",
        Some(libc::EBUSY) => "held by another tracer",
        Some(libc::EMFILE) | Some(libc::ENFILE) => "too many open files (raise the open-file limit: ulimit -n)",
        Some(libc::EOPNOTSUPP) | Some(524) => "not supported here by this kernel",
        _ => "",
    };
    let named = crate::util::errno::replace_os_errors(text, |n| format!(" ({})", crate::util::errno::name(n)));
    match errno {
        Some(n) if !words.is_empty() => format!("{words} ({})", crate::util::errno::name(n)),
        _ => named,
    }
}

/// The number of the last ` (os error N)` in `text`.
fn os_error(text: &str) -> Option<i32> {
    let at = text.rfind(" (os error ")?;
    let tail = &text[at + " (os error ".len()..];
    tail[..tail.find(')')?].parse().ok()
}

/// `Attaching N probes... P%` on stderr while points attach: on a terminal
/// at once, updated in place a few times a second and erased at the end;
/// otherwise only once attaching has taken a second, a line a second, and a
/// last line at 100%.
struct Progress {
    header: String,
    points: usize,
    start: Instant,
    terminal: bool,
    enabled: bool,
    last: Option<Instant>,
    /// A line is on a terminal, not yet erased.
    showing: bool,
}

impl Progress {
    fn new(probes: usize, points: usize, quiet: bool) -> Progress {
        let noun = if probes == 1 { "probe" } else { "probes" };
        Progress {
            header: format!("Attaching {probes} {noun}..."),
            points,
            start: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            enabled: !quiet && points > 1,
            last: None,
            showing: false,
        }
    }

    fn show(&mut self, done: usize) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let (first_after, every) = match self.terminal {
            true => (Duration::ZERO, Duration::from_millis(250)),
            false => (Duration::from_secs(1), Duration::from_secs(1)),
        };
        let due = match self.last {
            None => now.duration_since(self.start) >= first_after,
            Some(at) => now.duration_since(at) >= every,
        };
        if due {
            self.last = Some(now);
            self.write(done);
        }
    }

    fn write(&mut self, done: usize) {
        let pct = done * 100 / self.points.max(1);
        let mut err = std::io::stderr().lock();
        let _ = match self.terminal {
            true => write!(err, "\r{} {pct}%\x1b[K", self.header),
            false => writeln!(err, "{} {pct}%", self.header),
        };
        let _ = err.flush();
        self.showing = self.terminal;
    }

    /// Erase the line on a terminal.
    fn clear(&mut self) {
        if self.showing {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.showing = false;
        }
    }

    /// Attaching ended (`complete`: every point was tried).
    fn finish(&mut self, complete: bool) {
        if complete && !self.terminal && self.last.is_some() {
            self.write(self.points);
        }
        self.clear();
        self.enabled = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_in_words() {
        let msg = "cannot open tracepoint:a:b: No such file or directory (os error 2)";
        assert_eq!(refusal("tracepoint:a:b", msg), "not present in the running kernel (or binary) (ENOENT)");
        let msg = "uprobe:/x:f: cannot attach the program: Invalid argument (os error 22)";
        assert_eq!(refusal("uprobe:/x:f", msg), "cannot attach the program: Invalid argument (EINVAL)");
        assert_eq!(refusal("k:f", "cannot attach k:f: this kernel has no kprobes"), "this kernel has no kprobes");
        // A probe type's own explanation stays whole.
        let msg = "hardware:cycles: no counters (perf_event_open: No such file or directory (os error 2)); use X";
        assert_eq!(
            refusal("hardware:cycles", msg),
            "no counters (perf_event_open: No such file or directory (os error 2)); use X"
        );
    }
}
