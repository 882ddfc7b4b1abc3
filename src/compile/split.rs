//! The kernel/userspace split, decided before anything is lowered.
//!
//! A data-flow walk over a probe closure marks each statement kernel or
//! userspace. Kernel values are event fields, kernel `let`s, constants
//! captured from the top level and map reads; a statement runs in the kernel
//! when all it does is in the kernel subset (design.md §2.3): integer and
//! boolean arithmetic, comparisons, string `==`/`!=`, `if`, constant `for`
//! ranges, map reads and writes, aggregations, `str()`, `ksym()`, stacks,
//! `return`, `exit()`, `emit()` and the map control calls. Anything else
//! makes its statement run in userspace, whole, with the reason kept for
//! `--explain`. A kernel `if` or constant `for` stays in the kernel and its
//! inner statements are marked one by one. Lowering (`compile/lower`) then
//! only sees kernel statements; `lower/record.rs` turns each run of userspace
//! statements into one record carrying what they read.
//!
//! The walk also finds what userspace statements need the kernel to capture
//! for them: `str(ptr)` calls on kernel values (they read memory, which only
//! the probe can), and, where `e` is used as a whole value, the fields of `e`
//! that the closure and the script functions it is passed to read.

mod event_reads;

use event_reads::event_reads;
pub use event_reads::functions_need_per_point;

use std::collections::{HashMap, HashSet};

use probes_ebpf::ir::Span;
use rhai::{ASTNode, Expr as RExpr, Position, Stmt as RStmt, AST};

use super::closure::{property_chain, ClosureBody};
use super::syntax::{indexed_arg, is_aggregation, span};
use super::values::CapturedValue;
use crate::builtins::{builtin_call, builtin_call_with, event_field, is_stack, Call, Kind};
use crate::kernel::tracepoint_format::FieldKind;
use crate::plan::site::Placement;
use crate::probes::event::EventContext;

/// Where one statement runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    Kernel,
    /// Userspace, and why (`calls split()`).
    User(String),
}

/// The split of one closure.
#[derive(Default)]
pub struct Split {
    places: HashMap<Span, Place>,
    /// Every classified statement in source order.
    pub order: Vec<Placement>,
    /// `str(...)` calls inside userspace statements whose argument is a
    /// kernel value: the kernel reads the string and ships it.
    pub memory_reads: HashSet<Span>,
    /// Fields of `e` read through script functions `e` is passed to, or by
    /// the closure anywhere: what a whole `e` holds in userspace.
    pub whole_event: Vec<Vec<String>>,
    /// Aggregations (kernel only) whose key or value is only in userspace:
    /// the statement, and the userspace part.
    pub aggregate_errors: HashMap<Span, Why>,
    /// Statements the split had to put in userspace that do kernel-only
    /// work: the statement, and the whole located error.
    pub order_errors: HashMap<Span, Why>,
    /// `m[k]` reads inside userspace statements whose key is a kernel value:
    /// the kernel reads them at that point of the event and ships the value,
    /// so userspace sees the map as the closure's order says.
    pub map_reads: HashSet<Span>,
    /// Runs of userspace statements (each becomes a record), and whether one
    /// sits inside a kernel `for`: with more than one run per event, the
    /// records carry the event's identity so userspace variables live on
    /// from one run to the next.
    pub user_runs: u32,
    pub user_in_loop: bool,
    /// Maps (by id) the closure's userspace statements write, or read by a
    /// key only userspace has: in every probe their uses run in userspace,
    /// so that all of them happen in event order (`compile()` iterates).
    pub userspace_maps: HashSet<u32>,
}

impl Split {
    /// Where `s` runs (statements the walk didn't see, such as `Share`, are kernel no-ops).
    pub fn place(&self, s: &RStmt) -> &Place {
        self.places.get(&span(s.position())).unwrap_or(&Place::Kernel)
    }

    /// Whether userspace statements may run more than once per event
    /// (several runs, or one inside a kernel loop): then their records say
    /// which event they belong to and userspace keeps the event's variables.
    pub fn carries(&self) -> bool {
        self.user_runs > 1 || self.user_in_loop
    }
}

#[derive(Clone)]
enum Var {
    Kernel(Kind),
    /// Computed in userspace, at this position.
    User(Position),
}

/// Why a value is only in userspace, and where (the innermost expression).
#[derive(Clone, Debug)]
pub struct Why(pub String, pub Position);

impl From<String> for Why {
    fn from(s: String) -> Why {
        Why(s, Position::NONE)
    }
}

impl From<&str> for Why {
    fn from(s: &str) -> Why {
        Why(s.to_string(), Position::NONE)
    }
}

/// A map read in a userspace statement.
enum MapRead {
    /// By a key the kernel can compute, at this position: the kernel reads
    /// it at the event (unless userspace owns the map).
    KernelKey(Span),
    /// By a key only userspace has: read when the statement runs.
    UserKey,
    /// In a userspace loop: read at each pass.
    Polled,
}

/// A kernel value's kind, or why it is only in userspace.
type Flow = std::result::Result<Kind, Why>;

struct Walk<'a> {
    captures: &'a HashMap<String, CapturedValue>,
    event: Option<&'a str>,
    ctx: &'a dyn EventContext,
    /// Top-level variables the closure assigns: userspace state.
    assigned: HashSet<String>,
    scopes: Vec<Vec<(String, Var)>>,
    out: Split,
    depth: u32,
    /// Names the walk doesn't know are userspace (inside a userspace statement).
    strict: bool,
    /// A userspace statement that may end the closure (`return`, `throw`,
    /// `exit()`), once one has been seen: kernel statements after it with
    /// an effect must run in userspace too, where it decides whether they run.
    user_exit: Option<(Position, String)>,
    /// Maps a userspace statement wrote, and where: later kernel uses of
    /// them must come after that write, so they run in userspace too.
    user_wrote: HashMap<String, Position>,
    /// Maps a userspace statement read with a userspace key (read when it
    /// runs): a later kernel write must not overtake that read.
    user_read: HashMap<String, Position>,
    /// Inside a kernel `for` (for `user_in_loop`).
    in_loop: u32,
    /// Maps some probe's userspace statements write or read live (from the
    /// previous round of `compile()`).
    owned: &'a HashSet<u32>,
}

/// Split `body`; `ast` holds the script functions `e` may be passed to;
/// `owned` are the maps whose every use must run in userspace.
pub fn analyze(
    body: &ClosureBody,
    captures: &HashMap<String, CapturedValue>,
    event: Option<&str>,
    ctx: &dyn EventContext,
    ast: Option<&AST>,
    owned: &HashSet<u32>,
) -> Split {
    let mut assigned = HashSet::new();
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Stmt(RStmt::Assignment(x))) = path.last() {
                // `per[k] = v`, `obj.f = v`: the variable being written.
                if let RExpr::Variable(v, _, _) = target_root(&x.1.lhs) {
                    if matches!(captures.get(v.1.as_str()), Some(c) if !matches!(c, CapturedValue::Map(_))) {
                        assigned.insert(v.1.to_string());
                    }
                }
            }
            true
        });
    }
    let mut w = Walk::new(captures, event, ctx, assigned, owned);
    w.block(&body.body);
    if let Some(ev) = event {
        w.out.whole_event = event_reads(body, ev, ast);
    }
    w.out
}

static NONE: std::sync::LazyLock<HashSet<u32>> = std::sync::LazyLock::new(HashSet::new);

/// `--no-split`: every statement of the closure runs in userspace, whole,
/// as one run; the kernel only captures what it reads of the event.
pub fn whole_userspace(
    body: &ClosureBody,
    captures: &HashMap<String, CapturedValue>,
    event: Option<&str>,
    ctx: &dyn EventContext,
    ast: Option<&AST>,
) -> Split {
    let mut w = Walk::new(captures, event, ctx, HashSet::new(), &NONE);
    for s in &body.body {
        if matches!(s, RStmt::Noop(_) | RStmt::Share(_)) {
            continue;
        }
        w.record(s, Place::User("--no-split".into()));
        if let RStmt::Var(x, _, pos) = s {
            w.declare(x.0.name.as_str(), Var::User(*pos));
        }
    }
    w.out.user_runs = 1;
    if let Some(ev) = event {
        w.out.whole_event = event_reads(body, ev, ast);
    }
    w.out
}

fn name_of(v: &RExpr) -> Option<&str> {
    match v {
        RExpr::Variable(v, _, _) => Some(v.1.as_str()),
        _ => None,
    }
}

fn is_break(s: &RStmt) -> bool {
    let mut found = false;
    s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
        // A `break` of a loop nested inside stays in that loop.
        let nested = path[..path.len().saturating_sub(1)]
            .iter()
            .skip(1)
            .any(|n| matches!(n, ASTNode::Stmt(RStmt::For(..) | RStmt::While(..) | RStmt::Do(..))));
        if matches!(path.last(), Some(ASTNode::Stmt(RStmt::BreakLoop(..)))) && !nested {
            found = true;
        }
        !found
    });
    found
}

impl<'a> Walk<'a> {
    fn new(
        captures: &'a HashMap<String, CapturedValue>,
        event: Option<&'a str>,
        ctx: &'a dyn EventContext,
        assigned: HashSet<String>,
        owned: &'a HashSet<u32>,
    ) -> Walk<'a> {
        Walk {
            captures,
            event,
            ctx,
            assigned,
            scopes: vec![Vec::new()],
            out: Split::default(),
            depth: 0,
            strict: false,
            user_exit: None,
            user_wrote: HashMap::new(),
            user_read: HashMap::new(),
            in_loop: 0,
            owned,
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn declare(&mut self, name: &str, v: Var) {
        self.scopes.last_mut().unwrap().push((name.to_string(), v));
    }

    /// Each statement of a block in turn, in the closure's order. What a
    /// userspace statement does decides where later statements run: a
    /// variable it declares or changes is a userspace value from then on
    /// (kernel code using it runs in userspace, or is an error); after a
    /// userspace `return`/`throw`/`exit()`, or a userspace write of a map,
    /// later kernel statements with an effect (or using that map) run in
    /// userspace too, where the order is kept, or are an error.
    fn block(&mut self, stmts: &[RStmt]) {
        self.scopes.push(Vec::new());
        let mut in_run = false;
        for s in stmts {
            if matches!(s, RStmt::Noop(_) | RStmt::Share(_)) {
                continue;
            }
            match self.must_follow_userspace(s) {
                Some(why) => {
                    if let RStmt::Var(x, _, pos) = s {
                        self.declare(x.0.name.as_str(), Var::User(*pos));
                    }
                    if self.has_kernel_only_work(s) {
                        let msg = format!(
                            "this statement must run in the kernel (an aggregation or `emit()`), but {why}; move it before that point"
                        );
                        self.out.order_errors.insert(span(s.position()), Why(msg, shown_at(s)));
                    }
                    self.record(s, Place::User(why));
                }
                None => self.stmt(s),
            }
            let user = matches!(self.out.places.get(&span(s.position())), Some(Place::User(_)));
            if user {
                if !in_run {
                    self.out.user_runs += 1;
                    self.out.user_in_loop |= self.in_loop > 0;
                }
                self.after_userspace(s);
            }
            // A kernel `if`/`for`/block holds its own runs.
            in_run = user;
        }
        self.scopes.pop();
    }

    /// Why `s`, a statement that could run in the kernel, must run in
    /// userspace because of an earlier userspace statement.
    fn must_follow_userspace(&mut self, s: &RStmt) -> Option<String> {
        if matches!(s, RStmt::Block(_) | RStmt::For(..)) {
            return None; // their statements are looked at one by one
        }
        let at = |p: &Position| crate::script::position_text(*p);
        let cond_only = matches!(s, RStmt::If(..));
        let (reads, writes) = self.map_uses(s, cond_only);
        for m in reads.iter().chain(&writes) {
            if self.map_id(m).is_some_and(|id| self.owned.contains(&id)) {
                return Some(format!(
                    "map `{m}` is written (or read by a userspace key) by userspace statements, so every probe statement using it runs in userspace, in event order"
                ));
            }
            if let Some(p) = self.user_wrote.get(m) {
                return Some(format!("it uses map `{m}` after the userspace statement at {} writes it", at(p)));
            }
        }
        for m in &writes {
            if let Some(p) = self.user_read.get(m) {
                return Some(format!("it writes map `{m}` after the userspace statement at {} reads it", at(p)));
            }
        }
        match &self.user_exit {
            Some((p, what)) if !cond_only && self.has_effect(s) => {
                Some(format!("the userspace {what} at {} before it decides whether it runs", at(p)))
            }
            _ => None,
        }
    }

    /// What a userspace statement changes for the statements after it.
    fn after_userspace(&mut self, s: &RStmt) {
        // Variables it may change are userspace values from here on.
        for (name, pos) in written_variables(s) {
            if self.lookup(&name).is_some() {
                self.rebind(&name, Var::User(pos));
            }
        }
        if self.user_exit.is_none() {
            self.user_exit = ends_closure(s);
        }
        let (_, writes) = self.map_uses(s, false);
        for m in writes {
            self.out.userspace_maps.extend(self.map_id(&m));
            self.user_wrote.entry(m).or_insert(s.position());
        }
        for (m, read) in self.map_reads_in(s) {
            let owned = self.map_id(&m).is_some_and(|id| self.owned.contains(&id));
            match read {
                MapRead::KernelKey(at) if !owned => {
                    self.out.map_reads.insert(at);
                    continue;
                }
                MapRead::Polled | MapRead::KernelKey(_) => {}
                MapRead::UserKey => self.out.userspace_maps.extend(self.map_id(&m)),
            }
            self.user_read.entry(m).or_insert(s.position());
        }
    }

    /// The id of the captured map named `name`.
    fn map_id(&self, name: &str) -> Option<u32> {
        match self.captures.get(name) {
            Some(CapturedValue::Map(m)) => Some(m.id()),
            _ => None,
        }
    }

    /// The captured maps `s` reads and writes (only in its condition, for an `if`).
    fn map_uses(&self, s: &RStmt, cond_only: bool) -> (Vec<String>, Vec<String>) {
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        let mut visit = |path: &[ASTNode]| {
            match path.last() {
                Some(ASTNode::Stmt(RStmt::Assignment(x))) => {
                    let target = target_root(&x.1.lhs);
                    if self.map_of(target) {
                        writes.push(name_of(target).unwrap_or_default().to_string());
                    }
                }
                Some(ASTNode::Expr(RExpr::Dot(x, _, _))) if self.map_of(&x.lhs) => {
                    if let RExpr::MethodCall(c, _) = &x.rhs {
                        let name = name_of(&x.lhs).unwrap_or_default().to_string();
                        match c.name.as_str() {
                            "remove" | "clear" | "zero" => writes.push(name),
                            _ => reads.push(name),
                        }
                    }
                }
                Some(ASTNode::Expr(RExpr::FnCall(c, _))) if c.args.first().is_some_and(|a| self.map_of(a)) => {
                    let name = name_of(&c.args[0]).unwrap_or_default().to_string();
                    match c.name.as_str() {
                        "clear" | "zero" => writes.push(name),
                        _ => reads.push(name),
                    }
                }
                Some(ASTNode::Expr(RExpr::Index(x, _, _))) if self.map_of(&x.lhs) => {
                    reads.push(name_of(&x.lhs).unwrap_or_default().to_string());
                }
                _ => {}
            }
            true
        };
        match s {
            RStmt::If(fc, _) if cond_only => {
                fc.expr.walk(&mut Vec::new(), &mut visit);
            }
            _ => {
                s.walk(&mut Vec::new(), &mut visit);
            }
        }
        (reads, writes)
    }

    /// `m[k]` reads in a userspace statement: the map, whether `k` is a
    /// kernel value (then the kernel ships the value), and where.
    fn map_reads_in(&mut self, s: &RStmt) -> Vec<(String, MapRead)> {
        // The key, or `None` for a read in a userspace loop: each pass reads
        // the map as it is then (a loop may wait for another probe to write it).
        let mut found: Vec<(String, Option<RExpr>, Span)> = Vec::new();
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::Index(x, _, pos))) = path.last() {
                if self.map_of(&x.lhs) && !assigned_target(path) {
                    let looped = path.windows(2).any(|w| match (&w[0], &w[1]) {
                        // A `for`'s iterable is evaluated once, before the loop.
                        (ASTNode::Stmt(RStmt::For(f, _)), ASTNode::Expr(e)) => !std::ptr::eq(*e, &f.2.expr),
                        (ASTNode::Stmt(RStmt::For(..) | RStmt::While(..) | RStmt::Do(..)), _) => true,
                        _ => false,
                    });
                    let key = (!looped).then(|| x.rhs.clone());
                    found.push((name_of(&x.lhs).unwrap_or_default().to_string(), key, span(*pos)));
                }
            }
            true
        });
        self.strict = true;
        let out = found
            .into_iter()
            .map(|(m, key, at)| {
                let read = match key {
                    None => MapRead::Polled,
                    Some(k) if self.key(&k).is_ok() => MapRead::KernelKey(at),
                    Some(_) => MapRead::UserKey,
                };
                (m, read)
            })
            .collect();
        self.strict = false;
        out
    }

    /// Whether `s` does anything the kernel would do out of order if a
    /// userspace statement before it ended the closure: writes a map,
    /// aggregates, sends, exits, prints or clears a map.
    fn has_effect(&self, s: &RStmt) -> bool {
        let (_, writes) = self.map_uses(s, false);
        if !writes.is_empty() {
            return true;
        }
        let mut effect = false;
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::FnCall(c, _))) = path.last() {
                // Integer arithmetic may stop the closure with an error, as in Rhai.
                let arithmetic = matches!(c.name.as_str(), "+" | "-" | "*" | "/" | "%")
                    && !c.args.iter().all(|a| matches!(a, RExpr::IntegerConstant(..)));
                // Statements (exit, emit, print(m) ...) act, as do aggregations.
                let statement = builtin_call(c.name.as_str()).is_some_and(|r| r.gives.is_none());
                effect |= arithmetic || is_aggregation(c.name.as_str()) || statement || c.name == "fail";
            }
            if let Some(ASTNode::Stmt(RStmt::Assignment(x))) = path.last() {
                effect |= x.0.is_op_assignment();
            }
            !effect
        });
        effect
    }

    /// Aggregations and kernel-only statements (`emit()`) exist only in the kernel.
    fn has_kernel_only_work(&self, s: &RStmt) -> bool {
        let mut found = false;
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::FnCall(c, _))) = path.last() {
                found |= is_aggregation(c.name.as_str())
                    || builtin_call(c.name.as_str()).is_some_and(|r| r.kernel_only_statement());
            }
            !found
        });
        found
    }

    fn nested(&mut self, stmts: &[RStmt]) {
        self.depth += 1;
        self.block(stmts);
        self.depth -= 1;
    }

    fn record(&mut self, s: &RStmt, place: Place) {
        let at = span(s.position());
        if let Place::User(_) = place {
            self.find_memory_reads(s);
        }
        self.out.places.insert(at, place.clone());
        let at = span(shown_at(s));
        let userspace = match &place {
            Place::Kernel => None,
            Place::User(why) => Some(why.clone()),
        };
        self.out.order.push(Placement { at, depth: self.depth, userspace });
    }

    fn stmt(&mut self, s: &RStmt) {
        let place = match s {
            RStmt::Noop(_) | RStmt::Share(_) => return,
            RStmt::Var(x, _, pos) => {
                let (ident, init, _) = x.as_ref();
                let flow = if matches!(init, RExpr::Unit(_)) {
                    Err(format!("`let {}` has no value yet", ident.name).into())
                } else {
                    self.expr(init)
                };
                let place = to_place(&flow);
                self.record(s, place);
                let var = match flow {
                    Ok(k) => Var::Kernel(k),
                    Err(_) => Var::User(*pos),
                };
                self.declare(ident.name.as_str(), var);
                return;
            }
            RStmt::Assignment(x) => self.assignment(s, &x.1.lhs, &x.1.rhs, x.0.is_op_assignment()),
            RStmt::If(fc, _) => match self.expr(&fc.expr) {
                Ok(_) => {
                    self.record(s, Place::Kernel);
                    self.nested(fc.body.statements());
                    self.nested(fc.branch.statements());
                    return;
                }
                Err(why) => Place::User(format!("its condition: {}", why.0)),
            },
            RStmt::For(x, _) => {
                let (var, counter, fc) = x.as_ref();
                match self.const_range(&fc.expr) {
                    _ if counter.is_some() => Place::User("a `for` loop with a counter".into()),
                    _ if fc.body.statements().iter().any(is_break) => {
                        Place::User("a loop with `break`/`continue`".into())
                    }
                    false => Place::User("a `for` loop that isn't over a constant range".into()),
                    true => {
                        self.record(s, Place::Kernel);
                        self.scopes.push(vec![(var.name.to_string(), Var::Kernel(Kind::Int))]);
                        self.in_loop += 1;
                        self.nested(fc.body.statements());
                        self.in_loop -= 1;
                        self.scopes.pop();
                        return;
                    }
                }
            }
            RStmt::Block(b) => {
                self.record(s, Place::Kernel);
                self.nested(b.statements());
                return;
            }
            RStmt::Return(_, flags, _) if flags.contains(rhai::ASTFlags::BREAK) => Place::User("`throw`".into()),
            RStmt::Return(..) => Place::Kernel,
            RStmt::FnCall(call, _) => self.call_stmt(call),
            RStmt::Expr(e) => match e.as_ref() {
                RExpr::FnCall(call, _) => self.call_stmt(call),
                RExpr::Dot(x, _, _) => self.method_stmt(&x.lhs, &x.rhs),
                RExpr::Stmt(block) => {
                    self.record(s, Place::Kernel);
                    self.nested(block.statements());
                    return;
                }
                other => to_place(&self.expr(other)),
            },
            RStmt::While(fc, _) if matches!(fc.expr, RExpr::Unit(_)) => Place::User("a `loop`".into()),
            RStmt::While(..) => Place::User("a `while` loop".into()),
            RStmt::Do(..) => Place::User("a `do` loop".into()),
            RStmt::BreakLoop(..) => Place::User("`break`/`continue`".into()),
            RStmt::Switch(..) => Place::User("`switch`".into()),
            RStmt::TryCatch(..) => Place::User("`try`/`catch`".into()),
            _ => Place::User("this statement".into()),
        };
        self.record(s, place);
    }

    fn assignment(&mut self, s: &RStmt, lhs: &RExpr, rhs: &RExpr, compound: bool) -> Place {
        let (map, key) = match lhs {
            RExpr::Index(x, _, _) if self.map_of(&x.lhs) => (true, Some(&x.rhs)),
            other => (self.map_of(other), None),
        };
        if map {
            let key = key.map(|k| self.key(k)).unwrap_or(Ok(Kind::Any));
            let (value, agg) = match rhs {
                RExpr::FnCall(c, _) if is_aggregation(c.name.as_str()) => {
                    (c.args.iter().map(|a| self.expr(a)).find(Result::is_err).unwrap_or(Ok(Kind::Any)), true)
                }
                other => (self.expr(other), false),
            };
            let flow = key.and(value);
            if let (Err(why), true) = (&flow, agg) {
                self.out.aggregate_errors.insert(span(s.position()), why.clone());
            }
            return to_place(&flow);
        }
        let target = target_root(lhs);
        let Some(name) = name_of(target) else { return Place::User("writes into a value".into()) };
        match self.lookup(name).cloned() {
            Some(Var::User(at)) => {
                Place::User(format!("assigns `{name}`, computed in userspace at {}", crate::script::position_text(at)))
            }
            Some(Var::Kernel(_)) if !std::ptr::eq(target, lhs) => Place::User(format!("writes into `{name}`")),
            Some(Var::Kernel(Kind::Str)) if compound => {
                self.rebind(name, Var::User(lhs.position()));
                Place::User(format!("joins strings onto `{name}`"))
            }
            Some(Var::Kernel(_)) => match self.expr(rhs) {
                Ok(_) => Place::Kernel,
                Err(why) => {
                    // From here on the variable holds a userspace value.
                    self.rebind(name, Var::User(lhs.position()));
                    Place::User(why.0)
                }
            },
            None if self.assigned.contains(name) => {
                Place::User(format!("assigns `{name}`, a top-level variable (userspace state)"))
            }
            None if Some(name) == self.event => Place::User(format!("assigns `{name}`")),
            None => Place::Kernel,
        }
    }

    fn rebind(&mut self, name: &str, v: Var) {
        if let Some(slot) = self.scopes.iter_mut().rev().flat_map(|s| s.iter_mut().rev()).find(|(n, _)| n == name) {
            slot.1 = v;
        }
    }

    fn call_stmt(&mut self, call: &rhai::FnCallExpr) -> Place {
        let args = &call.args;
        match (builtin_call_with(call.name.as_str(), args.len()), args.len()) {
            _ if call.is_qualified() => Place::User(format!("calls {}()", call.name)),
            (Some(Call::Exit), 0) => Place::Kernel,
            (Some(_), n)
                if builtin_call(call.name.as_str())
                    .is_some_and(|r| r.kernel_only_statement() && r.arities.contains(&n)) =>
            {
                Place::Kernel
            }
            (Some(Call::Exit), 1) => to_place(&self.expr(&args[0])),
            (Some(Call::Print | Call::Clear | Call::Zero), 1) if self.map_of(&args[0]) => Place::Kernel,
            _ => to_place(&self.call(call)),
        }
    }

    fn method_stmt(&mut self, lhs: &RExpr, rhs: &RExpr) -> Place {
        if let (true, RExpr::MethodCall(call, _)) = (self.map_of(lhs), rhs) {
            match (call.name.as_str(), call.args.len()) {
                ("remove", 1) => return to_place(&self.key(&call.args[0])),
                ("clear" | "zero", 0) => return Place::Kernel,
                _ => {}
            }
        }
        to_place(&self.dot(lhs, rhs))
    }

    /// A captured map (not shadowed by a local).
    fn map_of(&self, e: &RExpr) -> bool {
        name_of(e)
            .is_some_and(|n| self.lookup(n).is_none() && matches!(self.captures.get(n), Some(CapturedValue::Map(_))))
    }

    fn const_int(&self, e: &RExpr) -> bool {
        match e {
            RExpr::IntegerConstant(..) => true,
            RExpr::Variable(v, _, _) => {
                let n = v.1.as_str();
                self.lookup(n).is_none()
                    && !self.assigned.contains(n)
                    && matches!(self.captures.get(n), Some(CapturedValue::Int(_)))
            }
            _ => false,
        }
    }

    fn const_range(&self, e: &RExpr) -> bool {
        matches!(e, RExpr::FnCall(call, _)
            if (call.name == ".." || call.name == "..=") && call.args.len() == 2
                && self.const_int(&call.args[0]) && self.const_int(&call.args[1]))
    }

    fn key(&mut self, e: &RExpr) -> Flow {
        match e {
            RExpr::Array(parts, _) => parts.iter().map(|p| self.expr(p)).find(Result::is_err).unwrap_or(Ok(Kind::Any)),
            RExpr::Unit(_) => Ok(Kind::Any),
            other => self.expr(other),
        }
    }

    fn expr(&mut self, e: &RExpr) -> Flow {
        self.expr_kind(e).map_err(|Why(text, pos)| Why(text, if pos.is_none() { e.position() } else { pos }))
    }

    fn expr_kind(&mut self, e: &RExpr) -> Flow {
        match e {
            RExpr::IntegerConstant(..) | RExpr::BoolConstant(..) | RExpr::CharConstant(..) => Ok(Kind::Int),
            RExpr::StringConstant(..) => Ok(Kind::Str),
            RExpr::DynamicConstant(d, _) if d.is_int() => Ok(Kind::Int),
            RExpr::DynamicConstant(d, _) if d.is_string() => Ok(Kind::Str),
            RExpr::DynamicConstant(d, _) => Err(format!("a constant {}", d.type_name()).into()),
            RExpr::Unit(_) => Ok(Kind::Any),
            RExpr::Variable(v, _, _) => self.variable(v.1.as_str()),
            RExpr::Dot(x, _, _) => self.dot(&x.lhs, &x.rhs),
            RExpr::Index(x, _, _) => {
                if self.map_of(&x.lhs) {
                    return self.key(&x.rhs).map(|_| Kind::Any);
                }
                match name_of(&x.lhs) {
                    Some(n) => Err(format!("indexes `{n}`, which isn't a map()").into()),
                    None => Err("indexes a value that isn't a map()".into()),
                }
            }
            RExpr::And(list, _) | RExpr::Or(list, _) => {
                list.iter().map(|p| self.expr(p)).find(Result::is_err).unwrap_or(Ok(Kind::Int))
            }
            RExpr::FnCall(call, _) => self.call(call),
            RExpr::Stmt(block) => match block.statements() {
                [RStmt::If(fc, _)] => {
                    self.expr(&fc.expr)?;
                    let branch = |w: &mut Self, b: &[RStmt]| match b {
                        [RStmt::Expr(x)] => w.expr(x),
                        _ => Ok(Kind::Any),
                    };
                    let a = branch(self, fc.body.statements())?;
                    branch(self, fc.branch.statements())?;
                    Ok(a)
                }
                _ => Err("a block used as a value".into()),
            },
            RExpr::InterpolatedString(..) => Err("string interpolation".into()),
            RExpr::FloatConstant(..) => Err("a floating-point number".into()),
            RExpr::Array(..) => Err("an array".into()),
            RExpr::Map(..) => Err("an object map".into()),
            RExpr::ThisPtr(..) => Err("`this`".into()),
            RExpr::MethodCall(call, _) => Err(format!("calls .{}()", call.name).into()),
            _ => Err("an expression only userspace has".into()),
        }
    }

    fn variable(&self, name: &str) -> Flow {
        match self.lookup(name) {
            Some(Var::Kernel(k)) => return Ok(*k),
            Some(Var::User(at)) => {
                return Err(
                    format!("`{name}` is computed in userspace at {}", crate::script::position_text(*at)).into()
                );
            }
            None => {}
        }
        if self.assigned.contains(name) {
            return Err(format!("uses `{name}`, a top-level variable the probe assigns (userspace state)").into());
        }
        match self.captures.get(name) {
            Some(CapturedValue::Int(_)) => Ok(Kind::Int),
            Some(CapturedValue::Str(_)) => Ok(Kind::Str),
            Some(CapturedValue::Map(_)) => Ok(Kind::Any),
            Some(CapturedValue::Other(t)) => Err(format!("uses `{name}`, a top-level {}", type_text(t)).into()),
            None if Some(name) == self.event => Err(format!("uses `{name}` as a whole value").into()),
            None if self.strict => Err(format!("uses `{name}`").into()),
            None => Ok(Kind::Any),
        }
    }

    /// `e.FIELD...`, `t.member` of a kernel struct pointer, or a method call.
    fn dot(&mut self, lhs: &RExpr, rhs: &RExpr) -> Flow {
        let name = name_of(lhs);
        let is_event = name.is_some() && name == self.event && self.lookup(name.unwrap_or("")).is_none();
        let (chain, rest) = property_chain(rhs);
        if is_event {
            if let RExpr::MethodCall(call, _) = rhs {
                return match call.name.as_str() {
                    stack if is_stack(stack) => Ok(Kind::Int),
                    other => Err(format!("calls .{other}()").into()),
                };
            }
            if indexed_arg(rhs).is_some() {
                return Ok(Kind::Any);
            }
            if rest {
                return Err(trailing_call(rhs).unwrap_or_else(|| "reads a part of an event field".into()).into());
            }
            if chain.len() == 1 && chain[0].0 == "args" {
                return Err(format!("uses `{}.args` as a whole value", name.unwrap_or("e")).into());
            }
            return Ok(self.field_kind(&chain.iter().map(|c| c.0.as_str()).collect::<Vec<_>>()));
        }
        if let Some(Var::Kernel(Kind::Pointer)) = name.and_then(|n| self.lookup(n)) {
            if !rest && !chain.is_empty() {
                // A member may be a struct pointer again (`let p = t.real_parent;`).
                return Ok(Kind::Pointer);
            }
        }
        if let RExpr::FnCall(c, _) = lhs {
            // `kptr(v, "struct sock").member`.
            if c.name == "kptr" && c.args.len() == 2 && !rest && !chain.is_empty() {
                return self.call(c).map(|_| Kind::Pointer);
            }
        }
        if let Some(why) = trailing_call(rhs) {
            return Err(why.into());
        }
        match name {
            Some(n) => match self.variable(n) {
                Err(why) => Err(why),
                Ok(_) => Err(format!("reads a property of `{n}`").into()),
            },
            None => Err("reads a property of a value".into()),
        }
    }

    /// The kind of `e.a.b...`.
    fn field_kind(&self, path: &[&str]) -> Kind {
        match path {
            ["args", field] => match self.ctx.format().and_then(|f| f.field(field)).map(|f| &f.kind) {
                Some(FieldKind::CharArray | FieldKind::DataLocString) => Kind::Str,
                Some(FieldKind::Pointer { to_char: false, .. }) => Kind::Pointer,
                Some(_) => Kind::Int,
                None => Kind::Pointer,
            },
            // A member of a struct pointer may be one again.
            ["args" | "curtask", _, ..] => Kind::Pointer,
            [name] => event_field(name).map_or(Kind::Int, |(_, row)| row.kind),
            _ => Kind::Int,
        }
    }

    fn call(&mut self, call: &rhai::FnCallExpr) -> Flow {
        let name = call.name.as_str();
        if call.is_qualified() {
            return Err(format!("calls {name}()").into());
        }
        let args = &call.args;
        let kinds: Vec<Flow> = args.iter().map(|a| self.expr(a)).collect();
        let arith = matches!(name, "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^" | "<<" | ">>");
        let compare = matches!(name, "==" | "!=" | "<" | "<=" | ">" | ">=");
        if (arith || compare || name == "!") && args.len() <= 2 {
            let ks = kinds.into_iter().collect::<std::result::Result<Vec<Kind>, Why>>()?;
            if ks.contains(&Kind::Str) {
                return match name {
                    "==" | "!=" => Ok(Kind::Int),
                    "+" => Err("joins strings".into()),
                    _ => Err(format!("uses `{name}` on strings").into()),
                };
            }
            return Ok(Kind::Int);
        }
        match name {
            "contains" if args.len() == 2 => {
                if self.map_of(&args[0]) {
                    // `[a, b] in m`: a tuple key, as in `m[[a, b]]`.
                    return self.key(&args[1]).map(|_| Kind::Int);
                }
                Err("`in` on a value that isn't a map()".into())
            }
            _ if is_aggregation(name) => Ok(Kind::Any),
            _ => match builtin_call(name).filter(|r| r.arities.contains(&args.len())) {
                Some(r) if r.call == Call::Exit => Ok(Kind::Any),
                // A built-in giving a value runs in the kernel when its arguments do.
                Some(r) if r.gives.is_some() => {
                    kinds.into_iter().collect::<std::result::Result<Vec<Kind>, Why>>()?;
                    Ok(match (r.call, args.len()) {
                        // kptr(p): the pointer, marked as kernel memory (no type to read members by).
                        (Call::Kptr, 1) => Kind::Int,
                        _ => r.gives.unwrap_or(Kind::Any),
                    })
                }
                _ => Err(format!("calls {name}()").into()),
            },
        }
    }

    /// `e.args.F` where F is a tracepoint's `char *`: records carry it as the string already.
    fn shipped_as_string(&self, e: &RExpr) -> bool {
        let RExpr::Dot(x, _, _) = e else { return false };
        if name_of(&x.lhs) != self.event || self.ctx.btf_args().is_some() {
            return false;
        }
        let (chain, rest) = property_chain(&x.rhs);
        let [(a, _), (f, _)] = chain.as_slice() else { return false };
        !rest
            && a == "args"
            && matches!(
                self.ctx.format().and_then(|t| t.field(f)).map(|t| &t.kind),
                Some(FieldKind::Pointer { to_char: true, .. })
            )
    }

    /// `str(...)` calls with kernel arguments inside a userspace statement.
    fn find_memory_reads(&mut self, s: &RStmt) {
        let mut calls: Vec<(Span, Vec<RExpr>)> = Vec::new();
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::FnCall(call, pos))) = path.last() {
                let is_str = builtin_call_with(call.name.as_str(), call.args.len()) == Some(Call::Str);
                if is_str && !call.is_qualified() {
                    calls.push((span(*pos), call.args.to_vec()));
                }
            }
            true
        });
        self.strict = true;
        for (at, args) in calls {
            let kernel = args.iter().all(|a| self.expr(a).is_ok())
                && !matches!(self.expr(&args[0]), Ok(Kind::Str))
                && !self.shipped_as_string(&args[0]);
            if kernel {
                self.out.memory_reads.insert(at);
            }
        }
        self.strict = false;
    }
}

fn to_place(flow: &Flow) -> Place {
    match flow {
        Ok(_) => Place::Kernel,
        Err(why) => Place::User(why.0.clone()),
    }
}

/// `.len()` at the end of `a.b.len()`: the method's name.
fn trailing_call(rhs: &RExpr) -> Option<String> {
    let mut cur = rhs;
    loop {
        match cur {
            RExpr::MethodCall(call, _) => return Some(format!("calls .{}()", call.name)),
            RExpr::Dot(x, _, _) => match &x.lhs {
                RExpr::MethodCall(call, _) => return Some(format!("calls .{}()", call.name)),
                _ => cur = &x.rhs,
            },
            RExpr::Index(..) => return Some("indexes a value that isn't a map()".into()),
            _ => return None,
        }
    }
}

fn type_text(t: &str) -> &str {
    match t {
        "map" => "object map",
        "Fn" => "function pointer",
        other => other,
    }
}

/// Whether the `Index` at the end of `path` is the target of an assignment
/// (`m[k] = v`, `m[k] += v`): a write, not a read.
fn assigned_target(path: &[ASTNode]) -> bool {
    let Some(ASTNode::Expr(me)) = path.last() else { return false };
    path.iter().rev().skip(1).any(|n| match n {
        ASTNode::Stmt(RStmt::Assignment(x)) => std::ptr::eq(&x.1.lhs, *me),
        _ => false,
    })
}

/// Methods that never change the value they are called on: a variable they
/// are called on keeps being a kernel value. Any other method (`make_upper`,
/// `push`, `replace`, a script function called as a method) may change it.
const PURE_METHODS: &[&str] = &[
    "len",
    "is_empty",
    "contains",
    "starts_with",
    "ends_with",
    "index_of",
    "sub_string",
    "to_upper",
    "to_lower",
    "to_string",
    "to_debug",
    "to_int",
    "to_float",
    "to_char",
    "split",
    "split_rev",
    "get",
    "keys",
    "values",
    "bytes",
    "chars",
    "abs",
    "sign",
    "map",
    "filter",
    "reduce",
    "reduce_rev",
    "some",
    "all",
    "find",
    "find_map",
    "index_of",
    "type_of",
    "to_json",
    "is_odd",
    "is_even",
    "is_zero",
    "min",
    "max",
    "to_hex",
    "to_octal",
    "to_binary",
    "tag",
    "is_shared",
    "zip",
    "contains_key",
    "get_bit",
    "get_bits",
    "to_blob",
    "as_string",
    "parse_int",
    "parse_float",
];

/// The variables a userspace statement may change: assignment targets
/// (also inside its loops and branches, and closures it creates, whose
/// captured variables are shared) and receivers of methods that may change
/// them.
fn written_variables(s: &RStmt) -> Vec<(String, Position)> {
    let mut out = Vec::new();
    let root = |e: &RExpr| match target_root(e) {
        RExpr::Variable(v, _, pos) => Some((v.1.to_string(), *pos)),
        _ => None,
    };
    if let RStmt::Var(x, _, pos) = s {
        out.push((x.0.name.to_string(), *pos));
    }
    s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Stmt(RStmt::Assignment(x))) => out.extend(root(&x.1.lhs)),
            Some(ASTNode::Expr(RExpr::Dot(x, _, _))) => {
                if let RExpr::MethodCall(c, _) = &x.rhs {
                    if !PURE_METHODS.contains(&c.name.as_str()) {
                        out.extend(root(&x.lhs));
                    }
                }
            }
            _ => {}
        }
        true
    });
    out
}

/// A userspace statement that may end the closure: what, and where.
fn ends_closure(s: &RStmt) -> Option<(Position, String)> {
    let mut found = None;
    s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Stmt(RStmt::Return(_, flags, pos))) => {
                let what = if flags.contains(rhai::ASTFlags::BREAK) { "`throw`" } else { "`return`" };
                found = Some((*pos, what.to_string()));
            }
            Some(ASTNode::Expr(RExpr::FnCall(c, pos))) if matches!(c.name.as_str(), "exit" | "fail") => {
                found = Some((*pos, format!("`{}()`", c.name)));
            }
            _ => {}
        }
        found.is_none()
    });
    found
}

/// The variable (or other root) an assignment target writes into:
/// `m` of `m[k]`, `obj` of `obj.f.g`.
fn target_root(mut e: &RExpr) -> &RExpr {
    while let RExpr::Index(x, _, _) | RExpr::Dot(x, _, _) = e {
        e = &x.lhs;
    }
    e
}

/// Where a statement is shown: an assignment's own position is its
/// operator's, so it is shown from its target.
fn shown_at(s: &RStmt) -> Position {
    match s {
        RStmt::Assignment(x) => target_root(&x.1.lhs).position(),
        _ => s.position(),
    }
}
