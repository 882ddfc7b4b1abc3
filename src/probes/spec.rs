//! Probe specs in bpftrace's syntax: `tracepoint:syscalls:sys_enter_openat`,
//! short aliases (`t:`, `rt:`, ...), comma lists. [`SPELLINGS`] is the one
//! list of the types' names and aliases.

use anyhow::{bail, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    Begin,
    End,
    Tracepoint,
    RawTracepoint,
    TpBtf,
    Kprobe,
    Kretprobe,
    Fentry,
    Fexit,
    FmodRet,
    Lsm,
    Uprobe,
    Uretprobe,
    Usdt,
    Profile,
    Interval,
    Software,
    Hardware,
}

/// How each probe type is spelled, as bpftrace spells it: its name and
/// short aliases, in bpftrace's order (BEGIN and END first, never written
/// `TYPE:target`).
pub static SPELLINGS: &[(ProbeKind, &str, &[&str])] = &[
    (ProbeKind::Begin, "BEGIN", &[]),
    (ProbeKind::End, "END", &[]),
    (ProbeKind::Tracepoint, "tracepoint", &["t"]),
    (ProbeKind::RawTracepoint, "rawtracepoint", &["rt"]),
    (ProbeKind::TpBtf, "tp_btf", &["btf"]),
    (ProbeKind::Kprobe, "kprobe", &["k"]),
    (ProbeKind::Kretprobe, "kretprobe", &["kr"]),
    (ProbeKind::Fentry, "fentry", &["f", "kfunc"]),
    (ProbeKind::Fexit, "fexit", &["fr", "kretfunc"]),
    (ProbeKind::FmodRet, "fmod_ret", &[]),
    (ProbeKind::Lsm, "lsm", &[]),
    (ProbeKind::Uprobe, "uprobe", &["u"]),
    (ProbeKind::Uretprobe, "uretprobe", &["ur"]),
    (ProbeKind::Usdt, "usdt", &["U"]),
    (ProbeKind::Profile, "profile", &["p"]),
    (ProbeKind::Interval, "interval", &["i"]),
    (ProbeKind::Software, "software", &["s"]),
    (ProbeKind::Hardware, "hardware", &["h"]),
];

/// The types written `TYPE:target` (not BEGIN/END).
fn listed() -> impl Iterator<Item = &'static (ProbeKind, &'static str, &'static [&'static str])> {
    SPELLINGS.iter().filter(|(kind, ..)| !kind.is_userspace())
}

/// The probe kind a type name or alias stands for (not BEGIN/END).
pub fn kind_named(ty: &str) -> Option<ProbeKind> {
    listed().find(|(_, name, aliases)| *name == ty || aliases.contains(&ty)).map(|(kind, ..)| *kind)
}

/// Every probe type's full name (not BEGIN/END), in bpftrace's order.
pub fn type_names() -> impl Iterator<Item = &'static str> {
    listed().map(|(_, name, _)| *name)
}

impl ProbeKind {
    pub fn name(self) -> &'static str {
        SPELLINGS.iter().find(|(kind, ..)| *kind == self).map_or("?", |(_, name, _)| name)
    }
    /// Runs wholly in userspace.
    pub fn is_userspace(self) -> bool {
        matches!(self, ProbeKind::Begin | ProbeKind::End)
    }
}

/// One element of a probe spec list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    /// What follows `TYPE:` (e.g. `syscalls:sys_enter_*`).
    pub target: String,
}

impl ProbeSpec {
    pub fn full_name(&self) -> String {
        if self.kind.is_userspace() {
            self.kind.name().to_string()
        } else {
            format!("{}:{}", self.kind.name(), self.target)
        }
    }
}

/// Parse `SPEC[,SPEC...]`.
pub fn parse(spec: &str) -> Result<Vec<ProbeSpec>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim) {
        if part.is_empty() {
            bail!("empty probe in '{spec}'");
        }
        out.push(parse_one(part)?);
    }
    Ok(out)
}

fn parse_one(part: &str) -> Result<ProbeSpec> {
    match part {
        "BEGIN" => return Ok(ProbeSpec { kind: ProbeKind::Begin, target: String::new() }),
        "END" => return Ok(ProbeSpec { kind: ProbeKind::End, target: String::new() }),
        _ => {}
    }
    let (ty, rest) = part.split_once(':').unwrap_or((part, ""));
    let Some(kind) = kind_named(ty) else {
        let known: Vec<&str> = type_names().collect();
        bail!("unknown probe type '{ty}' in '{part}' (known: BEGIN, END, {})", known.join(", "));
    };
    if rest.is_empty() {
        bail!("probe '{part}' names no target; write e.g. '{}:...'", kind.name());
    }
    Ok(ProbeSpec { kind, target: rest.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_lists() {
        let v = parse("t:syscalls:sys_enter_read, tracepoint:sched:*").unwrap();
        assert_eq!(v[0], ProbeSpec { kind: ProbeKind::Tracepoint, target: "syscalls:sys_enter_read".into() });
        assert_eq!(v[1].full_name(), "tracepoint:sched:*");
        assert_eq!(parse("BEGIN").unwrap()[0].kind, ProbeKind::Begin);
        assert_eq!(parse("rt:sys_enter").unwrap()[0].kind, ProbeKind::RawTracepoint);
    }

    #[test]
    fn errors() {
        assert!(parse("bogus:x").unwrap_err().to_string().contains("unknown probe type 'bogus'"));
        assert!(parse("tracepoint").unwrap_err().to_string().contains("names no target"));
    }
}
