//! From registered probes to loadable programs: parse specs, expand attach
//! points, lower each closure to IR (`lower`), unify map layouts (`maps`),
//! and generate BPF (`probes_ebpf`).

pub mod fields;
pub mod lower;
pub mod maps;
pub mod spec;

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use probes_ebpf::ir::{self, MapId, MapLayout, ValueKind};
use probes_ebpf::Generated;

use crate::attach::{self, tracefs, AttachPoint, ProbeType, Target as AttachTarget};
use crate::script::{position_text, ProbeDef, Session};
use maps::MapShape;
use spec::ProbeKind;

/// Settings that shape generated code.
#[derive(Clone, Debug)]
pub struct Options {
    /// Default `str()` length (env `RTRACE_STRLEN`, default 64).
    pub str_max: u32,
    pub start_ns: i64,
    /// Size of the data ring buffer in bytes (a power of two, ≥ 4096).
    pub ring_size: u32,
    /// Frames kept per stack when the script gives no limit (env RTRACE_STACK_DEPTH).
    pub stack_depth: u32,
}

/// A run of userspace statements of one probe, ready for the runtime.
pub struct SitePlan {
    pub site: lower::Site,
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
    pub probe_type: &'static dyn ProbeType,
    pub code: Generated,
    pub points: Vec<AttachPoint>,
    /// Index into `Plan::probes`.
    pub probe: usize,
    /// Ids of the userspace sites this program emits records for.
    pub site_ids: Vec<u32>,
    /// rtrace's own program (following `-c`'s children), not a script probe.
    pub internal: bool,
}

/// Everything to load and run.
pub struct Plan {
    /// Userspace probes (BEGIN/END) in registration order.
    pub begin: Vec<ProbeDef>,
    pub end: Vec<ProbeDef>,
    pub programs: Vec<CompiledProgram>,
    /// Shape of every script map, by id; the control ring is the last id.
    pub shapes: Vec<MapShape>,
    pub control_ring: MapId,
    pub data_ring: MapId,
    pub lost_map: MapId,
    /// Per-CPU counts of failed stack captures (slot 0 collisions, 1 map full).
    pub stack_lost: MapId,
    /// Userspace statement runs, indexed by site id.
    pub sites: Vec<SitePlan>,
    /// Stack maps: (map id, depth, user).
    pub stack_maps: Vec<(MapId, u32, bool)>,
    /// Kernel probes' spec text, indexed by probe number (as in control messages).
    pub probes: Vec<String>,
    /// `-c`: the map of followed pids (the command and its descendants).
    pub follow_map: Option<MapId>,
    /// A one-slot array every program checks first: non-zero = stopped.
    pub stop_map: MapId,
}

impl Plan {
    /// Probes of the script (rtrace's own programs not counted).
    pub fn attach_count(&self) -> usize {
        self.programs.iter().filter(|p| !p.internal).map(|p| p.points.len()).sum::<usize>()
            + self.begin.len()
            + self.end.len()
    }
}

pub fn compile(session: &Session, opts: &Options) -> Result<Plan> {
    let reg = session.registry.lock().unwrap();
    let file = &session.file_name;
    let map_count = reg.maps.len() as MapId;
    let control_ring = map_count;
    let data_ring = map_count + 1;
    let lost_map = map_count + 2;
    let mut plan = Plan {
        begin: vec![],
        end: vec![],
        programs: vec![],
        shapes: vec![],
        control_ring,
        data_ring,
        lost_map,
        stack_lost: lost_map + 1,
        sites: vec![],
        stack_maps: vec![],
        probes: vec![],
        follow_map: None,
        stop_map: 0,
    };
    let stack_maps = std::cell::RefCell::new(Vec::new());
    let stack_base = lost_map + 2;
    let mut pending: Vec<(lower::Lowered, String, &'static dyn ProbeType, Vec<AttachPoint>, usize)> = Vec::new();
    let mut total_points = 0usize;
    let here = |def: &ProbeDef, msg: String| anyhow!("{file}:{}: error: {msg}", position_text(def.pos));

    for def in &reg.probes {
        let specs = spec::parse(&def.spec).map_err(|e| here(def, e.to_string()))?;
        if specs.iter().any(|s| s.kind.is_userspace()) {
            if specs.len() > 1 {
                return Err(here(def, "BEGIN and END can't be combined with other probes in one spec".into()));
            }
            match specs[0].kind {
                ProbeKind::Begin => plan.begin.push(def.clone()),
                _ => plan.end.push(def.clone()),
            }
            continue;
        }
        let body = lower::find_closure(&def.ast, def.closure.fn_name())
            .ok_or_else(|| here(def, "the second argument of probe() must be a closure, e.g. |e| { ... }".into()))?;
        let probe_index = plan.probes.len();
        plan.probes.push(def.spec.clone());
        let per_point = lower::needs_per_point_program(&body);
        for spec in &specs {
            let ptype = attach::probe_type(spec.kind).map_err(|e| here(def, e.to_string()))?;
            let points = ptype.expand(spec).map_err(|e| here(def, e.to_string()))?;
            total_points += points.len();
            if total_points > attach::max_probes() {
                return Err(here(
                    def,
                    format!(
                        "this script attaches {total_points}+ probes, over the limit of {} (raise it with RTRACE_MAX_PROBES)",
                        attach::max_probes()
                    ),
                ));
            }
            // One USDT name can have sites with different argument specs.
            let per_point = per_point
                || ptype.program_per_point()
                || points.iter().any(|p| attach::usdt::args_of(p) != attach::usdt::args_of(&points[0]));
            let groups: Vec<Vec<AttachPoint>> =
                if per_point { points.into_iter().map(|p| vec![p]).collect() } else { vec![points] };
            for group in groups {
                let format = match (&group[0].target, per_point) {
                    (AttachTarget::Tracepoint { category, event }, true) => {
                        Some(tracefs::read_format(category, event).map_err(|e| here(def, e.to_string()))?)
                    }
                    _ => None,
                };
                let btf_args = if per_point { ptype.btf_args(&group[0]) } else { None };
                let probe_name = if per_point { group[0].name.clone() } else { spec.full_name() };
                let func = match &group[0].target {
                    AttachTarget::Uprobe { symbol, .. } if per_point => Some(symbol.as_str()),
                    AttachTarget::KernelFunction { function, .. } if per_point => Some(function.as_str()),
                    _ => None,
                };
                let target = lower::Target {
                    func,
                    usdt_args: attach::usdt::args_of(&group[0]),
                    user_space: matches!(group[0].target, AttachTarget::Uprobe { .. } | AttachTarget::Usdt { .. }),
                    probe_name: &probe_name,
                    context: ptype.context_at(&group[0]),
                    format: format.as_ref(),
                    start_ns: opts.start_ns,
                    str_max: opts.str_max,
                    control_ring,
                    probe_index: probe_index as u32,
                    data_ring,
                    lost_map,
                    first_site: plan.sites.len() as u32,
                    wake_bytes: (opts.ring_size / 8).max(64),
                    stack_maps: &stack_maps,
                    stack_base,
                    stack_lost: lost_map + 1,
                    stack_depth: opts.stack_depth,
                    btf_args: btf_args.as_deref(),
                    btf_retval: if per_point { ptype.btf_return(&group[0]) } else { None },
                };
                let lowered = lower::lower(&body, def.closure.curry(), &target)
                    .map_err(|e| anyhow!("{file}:{}: error: {}", position_text(e.pos), e.message))?;
                let captured: Vec<(String, rhai::Dynamic)> =
                    body.params.iter().cloned().zip(def.closure.curry().iter().cloned()).collect();
                let event =
                    (body.params.len() > def.closure.curry().len()).then(|| body.params.last().cloned()).flatten();
                let mut sites: Vec<&lower::Site> = lowered.sites.iter().collect();
                sites.sort_by_key(|s| s.id);
                if sites.iter().any(|s| s.emit) && def.on_event.is_none() {
                    return Err(here(
                        def,
                        "this probe calls emit(): give it a callback with .on_event(|rec| ...)".into(),
                    ));
                }
                for site in sites {
                    // Records name their site by id: ids index `plan.sites`.
                    debug_assert_eq!(site.id as usize, plan.sites.len());
                    plan.sites.push(SitePlan {
                        site: site.clone(),
                        probe: probe_index,
                        ast: def.ast.clone(),
                        captured: captured.clone(),
                        event: event.clone(),
                        on_event: def.on_event.clone(),
                    });
                }
                pending.push((lowered, probe_name, ptype, group, probe_index));
            }
        }
    }

    // One layout per map, from every use in every probe.
    let uses: Vec<maps::MapUse> = pending.iter().flat_map(|p| p.0.uses.iter().cloned()).collect();
    let names = |id: MapId| reg.maps.get(id as usize).map(|m| m.name()).unwrap_or_default();
    let unified: BTreeMap<MapId, MapShape> = maps::unify(&uses, &names).map_err(|e| anyhow!("{file}:{e}"))?;
    plan.shapes = (0..map_count).map(|id| unified.get(&id).cloned().unwrap_or_else(MapShape::unused)).collect();
    let mut layouts: Vec<MapLayout> = plan.shapes.iter().map(|s| s.layout.clone()).collect();
    layouts.push(MapLayout { key: vec![], value: ValueKind::RingBuf });
    layouts.push(MapLayout { key: vec![], value: ValueKind::RingBuf });
    layouts.push(MapLayout { key: vec![], value: ValueKind::Agg(ir::AggKind::Sum) });
    layouts.push(MapLayout { key: vec![], value: ValueKind::Agg(ir::AggKind::Sum) });
    for (i, (depth, user, _)) in stack_maps.borrow().iter().enumerate() {
        layouts.push(MapLayout { key: vec![], value: ValueKind::StackTrace { depth: *depth } });
        plan.stack_maps.push((stack_base + i as MapId, *depth, *user));
    }

    if attach::follow_children() && !pending.is_empty() {
        plan.follow_map = Some(layouts.len() as MapId);
        layouts.push(MapLayout { key: vec![ir::Ty::Int], value: ValueKind::Value(ir::Ty::Int) });
    }
    plan.stop_map = layouts.len() as MapId;
    layouts.push(MapLayout { key: vec![], value: ValueKind::Value(ir::Ty::Int) });
    let pid = ir::Expr::Builtin(ir::Builtin::Pid);
    for (lowered, name, ptype, points, probe) in pending {
        let site_ids = lowered.sites.iter().map(|s| s.id).collect();
        let mut body = lowered.body;
        // -p: every probe only sees the traced process; -c: the command and
        // the processes it starts. Not `interval`: a timer, whoever it interrupts.
        let timer = points.iter().all(|p| p.name.starts_with("interval:"));
        let not_target = match (plan.follow_map, attach::target_pid()) {
            _ if timer => None,
            (Some(map), _) => {
                Some(ir::Expr::Unary(ir::UnOp::Not, Box::new(ir::Expr::MapContains { map, key: vec![pid.clone()] })))
            }
            (None, Some(target)) => {
                Some(ir::Expr::Binary(ir::BinOp::Ne, Box::new(pid.clone()), Box::new(ir::Expr::Int(target as i64))))
            }
            (None, None) => None,
        };
        if let Some(cond) = not_target {
            body.insert(0, leave_if(cond));
        }
        body.insert(0, leave_if(stopped(plan.stop_map)));
        let program = ir::Program {
            name: name.clone(),
            context: ptype.context_at(&points[0]),
            locals: lowered.locals,
            maps: layouts.clone(),
            body,
        };
        let code = probes_ebpf::generate(&program)
            .map_err(|e| anyhow!("{file}:{}:{}: error: {}", e.span.line, e.span.col, e.message))?;
        plan.programs.push(CompiledProgram { name, probe_type: ptype, code, points, probe, site_ids, internal: false });
    }
    if let Some(map) = plan.follow_map {
        plan.programs
            .extend(follow_programs(map, plan.stop_map, layouts).map_err(|e| anyhow!("{file}: error: -c: {e}"))?);
    }
    Ok(plan)
}

/// `if cond { return }`, first thing in a program.
fn leave_if(cond: ir::Expr) -> ir::Stmt {
    let leave = ir::Stmt { kind: ir::StmtKind::Return, span: ir::Span::default() };
    ir::Stmt { kind: ir::StmtKind::If { cond, then: vec![leave], otherwise: vec![] }, span: ir::Span::default() }
}

/// Tracing has stopped: every program leaves at once, while the (slow)
/// detaching happens after the output is written.
fn stopped(stop_map: MapId) -> ir::Expr {
    ir::Expr::MapGet { map: stop_map, key: vec![] }
}

/// `-c`: two programs keep the followed pids. A new process (not a thread)
/// started by a followed one is followed too; a followed process whose last
/// thread exits is dropped (its pid may be reused).
fn follow_programs(map: MapId, stop_map: MapId, maps: Vec<MapLayout>) -> Result<Vec<CompiledProgram>> {
    const CLONE_THREAD: i64 = 0x10000;
    let pid = || ir::Expr::Builtin(ir::Builtin::Pid);
    let stmt = |kind| ir::Stmt { kind, span: ir::Span::default() };
    let field = |category: &str, event: &str, name: &str| -> Result<ir::Expr> {
        let format = tracefs::read_format(category, event)?;
        let f = format.field(name).ok_or_else(|| anyhow!("{category}:{event} has no {name} field"))?;
        Ok(ir::Expr::CtxInt { offset: f.offset, size: f.size, signed: f.signed })
    };
    // task_newtask runs in the parent, before the child runs.
    let followed = ir::Expr::MapContains { map, key: vec![pid()] };
    let thread = ir::Expr::Binary(
        ir::BinOp::And,
        Box::new(field("task", "task_newtask", "clone_flags")?),
        Box::new(ir::Expr::Int(CLONE_THREAD)),
    );
    let new_process =
        ir::Expr::LogicalAnd(Box::new(followed.clone()), Box::new(ir::Expr::Unary(ir::UnOp::Not, Box::new(thread))));
    let add =
        stmt(ir::StmtKind::MapStore { map, key: vec![field("task", "task_newtask", "pid")?], value: ir::Expr::Int(1) });
    let on_new = vec![stmt(ir::StmtKind::If { cond: new_process, then: vec![add], otherwise: vec![] })];
    // sched_process_exit runs in the exiting thread; group_dead: the last one.
    let last = ir::Expr::LogicalAnd(Box::new(followed), Box::new(field("sched", "sched_process_exit", "group_dead")?));
    let drop = stmt(ir::StmtKind::MapDelete { map, key: vec![pid()] });
    let on_exit = vec![stmt(ir::StmtKind::If { cond: last, then: vec![drop], otherwise: vec![] })];

    let ptype: &'static dyn ProbeType = &attach::tracepoint::Tracepoint;
    let mut out = Vec::new();
    for (name, target, mut body) in
        [("rtrace_follow", "task:task_newtask", on_new), ("rtrace_unfollow", "sched:sched_process_exit", on_exit)]
    {
        body.insert(0, leave_if(stopped(stop_map)));
        let points = ptype.expand(&spec::ProbeSpec { kind: ProbeKind::Tracepoint, target: target.into() })?;
        let program =
            ir::Program { name: name.into(), context: ptype.context(), locals: vec![], maps: maps.clone(), body };
        let code = probes_ebpf::generate(&program).map_err(|e| anyhow!("{}", e.message))?;
        out.push(CompiledProgram {
            name: name.into(),
            probe_type: ptype,
            code,
            points,
            probe: 0,
            site_ids: vec![],
            internal: true,
        });
    }
    Ok(out)
}
