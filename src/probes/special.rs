//! `BEGIN` and `END`: probes that run wholly in userspace, before tracing
//! starts and after it stops. They have no attach points and no program, so
//! compile hands them to the runtime as they are; this type only makes the
//! probe type table total.

use std::os::fd::BorrowedFd;

use anyhow::{bail, Result};

use super::spec::ProbeSpec;
use super::{AttachPoint, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::Attachment;
use crate::kernel::Kernel;

pub struct Special;

impl ProbeType for Special {
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, _k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        bail!("{} runs in userspace and has no attach points", spec.kind.name())
    }
    fn program(&self, point: &AttachPoint, _per_point: bool, _k: &dyn Kernel) -> Result<ProgramSpec> {
        bail!("{} runs in userspace and has no program", point.name)
    }
    fn attach(&self, point: &AttachPoint, _prog: BorrowedFd<'_>) -> Result<Attachment> {
        bail!("{} runs in userspace and attaches nothing", point.name)
    }
}
