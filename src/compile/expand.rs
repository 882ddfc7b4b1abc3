//! From one probe spec to programs: the spec's attach points (the probe
//! type expands it), the limit on how many a script attaches, and how the
//! points are grouped into programs (one program for all, or one per point
//! where the closure or the probe type needs it).

use crate::config::Config;
use crate::kernel::Kernel;
use crate::probes::spec::{ProbeKind, ProbeSpec};
use crate::probes::{self, AttachPoint, ProbeType};

use super::dispatch;

/// One spec's attach points, grouped into programs.
pub(super) struct Groups {
    pub ptype: &'static dyn ProbeType,
    /// The points of each program.
    pub groups: Vec<Vec<AttachPoint>>,
    /// One program per point.
    pub per_point: bool,
    /// Many syscall tracepoints: the raw_syscalls point their programs are
    /// merged onto, once each is lowered (`dispatch.rs`).
    pub raw: Option<AttachPoint>,
}

/// Expand `spec`; `per_point` when the closure needs a program per point
/// (it reads `e.args` or `e.probe`). `total` counts the script's points so far.
pub(super) fn groups(
    spec: &ProbeSpec,
    per_point: bool,
    opts: &Config,
    kernel: &dyn Kernel,
    total: &mut usize,
) -> Result<Groups, String> {
    let ptype = probes::probe_type(spec.kind);
    let points = ptype.expand(spec, &opts.trace, kernel).map_err(|e| e.to_string())?;
    *total += points.len();
    if *total > opts.max_probes {
        return Err(format!(
            "this script attaches {}+ probes, over the limit of {} (raise it with RTRACE_MAX_PROBES)",
            *total, opts.max_probes
        ));
    }
    let raw = if spec.kind == ProbeKind::Tracepoint { dispatch::target(&points, kernel) } else { None };
    let per_point = per_point || ptype.per_point(&points, kernel);
    let groups = if per_point { points.into_iter().map(|p| vec![p]).collect() } else { vec![points] };
    Ok(Groups { ptype, groups, per_point, raw })
}
