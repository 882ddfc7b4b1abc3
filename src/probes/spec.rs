//! Probe specs in bpftrace's syntax: `tracepoint:syscalls:sys_enter_openat`,
//! short aliases (`t:`, `rt:`, ...), comma lists. The names and aliases
//! come from [`super::TYPES`].

use anyhow::{bail, Result};

use super::TYPES;

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
    Uprobe,
    Uretprobe,
    Usdt,
    Profile,
    Interval,
    Software,
    Hardware,
}

/// The probe kind a type name or alias stands for (not BEGIN/END).
pub fn kind_named(ty: &str) -> Option<ProbeKind> {
    TYPES.iter().filter(|t| t.listed).find(|t| t.name == ty || t.aliases.contains(&ty)).map(|t| t.kind)
}

/// Every probe type's full name (not BEGIN/END), in bpftrace's order.
pub fn type_names() -> impl Iterator<Item = &'static str> {
    TYPES.iter().filter(|t| t.listed).map(|t| t.name)
}

impl ProbeKind {
    pub fn name(self) -> &'static str {
        TYPES.iter().find(|t| t.kind == self).map(|t| t.name).unwrap_or("?")
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
