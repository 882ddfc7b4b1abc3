//! `rawtracepoint:EVENT`: programs see the tracepoint's raw arguments
//! (`u64 args[]`, as `e.arg0..`, or by name and type as `e.args.NAME` where
//! the kernel has BTF) and attach with `BPF_RAW_TRACEPOINT_OPEN`.

use std::ffi::CString;
use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::RawArgsEvent;
use super::listing::{field_decl, kernel_name, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::Attachment;
use crate::kernel::sys::{self, BPF_PROG_TYPE_RAW_TRACEPOINT};
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::util::similar::{no_match, suggest};
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct RawTracepoint;

impl ProbeType for RawTracepoint {
    fn program(&self, point: &AttachPoint, per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let params = match &point.target {
            AttachTarget::RawTracepoint { event } if per_point => k.btf().and_then(|b| b.tracepoint_params(event)),
            _ => None,
        };
        let event = RawArgsEvent { params, retval: None, func: None, stack_skip: 0 };
        Ok(ProgramSpec::new(BPF_PROG_TYPE_RAW_TRACEPOINT, ContextKind::RawTracepoint, event))
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        // bpftrace accepts `rawtracepoint:CATEGORY:EVENT` too; the category is ignored.
        let pattern = spec.target.rsplit(':').next().unwrap_or(&spec.target);
        let found = expand_raw_tracepoints(pattern, k)?;
        if found.is_empty() {
            let all = k.raw_tracepoints().unwrap_or(&[]);
            let close = suggest(pattern, all.iter().map(String::as_str));
            return Err(no_match("raw tracepoint", pattern, close, " (see `rtrace -l 'rawtracepoint:*'`)"));
        }
        Ok(found
            .into_iter()
            .map(|event| AttachPoint {
                name: format!("rawtracepoint:{event}"),
                target: AttachTarget::RawTracepoint { event },
            })
            .collect())
    }
    fn list(&self, q: &ListQuery, k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let Some(name) = kernel_name(q.rest) else { return Ok(out) };
        for n in expand_raw_tracepoints(name, k)? {
            out.add_with(format!("rawtracepoint:{n}"), btf_params(&n, q.verbose, k));
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::RawTracepoint { event } = &point.target else {
            bail!("not a raw tracepoint: {}", point.name);
        };
        let name = CString::new(event.as_str())?;
        let fd =
            sys::raw_tracepoint_open(Some(&name), prog).map_err(|e| anyhow!("cannot attach {}: {e}", point.name))?;
        Ok(Attachment::new(vec![fd]))
    }
}

/// `-lv`: a raw tracepoint's BTF arguments as declarations (none without BTF
/// or `verbose`).
pub fn btf_params(event: &str, verbose: bool, k: &dyn Kernel) -> Vec<String> {
    let Some(b) = k.btf().filter(|_| verbose) else { return vec![] };
    match b.tracepoint_params(event) {
        Some(ps) => ps.iter().map(|p| field_decl(&p.name, &b.type_name(p.ty))).collect(),
        None => vec![],
    }
}

/// Expand a raw tracepoint pattern (`*`/`?` wildcards, comma lists). A
/// `prefix:` before the name (a tracepoint category or module, as in
/// `sched:sched_switch` or `vmlinux:sched_switch`) is accepted and ignored.
/// Unknown names yield nothing. Sorted and deduplicated.
pub fn expand_raw_tracepoints(pattern: &str, k: &dyn Kernel) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for item in pattern.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let name_pattern = item.rsplit_once(':').map_or(item, |(_, name)| name);
        if name_pattern.is_empty() {
            bail!("invalid raw tracepoint pattern '{item}'");
        }
        let all = k.raw_tracepoints()?;
        if has_wildcard(name_pattern) {
            found.extend(all.iter().filter(|name| wildcard_match(name_pattern, name)).cloned());
        } else if all.binary_search_by(|name| name.as_str().cmp(name_pattern)).is_ok() {
            found.push(name_pattern.to_string());
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::tracefs::{self, tracefs_available};
    use crate::kernel::LiveKernel;

    #[test]
    fn raw_tracepoints() {
        if !tracefs_available() {
            return;
        }
        let raw = tracefs::raw_tracepoints().unwrap();
        assert!(raw.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        for name in ["sys_enter", "sys_exit", "sched_switch"] {
            assert!(raw.iter().any(|r| r == name), "{name} missing");
        }
        assert!(!raw.iter().any(|r| r.starts_with("sys_enter_")), "syscalls:* are not raw tracepoints");
        assert_eq!(expand_raw_tracepoints("sched_switch", &LiveKernel).unwrap(), vec!["sched_switch"]);
        assert_eq!(expand_raw_tracepoints("sched:sched_switch", &LiveKernel).unwrap(), vec!["sched_switch"]);
        assert_eq!(expand_raw_tracepoints("sys_e*", &LiveKernel).unwrap(), vec!["sys_enter", "sys_exit"]);
        let both = expand_raw_tracepoints("sched_switch,sys_enter", &LiveKernel).unwrap();
        assert_eq!(both, vec!["sched_switch", "sys_enter"]);
        assert!(expand_raw_tracepoints("no_such_raw_tp", &LiveKernel).unwrap().is_empty());
    }
}
