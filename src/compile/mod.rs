//! From registered probes to loadable programs, as four passes
//! ([`compile_with`] runs them): expand the specs to attach points and
//! program groups (`expand_probes`, over `expand`); per group, split the
//! closure into kernel and userspace statements (`split`) and lower the
//! kernel ones to IR (`split_and_lower`, over `lower`); one layout per map
//! (`lay_out_maps`, over `maps`); the stop and pid filters first and BPF
//! generated (`generate`, over `filters` and `probes_ebpf`). The result is
//! a `plan::Plan`.

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
mod pending;
mod pointers;
pub mod split;
mod syntax;
pub mod userspace_uses;
mod values;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
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
use crate::probes::AttachPoint;
use crate::script::{ProbeDef, Session};
use pending::Pending;

/// A probe() on kernel events, expanded: its closure and its program groups.
struct Expanded<'r> {
    def: &'r ProbeDef,
    /// Its number in `Plan::probes` (as in control messages).
    index: usize,
    body: closure::ClosureBody,
    units: Vec<expand::Groups>,
}

/// A program group, split and lowered (pass 2).
struct LoweredGroup {
    pending: Pending,
    /// Its userspace runs.
    sites: Vec<SitePlan>,
    /// The maps whose uses the split put in userspace.
    userspace_maps: HashSet<u32>,
}

/// The probes of a script, expanded (pass 1).
#[derive(Default)]
struct Probes<'r> {
    begin: Vec<ProbeDef>,
    end: Vec<ProbeDef>,
    kernel: Vec<Expanded<'r>>,
}

pub fn compile(session: &Session, opts: &Config, kernel: &dyn Kernel) -> Result<Plan> {
    // Maps some probe's userspace statements write (or read by a userspace
    // key): every probe's uses of them run in userspace, in event order.
    // Putting statements in userspace can only add such maps: repeat until
    // the set stays the same.
    let mut owned = HashSet::new();
    loop {
        let (plan, found) = compile_with(session, opts, kernel, &owned)?;
        if found.is_subset(&owned) {
            return Ok(plan);
        }
        owned.extend(found);
    }
}

/// The passes, in order: expand the specs; split and lower each program
/// group; lay out the maps from every use; add the filters and generate
/// BPF. Also returns the maps whose uses the split put in userspace.
fn compile_with(
    session: &Session,
    opts: &Config,
    kernel: &dyn Kernel,
    owned: &HashSet<u32>,
) -> Result<(Plan, HashSet<u32>)> {
    // --no-split: the maps have the layouts the split program gives them
    // (its kernel statements type their keys and values).
    let split_shapes = match opts.no_split {
        true => compile(session, &Config { no_split: false, ..opts.clone() }, kernel).ok().map(|p| p.shapes),
        false => None,
    };
    let reg = session.registry.lock().unwrap();
    let file = &session.file_name;
    let probes = expand_probes(&reg.probes, opts, kernel, file)?;
    // Stack maps are added to the table as the probes ask for them.
    let table = RefCell::new(MapTable::new(reg.maps.len()));
    let mut sites = Vec::new();
    let mut pending = Vec::new();
    let mut found = HashSet::new();
    for probe in &probes.kernel {
        for unit in &probe.units {
            let first = pending.len();
            for group in &unit.groups {
                let g = split_and_lower(probe, unit, group, sites.len(), opts, kernel, &table, owned, file)?;
                found.extend(g.userspace_maps);
                sites.extend(g.sites);
                pending.push(g.pending);
            }
            if let Some(raw) = &unit.raw {
                let program = unit.ptype.program(raw, false, kernel).map_err(|e| at(file, probe.def, e.to_string()))?;
                dispatch::merge(&mut pending, first, raw.clone(), unit.name.clone(), program);
            }
        }
    }
    let shapes = lay_out_maps(session, &reg.maps, &pending, opts, split_shapes)?;
    let mut table = table.into_inner();
    let programs = generate(pending, &mut table, &shapes, opts, kernel, file)?;
    let plan = Plan {
        begin: probes.begin,
        end: probes.end,
        programs,
        shapes,
        maps: table,
        sites,
        probes: probes.kernel.iter().map(|p| p.def.spec.clone()).collect(),
        probe_at: probes.kernel.iter().map(|p| p.def.pos).collect(),
        syscall_dispatch: opts.syscall_dispatch,
    };
    Ok((plan, found))
}

/// An error at a probe() call.
fn at(file: &str, def: &ProbeDef, msg: String) -> anyhow::Error {
    Diagnostic::at(file, def.pos, msg).into()
}

/// Pass 1: each probe()'s specs, checked and expanded to attach points and
/// program groups; BEGIN and END set apart.
fn expand_probes<'r>(defs: &'r [ProbeDef], opts: &Config, kernel: &dyn Kernel, file: &str) -> Result<Probes<'r>> {
    let mut out = Probes::default();
    let mut total_points = 0usize;
    // One index per AST (the script's, each probe source string's): finding
    // every probe's closure stays linear in the number of probe() calls.
    let mut closures: HashMap<*const rhai::AST, closure::ClosureIndex> = HashMap::new();
    for def in defs {
        let specs = spec::parse(&def.spec).map_err(|e| at(file, def, e.to_string()))?;
        let index = closures.entry(Arc::as_ptr(&def.ast)).or_insert_with(|| closure::ClosureIndex::new(&def.ast));
        if specs.iter().any(|s| s.kind.is_userspace()) {
            if !specs.iter().all(|s| s.kind.is_userspace()) {
                let msg = "BEGIN and END can't be combined with other probes in one spec (`BEGIN,END` is fine)";
                return Err(at(file, def, msg.into()));
            }
            if index.get(def.closure.fn_name()).is_some_and(|b| b.params.len() > def.closure.curry().len()) {
                let msg =
                    format!("{} closures take no parameter: write probe(\"{}\", || {{ ... }})", def.spec, def.spec);
                return Err(at(file, def, msg));
            }
            // `BEGIN,END`: the closure runs at both.
            for s in &specs {
                match s.kind {
                    ProbeKind::Begin => out.begin.push(def.clone()),
                    _ => out.end.push(def.clone()),
                }
            }
            continue;
        }
        let body = index.get(def.closure.fn_name()).ok_or_else(|| {
            at(file, def, "the second argument of probe() must be a closure, e.g. |e| { ... }".into())
        })?;
        let per_point = closure::needs_per_point_program(&body)
            || split::functions_need_per_point(&body, &def.ast, def.closure.curry().len());
        // Many syscall tracepoints of one direction, from any of the specs:
        // one program on raw_syscalls, lowered per syscall first; any number
        // of them when the closure reads a kernel stack (closure::reads_kernel_stack).
        let dispatch_from = match opts.syscall_dispatch {
            0 => 0,
            _ if closure::reads_kernel_stack(&body) => 1,
            n => n,
        };
        let units = expand::groups(&specs, per_point, dispatch_from, opts, kernel, &mut total_points)
            .map_err(|e| at(file, def, e))?;
        out.kernel.push(Expanded { def, index: out.kernel.len(), body, units });
    }
    Ok(out)
}

/// Pass 2, per program group: split the closure into kernel and userspace
/// statements, lower the kernel ones to IR; the group's userspace runs
/// become sites numbered from `first_site`.
#[allow(clippy::too_many_arguments)]
fn split_and_lower(
    probe: &Expanded,
    unit: &expand::Groups,
    group: &[AttachPoint],
    first_site: usize,
    opts: &Config,
    kernel: &dyn Kernel,
    table: &RefCell<MapTable>,
    owned: &HashSet<u32>,
    file: &str,
) -> Result<LoweredGroup> {
    let (def, body) = (probe.def, &probe.body);
    let program = unit.ptype.program(&group[0], unit.per_point, kernel).map_err(|e| at(file, def, e.to_string()))?;
    let probe_name = if unit.per_point { group[0].name.clone() } else { unit.name.clone() };
    let target = lower::ProgramCtx {
        probe_name: &probe_name,
        probe_index: probe.index as u32,
        context: program.context,
        verdict: program.verdict,
        event: program.event.as_ref(),
        btf: kernel.btf(),
        first_site: first_site as u32,
        settings: opts,
        maps: table,
    };
    let event = (body.params.len() > def.closure.curry().len()).then(|| body.params.last().cloned()).flatten();
    let captures = values::captured(&body.params, def.closure.curry());
    let split = if opts.no_split {
        split::whole_userspace(body, &captures, event.as_deref(), target.event, Some(&def.ast))
    } else {
        split::analyze(body, &captures, event.as_deref(), target.event, Some(&def.ast), owned)
    };
    let closure = lower::Closure { body, captures: &captures, event: event.as_deref(), split: &split };
    let lowered = lower::lower(&closure, &target).map_err(|e| def.error_in_closure(file, e.pos, e.message))?;
    let captured: Vec<(String, rhai::Dynamic)> =
        body.params.iter().cloned().zip(def.closure.curry().iter().cloned()).collect();
    let mut own: Vec<&Site> = lowered.sites.iter().collect();
    own.sort_by_key(|s| s.id);
    if own.iter().any(|s| s.emit) && def.on_event.is_none() {
        return Err(at(file, def, "this probe calls emit(): give it a callback with .on_event(|rec| ...)".into()));
    }
    let mut sites = Vec::new();
    for site in own {
        // Records name their site by id: ids index `plan.sites`.
        debug_assert_eq!(site.id as usize, first_site + sites.len());
        let mut site = site.clone();
        if opts.no_split {
            no_split::rewrite_aggregations(&mut site.stmts, &captures);
        }
        sites.push(SitePlan {
            site,
            probe: probe.index,
            ast: def.ast.clone(),
            captured: captured.clone(),
            event: event.clone(),
            on_event: def.on_event.clone(),
        });
    }
    let pending = Pending {
        lowered,
        name: probe_name,
        ptype: unit.ptype,
        program,
        points: group.to_vec(),
        probe: probe.index,
        pos: def.pos,
        unplaced_source: def.source_unplaced(),
        dispatch: 0,
        unfiltered: def.unfiltered,
    };
    Ok(LoweredGroup { pending, sites, userspace_maps: split.userspace_maps })
}

/// Pass 3: one layout per map, from every use in every probe and in the
/// userspace callbacks; `split_shapes` (for --no-split) take precedence.
fn lay_out_maps(
    session: &Session,
    maps: &[crate::script::MapHandle],
    pending: &[Pending],
    opts: &Config,
    split_shapes: Option<Vec<MapShape>>,
) -> Result<Vec<MapShape>> {
    let file = &session.file_name;
    let mut uses: Vec<maps::MapUse> = pending.iter().flat_map(|p| p.lowered.uses.iter().cloned()).collect();
    uses.extend(userspace_uses::uses(&session.ast, &session.scope, opts.str_max));
    let names = |id: MapId| maps.get(id as usize).map(|m| m.name()).unwrap_or_default();
    let mut unified: BTreeMap<MapId, MapShape> =
        maps::unify(&uses, &names).map_err(|(at, msg)| Diagnostic::at_text(file, &at, msg))?;
    for p in pending.iter().filter(|p| p.program.irqs_off) {
        for u in &p.lowered.uses {
            if let Some(shape) = unified.get_mut(&u.map) {
                shape.prealloc = true;
            }
        }
    }
    for (id, shape) in split_shapes.into_iter().flatten().enumerate() {
        if shape != MapShape::unused() {
            unified.insert(id as MapId, shape);
        }
    }
    let shapes: Vec<MapShape> =
        (0..maps.len() as MapId).map(|id| unified.get(&id).cloned().unwrap_or_else(MapShape::unused)).collect();
    if let Some((pos, msg)) = map_names::check(maps, &shapes) {
        return Err(Diagnostic::at(file, pos, msg).into());
    }
    Ok(shapes)
}

/// Pass 4: each program with its filters first (the stop flag, -p/-c),
/// generated as BPF; the -c follow programs after them.
fn generate(
    pending: Vec<Pending>,
    table: &mut MapTable,
    shapes: &[MapShape],
    opts: &Config,
    kernel: &dyn Kernel,
    file: &str,
) -> Result<Vec<CompiledProgram>> {
    let follow_map = (opts.trace.follow_children && !pending.is_empty()).then(|| table.alloc_follow());
    let stop_map = table.alloc_stop();
    let helper_map = (opts.check_helpers > 0).then(|| table.alloc_helper_errors());
    let mut helper_slots = 0u32;
    let layouts: Vec<MapLayout> = table.layouts(shapes);
    let mut programs = Vec::new();
    for Pending { lowered, name, ptype, program: spec, points, probe, pos, unplaced_source, dispatch, unfiltered } in
        pending
    {
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
            arith_errors: Some((table.control_ring(), table.lost(), probe as u32)),
            helper_checks: helper_map.map(|map| ir::HelperChecks {
                map,
                first_slot: helper_slots,
                reads: opts.check_helpers > 1,
            }),
        };
        let code = probes_ebpf::generate(&program).map_err(|e| {
            // Code with no statement of its own (e.g. the whole probe over a limit): the probe() call.
            let at =
                Pos::of_span(e.span).map_or(rhai::Position::NONE, |p| rhai::Position::new(p.line as u16, p.col as u16));
            crate::script::closure_error(file, pos, unplaced_source, at, e.message)
        })?;
        helper_slots += code.helper_sites.len() as u32;
        programs.push(CompiledProgram {
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
        programs.extend(
            filters::follow_programs(map, stop_map, layouts, kernel)
                .map_err(|e| Diagnostic::new(file, None, format!("-c: {e}")))?,
        );
    }
    Ok(programs)
}

#[cfg(test)]
mod tests;
