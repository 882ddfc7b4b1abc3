//! From registered probes to loadable programs, in this order: parse specs
//! and expand them to attach points and program groups (`expand`); per
//! group, split the closure into kernel and userspace statements (`split`)
//! and lower the kernel ones to IR (`lower`); unify map layouts (`maps`);
//! put the stop and pid filters first (`filters`); generate BPF
//! (`probes_ebpf`). The result is a `plan::Plan`.

pub mod closure;
mod dispatch;
pub mod event;
pub mod exit_flag;
mod expand;
pub mod explain;
pub mod fields;
mod filters;
pub mod lower;
mod map_names;
pub mod maps;
pub mod no_split;
mod pointers;
pub mod split;
mod syntax;
pub mod userspace_uses;
mod values;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use probes_ebpf::ir::{self, MapId, MapLayout};

use crate::config::Config;
use crate::diag::{Diagnostic, Pos};
use crate::kernel::Kernel;
use crate::plan::maps::MapTable;
use crate::plan::site::{MapShape, Site};
pub use crate::plan::{CompiledProgram, Plan, SitePlan};
use crate::probes::spec::{self, ProbeKind};
use crate::probes::{AttachPoint, ProbeType, ProgramSpec};
use crate::script::{ProbeDef, Session};

/// A lowered program group waiting for the map layouts.
struct Pending {
    lowered: lower::Lowered,
    name: String,
    ptype: &'static dyn ProbeType,
    program: ProgramSpec,
    points: Vec<AttachPoint>,
    probe: usize,
    dispatch: usize,
    /// `.unfiltered()`: no -p/-c filter.
    unfiltered: bool,
}

pub fn compile(session: &Session, opts: &Config, kernel: &dyn Kernel) -> Result<Plan> {
    // Maps some probe's userspace statements write (or read by a userspace
    // key): every probe's uses of them run in userspace, in event order.
    // Putting statements in userspace can only add such maps: repeat until
    // the set stays the same.
    let mut owned = std::collections::HashSet::new();
    loop {
        let (plan, found) = compile_with(session, opts, kernel, &owned)?;
        if found.is_subset(&owned) {
            return Ok(plan);
        }
        owned.extend(found);
    }
}

fn compile_with(
    session: &Session,
    opts: &Config,
    kernel: &dyn Kernel,
    owned: &std::collections::HashSet<u32>,
) -> Result<(Plan, std::collections::HashSet<u32>)> {
    let mut found = std::collections::HashSet::new();
    // --no-split: the maps have the layouts the split program gives them
    // (its kernel statements type their keys and values).
    let split_shapes = match opts.no_split {
        true => compile(session, &Config { no_split: false, ..opts.clone() }, kernel).ok().map(|p| p.shapes),
        false => None,
    };
    let reg = session.registry.lock().unwrap();
    let file = &session.file_name;
    let map_count = reg.maps.len() as MapId;
    let mut plan = Plan {
        begin: vec![],
        end: vec![],
        programs: vec![],
        shapes: vec![],
        maps: MapTable::default(),
        sites: vec![],
        probes: vec![],
        syscall_dispatch: opts.syscall_dispatch,
    };
    // Stack maps are added to the table as the probes ask for them.
    let table = RefCell::new(MapTable::new(reg.maps.len()));
    let mut pending: Vec<Pending> = Vec::new();
    let mut total_points = 0usize;
    let here = |def: &ProbeDef, msg: String| anyhow::Error::from(Diagnostic::at(file, def.pos, msg));

    // One index per AST (the script's, each probe source string's): finding
    // every probe's closure stays linear in the number of probe() calls.
    let mut closures: std::collections::HashMap<*const rhai::AST, closure::ClosureIndex> = Default::default();
    for def in &reg.probes {
        let specs = spec::parse(&def.spec).map_err(|e| here(def, e.to_string()))?;
        if specs.iter().any(|s| s.kind.is_userspace()) {
            if !specs.iter().all(|s| s.kind.is_userspace()) {
                return Err(here(
                    def,
                    "BEGIN and END can't be combined with other probes in one spec (`BEGIN,END` is fine)".into(),
                ));
            }
            let index = closures.entry(Arc::as_ptr(&def.ast)).or_insert_with(|| closure::ClosureIndex::new(&def.ast));
            if index.get(def.closure.fn_name()).is_some_and(|b| b.params.len() > def.closure.curry().len()) {
                return Err(here(
                    def,
                    format!("{} closures take no parameter: write probe(\"{}\", || {{ ... }})", def.spec, def.spec),
                ));
            }
            // `BEGIN,END`: the closure runs at both.
            for s in &specs {
                match s.kind {
                    ProbeKind::Begin => plan.begin.push(def.clone()),
                    _ => plan.end.push(def.clone()),
                }
            }
            continue;
        }
        let index = closures.entry(Arc::as_ptr(&def.ast)).or_insert_with(|| closure::ClosureIndex::new(&def.ast));
        let body = index
            .get(def.closure.fn_name())
            .ok_or_else(|| here(def, "the second argument of probe() must be a closure, e.g. |e| { ... }".into()))?;
        let probe_index = plan.probes.len();
        plan.probes.push(def.spec.clone());
        let per_point = closure::needs_per_point_program(&body)
            || split::functions_need_per_point(&body, &def.ast, def.closure.curry().len());
        // Many syscall tracepoints of one direction, from any of the specs:
        // one program on raw_syscalls, lowered per syscall first.
        for expand::Groups { ptype, name: unit_name, groups, per_point, raw } in
            expand::groups(&specs, per_point, opts, kernel, &mut total_points).map_err(|e| here(def, e))?
        {
            let first_pending = pending.len();
            for group in groups {
                let program = ptype.program(&group[0], per_point, kernel).map_err(|e| here(def, e.to_string()))?;
                let probe_name = if per_point { group[0].name.clone() } else { unit_name.clone() };
                let target = lower::ProgramCtx {
                    no_split: opts.no_split,
                    event: program.event.as_ref(),
                    btf: kernel.btf(),
                    probe_name: &probe_name,
                    context: program.context,
                    start_ns: opts.start_ns,
                    str_max: opts.str_max,
                    control_ring: table.borrow().control_ring(),
                    probe_index: probe_index as u32,
                    data_ring: table.borrow().data_ring(),
                    lost_map: table.borrow().lost(),
                    wake_map: table.borrow().wake(),
                    first_site: plan.sites.len() as u32,
                    wake_bytes: opts.wake_bytes(),
                    join_max: opts.join_max,
                    maps: &table,
                    stack_lost: table.borrow().stack_lost(),
                    stack_depth: opts.stack_depth,
                };
                let event =
                    (body.params.len() > def.closure.curry().len()).then(|| body.params.last().cloned()).flatten();
                // The pipeline per group: split the closure, then lower its kernel statements.
                let captures = values::captured(&body.params, def.closure.curry());
                let split = if opts.no_split {
                    split::whole_userspace(&body, &captures, event.as_deref(), target.event, Some(&def.ast))
                } else {
                    split::analyze(&body, &captures, event.as_deref(), target.event, Some(&def.ast), owned)
                };
                found.extend(split.userspace_maps.iter().copied());
                let closure =
                    lower::Closure { body: &body, captures: &captures, event: event.as_deref(), split: &split };
                let lowered = lower::lower(&closure, &target).map_err(|e| Diagnostic::at(file, e.pos, e.message))?;
                let captured: Vec<(String, rhai::Dynamic)> =
                    body.params.iter().cloned().zip(def.closure.curry().iter().cloned()).collect();
                let mut sites: Vec<&Site> = lowered.sites.iter().collect();
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
                    let mut site = site.clone();
                    if opts.no_split {
                        no_split::rewrite_aggregations(&mut site.stmts, &captures);
                    }
                    plan.sites.push(SitePlan {
                        site,
                        probe: probe_index,
                        ast: def.ast.clone(),
                        captured: captured.clone(),
                        event: event.clone(),
                        on_event: def.on_event.clone(),
                    });
                }
                pending.push(Pending {
                    lowered,
                    name: probe_name,
                    ptype,
                    program,
                    points: group,
                    probe: probe_index,
                    dispatch: 0,
                    unfiltered: def.unfiltered,
                });
            }
            if let Some(raw) = raw {
                let program = ptype.program(&raw, false, kernel).map_err(|e| here(def, e.to_string()))?;
                dispatch::merge(&mut pending, first_pending, raw, unit_name, program);
            }
        }
    }

    // One layout per map, from every use in every probe.
    let mut uses: Vec<maps::MapUse> = pending.iter().flat_map(|p| p.lowered.uses.iter().cloned()).collect();
    uses.extend(userspace_uses::uses(&session.ast, &session.scope, opts.str_max));
    let names = |id: MapId| reg.maps.get(id as usize).map(|m| m.name()).unwrap_or_default();
    let mut unified: BTreeMap<MapId, MapShape> =
        maps::unify(&uses, &names).map_err(|(at, msg)| Diagnostic::at_text(file, &at, msg))?;
    for p in &pending {
        if p.program.irqs_off {
            for u in &p.lowered.uses {
                if let Some(shape) = unified.get_mut(&u.map) {
                    shape.prealloc = true;
                }
            }
        }
    }
    for (id, shape) in split_shapes.into_iter().flatten().enumerate() {
        if shape != MapShape::unused() {
            unified.insert(id as MapId, shape);
        }
    }
    plan.shapes = (0..map_count).map(|id| unified.get(&id).cloned().unwrap_or_else(MapShape::unused)).collect();
    if let Some((pos, msg)) = map_names::check(&reg.maps, &plan.shapes) {
        return Err(Diagnostic::at(file, pos, msg).into());
    }
    let mut table = table.into_inner();
    let follow_map = (opts.trace.follow_children && !pending.is_empty()).then(|| table.alloc_follow());
    let stop_map = table.alloc_stop();
    let helper_map = (opts.check_helpers > 0).then(|| table.alloc_helper_errors());
    let mut helper_slots = 0u32;
    let layouts: Vec<MapLayout> = table.layouts(&plan.shapes);
    plan.maps = table;
    for Pending { lowered, name, ptype, program: spec, points, probe, dispatch, unfiltered } in pending {
        let site_ids = lowered.sites.iter().map(|s| s.id).collect();
        let split = lowered.split.clone();
        let mut body = lowered.body;
        let (follow, pid) = if unfiltered { (None, None) } else { (follow_map, opts.trace.pid) };
        filters::add(&mut body, &points, follow, pid, stop_map);
        exit_flag::mark_exits(&mut body, stop_map);
        let program = ir::Program {
            name: name.clone(),
            context: spec.context,
            locals: lowered.locals,
            maps: layouts.clone(),
            body,
            possible_cpus: kernel.possible_cpus(),
            arith_errors: Some((plan.maps.control_ring(), plan.maps.lost(), probe as u32)),
            helper_checks: helper_map.map(|map| ir::HelperChecks {
                map,
                first_slot: helper_slots,
                reads: opts.check_helpers > 1,
            }),
        };
        let code = probes_ebpf::generate(&program).map_err(|e| {
            // Code with no statement of its own (e.g. the whole probe over a limit): the probe() call.
            let pos = Pos::of_span(e.span)
                .or_else(|| reg.probes.iter().find(|p| p.spec == plan.probes[probe]).and_then(|p| Pos::of(p.pos)));
            Diagnostic::new(file, pos, e.message)
        })?;
        helper_slots += code.helper_sites.len() as u32;
        plan.programs.push(CompiledProgram {
            name,
            probe_type: ptype,
            prog_type: spec.prog_type,
            load: spec.load,
            code,
            points,
            probe,
            site_ids,
            split,
            internal: false,
            dispatch,
        });
    }
    if let Some(map) = follow_map {
        plan.programs.extend(
            filters::follow_programs(map, stop_map, layouts, kernel)
                .map_err(|e| Diagnostic::new(file, None, format!("-c: {e}")))?,
        );
    }
    Ok((plan, found))
}

#[cfg(test)]
mod tests;
