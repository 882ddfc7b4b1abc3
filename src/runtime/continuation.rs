//! Running the userspace part of probes: each record names a site (a run of
//! userspace statements); its fields become `e.*`, the kernel `let` values
//! and the strings the kernel read for `str()` calls, as they were at the
//! event, in a Rhai scope rebuilt for each record (its storage is reused).
//! Once `exit()` or `fail()` ran in userspace, no further record runs.

use probes_ebpf::ir::Ty;
use probes_ebpf::record;
use rhai::{Dynamic, Scope, AST};

use crate::plan::site::RecordField;
use crate::plan::site::ValueMeaning;
use crate::plan::Plan;
use std::sync::Arc;

use crate::runtime::stacks::StackMaps;
use crate::script::Session;

struct SiteRunner {
    ast: AST,
    /// For `emit()` sites: the callback, the AST it lives in, array or not.
    on_event: Option<(rhai::FnPtr, std::sync::Arc<AST>, bool)>,
    sems: Vec<ValueMeaning>,
    scope: Vec<String>,
    fields: Vec<(RecordField, Ty, usize)>,
    captured: Vec<(String, Dynamic)>,
    event: Option<String>,
    probe: usize,
    at: String,
    /// Whether any field is an event field (else `e` is not read: it is `()`).
    has_event: bool,
    /// Whether any field is a string read for a `str()` call.
    has_reads: bool,
    /// Whether any field is a map value read at the event.
    has_map_reads: bool,
    /// Per `scope` entry: declaration id, and whether it is a kernel local.
    decls: Vec<(u32, bool)>,
    /// Declarations of the run's own top-level `let`s.
    own: Vec<u32>,
    /// Records say which event they belong to; the event's userspace
    /// variables are kept from one run to the next (see [`Carried`]).
    carry: bool,
}

/// What one event's userspace statements left for its later runs: the
/// variables they declared or changed (by declaration id), the maps they
/// wrote, and whether a `return` ended the closure.
#[derive(Default)]
struct Carried {
    values: std::collections::HashMap<u32, Dynamic>,
    written: Vec<u32>,
    ended: bool,
}

/// Events whose userspace runs may still come, oldest first. Records of
/// one event arrive in order but interleaved with other CPUs'; an event is
/// forgotten once this many newer ones have started.
const CARRIED_EVENTS: usize = 4096;

#[derive(Default)]
struct CarriedEvents {
    events: std::collections::HashMap<(usize, i64, i64), Carried>,
    order: std::collections::VecDeque<(usize, i64, i64)>,
}

impl CarriedEvents {
    fn take(&mut self, key: (usize, i64, i64)) -> Carried {
        self.events.remove(&key).unwrap_or_default()
    }
    fn put(&mut self, key: (usize, i64, i64), c: Carried) {
        if self.events.insert(key, c).is_none() {
            self.order.push_back(key);
            while self.order.len() > CARRIED_EVENTS {
                if let Some(old) = self.order.pop_front() {
                    self.events.remove(&old);
                }
            }
        }
    }
}

/// Whether a value userspace holds is still the one the kernel sent.
fn same(a: &Dynamic, b: &Dynamic) -> bool {
    if let (Ok(x), Ok(y)) = (a.as_int(), b.as_int()) {
        return x == y;
    }
    if let (Ok(x), Ok(y)) = (a.as_bool(), b.as_bool()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.read_lock::<rhai::ImmutableString>(), b.read_lock::<rhai::ImmutableString>()) {
        return *x == *y;
    }
    false
}

pub struct Continuations {
    sites: Vec<SiteRunner>,
    /// Errors seen so far (with `--keep-going`).
    pub errors: u64,
    pub keep_going: bool,
    /// With `keep_going`: errors shown before the rest are only counted.
    pub errors_shown: u64,
    pub records: u64,
    /// `exit()` or `fail()` ran in a userspace statement: later records don't run.
    pub stopped: bool,
    /// Records not run because `stopped` was set.
    pub skipped: u64,
    /// The scope records run in, cleared and refilled for each.
    scope: Scope<'static>,
    /// The kernel `let` values of the record being run, reused likewise.
    locals: Vec<Dynamic>,
    /// The run's stack maps, for stack fields.
    stacks: Arc<StackMaps>,
    carried: CarriedEvents,
    /// Which scope entries the record being run filled.
    from_record: Vec<bool>,
}

impl Continuations {
    pub fn new(plan: &Plan, keep_going: bool, stacks: Arc<StackMaps>) -> Continuations {
        let sites = plan
            .sites
            .iter()
            .map(|sp| {
                let (offsets, _) = record::field_offsets(sp.site.fields.iter().map(|(_, ty)| *ty));
                let fields =
                    sp.site.fields.iter().zip(offsets).map(|((cap, ty), at)| (cap.clone(), *ty, at as usize)).collect();
                let has_event = sp
                    .site
                    .fields
                    .iter()
                    .any(|(c, _)| matches!(c, RecordField::Event(_) | RecordField::EventItem { .. }));
                let has_reads = sp.site.fields.iter().any(|(c, _)| matches!(c, RecordField::Read { .. }));
                let has_map_reads = sp.site.fields.iter().any(|(c, _)| matches!(c, RecordField::MapRead { .. }));
                let mut stmts = sp.site.stmts.clone();
                if sp.site.carry {
                    // The last statement says the run reached its end (no `return`).
                    stmts.extend(run_done_stmt());
                }
                SiteRunner {
                    has_event,
                    has_reads,
                    has_map_reads,
                    decls: sp.site.decls.clone(),
                    own: sp.site.own.clone(),
                    carry: sp.site.carry,
                    ast: AST::new(stmts, sp.ast.shared_lib().clone()),
                    fields,
                    scope: sp.site.scope.clone(),
                    sems: sp.site.sems.clone(),
                    on_event: if sp.site.emit {
                        sp.on_event.clone().map(|f| (f, sp.ast.clone(), sp.site.emit_array))
                    } else {
                        None
                    },
                    captured: sp.captured.clone(),
                    event: sp.event.clone(),
                    probe: sp.probe,
                    at: sp.site.at.clone(),
                }
            })
            .collect();
        Continuations {
            sites,
            errors: 0,
            keep_going,
            errors_shown: 1,
            records: 0,
            stopped: false,
            skipped: 0,
            scope: Scope::new(),
            locals: Vec::new(),
            stacks,
            carried: CarriedEvents::default(),
            from_record: Vec::new(),
        }
    }

    /// A runtime error in a probe's statements (userspace or kernel): it
    /// stops tracing, or with `--keep-going` is counted (the first shown).
    pub fn error(&mut self, msg: String) -> anyhow::Result<()> {
        self.errors += 1;
        if self.keep_going {
            if self.errors <= self.errors_shown {
                eprintln!("{msg}");
            }
            Ok(())
        } else {
            Err(anyhow::anyhow!(msg))
        }
    }

    /// Run the statements of one record. An error stops tracing unless
    /// `keep_going` (then it is counted).
    pub fn run(&mut self, session: &Session, plan: &Plan, rec: &[u8]) -> anyhow::Result<()> {
        self.records += 1;
        if self.stopped {
            self.skipped += 1;
            return Ok(());
        }
        let Some(id) = record::record_site(rec) else {
            return Ok(());
        };
        let Some(site) = self.sites.get(id as usize) else { return Ok(()) };
        if let Some((f, ast, array)) = &site.on_event {
            let values: Vec<Dynamic> = site
                .fields
                .iter()
                .enumerate()
                .map(|(i, (_, ty, off))| match site.sems.get(i) {
                    Some(ValueMeaning::Stack { map, user, mode }) => Dynamic::from(self.stacks.render(
                        *map,
                        decode(rec, *off, *ty).as_int().unwrap_or(-1),
                        *user,
                        *mode,
                    )),
                    _ => decode(rec, *off, *ty),
                })
                .collect();
            let arg = if *array { Dynamic::from(values) } else { values.into_iter().next().unwrap_or(Dynamic::UNIT) };
            return match session.call_closure(ast, f, (arg,)) {
                Ok(_) => Ok(()),
                Err(e) if matches!(*e, rhai::EvalAltResult::ErrorTerminated(..)) => {
                    self.stopped = true;
                    Ok(())
                }
                Err(e) => {
                    self.errors += 1;
                    let msg = format!(
                        "{} (in the on_event callback of probe {})",
                        session.runtime_error(&e),
                        plan.probes[site.probe]
                    );
                    if self.keep_going {
                        Ok(())
                    } else {
                        Err(anyhow::anyhow!(msg))
                    }
                }
            };
        }
        let scope = &mut self.scope;
        scope.clear();
        for (name, v) in &site.captured {
            scope.push_dynamic(name.as_str(), v.clone());
        }
        // Rebuild the closure's scope in Rhai's order: parameters, then locals.
        let mut event = rhai::Map::new();
        let mut args = rhai::Map::new();
        let locals = &mut self.locals;
        locals.clear();
        locals.resize(site.scope.len(), Dynamic::UNIT);
        let mut arrays: std::collections::BTreeMap<String, Vec<Dynamic>> = std::collections::BTreeMap::new();
        let mut kptr_bases: std::collections::HashMap<usize, (i64, String)> = Default::default();
        let mut kptr_members: Vec<(usize, Vec<String>, Dynamic)> = Vec::new();
        let from_record = &mut self.from_record;
        from_record.clear();
        from_record.resize(site.scope.len(), false);
        let mut event_key = [0i64; 2];
        for (i, (cap, ty, off)) in site.fields.iter().enumerate() {
            let mut value = decode(rec, *off, *ty);
            match site.sems.get(i) {
                Some(ValueMeaning::Stack { map, user, mode }) => {
                    let v = value.as_int().unwrap_or(-1);
                    value = Dynamic::from(self.stacks.render(*map, v, *user, *mode));
                }
                Some(ValueMeaning::Bool) => value = Dynamic::from(value.as_int().unwrap_or(0) != 0),
                Some(ValueMeaning::Buf) => {
                    let n = match ty {
                        Ty::Bytes(n) => *n as usize,
                        Ty::Int => 0,
                    };
                    value =
                        Dynamic::from(crate::output::bytes::Buf::from_field(rec.get(*off..*off + n).unwrap_or(&[])));
                }
                Some(ValueMeaning::Ksym) => {
                    value = Dynamic::from(crate::symbols::stacks::ksym_name(value.as_int().unwrap_or(0) as u64))
                }
                _ => {}
            }
            match cap {
                RecordField::Local { slot, .. } => {
                    if let Some(l) = locals.get_mut(*slot) {
                        *l = value;
                        from_record[*slot] = true;
                    }
                }
                RecordField::EventKey(k) => event_key[(*k as usize).min(1)] = value.as_int().unwrap_or(0),
                RecordField::Emitted | RecordField::Read { .. } | RecordField::MapRead { .. } => {}
                RecordField::KptrBase { id, ty } => {
                    kptr_bases.insert(*id, (value.as_int().unwrap_or(0), ty.clone()));
                }
                RecordField::KptrMember { id, path } => kptr_members.push((*id, path.clone(), value)),
                RecordField::EventItem { path, .. } => {
                    if let Some(f) = path.last() {
                        arrays.entry(f.clone()).or_default().push(value);
                    }
                }
                RecordField::Event(path) if arrays.contains_key(path.last().map(String::as_str).unwrap_or("")) => {
                    // The array's own marker field: the items came just before.
                }
                RecordField::Event(path) => match path.as_slice() {
                    [f, ..] if crate::builtins::is_stack(f) => {
                        event.insert(path.join("/").into(), value);
                    }
                    [f] => {
                        event.insert(f.as_str().into(), value);
                    }
                    [a, f] if a == "args" => {
                        args.insert(f.as_str().into(), value);
                    }
                    [a, rest @ ..] if a == "args" => insert_path(&mut args, rest, value),
                    _ => insert_path(&mut event, path, value),
                },
            }
        }
        for (name, mut items) in arrays {
            // A NULL entry ends the array (it reads as an empty string).
            if let Some(end) = items.iter().position(|v| v.to_string().is_empty()) {
                items.truncate(end);
            }
            args.insert(name.as_str().into(), Dynamic::from(items));
        }
        if !args.is_empty() {
            event.insert("args".into(), Dynamic::from(args));
        }
        let mut kptrs: std::collections::HashMap<(i64, String), rhai::Map> = Default::default();
        for (id, path, value) in kptr_members {
            if let Some(base) = kptr_bases.get(&id) {
                insert_path(kptrs.entry(base.clone()).or_default(), &path, value);
            }
        }
        crate::script::userlib::set_kptrs(kptrs);
        if let Some(name) = &site.event {
            if site.has_event {
                scope.push(name.as_str(), event);
            } else {
                scope.push_dynamic(name.as_str(), Dynamic::UNIT);
            }
        }
        // A carried event: what its earlier runs declared or changed.
        let key = (site.probe, event_key[0], event_key[1]);
        let mut carried = if site.carry { self.carried.take(key) } else { Carried::default() };
        if carried.ended {
            // A `return` in an earlier run ended this event's closure.
            self.carried.put(key, carried);
            return Ok(());
        }
        let base = scope.len();
        for (i, (name, value)) in site.scope.iter().zip(locals.iter()).enumerate() {
            let kept = site.decls.get(i).and_then(|(decl, _)| carried.values.get(decl));
            scope.push_dynamic(name.as_str(), kept.cloned().unwrap_or_else(|| value.clone()));
        }
        crate::script::kernel_reads::swap_written(&mut carried.written);
        if site.carry {
            crate::script::kernel_reads::set_run_done(false);
        }
        if site.has_map_reads {
            crate::script::kernel_reads::with_map_reads(|reads| {
                for (cap, ty, off) in &site.fields {
                    if let RecordField::MapRead { line, col } = cap {
                        reads.push((*line, *col, decode(rec, *off, *ty)));
                    }
                }
            });
        }
        if site.has_reads {
            crate::script::kernel_reads::with_reads(|reads| {
                for (cap, ty, off) in &site.fields {
                    if let RecordField::Read { line, col } = cap {
                        reads.push((*line, *col, decode(rec, *off, *ty).into_string().unwrap_or_default()));
                    }
                }
            });
        }
        let result = session.run_statements(scope, &site.ast);
        crate::script::kernel_reads::swap_written(&mut carried.written);
        if site.carry {
            carried.ended = !crate::script::kernel_reads::run_done();
            // Keep what userspace declared or changed for the event's later runs.
            let values: Vec<Dynamic> = scope.iter().skip(base).map(|(_, _, v)| v).collect();
            for (i, v) in values.iter().enumerate() {
                let decl = match (site.decls.get(i), site.own.get(i.wrapping_sub(site.decls.len()))) {
                    (Some(&(decl, kernel)), _) => {
                        let changed = !kernel
                            || carried.values.contains_key(&decl)
                            || (self.from_record[i] && !same(v, &self.locals[i]));
                        if !changed {
                            continue;
                        }
                        decl
                    }
                    (None, Some(&decl)) => decl,
                    _ => continue,
                };
                carried.values.insert(decl, v.clone());
            }
            self.carried.put(key, carried);
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) if matches!(*e, rhai::EvalAltResult::ErrorTerminated(..)) => {
                self.stopped = true;
                Ok(())
            }
            Err(e) => {
                let msg = format!(
                    "{} (in probe {}, statements at {})",
                    session.runtime_error(&e),
                    plan.probes[site.probe],
                    site.at
                );
                self.error(msg)
            }
        }
    }
}

/// `e.curtask.real_parent.tgid`: nested object maps down `path`.
fn insert_path(map: &mut rhai::Map, path: &[String], value: Dynamic) {
    match path {
        [] => {}
        [last] => {
            map.insert(last.as_str().into(), value);
        }
        [first, rest @ ..] => {
            let entry = map.entry(first.as_str().into()).or_insert_with(|| Dynamic::from(rhai::Map::new()));
            if !entry.is_map() {
                *entry = Dynamic::from(rhai::Map::new());
            }
            if let Some(mut inner) = entry.write_lock::<rhai::Map>() {
                insert_path(&mut inner, rest, value);
            }
        }
    }
}

fn decode(rec: &[u8], off: usize, ty: Ty) -> Dynamic {
    match ty {
        Ty::Int => {
            let v = rec.get(off..off + 8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).unwrap_or(0);
            Dynamic::from(v)
        }
        Ty::Bytes(n) => {
            let bytes = rec.get(off..(off + n as usize).min(rec.len())).unwrap_or(&[]);
            let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
            Dynamic::from(String::from_utf8_lossy(&bytes[..end]).into_owned())
        }
    }
}

/// `__rtrace_run_done();`, appended to runs of carried events.
fn run_done_stmt() -> Vec<rhai::Stmt> {
    let engine = rhai::Engine::new_raw();
    let src = format!("{}();", crate::script::kernel_reads::RUN_DONE_FN);
    engine.compile(&src).map(|ast| ast.statements().to_vec()).unwrap_or_default()
}
