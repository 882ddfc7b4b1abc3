//! Running the userspace part of probes: each record names a site (a run of
//! userspace statements); its fields become `e.*`, the kernel `let` values
//! and the strings the kernel read for `str()` calls, as they were at the
//! event, in a Rhai scope rebuilt for each record (its storage is reused).
//! Once `exit()` or `fail()` ran in userspace, no further record runs.

use rhai::{Dynamic, Scope, AST};

use crate::diag::Diagnostic;
use crate::plan::site::RecordField;
use crate::plan::Plan;
use std::sync::Arc;

use super::record::{self, SiteLayout, SiteValues, StackRef, Symbols, Value};

use crate::runtime::stacks::StackMaps;
use crate::script::Session;

struct SiteRunner {
    ast: AST,
    /// For `emit()` sites: the callback, the AST it lives in, array or not.
    on_event: Option<(rhai::FnPtr, std::sync::Arc<AST>, bool)>,
    scope: Vec<String>,
    captured: Vec<(String, Dynamic)>,
    event: Option<String>,
    probe: usize,
    at: String,
    /// Whether any field is an event field (else `e` is not read: it is `()`).
    has_event: bool,
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
    /// Every site's record layout, by site id.
    layouts: Vec<SiteLayout>,
    /// Errors seen so far (with `--keep-going`).
    pub errors: u64,
    pub keep_going: bool,
    /// With `keep_going`: errors shown before the rest are only counted.
    pub errors_shown: u64,
    pub records: u64,
    /// Records that could not be decoded (counted, reported at the end).
    pub malformed: u64,
    /// `exit()` or `fail()` ran in a userspace statement: later records don't run.
    pub stopped: bool,
    /// Records not run because `stopped` was set.
    pub skipped: u64,
    /// The scope records run in, cleared and refilled for each.
    scope: Scope<'static>,
    /// The decoded values of the record being run, and what they give its
    /// statements (storage reused from record to record).
    values: Vec<Value>,
    inputs: SiteValues,
    /// The run's stack maps, for stack fields.
    stacks: Arc<StackMaps>,
    carried: CarriedEvents,
}

/// Stacks through the run's stack maps, addresses through the kernel's symbols.
impl Symbols for StackMaps {
    fn stack(&self, s: &StackRef) -> String {
        self.render(s.map, s.id, s.user, s.mode)
    }
    fn ksym(&self, addr: u64) -> String {
        crate::symbols::stacks::ksym_name(addr)
    }
}

impl Continuations {
    pub fn new(plan: &Plan, keep_going: bool, stacks: Arc<StackMaps>) -> Continuations {
        let layouts: Vec<SiteLayout> = plan.sites.iter().map(|sp| SiteLayout::of(&sp.site)).collect();
        let sites = plan
            .sites
            .iter()
            .map(|sp| {
                let has_event = sp
                    .site
                    .fields
                    .iter()
                    .any(|(c, _)| matches!(c, RecordField::Event(_) | RecordField::EventItem { .. }));
                let mut stmts = sp.site.stmts.clone();
                if sp.site.carry {
                    // The last statement says the run reached its end (no `return`).
                    stmts.extend(run_done_stmt());
                }
                SiteRunner {
                    has_event,
                    decls: sp.site.decls.clone(),
                    own: sp.site.own.clone(),
                    carry: sp.site.carry,
                    ast: AST::new(stmts, sp.ast.shared_lib().clone()),
                    scope: sp.site.scope.clone(),
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
            layouts,
            errors: 0,
            keep_going,
            errors_shown: 1,
            records: 0,
            malformed: 0,
            stopped: false,
            skipped: 0,
            scope: Scope::new(),
            values: Vec::new(),
            inputs: SiteValues::default(),
            stacks,
            carried: CarriedEvents::default(),
        }
    }

    /// Every site's record layout, by site id.
    pub fn layouts(&self) -> &[SiteLayout] {
        &self.layouts
    }

    /// A runtime error in a probe's statements (userspace or kernel): it
    /// stops tracing, or with `--keep-going` is counted (the first shown).
    pub fn error(&mut self, d: Diagnostic) -> anyhow::Result<()> {
        self.errors += 1;
        if self.keep_going {
            if self.errors <= self.errors_shown {
                crate::output::sink::report(&d);
            }
            Ok(())
        } else {
            Err(d.into())
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
        let decoded = record::site_of(&self.layouts, rec)
            .and_then(|layout| record::decode_into(layout, rec, &mut self.values).map(|()| layout.site));
        let id = match decoded {
            Ok(id) => id as usize,
            Err(why) => {
                self.malformed += 1;
                if self.malformed == 1 {
                    let msg = format!("{why}: skipped (records that can't be decoded are counted)");
                    crate::output::sink::report(&Diagnostic::tool(msg).warning());
                }
                return Ok(());
            }
        };
        let site = &self.sites[id];
        self.inputs.fill(&self.layouts[id], &mut self.values, site.scope.len(), &*self.stacks);
        if let Some((f, ast, array)) = &site.on_event {
            let mut emitted = std::mem::take(&mut self.inputs.emitted);
            let arg = if *array { Dynamic::from(emitted) } else { emitted.drain(..).next().unwrap_or(Dynamic::UNIT) };
            return match session.call_closure(ast, f, (arg,)) {
                Ok(_) => Ok(()),
                Err(e) if matches!(*e, rhai::EvalAltResult::ErrorTerminated(..)) => {
                    session.note_stopped(&e, crate::diag::Pos::parse(&site.at));
                    self.stopped = true;
                    Ok(())
                }
                Err(e) => {
                    let mut d = session.runtime_error(&e);
                    d.message =
                        format!("{} (in the on_event callback of probe {})", d.message, plan.probes[site.probe]);
                    self.error(d)
                }
            };
        }
        let inputs = &mut self.inputs;
        let scope = &mut self.scope;
        scope.clear();
        for (name, v) in &site.captured {
            scope.push_dynamic(name.as_str(), v.clone());
        }
        // Rebuild the closure's scope in Rhai's order: parameters, then locals.
        if let Some(name) = &site.event {
            if site.has_event {
                scope.push(name.as_str(), std::mem::take(&mut inputs.event));
            } else {
                scope.push_dynamic(name.as_str(), Dynamic::UNIT);
            }
        }
        // A carried event: what its earlier runs declared or changed.
        let key = (site.probe, inputs.event_key.0, inputs.event_key.1);
        let mut carried = if site.carry { self.carried.take(key) } else { Carried::default() };
        if carried.ended {
            // A `return` in an earlier run ended this event's closure.
            self.carried.put(key, carried);
            return Ok(());
        }
        let base = scope.len();
        for (i, (name, value)) in site.scope.iter().zip(&inputs.locals).enumerate() {
            let kept = site.decls.get(i).and_then(|(decl, _)| carried.values.get(decl));
            let value = kept.or(value.as_ref()).cloned().unwrap_or(Dynamic::UNIT);
            scope.push_dynamic(name.as_str(), value);
        }
        let at_event = std::mem::take(&mut inputs.at_event);
        let at_event = if site.carry || !at_event.is_empty() {
            *at_event.written.lock().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut carried.written);
            Some(Arc::new(at_event))
        } else {
            None
        };
        let result = session.run_statements(scope, &site.ast, at_event.clone());
        if site.carry {
            let at_event = at_event.unwrap_or_default();
            carried.written = at_event.take_written();
            carried.ended = !at_event.ran_to_end();
            // Keep what userspace declared or changed for the event's later runs.
            for (i, (_, _, v)) in scope.iter().skip(base).enumerate() {
                let decl = match (site.decls.get(i), site.own.get(i.wrapping_sub(site.decls.len()))) {
                    (Some(&(decl, kernel)), _) => {
                        let from_record = inputs.locals.get(i).and_then(Option::as_ref);
                        let changed = !kernel
                            || carried.values.contains_key(&decl)
                            || from_record.is_some_and(|sent| !same(&v, sent));
                        if !changed {
                            continue;
                        }
                        decl
                    }
                    (None, Some(&decl)) => decl,
                    _ => continue,
                };
                carried.values.insert(decl, v);
            }
            self.carried.put(key, carried);
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) if matches!(*e, rhai::EvalAltResult::ErrorTerminated(..)) => {
                session.note_stopped(&e, crate::diag::Pos::parse(&site.at));
                self.stopped = true;
                Ok(())
            }
            Err(e) => {
                let mut d = session.runtime_error(&e);
                d.message = format!("{} (in probe {}, statements at {})", d.message, plan.probes[site.probe], site.at);
                self.error(d)
            }
        }
    }
}

/// `__rtrace_run_done();`, appended to runs of carried events.
fn run_done_stmt() -> Vec<rhai::Stmt> {
    let engine = rhai::Engine::new_raw();
    let src = format!("{}();", crate::script::kernel_reads::RUN_DONE_FN);
    engine.compile(&src).map(|ast| ast.statements().to_vec()).unwrap_or_default()
}
