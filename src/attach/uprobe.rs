//! `uprobe:BIN:FN` / `uretprobe:BIN:FN`: programs of type BPF_PROG_TYPE_KPROBE
//! attached to user functions through perf events of the `uprobe` PMU.

use std::os::fd::BorrowedFd;

use anyhow::{bail, Result};
use probes_ebpf::ir::ContextKind;

use super::{AttachPoint, Attachment, ProbeType};
use crate::compile::spec::ProbeSpec;

pub struct UprobeProbe {
    pub retprobe: bool,
}

pub static UPROBE: UprobeProbe = UprobeProbe { retprobe: false };
pub static URETPROBE: UprobeProbe = UprobeProbe { retprobe: true };

const BPF_PROG_TYPE_KPROBE: u32 = 2;

impl ProbeType for UprobeProbe {
    fn prog_type(&self) -> u32 {
        BPF_PROG_TYPE_KPROBE
    }
    fn context(&self) -> ContextKind {
        ContextKind::PtRegs
    }
    fn expand(&self, spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
        bail!("{} probes are not supported yet", spec.kind.name())
    }
    fn attach(&self, point: &AttachPoint, _prog: BorrowedFd<'_>) -> Result<Attachment> {
        bail!("cannot attach {}", point.name)
    }
}
