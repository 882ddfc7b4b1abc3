//! `profile:`, `interval:`, `software:` and `hardware:` probes: programs of
//! type BPF_PROG_TYPE_PERF_EVENT attached to sampling perf events.

use std::os::fd::BorrowedFd;

use anyhow::{bail, Result};
use probes_ebpf::ir::ContextKind;

use super::{AttachPoint, Attachment, ProbeType};
use crate::compile::spec::{ProbeKind, ProbeSpec};

/// One of the four perf-event-based probe kinds.
pub struct PerfEventProbe {
    pub kind: ProbeKind,
}

pub static PROFILE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Profile };
pub static INTERVAL: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Interval };
pub static SOFTWARE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Software };
pub static HARDWARE: PerfEventProbe = PerfEventProbe { kind: ProbeKind::Hardware };

const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;

impl ProbeType for PerfEventProbe {
    fn prog_type(&self) -> u32 {
        BPF_PROG_TYPE_PERF_EVENT
    }
    fn context(&self) -> ContextKind {
        ContextKind::PerfEvent
    }
    fn expand(&self, spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
        bail!("{} probes are not supported yet", spec.kind.name())
    }
    fn attach(&self, point: &AttachPoint, _prog: BorrowedFd<'_>) -> Result<Attachment> {
        bail!("cannot attach {}", point.name)
    }
}
