//! From one probe()'s specs to programs: the specs' attach points (the
//! probe type expands each), the limit on how many a script attaches, and
//! how the points are grouped into programs (one program for all, one per
//! point where the closure or the probe type needs it, many syscall
//! tracepoints on one dispatch program).

use crate::config::Config;
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::probes::{self, AttachPoint, ProbeType};

use super::dispatch;

/// Attach points of one probe(), grouped into programs.
pub(super) struct Groups {
    pub ptype: &'static dyn ProbeType,
    /// What a program for several points is called: the spec, or the specs
    /// whose syscall tracepoints one dispatch program serves.
    pub name: String,
    /// The points of each program.
    pub groups: Vec<Vec<AttachPoint>>,
    /// One program per point.
    pub per_point: bool,
    /// Many syscall tracepoints: the raw_syscalls point their programs are
    /// merged onto, once each is lowered (`dispatch.rs`).
    pub raw: Option<AttachPoint>,
}

/// Expand a probe()'s `specs`; `per_point` when the closure needs a program
/// per point (it reads `e.args` or `e.probe`). `total` counts the script's
/// points so far. The syscall tracepoints of one direction, from whichever
/// specs, share one dispatch program when there are `dispatch_from` or more
/// (0: never; `dispatch::units`).
pub(super) fn groups(
    specs: &[ProbeSpec],
    per_point: bool,
    dispatch_from: usize,
    opts: &Config,
    kernel: &dyn Kernel,
    total: &mut usize,
) -> Result<Vec<Groups>, String> {
    let mut expanded = Vec::with_capacity(specs.len());
    for spec in specs {
        let points = probes::probe_type(spec.kind).expand(spec, &opts.trace, kernel).map_err(|e| e.to_string())?;
        *total += points.len();
        if *total > opts.max_probes {
            return Err(format!(
                "this script attaches {}+ probes, over the limit of {} (raise it with RTRACE_MAX_PROBES)",
                *total, opts.max_probes
            ));
        }
        expanded.push(points);
    }
    let units = dispatch::units(specs, expanded, dispatch_from, kernel);
    Ok(units
        .into_iter()
        .map(|unit| {
            let ptype = probes::probe_type(unit.kind);
            let per_point = per_point || ptype.per_point(&unit.points, kernel);
            let groups = if per_point { unit.points.into_iter().map(|p| vec![p]).collect() } else { vec![unit.points] };
            Groups { ptype, name: unit.name, groups, per_point, raw: unit.raw }
        })
        .collect())
}
