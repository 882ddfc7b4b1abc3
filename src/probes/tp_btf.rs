//! `tp_btf:EVENT`: a raw tracepoint whose arguments are typed by the
//! kernel's BTF (`e.args.prev.pid` on sched_switch). The program is a
//! BPF_PROG_TYPE_TRACING program loaded against the `btf_trace_EVENT`
//! prototype, so each attach point gets its own program.

use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::RawArgsEvent;
use super::listing::{kernel_name, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::btf::BtfTypes;
use crate::kernel::link::{Attachment, LoadAttrs};
use crate::kernel::sys::{self, BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP};
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::util::similar::{no_match, suggest};
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct TpBtf;

impl ProbeType for TpBtf {
    fn per_point(&self, _points: &[AttachPoint], _k: &dyn Kernel) -> bool {
        true
    }
    fn program(&self, point: &AttachPoint, _per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let params = match &point.target {
            AttachTarget::BtfTracepoint { event } => k.btf().and_then(|b| b.tracepoint_params(event)),
            _ => None,
        };
        let event = RawArgsEvent { params, retval: None, func: None, stack_skip: 0 };
        let mut spec = ProgramSpec::new(BPF_PROG_TYPE_TRACING, ContextKind::RawTracepoint, event);
        spec.load = load_attrs(point, k).map_err(|e| e.to_string());
        Ok(spec)
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        let Some(kernel) = k.btf() else {
            bail!(
                "tp_btf probes need kernel BTF (/sys/kernel/btf/vmlinux), which this kernel lacks; use rawtracepoint:"
            );
        };
        let pattern = spec.target.rsplit(':').next().unwrap_or(&spec.target);
        let found = matching(kernel, pattern);
        if found.is_empty() {
            let all = kernel.tracepoint_names();
            let close = suggest(pattern, all.iter().map(String::as_str));
            return Err(no_match("BTF tracepoint", pattern, close, " (see `rtrace -l 'tp_btf:*'`)"));
        }
        Ok(found
            .into_iter()
            .map(|event| AttachPoint { name: format!("tp_btf:{event}"), target: AttachTarget::BtfTracepoint { event } })
            .collect())
    }
    fn list(&self, q: &ListQuery, k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let (Some(name), Some(kernel)) = (kernel_name(q.rest), k.btf()) else { return Ok(out) };
        for n in matching(kernel, name) {
            let details = super::rawtracepoint::btf_params(&n, q.verbose, k);
            out.add_with(format!("tp_btf:{n}"), details);
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        attach_by_btf_id(point, prog)
    }
}

/// The BTF attach target of the program at `point`.
fn load_attrs(point: &AttachPoint, k: &dyn Kernel) -> Result<LoadAttrs> {
    let AttachTarget::BtfTracepoint { event } = &point.target else {
        bail!("not a BTF tracepoint: {}", point.name);
    };
    let id =
        k.btf().and_then(|b| b.tracepoint_id(event)).ok_or_else(|| anyhow!("{} has no BTF prototype", point.name))?;
    Ok(LoadAttrs { expected_attach_type: BPF_TRACE_RAW_TP, attach_btf_id: id })
}

/// The vmlinux raw tracepoints with a BTF prototype matching `pattern`
/// (a name or a `*`/`?` wildcard), sorted.
pub fn matching(kernel: &dyn BtfTypes, pattern: &str) -> Vec<String> {
    if has_wildcard(pattern) {
        kernel.tracepoint_names().into_iter().filter(|n| wildcard_match(pattern, n)).collect()
    } else if kernel.tracepoint_id(pattern).is_some() {
        vec![pattern.to_string()]
    } else {
        vec![]
    }
}

/// Attach a program loaded with a BTF attach target (tp_btf, fentry,
/// fexit): the kernel knows where from the program itself.
pub fn attach_by_btf_id(point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
    let fd = sys::raw_tracepoint_open(None, prog).map_err(|e| anyhow!("cannot attach {}: {e}", point.name))?;
    Ok(Attachment::new(vec![fd]))
}
