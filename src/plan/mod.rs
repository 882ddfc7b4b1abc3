//! The compile → runtime contract: the `Plan` compile hands over (programs
//! with their code and attach points, userspace sites, map shapes and the
//! table of every map id with its role), in a module both sides import, so
//! neither imports the other. The record wire format is in
//! `probes_ebpf::record`.

pub mod maps;
pub mod site;

use probes_ebpf::Generated;

use crate::kernel::link::LoadAttrs;
use crate::probes::{AttachPoint, ProbeType};
use crate::script::ProbeDef;
use maps::MapTable;
use site::{MapShape, Site};

/// A run of userspace statements of one probe, ready for the runtime.
pub struct SitePlan {
    pub site: Site,
    /// Index into `Plan::probes`.
    pub probe: usize,
    /// The AST holding the script's functions.
    pub ast: std::sync::Arc<rhai::AST>,
    /// Captured top-level values by name (shared values stay shared).
    pub captured: Vec<(String, rhai::Dynamic)>,
    /// The closure's event parameter name.
    pub event: Option<String>,
    /// The probe's `.on_event` callback (for `emit()` sites).
    pub on_event: Option<rhai::FnPtr>,
}

/// One BPF program and where it attaches.
pub struct CompiledProgram {
    pub name: String,
    /// Attaches the program to its points.
    pub probe_type: &'static dyn ProbeType,
    /// Program type and load attributes, from the probe type's `ProgramSpec`.
    pub prog_type: u32,
    pub load: Result<LoadAttrs, String>,
    pub code: Generated,
    pub points: Vec<AttachPoint>,
    /// Index into `Plan::probes`.
    pub probe: usize,
    /// Ids of the userspace sites this program emits records for.
    pub site_ids: Vec<u32>,
    /// Where each statement of the probe's closure runs (empty for rtrace's own programs).
    pub split: Vec<site::Placement>,
    /// rtrace's own program (following `-c`'s children), not a script probe.
    pub internal: bool,
    /// Syscalls this `raw_syscalls` program dispatches to (compile/dispatch.rs); 0: none.
    pub dispatch: usize,
}

/// Everything to load and run.
pub struct Plan {
    /// Userspace probes (BEGIN/END) in registration order.
    pub begin: Vec<ProbeDef>,
    pub end: Vec<ProbeDef>,
    pub programs: Vec<CompiledProgram>,
    /// Shape of every script map, by id.
    pub shapes: Vec<MapShape>,
    /// Every map id (the script's and rtrace's own) with its role.
    pub maps: MapTable,
    /// Userspace statement runs, indexed by site id.
    pub sites: Vec<SitePlan>,
    /// Kernel probes' spec text, indexed by probe number (as in control messages).
    pub probes: Vec<String>,
    /// Where each kernel probe's `probe()` was called, by probe number (a
    /// spec written twice has two).
    pub probe_at: Vec<rhai::Position>,
    /// The fewest syscall tracepoints of one direction in one probe() that
    /// go on one dispatching `raw_syscalls` program (0: never).
    pub syscall_dispatch: usize,
}

impl Plan {
    /// Probes of the script (rtrace's own programs not counted).
    pub fn attach_count(&self) -> usize {
        self.programs.iter().filter(|p| !p.internal).map(|p| p.dispatch.max(p.points.len())).sum::<usize>()
            + self.begin.len()
            + self.end.len()
    }

    /// (program index, point) in the order to attach them, so that probes
    /// on one place run in the order they were registered: points of probe
    /// types whose handlers on one place the kernel runs newest first
    /// (uprobes, USDT) attach in reverse, after the others.
    pub fn attach_order(&self) -> Vec<(usize, &AttachPoint)> {
        let all = self.programs.iter().enumerate().flat_map(|(i, p)| p.points.iter().map(move |pt| (i, pt)));
        let (mut newest_first, mut order): (Vec<_>, Vec<_>) =
            all.partition(|(i, _)| self.programs[*i].probe_type.newest_runs_first());
        newest_first.reverse();
        order.extend(newest_first);
        order
    }
}
