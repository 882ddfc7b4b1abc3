//! BPF run statistics per probe: how often each probe's programs ran and how
//! long they took in the kernel (`bpf_prog_info.run_cnt` / `run_time_ns`).
//! The kernel keeps them only while statistics are enabled, which
//! `BPF_ENABLE_STATS` does for as long as its fd is open (or the
//! `kernel.bpf_stats_enabled` sysctl). Enabling them costs two clock reads
//! per program run, so rtrace does it only for `--serve` and `-v`.

use std::os::fd::{AsFd, OwnedFd};

use crate::kernel::sys;
use crate::output::overhead::ProbeStat;
use crate::plan::Plan;

/// Statistics on while this lives.
pub struct Enabled {
    _fd: Option<OwnedFd>,
}

/// Turn run statistics on; `Err` says why they are not available (the
/// sysctl may still have them on).
pub fn enable() -> Result<Enabled, String> {
    match sys::enable_run_time_stats() {
        Ok(fd) => Ok(Enabled { _fd: Some(fd) }),
        Err(_) if sysctl_enabled() => Ok(Enabled { _fd: None }),
        Err(e) => Err(format!("the kernel refused BPF_ENABLE_STATS: {e}")),
    }
}

fn sysctl_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// `(runs, ns)` of one loaded program.
pub fn program_stats(fd: &OwnedFd) -> Option<(u64, u64)> {
    sys::prog_run_stats(fd.as_fd())
}

/// The script probes' programs, as (probe index, own fd): duplicates, so
/// another thread can read their statistics.
pub fn probe_programs(plan: &Plan, programs: &[OwnedFd]) -> Vec<(usize, OwnedFd)> {
    plan.programs
        .iter()
        .zip(programs)
        .filter(|(p, _)| !p.internal)
        .filter_map(|(p, fd)| fd.try_clone().ok().map(|fd| (p.probe, fd)))
        .collect()
}

/// Runs and nanoseconds per probe that has programs, in the plan's probe
/// order (programs of one probe added up).
pub fn per_probe(probes: &[String], programs: &[(usize, OwnedFd)]) -> Vec<ProbeStat> {
    let mut out: Vec<Option<ProbeStat>> = vec![None; probes.len()];
    for (probe, fd) in programs {
        let Some(slot) = out.get_mut(*probe) else { continue };
        let s = slot.get_or_insert_with(|| ProbeStat { probe: probes[*probe].clone(), runs: 0, total_ns: 0 });
        if let Some((runs, ns)) = program_stats(fd) {
            s.runs += runs;
            s.total_ns += ns;
        }
    }
    out.into_iter().flatten().collect()
}

/// `-v` at exit: the per-probe overhead, as text on stderr or a
/// `probe_stats` record in JSON output.
pub fn report(plan: &Plan, programs: &[OwnedFd], enabled: &Result<Enabled, String>) {
    if let Err(why) = enabled {
        crate::output::sink::report(
            &crate::diag::Diagnostic::tool(format!("per-probe overhead is not available: {why}")).note(),
        );
        return;
    }
    let stats = per_probe(&plan.probes, &probe_programs(plan, programs));
    if stats.is_empty() {
        return;
    }
    match crate::output::sink::format() {
        crate::output::sink::Format::Text => {
            crate::util::errtext!("{}", crate::output::overhead::format_probe_stats_text(&stats))
        }
        crate::output::sink::Format::Json => {
            crate::output::sink::raw(&crate::output::overhead::format_probe_stats_json(&stats))
        }
    }
}
