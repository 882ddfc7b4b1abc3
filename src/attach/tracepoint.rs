//! `tracepoint:CATEGORY:EVENT`: programs see the event's raw record (fields as
//! in its tracefs format file) and attach through a perf event.

use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::{perf, tracefs, AttachPoint, Attachment, ProbeType, Target};
use crate::compile::spec::ProbeSpec;

pub struct Tracepoint;

const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;

impl ProbeType for Tracepoint {
    fn prog_type(&self) -> u32 {
        BPF_PROG_TYPE_TRACEPOINT
    }
    fn context(&self) -> ContextKind {
        ContextKind::Tracepoint
    }
    fn expand(&self, spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
        if !spec.target.contains(':') {
            bail!("tracepoint '{}' needs CATEGORY:EVENT, e.g. tracepoint:syscalls:sys_enter_openat", spec.target);
        }
        let found = tracefs::expand_tracepoints(&spec.target)?;
        if found.is_empty() {
            let close = tracefs::suggest_tracepoints(&spec.target);
            return Err(tracefs::no_match("tracepoint", &spec.target, close, " (see `rtrace -l 'tracepoint:*'`)"));
        }
        Ok(found
            .into_iter()
            .map(|(category, event)| AttachPoint {
                name: format!("tracepoint:{category}:{event}"),
                target: Target::Tracepoint { category, event },
            })
            .collect())
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let Target::Tracepoint { category, event } = &point.target else {
            bail!("not a tracepoint: {}", point.name);
        };
        let id = tracefs::tracepoint_id(category, event)?;
        let fd = perf::open(perf::PERF_TYPE_TRACEPOINT, id as u64, 1, -1, 0)
            .map_err(|e| anyhow!("cannot open {}: {e}", point.name))?;
        perf::attach_bpf(vec![fd], prog).map_err(|e| anyhow!("{}: {e}", point.name))
    }
}
