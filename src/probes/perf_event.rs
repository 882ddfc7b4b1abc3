//! `profile:`, `interval:`, `software:` and `hardware:` probes: programs of
//! type BPF_PROG_TYPE_PERF_EVENT attached to sampling perf events.
//!
//! `profile` and `interval` are the cpu-clock software event sampled at a
//! rate (`hz`) or a period (`s`/`ms`/`us`): profile on every online CPU,
//! interval on one. `software` and `hardware` name a perf event as bpftrace
//! does, sampled every COUNT occurrences (bpftrace's default when omitted),
//! on every online CPU.

use std::io;
use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::NoArgs;
use super::listing::{matches, or_star, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::Attachment;
use crate::kernel::sys::{self as perf, BPF_PROG_TYPE_PERF_EVENT};
use crate::kernel::Kernel;
use crate::probes::spec::{ProbeKind, ProbeSpec};
use crate::util::similar::suggest;
use crate::util::wildcard::{has_wildcard, wildcard_match};

/// One of the four perf-event-based probe kinds.
pub struct PerfEventProbe {
    pub kind: ProbeKind,
}

pub static PROFILE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Profile };
pub static INTERVAL: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Interval };
pub static SOFTWARE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Software };
pub static HARDWARE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Hardware };

const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;

/// A perf event by name: bpftrace's name and alias, the perf `config`, and
/// the sample period used when the spec gives no COUNT.
struct NamedEvent {
    name: &'static str,
    alias: &'static str,
    config: u64,
    default_count: u64,
}

/// `software:` events (PERF_TYPE_SOFTWARE), as in bpftrace's SW_PROBE_LIST.
const SOFTWARE_EVENTS: &[NamedEvent] = &[
    NamedEvent { name: "alignment-faults", alias: "", config: 7, default_count: 1 },
    NamedEvent { name: "bpf-output", alias: "", config: 10, default_count: 1 },
    NamedEvent { name: "context-switches", alias: "cs", config: 3, default_count: 1000 },
    NamedEvent { name: "cpu-clock", alias: "cpu", config: 0, default_count: 1_000_000 },
    NamedEvent { name: "cpu-migrations", alias: "", config: 4, default_count: 1 },
    NamedEvent { name: "dummy", alias: "", config: 9, default_count: 1 },
    NamedEvent { name: "emulation-faults", alias: "", config: 8, default_count: 1 },
    NamedEvent { name: "major-faults", alias: "", config: 6, default_count: 1 },
    NamedEvent { name: "minor-faults", alias: "", config: 5, default_count: 100 },
    NamedEvent { name: "page-faults", alias: "faults", config: 2, default_count: 100 },
    NamedEvent { name: "task-clock", alias: "", config: 1, default_count: 1 },
];

/// `hardware:` events (PERF_TYPE_HARDWARE), as in bpftrace's HW_PROBE_LIST.
const HARDWARE_EVENTS: &[NamedEvent] = &[
    NamedEvent { name: "backend-stalls", alias: "", config: 8, default_count: 1_000_000 },
    NamedEvent { name: "branch-instructions", alias: "branches", config: 4, default_count: 100_000 },
    NamedEvent { name: "branch-misses", alias: "", config: 5, default_count: 100_000 },
    NamedEvent { name: "bus-cycles", alias: "", config: 6, default_count: 100_000 },
    NamedEvent { name: "cache-misses", alias: "", config: 3, default_count: 1_000_000 },
    NamedEvent { name: "cache-references", alias: "", config: 2, default_count: 1_000_000 },
    NamedEvent { name: "cpu-cycles", alias: "cycles", config: 0, default_count: 1_000_000 },
    NamedEvent { name: "frontend-stalls", alias: "", config: 7, default_count: 1_000_000 },
    NamedEvent { name: "instructions", alias: "", config: 1, default_count: 1_000_000 },
    NamedEvent { name: "ref-cycles", alias: "", config: 9, default_count: 1_000_000 },
];

/// `(name, alias)` of every `software:` event (alias "" when none), for `-l`.
pub fn software_event_names() -> Vec<(&'static str, &'static str)> {
    SOFTWARE_EVENTS.iter().map(|e| (e.name, e.alias)).collect()
}

/// `(name, alias)` of every `hardware:` event (alias "" when none), for `-l`.
pub fn hardware_event_names() -> Vec<(&'static str, &'static str)> {
    HARDWARE_EVENTS.iter().map(|e| (e.name, e.alias)).collect()
}

impl ProbeType for PerfEventProbe {
    fn program(&self, _point: &AttachPoint, _per_point: bool, _k: &dyn Kernel) -> Result<ProgramSpec> {
        Ok(ProgramSpec::new(BPF_PROG_TYPE_PERF_EVENT, ContextKind::PerfEvent, NoArgs))
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, _k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        match self.kind {
            ProbeKind::Profile | ProbeKind::Interval => expand_timer(spec),
            _ => expand_named(spec),
        }
    }
    fn list(&self, q: &ListQuery, _k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        // bpftrace lists no profile/interval probes: they are rates, not places.
        let table = match self.kind {
            ProbeKind::Software => software_event_names(),
            ProbeKind::Hardware => hardware_event_names(),
            _ => return Ok(out),
        };
        let event = or_star(q.rest.split(':').next().unwrap_or(""));
        for (name, alias) in table {
            if matches(event, name) || (!alias.is_empty() && matches(event, alias)) {
                out.add(format!("{}:{name}:", self.kind.name()));
            }
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::PerfEvent { type_, config, period, freq, cpus } = &point.target else {
            bail!("not a perf event: {}", point.name);
        };
        let mut fds = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let opened = match freq {
                Some(hz) => perf::open_freq(*type_, *config, *hz, -1, cpu),
                None => perf::open(*type_, *config, *period, -1, cpu),
            };
            fds.push(opened.map_err(|e| open_error(point, *type_, *freq, cpu, e))?);
        }
        perf::attach_bpf(fds, prog).map_err(|e| anyhow!("{}: {e}", point.name))
    }
}

/// Nanoseconds per unit of a timer period (`hz` is a rate instead).
const PERIOD_UNITS: &[(&str, u64)] = &[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)];

/// `profile:UNIT:N` / `interval:UNIT:N`: the cpu-clock event every N units
/// (or N times a second for `hz`).
fn expand_timer(spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
    let name = spec.full_name();
    let kind = spec.kind.name();
    let usage = format!("write {kind}:hz:RATE, {kind}:s:N, {kind}:ms:N or {kind}:us:N");
    let scale = |unit: &str| PERIOD_UNITS.iter().find(|(u, _)| *u == unit).map(|&(_, ns)| ns);
    let what = |unit: &str| if unit == "hz" { "rate" } else { "count" };
    let parts: Vec<&str> = spec.target.split(':').collect();
    let (unit, count) = match parts.as_slice() {
        [unit, count] if !count.is_empty() => (*unit, *count),
        [unit] | [unit, _] if *unit == "hz" || scale(unit).is_some() => {
            bail!("{name}: missing the {}; e.g. {kind}:{unit}:{}", what(unit), example(unit))
        }
        [_] | [_, _] => bail!("{name}: expected UNIT:N; {usage}"),
        _ => bail!("{name}: too many fields; {usage}"),
    };
    let n = parse_count(count).ok_or_else(|| anyhow!("{name}: '{count}' is not a whole number; {usage}"))?;
    if n == 0 {
        bail!("{name}: the {} must be at least 1", what(unit));
    }
    let (period, freq) = match (unit, scale(unit)) {
        ("hz", _) => {
            if let Some(max) = max_sample_rate() {
                if n > max {
                    bail!("{name}: {n} Hz is over the kernel's limit of {max} Hz (kernel.perf_event_max_sample_rate)");
                }
            }
            (0, Some(n))
        }
        (_, Some(ns)) => {
            let period = n.checked_mul(ns).filter(|&ns| ns < 1 << 63);
            (period.ok_or_else(|| anyhow!("{name}: {n} {unit} is too long a period"))?, None)
        }
        (other, None) => bail!("{name}: unknown unit '{other}'; {usage}"),
    };
    let online = online_cpus()?;
    let cpus = if spec.kind == ProbeKind::Interval { online[..1].to_vec() } else { online };
    Ok(vec![AttachPoint {
        name,
        target: AttachTarget::PerfEvent {
            type_: perf::PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_CPU_CLOCK,
            period,
            freq,
            cpus,
        },
    }])
}

fn example(unit: &str) -> &'static str {
    match unit {
        "hz" => "99",
        "s" => "1",
        _ => "100",
    }
}

/// `software:EVENT[:COUNT]` / `hardware:EVENT[:COUNT]`; EVENT may be a
/// wildcard over the event names.
fn expand_named(spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
    let name = spec.full_name();
    let kind = spec.kind.name();
    let (table, type_) = if spec.kind == ProbeKind::Hardware {
        (HARDWARE_EVENTS, perf::PERF_TYPE_HARDWARE)
    } else {
        (SOFTWARE_EVENTS, perf::PERF_TYPE_SOFTWARE)
    };
    let parts: Vec<&str> = spec.target.split(':').collect();
    let (event, count) = match parts.as_slice() {
        [event] | [event, ""] => (*event, None),
        [event, count] => {
            let n = parse_count(count).ok_or_else(|| {
                anyhow!("{name}: the count '{count}' is not a whole number; write {kind}:EVENT:COUNT")
            })?;
            if n == 0 {
                bail!("{name}: the count must be at least 1");
            }
            if n >= 1 << 63 {
                bail!("{name}: the count {n} is too large");
            }
            (*event, Some(n))
        }
        _ => bail!("{name}: too many fields; write {kind}:EVENT or {kind}:EVENT:COUNT"),
    };
    let wildcard = has_wildcard(event);
    let matched: Vec<&NamedEvent> = if wildcard {
        table.iter().filter(|e| wildcard_match(event, e.name)).collect()
    } else {
        table.iter().filter(|e| e.name == event || (!e.alias.is_empty() && e.alias == event)).collect()
    };
    if matched.is_empty() {
        let known: Vec<String> = table
            .iter()
            .map(|e| if e.alias.is_empty() { e.name.to_string() } else { format!("{}/{}", e.name, e.alias) })
            .collect();
        let hint = if wildcard { vec![] } else { suggest(event, table.iter().map(|e| e.name)) };
        let did_you_mean = if hint.is_empty() { String::new() } else { format!("; did you mean {}?", hint.join(", ")) };
        let what = if wildcard {
            format!("no {kind} event matches '{event}'")
        } else {
            format!("unknown {kind} event '{event}'")
        };
        bail!("{what}{did_you_mean} (known: {})", known.join(", "));
    }
    let cpus = online_cpus()?;
    Ok(matched
        .into_iter()
        .map(|e| AttachPoint {
            name: if wildcard {
                match count {
                    Some(n) => format!("{kind}:{}:{n}", e.name),
                    None => format!("{kind}:{}", e.name),
                }
            } else {
                name.clone()
            },
            target: AttachTarget::PerfEvent {
                type_,
                config: e.config,
                period: count.unwrap_or(e.default_count),
                freq: None,
                cpus: cpus.clone(),
            },
        })
        .collect())
}

/// A positive count as bpftrace accepts it: `1000`, `1_000` or `1e3`.
fn parse_count(text: &str) -> Option<u64> {
    let text = text.replace('_', "");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'e') {
        return None;
    }
    match text.split_once('e') {
        Some((mantissa, exp)) => mantissa.parse::<u64>().ok()?.checked_mul(10u64.checked_pow(exp.parse().ok()?)?),
        None => text.parse().ok(),
    }
}

/// The kernel's limit on sampling frequencies, when readable.
fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate").ok()?.trim().parse().ok()
}

/// Online CPUs, from /sys/devices/system/cpu/online (`0-3,5`).
pub fn online_cpus() -> Result<Vec<i32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("cannot read {path}: {e}"))?;
    parse_cpu_list(&text).filter(|v| !v.is_empty()).ok_or_else(|| anyhow!("cannot parse {path}: {:?}", text.trim()))
}

fn parse_cpu_list(text: &str) -> Option<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (i32, i32) = (lo.parse().ok()?, hi.parse().ok()?);
                if lo > hi {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Whether a hardware PMU exists at all: a counting cpu-cycles event opens.
fn has_hardware_counters(cpu: i32) -> bool {
    perf::open(perf::PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 0, -1, cpu).is_ok()
}

/// A one-line explanation of a failed perf_event_open.
fn open_error(point: &AttachPoint, type_: u32, freq: Option<u64>, cpu: i32, err: io::Error) -> anyhow::Error {
    let name = &point.name;
    let errno = err.raw_os_error().unwrap_or(0);
    let instead = "use software:cpu-clock or profile:hz:N instead";
    if type_ == perf::PERF_TYPE_HARDWARE && matches!(errno, libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) {
        if !has_hardware_counters(cpu) {
            return anyhow!(
                "{name}: this machine has no hardware performance counters (perf_event_open: {err}); {instead}"
            );
        }
        if errno == libc::EOPNOTSUPP {
            return anyhow!(
                "{name}: the hardware counters here can't sample this event (perf_event_open: {err}); {instead}"
            );
        }
        return anyhow!("{name}: this CPU has no counter for this event (perf_event_open: {err})");
    }
    match errno {
        libc::EACCES | libc::EPERM => {
            anyhow!("{name}: perf_event_open was refused ({err}); run as root or with CAP_PERFMON")
        }
        libc::EINVAL if freq.is_some() => anyhow!(
            "{name}: the kernel refused the sampling rate (perf_event_open: {err}); see kernel.perf_event_max_sample_rate"
        ),
        _ => anyhow!("{name}: cannot open the perf event on CPU {cpu}: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::LiveKernel;

    fn spec(kind: ProbeKind, target: &str) -> ProbeSpec {
        ProbeSpec { kind, target: target.into() }
    }

    fn target(p: &AttachPoint) -> (u32, u64, u64, Option<u64>, usize) {
        let AttachTarget::PerfEvent { type_, config, period, freq, cpus } = &p.target else { panic!("{p:?}") };
        (*type_, *config, *period, *freq, cpus.len())
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("99"), Some(99));
        assert_eq!(parse_count("1e6"), Some(1_000_000));
        assert_eq!(parse_count("1_000"), Some(1000));
        assert_eq!(parse_count("x"), None);
        assert_eq!(parse_count("-1"), None);
        assert_eq!(parse_count(""), None);
        assert_eq!(parse_count("1e30"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-3,7"), Some(vec![0, 2, 3, 7]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn timers() {
        let cpus = online_cpus().unwrap().len();
        let p = PROFILE.expand(&spec(ProbeKind::Profile, "hz:99"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(p[0].name, "profile:hz:99");
        assert_eq!(target(&p[0]), (perf::PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 0, Some(99), cpus));
        let p = PROFILE.expand(&spec(ProbeKind::Profile, "ms:10"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&p[0]), (perf::PERF_TYPE_SOFTWARE, 0, 10_000_000, None, cpus));
        let i = INTERVAL.expand(&spec(ProbeKind::Interval, "s:2"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(i[0].name, "interval:s:2");
        assert_eq!(target(&i[0]), (perf::PERF_TYPE_SOFTWARE, 0, 2_000_000_000, None, 1));
        let i = INTERVAL.expand(&spec(ProbeKind::Interval, "us:500"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&i[0]).2, 500_000);
    }

    #[test]
    fn timer_errors() {
        let err =
            |kind, t: &str| PROFILE.expand(&spec(kind, t), &Trace::default(), &LiveKernel).unwrap_err().to_string();
        assert!(err(ProbeKind::Profile, "hz:0").contains("at least 1"));
        assert!(err(ProbeKind::Profile, "xx:5").contains("unknown unit 'xx'"));
        assert!(err(ProbeKind::Interval, "s").contains("missing the count"));
        assert!(err(ProbeKind::Interval, "s:").contains("missing the count"));
        assert!(err(ProbeKind::Profile, "hz:abc").contains("not a whole number"));
        assert!(err(ProbeKind::Profile, "99").contains("expected UNIT:N"));
        assert!(err(ProbeKind::Profile, "hz:1:2").contains("too many fields"));
        assert!(err(ProbeKind::Profile, "s:99999999999").contains("too long"));
        assert!(err(ProbeKind::Profile, "hz:100000000").contains("limit"));
    }

    #[test]
    fn named_events() {
        let cpus = online_cpus().unwrap().len();
        let s = SOFTWARE.expand(&spec(ProbeKind::Software, "faults"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(s[0].name, "software:faults");
        assert_eq!(target(&s[0]), (perf::PERF_TYPE_SOFTWARE, 2, 100, None, cpus));
        let s = SOFTWARE.expand(&spec(ProbeKind::Software, "cs:5"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&s[0]), (perf::PERF_TYPE_SOFTWARE, 3, 5, None, cpus));
        let s = SOFTWARE.expand(&spec(ProbeKind::Software, "cpu-clock:"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&s[0]).2, 1_000_000);
        let h = HARDWARE.expand(&spec(ProbeKind::Hardware, "cycles:1e6"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&h[0]), (perf::PERF_TYPE_HARDWARE, 0, 1_000_000, None, cpus));
        let h = HARDWARE.expand(&spec(ProbeKind::Hardware, "branches"), &Trace::default(), &LiveKernel).unwrap();
        assert_eq!(target(&h[0]), (perf::PERF_TYPE_HARDWARE, 4, 100_000, None, cpus));
        let w = SOFTWARE.expand(&spec(ProbeKind::Software, "*faults:1"), &Trace::default(), &LiveKernel).unwrap();
        let names: Vec<&str> = w.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "software:alignment-faults:1",
                "software:emulation-faults:1",
                "software:major-faults:1",
                "software:minor-faults:1",
                "software:page-faults:1"
            ]
        );
    }

    #[test]
    fn named_errors() {
        let err = |t: &str| {
            SOFTWARE.expand(&spec(ProbeKind::Software, t), &Trace::default(), &LiveKernel).unwrap_err().to_string()
        };
        let e = err("page-fault");
        assert!(e.contains("unknown software event 'page-fault'; did you mean page-faults?"), "{e}");
        assert!(e.contains("context-switches/cs"), "{e}");
        assert!(err("nope*").contains("no software event matches 'nope*'"));
        assert!(err("cs:0").contains("at least 1"));
        assert!(err("cs:x").contains("not a whole number"));
        assert!(err("cs:1:2").contains("too many fields"));
        let e = HARDWARE
            .expand(&spec(ProbeKind::Hardware, "cpu-clock"), &Trace::default(), &LiveKernel)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown hardware event 'cpu-clock'") && e.contains("cpu-cycles/cycles"), "{e}");
    }
}
