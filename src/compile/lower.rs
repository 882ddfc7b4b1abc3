//! Rhai closure AST → kernel IR for one attach point.
//!
//! Walks the closure body statement by statement. Event fields (`e.pid`,
//! `e.args.filename`), captured top-level values (constants become
//! immediates, maps become map references), locals, control flow, map
//! operations and aggregations become IR; anything else is reported with its
//! line:column as something the kernel side cannot run.

use std::collections::HashMap;

use probes_ebpf::ir::{AggOp, BinOp, Builtin, ContextKind, Expr, LocalId, MapId, Span, Stmt, StmtKind, Ty, UnOp};
use rhai::{ASTNode, Dynamic, Expr as RExpr, Position, Stmt as RStmt};

use super::fields;

mod index;
mod strings;
use super::maps::{MapUse, UseKind};
use crate::kernel::btf::{BtfTypes, Shape};
use crate::kernel::tracepoint_format::FieldKind;
use crate::plan::maps::MapTable;
use crate::plan::site::{Capture, Sem, Site};
use crate::probes::event::{btf_slot, EventContext};
use crate::script::MapHandle;
use crate::symbols::stacks::StackMode;
use probes_ebpf::record::{CONTROL_CLEAR, CONTROL_EXIT, CONTROL_PRINT, CONTROL_ZERO};

/// What a closure is being compiled for.
pub struct Target<'a> {
    /// Full probe name (`tracepoint:syscalls:sys_enter_read`), the value of `e.probe`.
    pub probe_name: &'a str,
    pub context: ContextKind,
    /// What the probe type says the event holds: `e.argN`, `e.retval`,
    /// `e.func`, `e.args.*`, and whether pointers are user memory.
    pub event: &'a dyn EventContext,
    /// The kernel's types (`e.curtask`, member chains); None without BTF.
    pub btf: Option<&'a dyn BtfTypes>,
    /// `ktime` at start, for `e.elapsed`.
    pub start_ns: i64,
    /// Default maximum length of `str()`.
    pub str_max: u32,
    /// Map id of the control ring buffer.
    pub control_ring: MapId,
    /// Index of this probe, reported in control messages.
    pub probe_index: u32,
    /// The data ring buffer and the per-probe lost-records array.
    pub data_ring: MapId,
    pub lost_map: MapId,
    /// The reader's "about to sleep" flag (see `ir::StmtKind::Emit`).
    pub wake_map: MapId,
    /// Id of this probe's first userspace site (ids are global).
    pub first_site: u32,
    /// Pending bytes in the data ring that trigger a wake-up of the reader.
    pub wake_bytes: u32,
    /// Strings read from a `char **` field for `join()` (RTRACE_JOIN_MAX).
    pub join_max: u32,
    /// Every map id; stack maps are added as probes ask for them (shared by all probes).
    pub maps: &'a std::cell::RefCell<MapTable>,
    /// The per-CPU counts of failed stack captures.
    pub stack_lost: MapId,
    /// Frames kept per stack unless the script gives a limit.
    pub stack_depth: u32,
}

impl Target<'_> {
    /// The stack map for stacks of this shape.
    fn stack_map(&self, depth: u32, user: bool, mode: StackMode) -> MapId {
        self.maps.borrow_mut().stack(depth, user, mode)
    }

    fn stack_info(&self, map: MapId) -> Option<(u32, bool, StackMode)> {
        self.maps.borrow().stack_info(map)
    }
}

/// A compile error at a script position.
#[derive(Debug)]
pub struct LowerError {
    pub pos: Position,
    pub message: String,
    /// The statement is fine but must run in userspace.
    pub userspace: bool,
}

type Result<T> = std::result::Result<T, LowerError>;

fn err<T>(pos: Position, message: impl Into<String>) -> Result<T> {
    Err(LowerError { pos, message: message.into(), userspace: false })
}

/// A value captured from the script's top level.
#[derive(Clone)]
enum Captured {
    Map(MapHandle),
    Int(i64),
    Str(String),
    Other(&'static str),
}

/// A closure's parameters and body statements, found in `ast` by function name.
#[derive(Clone)]
pub struct ClosureBody {
    pub params: Vec<String>,
    pub body: Vec<RStmt>,
}

/// The IR of one probe plus how it uses maps.
pub struct Lowered {
    pub locals: Vec<Ty>,
    pub body: Vec<Stmt>,
    pub uses: Vec<MapUse>,
    /// Userspace statements and what their records carry.
    pub sites: Vec<Site>,
}

/// Whether a closure body mentions `e.args` or `e.probe` (decides whether
/// wildcard attach points can share one program).
pub fn needs_per_point_program(body: &ClosureBody) -> bool {
    let event = match body.params.last() {
        Some(e) => e.clone(),
        None => return false,
    };
    let mut found = false;
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::Dot(x, _, _))) = path.last() {
                if let (RExpr::Variable(v, _, _), rhs) = (&x.lhs, &x.rhs) {
                    if v.1.as_str() == event {
                        let prop = match rhs {
                            RExpr::Property(p, _) => Some(p.2.as_str()),
                            RExpr::Dot(inner, _, _) => match &inner.lhs {
                                RExpr::Property(p, _) => Some(p.2.as_str()),
                                _ => None,
                            },
                            _ => None,
                        };
                        if matches!(prop, Some("args") | Some("probe") | Some("func")) {
                            found = true;
                        }
                    }
                }
            }
            true
        });
    }
    found
}

/// Lower a closure (captured values in `curry`, matched to the first
/// parameters) for `target`. A string local is as wide as the longest value
/// any assignment stores in it: when a later assignment is longer than the
/// `let`, the closure is lowered again with the wider size.
pub fn lower(body: &ClosureBody, curry: &[Dynamic], target: &Target) -> Result<Lowered> {
    let mut widths = HashMap::new();
    for _ in 0..8 {
        let (lowered, wanted) = lower_pass(body, curry, target, &widths)?;
        if wanted.iter().all(|(at, w)| widths.get(at).is_some_and(|h| h >= w)) {
            return Ok(lowered);
        }
        for (at, w) in wanted {
            let h = widths.entry(at).or_insert(0);
            *h = (*h).max(w);
        }
    }
    lower_pass(body, curry, target, &widths).map(|(l, _)| l)
}

/// One lowering pass; string locals declared at a position in `widths` are
/// at least that wide. Returns the widths assignments asked for too.
fn lower_pass(
    body: &ClosureBody,
    curry: &[Dynamic],
    target: &Target,
    widths: &HashMap<Span, u32>,
) -> Result<(Lowered, HashMap<Span, u32>)> {
    let mut captures = HashMap::new();
    for (name, value) in body.params.iter().zip(curry) {
        let v = value.flatten_clone();
        let c = if let Some(m) = v.clone().try_cast::<MapHandle>() {
            Captured::Map(m)
        } else if let Ok(i) = v.as_int() {
            Captured::Int(i)
        } else if let Ok(b) = v.as_bool() {
            Captured::Int(b as i64)
        } else if let Ok(s) = v.clone().into_string() {
            Captured::Str(s)
        } else {
            Captured::Other(v.type_name())
        };
        captures.insert(name.clone(), c);
    }
    let event = if body.params.len() > curry.len() { body.params.last().cloned() } else { None };
    // Top-level variables the closure assigns live in userspace.
    let mut userspace_vars = HashMap::new();
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Stmt(RStmt::Assignment(x))) = path.last() {
                if let RExpr::Variable(v, _, pos) = &x.1.lhs {
                    if matches!(captures.get(v.1.as_str()), Some(c) if !matches!(c, Captured::Map(_))) {
                        userspace_vars.entry(v.1.to_string()).or_insert((*pos, None));
                    }
                }
            }
            true
        });
    }
    let mut l = Lowerer {
        target,
        captures,
        event,
        scopes: vec![Vec::new()],
        locals: Vec::new(),
        uses: Vec::new(),
        sites: Vec::new(),
        next_site: target.first_site,
        userspace_vars,
        local_sems: HashMap::new(),
        local_btf: HashMap::new(),
        widths,
        local_user: Default::default(),
        local_decl: HashMap::new(),
        wanted_widths: HashMap::new(),
    };
    let stmts = l.block(&body.body)?;
    Ok((Lowered { locals: l.locals, body: stmts, uses: l.uses, sites: l.sites }, l.wanted_widths))
}

struct Lowerer<'a> {
    target: &'a Target<'a>,
    captures: HashMap<String, Captured>,
    event: Option<String>,
    /// Declarations visible in each open block, in order, as Rhai's scope
    /// holds them: kernel locals (`Some(id)`) and userspace ones (`None`).
    scopes: Vec<Vec<(String, Option<LocalId>)>>,
    locals: Vec<Ty>,
    uses: Vec<MapUse>,
    sites: Vec<Site>,
    next_site: u32,
    /// Variables computed in userspace: where, and by which site (None: a
    /// top-level variable the closure assigns).
    userspace_vars: HashMap<String, (Position, Option<u32>)>,
    /// Locals holding stacks or symbols.
    local_sems: HashMap<LocalId, Sem>,
    /// Locals holding kernel pointers to BTF structs: the struct's type id.
    local_btf: HashMap<LocalId, u32>,
    /// Locals holding pointers to structs in user memory.
    local_user: std::collections::HashSet<LocalId>,
    /// Least widths of string locals, by the position of their `let`.
    widths: &'a HashMap<Span, u32>,
    /// Where each local was declared.
    local_decl: HashMap<LocalId, Span>,
    /// Widths later assignments need (see [`lower`]).
    wanted_widths: HashMap<Span, u32>,
}

/// Lowering state to roll back when a statement turns out to be userspace.
struct Snapshot {
    locals: usize,
    uses: usize,
    scope: Vec<(String, Option<LocalId>)>,
}

fn span(pos: Position) -> Span {
    Span { line: pos.line().unwrap_or(0) as u32, col: pos.position().unwrap_or(0) as u32 }
}

fn at(pos: Position) -> String {
    crate::script::position_text(pos)
}

fn userspace_only(what: &str, pos: Position) -> LowerError {
    LowerError { pos, message: format!("{what} runs in userspace"), userspace: true }
}

/// A userspace-only value reached a statement that must run in the kernel
/// (an aggregation): that is an error naming both places.
fn kernel_needs(e: LowerError) -> LowerError {
    if !e.userspace {
        return e;
    }
    LowerError {
        pos: e.pos,
        message: format!(
            "this aggregation runs in the kernel, but {} (kernel code can't use userspace values)",
            e.message
        ),
        userspace: false,
    }
}

/// `ksym(x)` lowers to `x | KSYM_TAG` (a no-op) so the value is known to
/// print as a kernel symbol.
const KSYM_TAG: i64 = 0;

/// Aggregations exist only in the kernel.
const AGGREGATIONS: &[&str] = &["count", "sum", "min", "max", "avg", "stats", "hist", "lhist", "quantiles"];

impl<'a> Lowerer<'a> {
    fn lookup_local(&self, name: &str) -> Option<LocalId> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|(n, _)| n == name).and_then(|(_, id)| *id)
    }

    fn new_local(&mut self, name: &str, ty: Ty) -> LocalId {
        let id = self.locals.len() as LocalId;
        self.locals.push(ty);
        self.scopes.last_mut().unwrap().push((name.to_string(), Some(id)));
        id
    }

    fn ty(&self, e: &Expr) -> Ty {
        e.ty(&self.locals)
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            locals: self.locals.len(),
            uses: self.uses.len(),
            scope: self.scopes.last().cloned().unwrap_or_default(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.local_sems.retain(|id, _| (*id as usize) < s.locals);
        self.local_btf.retain(|id, _| (*id as usize) < s.locals);
        self.local_user.retain(|id| (*id as usize) < s.locals);
        self.locals.truncate(s.locals);
        self.uses.truncate(s.uses);
        *self.scopes.last_mut().unwrap() = s.scope;
    }

    /// Lower a block: kernel statements become IR; each run of consecutive
    /// userspace statements becomes one record emitted at that point.
    fn block(&mut self, stmts: &[RStmt]) -> Result<Vec<Stmt>> {
        self.scopes.push(Vec::new());
        let mut out = Vec::new();
        let mut run: Vec<RStmt> = Vec::new();
        let mut run_id = 0u32;
        for s in stmts {
            let snap = self.snapshot();
            let declared_before = self.scopes.last().map_or(0, Vec::len);
            let mut lowered = Vec::new();
            match self.stmt(s, &mut lowered) {
                Ok(()) => {
                    // The pending userspace run comes before this statement:
                    // the locals it just declared are not in the run's scope.
                    let declared: Vec<_> = self.scopes.last_mut().map_or(vec![], |sc| sc.split_off(declared_before));
                    self.flush_site(&mut run, run_id, &mut out)?;
                    if let Some(sc) = self.scopes.last_mut() {
                        sc.extend(declared);
                    }
                    out.extend(lowered);
                }
                Err(e) if e.userspace => {
                    self.restore(snap);
                    if run.is_empty() {
                        run_id = self.next_site;
                        self.next_site += 1;
                    }
                    self.check_userspace_stmt(s, run_id)?;
                    run.push(s.clone());
                }
                Err(e) => return Err(e),
            }
        }
        self.flush_site(&mut run, run_id, &mut out)?;
        self.scopes.pop();
        Ok(out)
    }

    /// A statement classified userspace must not hold kernel-only work, and
    /// the variables it declares are userspace values from now on.
    fn check_userspace_stmt(&mut self, s: &RStmt, run_id: u32) -> Result<()> {
        let mut bad: Option<(String, Position)> = None;
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(RExpr::FnCall(call, pos))) = path.last() {
                let kernel_only = AGGREGATIONS.contains(&call.name.as_str())
                    || (strings::KERNEL_ONLY.contains(&call.name.as_str()) && !strings::member_read(path));
                if kernel_only && bad.is_none() {
                    bad = Some((call.name.to_string(), *pos));
                }
            }
            true
        });
        if let Some((name, pos)) = bad.clone().filter(|(n, _)| strings::KERNEL_ONLY.contains(&n.as_str())) {
            return err(
                pos,
                format!(
                    "{name}() reads kernel memory, but the statement at {} around it runs in userspace; read it in a kernel `let` first (`let v = {name}(...);`) and use `v` here",
                    at(s.position())
                ),
            );
        }
        if let Some((name, pos)) = bad {
            return err(
                pos,
                format!(
                    "{name}() runs in the kernel, but the statement at {} around it runs in userspace (it uses something only userspace has); compute the condition from event fields, maps or constants",
                    at(s.position())
                ),
            );
        }
        if let RStmt::Var(x, _, pos) = s {
            self.userspace_vars.insert(x.0.name.to_string(), (*pos, Some(run_id)));
            self.scopes.last_mut().unwrap().push((x.0.name.to_string(), None));
        }
        Ok(())
    }

    /// Emit the record for a run of userspace statements.
    fn flush_site(&mut self, run: &mut Vec<RStmt>, id: u32, out: &mut Vec<Stmt>) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let stmts = std::mem::take(run);
        let first_pos = stmts[0].position();
        let event = self.event.clone();
        // What the statements read: event fields and kernel locals.
        let mut wanted: Vec<(Capture, Position)> = Vec::new();
        let mut problem: Option<LowerError> = None;
        let mut kptr_uses: Vec<(RExpr, RExpr, Position)> = Vec::new();
        for s in &stmts {
            s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
                match path.last() {
                    Some(ASTNode::Expr(RExpr::Dot(x, _, pos))) => {
                        if strings::is_kptr(&x.lhs) {
                            kptr_uses.push((x.lhs.clone(), x.rhs.clone(), *pos));
                        }
                        if let RExpr::Variable(v, _, _) = &x.lhs {
                            let name = v.1.as_str();
                            if let (Some(id), None) = (self.lookup_local(name), &problem) {
                                if self.local_btf.contains_key(&id) && matches!(x.rhs, RExpr::Property(..) | RExpr::Dot(..)) {
                                    problem = Some(LowerError {
                                        pos: *pos,
                                        message: format!(
                                            "`{name}` is a kernel pointer: read its members in a kernel statement first, e.g. `let x = {name}.{};`, then use `x` here",
                                            property_chain(&x.rhs).0.iter().map(|c| c.0.as_str()).collect::<Vec<_>>().join(".")
                                        ),
                                        userspace: false,
                                    });
                                }
                            }
                            if Some(v.1.as_str()) == event.as_deref() {
                                match (event_path(&x.rhs, &|a| self.const_arg(a)), &x.rhs) {
                                    (Some(p), _) => wanted.push((Capture::Event(p), *pos)),
                                    (None, RExpr::MethodCall(call, cpos))
                                        if matches!(call.name.as_str(), "kstack" | "ustack") && problem.is_none() =>
                                    {
                                        problem = Some(LowerError {
                                            pos: *cpos,
                                            message: "stack arguments are a constant limit and/or a mode (\"bpftrace\", \"perf\", \"raw\"), literals or top-level constants".into(),
                                            userspace: false,
                                        });
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    Some(ASTNode::Expr(RExpr::Variable(v, _, pos))) => {
                        let name = v.1.as_str();
                        if self.lookup_local(name).is_some() {
                            wanted.push((Capture::Local { name: name.to_string(), slot: 0 }, *pos));
                        } else if let Some((decl, Some(site))) = self.userspace_vars.get(name) {
                            if *site != id && problem.is_none() {
                                problem = Some(LowerError {
                                    pos: *pos,
                                    message: format!(
                                        "`{name}` was computed by the userspace statements at {}; a kernel statement comes in between, so it isn't available here — keep the userspace statements together",
                                        at(*decl)
                                    ),
                                    userspace: false,
                                });
                            }
                        }
                    }
                    _ => {}
                }
                true
            });
        }
        if let Some(p) = problem {
            return Err(p);
        }
        // `e.curtask` arrives as an object map when its members are used too,
        // so it can't also be a number in the same run.
        for (a, _) in &wanted {
            for (b, bpos) in &wanted {
                if let (Capture::Event(short), Capture::Event(long)) = (a, b) {
                    if long.len() > short.len()
                        && long.starts_with(short)
                        && !matches!(short[0].as_str(), "kstack" | "ustack")
                    {
                        let ev = event.as_deref().unwrap_or("e");
                        return err(
                            *bpos,
                            format!(
                                "`{ev}.{}` and `{ev}.{}` are both used here; in userspace one value can't be both: keep one in a `let` first (`let x = {ev}.{};`)",
                                short.join("."),
                                long.join("."),
                                long.join(".")
                            ),
                        );
                    }
                }
            }
        }
        // Locals visible before the run: the run's own `let`s (the last entries
        // of the innermost scope) are created when it runs.
        let mut visible: Vec<(String, Option<LocalId>)> = self.scopes.iter().flatten().cloned().collect();
        let own = stmts.iter().filter(|s| matches!(s, RStmt::Var(..))).count();
        visible.truncate(visible.len().saturating_sub(own));
        let mut fields: Vec<(Capture, Ty)> = Vec::new();
        let mut sems = Vec::new();
        let mut exprs = Vec::new();
        for (mut cap, pos) in wanted {
            if let Capture::Local { name, slot } = &mut cap {
                // The innermost declaration of the name is the one in use.
                *slot = visible.iter().rposition(|(n, _)| n == name).unwrap_or(0);
            }
            if fields.iter().any(|f| f.0 == cap) {
                continue;
            }
            if let Capture::Event(path) = &cap {
                if let Some(items) = self.string_array(path, pos)? {
                    for (index, e) in items.into_iter().enumerate() {
                        fields.push((Capture::EventItem { path: path.clone(), index }, self.ty(&e)));
                        sems.push(Sem::Plain);
                        exprs.push(e);
                    }
                    fields.push((cap, Ty::Int));
                    sems.push(Sem::Plain);
                    exprs.push(Expr::Int(0));
                    continue;
                }
            }
            let expr = match &cap {
                Capture::Local { slot, .. } => Expr::Local(visible[*slot].1.unwrap_or(0)),
                Capture::Event(path) => self.event_capture(path, pos)?,
                Capture::Emitted
                | Capture::EventItem { .. }
                | Capture::KptrBase { .. }
                | Capture::KptrMember { .. } => continue,
            };
            fields.push((cap, self.ty(&expr)));
            sems.push(self.sem(&expr));
            exprs.push(expr);
        }
        for (i, (call, rhs, pos)) in kptr_uses.iter().enumerate() {
            for (cap, expr) in self.kptr_fields(i, call, rhs, *pos)? {
                fields.push((cap, self.ty(&expr)));
                sems.push(self.sem(&expr));
                exprs.push(expr);
            }
        }
        out.push(Stmt { kind: self.emit_stmt(id, exprs), span: span(first_pos) });
        let scope = visible.into_iter().map(|(n, _)| n).collect();
        self.sites.push(Site { id, stmts, fields, sems, scope, at: at(first_pos), emit: false, emit_array: false });
        Ok(())
    }

    /// For a `char **` tracepoint field (`e.args.argv`): reads of its first
    /// strings (env RTRACE_JOIN_MAX, default 6, each up to 48 bytes), so
    /// userspace gets an array (for `join()`).
    fn string_array(&mut self, path: &[String], pos: Position) -> Result<Option<Vec<Expr>>> {
        let [args, field] = path else { return Ok(None) };
        if args != "args" {
            return Ok(None);
        }
        let Some(format) = self.target.event.format() else { return Ok(None) };
        let Some(f) = format.field(field) else { return Ok(None) };
        if let Some(items) = index::array_items(format, field) {
            // An array of integers (`unsigned long args[6]`): every element.
            return Ok(Some(items));
        }
        if !(f.c_type.contains("char") && f.c_type.matches('*').count() == 2) {
            return Ok(None);
        }
        let count = self.target.join_max as i64;
        let base = self.tracepoint_arg(field, pos)?;
        Ok(Some(
            (0..count)
                .map(|i| {
                    let slot = Expr::Binary(BinOp::Add, Box::new(base.clone()), Box::new(Expr::Int(8 * i)));
                    let ptr = Expr::ReadMem { addr: Box::new(slot), size: 8, signed: false, user: true };
                    Expr::ReadStr { ptr: Box::new(ptr), max: 48, user: true }
                })
                .collect(),
        ))
    }

    /// The statement sending the record of site `id`.
    fn emit_stmt(&self, id: u32, fields: Vec<Expr>) -> StmtKind {
        StmtKind::Emit {
            ring: self.target.data_ring,
            lost: self.target.lost_map,
            wake: Some(self.target.wake_map),
            site: id,
            probe: self.target.probe_index,
            fields,
            wake_bytes: self.target.wake_bytes,
        }
    }

    /// The kernel value shipped for `e.PATH` in a record. Character pointers
    /// are shipped as the strings they point to.
    fn event_capture(&mut self, path: &[String], pos: Position) -> Result<Expr> {
        if matches!(path[0].as_str(), "kstack" | "ustack") {
            return self.stack_expr(path, pos);
        }
        match path {
            [field] => self.event_field(field, pos),
            [args, field] if args == "args" && self.target.event.btf_args().is_none() => {
                let v = self.tracepoint_arg(field, pos)?;
                let pointer = self.target.event.format().and_then(|f| f.field(field)).map(|f| f.kind.clone());
                Ok(match pointer {
                    Some(FieldKind::Pointer { user, to_char: true }) => {
                        Expr::ReadStr { ptr: Box::new(v), max: self.target.str_max, user }
                    }
                    _ => v,
                })
            }
            [first, ..] if matches!(first.as_str(), "args" | "curtask") => {
                let chain: Vec<(String, Position)> = path.iter().map(|n| (n.clone(), pos)).collect();
                let a = self.member_chain(&chain)?;
                Ok(if a.char_pointer {
                    Expr::ReadStr {
                        ptr: Box::new(a.expr),
                        max: self.target.str_max,
                        user: self.target.event.user_memory(),
                    }
                } else {
                    a.expr
                })
            }
            _ => err(pos, "unsupported event field"),
        }
    }

    fn stmt(&mut self, s: &RStmt, out: &mut Vec<Stmt>) -> Result<()> {
        let pos = s.position();
        let mut push = |kind: StmtKind| out.push(Stmt { kind, span: span(pos) });
        match s {
            RStmt::Noop(_) | RStmt::Share(_) => {}
            RStmt::Var(x, _, pos) => {
                let (ident, init, _) = x.as_ref();
                if matches!(init, RExpr::Unit(_)) {
                    return err(*pos, format!("`let {}` needs a value in a probe", ident.name));
                }
                // A typed pointer keeps its struct type (`let t = e.curtask;`).
                let typed = match init {
                    RExpr::Dot(x, _, dpos) => self.pointer_access(&x.lhs, &x.rhs, *dpos),
                    RExpr::FnCall(c, _) if c.name == "kptr" && c.args.len() == 2 => Some(self.kptr(&c.args)),
                    _ => None,
                };
                let (value, pointee) = match typed {
                    Some(access) => access.map(|a| (a.expr, a.pointee))?,
                    None => (self.expr(init)?, None),
                };
                let ty = match (self.ty(&value), self.widths.get(&span(*pos))) {
                    (Ty::Bytes(n), Some(w)) => Ty::Bytes(n.max(*w)),
                    (ty, _) => ty,
                };
                let sem = if self.is_bool(init) { Sem::Bool } else { self.sem(&value) };
                let id = self.new_local(ident.name.as_str(), ty);
                self.local_decl.insert(id, span(*pos));
                if sem != Sem::Plain {
                    self.local_sems.insert(id, sem);
                }
                if let Some(p) = pointee {
                    self.local_btf.insert(id, p);
                    if self.user_struct_pointer(init) {
                        self.local_user.insert(id);
                    }
                }
                push(StmtKind::SetLocal(id, value));
            }
            RStmt::Assignment(x) => {
                let (op, bin) = x.as_ref();
                let compound = op.get_op_assignment_info().map(|info| info.5);
                for k in self.assignment(&bin.lhs, &bin.rhs, compound, op.position())? {
                    push(k);
                }
            }
            RStmt::If(fc, _) => {
                let cond = self.cond(&fc.expr)?;
                let then = self.block(fc.body.statements())?;
                let otherwise = self.block(fc.branch.statements())?;
                push(StmtKind::If { cond, then, otherwise });
            }
            RStmt::For(x, pos) => {
                let (var, counter, fc) = x.as_ref();
                if counter.is_some() {
                    return err(*pos, "a counter variable in `for` isn't supported in probes; use `for i in 0..N`");
                }
                let (start, count) = self.const_range(&fc.expr)?;
                self.scopes.push(Vec::new());
                let id = self.new_local(var.name.as_str(), Ty::Int);
                let body = self.block(fc.body.statements())?;
                self.scopes.pop();
                push(StmtKind::Repeat { var: id, start, count, body });
            }
            RStmt::Block(b) => {
                let inner = self.block(b.statements())?;
                out.extend(inner);
            }
            RStmt::Return(value, _, _) => {
                if value.is_some() {
                    return err(pos, "probes can't return a value; write `return;`");
                }
                push(StmtKind::Return);
            }
            RStmt::FnCall(call, pos) => {
                let k = self.call_stmt(call.name.as_str(), &call.args, *pos)?;
                push_call(&mut push, k);
            }
            RStmt::Expr(e) => match e.as_ref() {
                RExpr::FnCall(call, pos) => {
                    let k = self.call_stmt(call.name.as_str(), &call.args, *pos)?;
                    push_call(&mut push, k);
                }
                RExpr::Dot(x, _, pos) => {
                    let k = self.method_stmt(&x.lhs, &x.rhs, *pos)?;
                    push(k);
                }
                RExpr::Stmt(block) => {
                    let inner = self.block(block.statements())?;
                    out.extend(inner);
                }
                other => {
                    // A bare expression: evaluate only for its checks; no effect.
                    self.expr(other)?;
                }
            },
            RStmt::While(..) | RStmt::Do(..) => {
                return err(pos, "while/loop can't run in the kernel: use `for i in 0..N` with a constant N")
            }
            RStmt::BreakLoop(..) => return err(pos, "break/continue aren't supported in probes yet"),
            RStmt::Switch(..) => return err(pos, "switch isn't supported in probes; use if / else if"),
            RStmt::TryCatch(..) => return Err(userspace_only("try/catch", pos)),
            _ => return Err(userspace_only("this statement", pos)),
        }
        Ok(())
    }

    /// `for i in A..B` / `A..=B` with constant bounds: (start, count).
    fn const_range(&self, e: &RExpr) -> Result<(i64, u32)> {
        let pos = e.position();
        if let RExpr::FnCall(call, _) = e {
            if (call.name == ".." || call.name == "..=") && call.args.len() == 2 {
                let a = self.const_int(&call.args[0]);
                let b = self.const_int(&call.args[1]);
                if let (Some(a), Some(b)) = (a, b) {
                    let end = if call.name == "..=" { b + 1 } else { b };
                    let count = (end - a).max(0);
                    if count > 4096 {
                        return err(
                            pos,
                            format!("loop of {count} iterations is too long for the kernel (at most 4096)"),
                        );
                    }
                    return Ok((a, count as u32));
                }
            }
        }
        err(pos, "loops in probes need a constant range, e.g. `for i in 0..8`")
    }

    fn const_int(&self, e: &RExpr) -> Option<i64> {
        match e {
            RExpr::IntegerConstant(v, _) => Some(*v),
            RExpr::Variable(v, _, _) => match self.captures.get(v.1.as_str()) {
                Some(Captured::Int(i)) if self.lookup_local(v.1.as_str()).is_none() => Some(*i),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a kernel value is a boolean in Rhai (a comparison, `&&`,
    /// `||`, `!`, `in`, `true`/`false`, a bool local, an if-expression of
    /// bools): userspace gets it back as a bool, not 0/1.
    fn is_bool(&self, e: &RExpr) -> bool {
        match e {
            RExpr::BoolConstant(..) | RExpr::And(..) | RExpr::Or(..) => true,
            RExpr::FnCall(call, _) => {
                matches!(call.name.as_str(), "==" | "!=" | "<" | "<=" | ">" | ">=" | "!" | "contains" | "strcontains")
            }
            RExpr::Variable(v, _, _) => match self.lookup_local(v.1.as_str()) {
                Some(id) => self.local_sems.get(&id) == Some(&Sem::Bool),
                None => false,
            },
            RExpr::Stmt(block) => match block.statements() {
                [RStmt::If(fc, _)] => {
                    let single = |b: &[RStmt]| matches!(b, [RStmt::Expr(x)] if self.is_bool(x));
                    single(fc.body.statements()) && single(fc.branch.statements())
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// A constant argument's text (a literal, or a top-level integer or
    /// string the probe captured): stack limits and modes.
    fn const_arg(&self, e: &RExpr) -> Option<String> {
        match e {
            RExpr::StringConstant(m, _) => Some(m.to_string()),
            RExpr::Variable(v, _, _) if self.lookup_local(v.1.as_str()).is_none() => {
                match self.captures.get(v.1.as_str()) {
                    Some(Captured::Int(i)) => Some(i.to_string()),
                    Some(Captured::Str(s)) => Some(s.clone()),
                    _ => None,
                }
            }
            other => self.const_int(other).map(|i| i.to_string()),
        }
    }

    /// A captured map referenced by a variable expression.
    fn map_of(&self, e: &RExpr) -> Option<MapHandle> {
        if let RExpr::Variable(v, _, _) = e {
            if self.lookup_local(v.1.as_str()).is_none() {
                if let Some(Captured::Map(m)) = self.captures.get(v.1.as_str()) {
                    return Some(m.clone());
                }
            }
        }
        None
    }

    fn key(&mut self, e: &RExpr) -> Result<Vec<Expr>> {
        match e {
            RExpr::Array(parts, _) => parts.iter().map(|p| self.expr(p)).collect(),
            // `m[()]`: the one value of a keyless map.
            RExpr::Unit(_) => Ok(Vec::new()),
            other => Ok(vec![self.expr(other)?]),
        }
    }

    fn record_use(&mut self, map: &MapHandle, key: &[Expr], kind: UseKind, pos: Position) {
        let key_sems = key.iter().map(|k| self.sem(k)).collect();
        let key = key.iter().map(|k| self.ty(k)).collect();
        self.uses.push(MapUse { map: map.id(), key, key_sems, kind, at: at(pos) });
    }

    /// How a value prints: stacks and `ksym()` are integers shown as symbols.
    fn sem(&self, e: &Expr) -> Sem {
        match e {
            Expr::StackId { map, user, .. } => match self.target.stack_info(*map) {
                Some((_, _, mode)) => Sem::Stack { map: *map, user: *user, mode },
                None => Sem::Plain,
            },
            Expr::Local(id) => self.local_sems.get(id).copied().unwrap_or(Sem::Plain),
            Expr::ReadBuf { .. } => Sem::Buf,
            Expr::Binary(BinOp::Or, a, b) if **b == Expr::Int(KSYM_TAG) => {
                let _ = a;
                Sem::Ksym
            }
            _ => Sem::Plain,
        }
    }

    fn assignment(&mut self, lhs: &RExpr, rhs: &RExpr, compound: Option<&str>, pos: Position) -> Result<Vec<StmtKind>> {
        // Map target: `m[k] = ...` or keyless `m = ...`.
        let (map, key) = match lhs {
            RExpr::Index(x, _, _) => match self.map_of(&x.lhs) {
                Some(m) => (Some(m), Some(&x.rhs)),
                None => return err(lhs.position(), "only maps declared with map() can be indexed in a probe"),
            },
            other => (self.map_of(other), None),
        };
        if let Some(map) = map {
            let is_agg = matches!(rhs, RExpr::FnCall(c, _) if AGGREGATIONS.contains(&c.name.as_str()));
            let key = match key {
                Some(k) => self.key(k).map_err(|e| if is_agg { kernel_needs(e) } else { e })?,
                None => Vec::new(),
            };
            let agg = self.aggregation(rhs).map_err(kernel_needs)?;
            if let Some(agg) = agg {
                if compound.is_some() {
                    return err(pos, "an aggregation is assigned with `=`, e.g. `m[k] = count()`");
                }
                let (op, value) = agg;
                self.record_use(&map, &key, UseKind::Aggregate(op), pos);
                return Ok(vec![StmtKind::Aggregate { map: map.id(), key, op, value }]);
            }
            let value = self.expr(rhs)?;
            return Ok(vec![match compound {
                None => {
                    let ty = self.ty(&value);
                    self.record_use(&map, &key, UseKind::Store(ty), pos);
                    StmtKind::MapStore { map: map.id(), key, value }
                }
                Some(op) => {
                    let op = bin_op(op).ok_or_else(|| LowerError {
                        pos,
                        message: format!("`{op}=` isn't supported on maps"),
                        userspace: false,
                    })?;
                    self.record_use(&map, &key, UseKind::Update, pos);
                    StmtKind::MapUpdate { map: map.id(), key, op, value }
                }
            }]);
        }
        // Local target.
        let RExpr::Variable(v, _, vpos) = lhs else {
            return err(lhs.position(), "this assignment target can't be written in a probe");
        };
        let name = v.1.as_str();
        let Some(id) = self.lookup_local(name) else {
            if self.userspace_vars.contains_key(name) {
                return Err(userspace_only(&format!("assigning `{name}`"), *vpos));
            }
            if self.captures.contains_key(name) {
                return Err(LowerError {
                    pos: *vpos,
                    message: format!(
                        "`{name}` is a top-level variable: a probe can't assign it in the kernel; keep state in a map (e.g. `let {name} = map();`)"
                    ),
                    userspace: false,
                });
            }
            return err(*vpos, format!("unknown variable `{name}`"));
        };
        let mut value = self.expr(rhs)?;
        if let Some(op) = compound {
            let op = bin_op(op).ok_or_else(|| LowerError {
                pos,
                message: format!("`{op}=` isn't supported"),
                userspace: false,
            })?;
            self.check_div(op, &value, pos)?;
            value = Expr::Binary(op, Box::new(Expr::Local(id)), Box::new(value));
        }
        let (want, got) = (self.locals[id as usize], self.ty(&value));
        if matches!(want, Ty::Int) != matches!(got, Ty::Int) {
            return err(pos, format!("`{name}` holds a {} but is assigned a {}", ty_name(want), ty_name(got)));
        }
        if let (Ty::Bytes(w), Ty::Bytes(g), Some(decl)) = (want, got, self.local_decl.get(&id)) {
            if g > w {
                let need = self.wanted_widths.entry(*decl).or_insert(0);
                *need = (*need).max(g);
            }
        }
        Ok(vec![StmtKind::SetLocal(id, value)])
    }

    /// `count()`, `hist(x)`, ... as the right side of a map assignment.
    fn aggregation(&mut self, rhs: &RExpr) -> Result<Option<(AggOp, Option<Expr>)>> {
        let RExpr::FnCall(call, pos) = rhs else { return Ok(None) };
        let args = &call.args;
        let want = |n: usize| -> Result<()> {
            if args.len() != n {
                return err(*pos, format!("{}() takes {n} argument(s)", call.name));
            }
            Ok(())
        };
        let op = match call.name.as_str() {
            "count" => {
                want(0)?;
                return Ok(Some((AggOp::Count, None)));
            }
            "sum" => AggOp::Sum,
            "min" => AggOp::Min,
            "max" => AggOp::Max,
            "avg" => AggOp::Avg,
            "stats" => AggOp::Stats,
            "hist" => AggOp::Hist,
            "lhist" => {
                want(4)?;
                let c: Vec<Option<i64>> = args[1..].iter().map(|a| self.const_int(a)).collect();
                let (Some(min), Some(max), Some(step)) = (c[0], c[1], c[2]) else {
                    return err(*pos, "lhist(value, min, max, step) needs constant min, max and step");
                };
                if step <= 0 || max <= min {
                    return err(*pos, "lhist needs min < max and step > 0");
                }
                if (max - min) / step > 1000 {
                    return err(*pos, "lhist would have more than 1000 buckets; use a larger step");
                }
                let v = self.int_expr(&args[0])?;
                return Ok(Some((AggOp::Lhist { min, max, step }, Some(v))));
            }
            "quantiles" => {
                let unit_ns = match args.len() {
                    1 => 0,
                    2 => super::maps::quantiles_unit(&args[1]).or_else(|e| err(*pos, e))?,
                    _ => return err(*pos, "quantiles(value[, unit]) takes 1 or 2 arguments"),
                };
                let v = self.int_expr(&args[0])?;
                return Ok(Some((AggOp::Quantiles { unit_ns }, Some(v))));
            }
            _ => return Ok(None),
        };
        want(1)?;
        let v = self.int_expr(&args[0])?;
        Ok(Some((op, Some(v))))
    }

    fn int_expr(&mut self, e: &RExpr) -> Result<Expr> {
        let v = self.expr(e)?;
        if self.ty(&v) != Ty::Int {
            return err(e.position(), "a string is used where a number is expected");
        }
        Ok(v)
    }

    /// Statement-level function calls: `exit()`, `print(m)`.
    fn call_stmt(&mut self, name: &str, args: &[RExpr], pos: Position) -> Result<StmtKind> {
        let control = |s: &Self, kind: u32, arg: Expr| StmtKind::Control {
            ring: s.target.control_ring,
            lost: s.target.lost_map,
            kind,
            probe: s.target.probe_index,
            arg,
        };
        match (name, args.len()) {
            ("exit", 0) => Ok(control(self, CONTROL_EXIT, Expr::Int(0))),
            ("exit", 1) => {
                let code = self.int_expr(&args[0])?;
                Ok(control(self, CONTROL_EXIT, code))
            }
            ("emit", 1) => {
                let parts: Vec<&RExpr> = match &args[0] {
                    RExpr::Array(items, _) => items.iter().collect(),
                    one => vec![one],
                };
                let mut fields = Vec::new();
                let mut exprs = Vec::new();
                let mut sems = Vec::new();
                for p in parts {
                    let v = self.expr(p).map_err(|mut e| {
                        if e.userspace {
                            e.userspace = false;
                            e.message = format!("emit() sends kernel values: {}", e.message);
                        }
                        e
                    })?;
                    fields.push((Capture::Emitted, self.ty(&v)));
                    sems.push(self.sem(&v));
                    exprs.push(v);
                }
                let id = self.next_site;
                self.next_site += 1;
                self.sites.push(Site {
                    id,
                    stmts: Vec::new(),
                    fields,
                    sems,
                    scope: Vec::new(),
                    at: at(pos),
                    emit: true,
                    emit_array: matches!(args[0], RExpr::Array(..)),
                });
                Ok(self.emit_stmt(id, exprs))
            }
            ("print", 1) | ("clear", 1) | ("zero", 1) if self.map_of(&args[0]).is_some() => {
                let m = self.map_of(&args[0]).unwrap();
                let kind = match name {
                    "print" => CONTROL_PRINT,
                    "clear" => CONTROL_CLEAR,
                    _ => CONTROL_ZERO,
                };
                Ok(control(self, kind, Expr::Int(m.id() as i64)))
            }
            _ => Err(userspace_only(&format!("`{name}(...)`"), pos)),
        }
    }

    /// Statement-level method calls: `m.remove(k)`, `m.clear()`, `m.zero()`, `print(m)`.
    fn method_stmt(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Result<StmtKind> {
        if let (Some(map), RExpr::MethodCall(call, mpos)) = (self.map_of(lhs), rhs) {
            match (call.name.as_str(), call.args.len()) {
                ("remove", 1) => {
                    let key = self.key(&call.args[0])?;
                    self.record_use(&map, &key, UseKind::Delete, *mpos);
                    return Ok(StmtKind::MapDelete { map: map.id(), key });
                }
                ("clear", 0) | ("zero", 0) => {
                    let kind = if call.name == "clear" { CONTROL_CLEAR } else { CONTROL_ZERO };
                    return Ok(StmtKind::Control {
                        ring: self.target.control_ring,
                        lost: self.target.lost_map,
                        kind,
                        probe: self.target.probe_index,
                        arg: Expr::Int(map.id() as i64),
                    });
                }
                (other, _) => {
                    return err(
                        *mpos,
                        format!("map method `{other}` isn't available in probes (remove, clear, zero are)"),
                    )
                }
            }
        }
        Err(userspace_only("this method call", pos))
    }

    /// A condition: numbers are true when non-zero.
    fn cond(&mut self, e: &RExpr) -> Result<Expr> {
        let c = self.expr(e)?;
        if self.ty(&c) != Ty::Int {
            return err(e.position(), "a string can't be used as a condition; compare it, e.g. `s == \"x\"`");
        }
        Ok(c)
    }

    fn check_div(&self, op: BinOp, rhs: &Expr, pos: Position) -> Result<()> {
        if matches!(op, BinOp::Div | BinOp::Mod) && *rhs == Expr::Int(0) {
            return err(pos, "division by zero");
        }
        Ok(())
    }

    fn expr(&mut self, e: &RExpr) -> Result<Expr> {
        let pos = e.position();
        match e {
            RExpr::IntegerConstant(v, _) => Ok(Expr::Int(*v)),
            RExpr::BoolConstant(b, _) => Ok(Expr::Int(*b as i64)),
            RExpr::CharConstant(c, _) => Ok(Expr::Int(*c as i64)),
            RExpr::StringConstant(s, _) => Ok(str_literal(s)),
            RExpr::DynamicConstant(d, _) => {
                if let Ok(i) = d.as_int() {
                    Ok(Expr::Int(i))
                } else if let Ok(s) = d.clone().into_string() {
                    Ok(str_literal(&s))
                } else {
                    err(pos, format!("a {} value can't be used in the kernel", d.type_name()))
                }
            }
            RExpr::Variable(v, _, _) => {
                let name = v.1.as_str();
                if let Some(id) = self.lookup_local(name) {
                    return Ok(Expr::Local(id));
                }
                if let Some((decl, _)) = self.userspace_vars.get(name) {
                    return Err(LowerError {
                        pos,
                        message: format!("`{name}` is computed in userspace at {}", at(*decl)),
                        userspace: true,
                    });
                }
                match self.captures.get(name) {
                    Some(Captured::Int(i)) => Ok(Expr::Int(*i)),
                    Some(Captured::Str(s)) => Ok(str_literal(s)),
                    Some(Captured::Map(m)) => {
                        err(pos, format!("map `{}` needs a key here, e.g. `{name}[e.pid]`", m.name()))
                    }
                    Some(Captured::Other(t)) => {
                        err(pos, format!("`{name}` is a {t}, which can't be used in the kernel"))
                    }
                    None if Some(name) == self.event.as_deref() => {
                        err(pos, format!("`{name}` is the event; use one of its fields, e.g. `{name}.pid`"))
                    }
                    None => err(pos, format!("unknown variable `{name}`")),
                }
            }
            RExpr::Dot(x, _, _) => self.dot(&x.lhs, &x.rhs, pos),
            RExpr::Index(x, _, _) => {
                let Some(map) = self.map_of(&x.lhs) else {
                    return err(pos, "only maps declared with map() can be indexed in a probe");
                };
                let key = self.key(&x.rhs)?;
                self.record_use(&map, &key, UseKind::Read, pos);
                Ok(Expr::MapGet { map: map.id(), key })
            }
            RExpr::And(list, _) | RExpr::Or(list, _) => {
                let is_and = matches!(e, RExpr::And(..));
                let mut parts = Vec::new();
                for p in list.iter() {
                    parts.push(self.cond(p)?);
                }
                let mut it = parts.into_iter();
                let first = it.next().unwrap_or(Expr::Int(is_and as i64));
                Ok(it.fold(first, |acc, p| {
                    if is_and {
                        Expr::LogicalAnd(Box::new(acc), Box::new(p))
                    } else {
                        Expr::LogicalOr(Box::new(acc), Box::new(p))
                    }
                }))
            }
            RExpr::FnCall(call, _) => self.call_expr(call.name.as_str(), &call.args, pos),
            RExpr::Stmt(block) => {
                // An if-expression: `if c { a } else { b }`.
                let stmts = block.statements();
                if let [RStmt::If(fc, _)] = stmts {
                    let c = self.cond(&fc.expr)?;
                    let a = self.block_value(fc.body.statements(), pos)?;
                    let b = self.block_value(fc.branch.statements(), pos)?;
                    if matches!(self.ty(&a), Ty::Int) != matches!(self.ty(&b), Ty::Int) {
                        return err(pos, "both branches of an if-expression must be numbers, or both strings");
                    }
                    return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
                }
                err(pos, "this block can't be used as a value in a probe")
            }
            RExpr::InterpolatedString(..) => Err(userspace_only("string interpolation", pos)),
            RExpr::FloatConstant(..) => Err(userspace_only("floating-point arithmetic", pos)),
            RExpr::Array(..) => err(pos, "arrays can only be map keys in a probe (`m[[a, b]]`)"),
            RExpr::Map(..) => Err(userspace_only("object maps", pos)),
            RExpr::MethodCall(..) => Err(userspace_only("this method call", pos)),
            _ => Err(userspace_only("this expression", pos)),
        }
    }

    /// The value of a `{ ...; value }` branch of an if-expression.
    fn block_value(&mut self, stmts: &[RStmt], pos: Position) -> Result<Expr> {
        match stmts {
            [RStmt::Expr(e)] => self.expr(e),
            [] => err(pos, "an if-expression needs an else branch with a value"),
            _ => err(pos, "if-expression branches in probes must be single values"),
        }
    }

    fn call_expr(&mut self, name: &str, args: &[RExpr], pos: Position) -> Result<Expr> {
        if let Some(op) = bin_op(name) {
            if args.len() == 2 {
                let a = self.expr(&args[0])?;
                let b = self.expr(&args[1])?;
                let (ta, tb) = (self.ty(&a), self.ty(&b));
                let strings = matches!(ta, Ty::Bytes(_)) || matches!(tb, Ty::Bytes(_));
                if strings {
                    if matches!(ta, Ty::Int) || matches!(tb, Ty::Int) {
                        return err(pos, "a string is compared with a number");
                    }
                    return match op {
                        BinOp::Eq => Ok(Expr::StrEq(Box::new(a), Box::new(b))),
                        BinOp::Ne => Ok(Expr::Unary(UnOp::Not, Box::new(Expr::StrEq(Box::new(a), Box::new(b))))),
                        BinOp::Add => Err(userspace_only("string concatenation", pos)),
                        _ => err(pos, "strings can only be compared with == and != in a probe"),
                    };
                }
                self.check_div(op, &b, pos)?;
                return Ok(fold(op, a, b));
            }
            if args.len() == 1 && name == "-" {
                let a = self.int_expr(&args[0])?;
                return Ok(match a {
                    Expr::Int(v) => Expr::Int(v.wrapping_neg()),
                    a => Expr::Unary(UnOp::Neg, Box::new(a)),
                });
            }
        }
        match (name, args.len()) {
            ("!", 1) => {
                let a = self.cond(&args[0])?;
                Ok(Expr::Unary(UnOp::Not, Box::new(a)))
            }
            ("contains", 2) => {
                // `k in m` parses as contains(m, k).
                let Some(map) = self.map_of(&args[0]) else {
                    return err(pos, "`in` works on maps declared with map() in a probe");
                };
                let key = self.key(&args[1])?;
                self.record_use(&map, &key, UseKind::Read, pos);
                Ok(Expr::MapContains { map: map.id(), key })
            }
            ("str", 1) | ("str", 2) => {
                let v = self.expr(&args[0])?;
                let max = match args.get(1) {
                    None => self.target.str_max,
                    Some(a) => match self.const_int(a) {
                        Some(n) if n > 0 && n <= 256 => n as u32,
                        _ => return err(a.position(), "str(ptr, len): len must be a constant from 1 to 256"),
                    },
                };
                match self.ty(&v) {
                    Ty::Bytes(_) => Ok(v),
                    Ty::Int => {
                        let user = self.is_user_pointer(&args[0]);
                        Ok(Expr::ReadStr { ptr: Box::new(v), max, user })
                    }
                }
            }
            ("ksym", 1) => {
                let v = self.int_expr(&args[0])?;
                Ok(Expr::Binary(BinOp::Or, Box::new(v), Box::new(Expr::Int(KSYM_TAG))))
            }
            ("count" | "sum" | "min" | "max" | "avg" | "stats" | "hist" | "lhist" | "quantiles", _) => {
                err(pos, format!("{name}() is an aggregation: assign it to a map, e.g. `m[e.comm] = {name}(...)`"))
            }
            ("exit", _) => err(pos, "exit() is a statement, not a value"),
            _ => match self.string_call(name, args, pos) {
                Some(r) => r,
                None => Err(userspace_only(&format!("`{name}(...)`"), pos)),
            },
        }
    }

    /// `e.args.X` (a `__user` pointer field) or a local holding one.
    fn user_struct_pointer(&self, e: &RExpr) -> bool {
        if let RExpr::Variable(v, _, _) = e {
            return self.lookup_local(v.1.as_str()).is_some_and(|id| self.local_user.contains(&id));
        }
        let RExpr::Dot(x, _, _) = e else { return false };
        let (chain, rest) = property_chain(&x.rhs);
        !rest && chain.len() == 2 && chain[0].0 == "args" && self.user_field(&chain[1].0)
    }

    /// `e.args.X` where X is a `__user` pointer field.
    fn is_user_pointer(&self, e: &RExpr) -> bool {
        if self.target.event.user_memory() {
            return true;
        }
        // A syscall's pointers are the caller's memory, also once saved in a
        // map or a local (`str(path[e.tid])` at sys_exit_openat).
        if self.target.event.format().is_some_and(|f| f.category == "syscalls") && !matches!(e, RExpr::Dot(..)) {
            return true;
        }
        let (Some(format), RExpr::Dot(x, _, _)) = (self.target.event.format(), e) else { return false };
        if let Some((field, _, _)) = index::indexed_arg(&x.rhs) {
            return self.user_field(field);
        }
        if let RExpr::Dot(inner, _, _) = &x.rhs {
            if let (RExpr::Property(a, _), RExpr::Property(f, _)) = (&inner.lhs, &inner.rhs) {
                if a.2.as_str() == "args" {
                    return matches!(
                        format.field(f.2.as_str()).map(|f| &f.kind),
                        Some(FieldKind::Pointer { user: true, .. })
                    );
                }
            }
        }
        false
    }

    /// A typed kernel value reached by a property chain: `e.curtask`,
    /// `e.args.X...`, `e.curtask.X...`, or `t.X...` of a local holding a BTF
    /// struct pointer. `None` for every other property access.
    fn pointer_access(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Option<Result<fields::Access>> {
        if let RExpr::FnCall(c, _) = lhs {
            // `kptr(v, "struct sock").member`.
            return (c.name == "kptr" && c.args.len() == 2).then(|| self.kptr_member(&c.args, rhs, pos));
        }
        let RExpr::Variable(v, _, _) = lhs else { return None };
        let (chain, rest) = property_chain(rhs);
        if rest || chain.is_empty() {
            return None;
        }
        let name = v.1.as_str();
        if let Some((id, to)) = self.btf_local(name) {
            // `t.pid` where `let t = e.curtask;`: members through BTF.
            let Some(btf) = self.target.btf else { return Some(err(pos, "this kernel has no BTF")) };
            let names: Vec<String> = chain.iter().map(|c| c.0.clone()).collect();
            let base = fields::Base { value: Expr::Local(id), ty: to, pointee: true, name: name.to_string() };
            let user = self.local_user.contains(&id);
            return Some(fields::walk(btf, base, &names).map(|a| user_access(a, user)).map_err(|(i, msg)| {
                let at = chain.get(i).or(chain.last()).map(|c| c.1).unwrap_or(pos);
                LowerError { pos: at, message: msg, userspace: false }
            }));
        }
        if Some(name) != self.event.as_deref() || self.lookup_local(name).is_some() {
            return None;
        }
        match chain[0].0.as_str() {
            "curtask" if chain.len() == 1 => Some(Ok(fields::Access {
                expr: Expr::Builtin(Builtin::CurTask),
                char_pointer: false,
                pointee: self.target.btf.and_then(|b| b.struct_named("task_struct")),
            })),
            "curtask" | "args" if chain.len() >= 2 => Some(self.member_chain(&chain)),
            _ => None,
        }
    }

    /// A kernel local holding a BTF struct pointer: its id and struct type.
    fn btf_local(&self, name: &str) -> Option<(LocalId, u32)> {
        let id = self.lookup_local(name)?;
        self.local_btf.get(&id).map(|to| (id, *to))
    }

    /// `e.FIELD`, `e.args.FIELD`.
    fn dot(&mut self, lhs: &RExpr, rhs: &RExpr, pos: Position) -> Result<Expr> {
        if let Some(access) = self.pointer_access(lhs, rhs, pos) {
            return access.map(|a| a.expr);
        }
        if let RExpr::Variable(v, _, _) = lhs {
            if self.btf_local(v.1.as_str()).is_some() {
                return Err(userspace_only(&format!("`{}...`", v.1), pos));
            }
        }
        let is_event = matches!(lhs, RExpr::Variable(v, _, _) if Some(v.1.as_str()) == self.event.as_deref() && self.lookup_local(v.1.as_str()).is_none());
        if let (true, Some((field, fpos, ix))) = (is_event, index::indexed_arg(rhs)) {
            return self.arg_element(field, fpos, ix).map(|(e, _)| e);
        }
        if !is_event {
            if let RExpr::MethodCall(call, _) = rhs {
                return Err(userspace_only(&format!("`.{}()`", call.name), pos));
            }
            return Err(userspace_only("this property access", pos));
        }
        match rhs {
            RExpr::Property(p, ppos) => self.event_field(p.2.as_str(), *ppos),
            RExpr::Dot(..) => {
                let (chain, rest) = property_chain(rhs);
                let names: Vec<String> = chain.iter().map(|c| c.0.clone()).collect();
                match (names.first().map(String::as_str), rest) {
                    (Some("args"), _) if names.len() == 1 => {
                        err(chain[0].1, "`e.args` needs a field name, e.g. `e.args.filename`")
                    }
                    // e.g. `e.comm.len()`: string work on a captured field.
                    (Some(first), _) => {
                        Err(userspace_only(&format!("`{}.{}...`", self.event.as_deref().unwrap_or("e"), first), pos))
                    }
                    _ => err(pos, "unsupported field access"),
                }
            }
            RExpr::MethodCall(call, mpos) if matches!(call.name.as_str(), "kstack" | "ustack") => {
                let mut words = Vec::new();
                for a in call.args.iter() {
                    match self.const_arg(a) {
                        Some(w) => words.push(w),
                        None => {
                            return err(
                                a.position(),
                                "stack arguments are a constant limit and/or a mode: \"bpftrace\", \"perf\", \"raw\"",
                            )
                        }
                    }
                }
                let mut path = vec![call.name.to_string()];
                path.extend(words);
                self.stack_expr(&path, *mpos)
            }
            RExpr::MethodCall(call, mpos) => err(
                *mpos,
                format!(
                    "`{}.{}()` isn't available on this kernel side yet",
                    self.event.as_deref().unwrap_or("e"),
                    call.name
                ),
            ),
            _ => err(pos, "unsupported field access"),
        }
    }

    /// `e.kstack`, `e.ustack(8)`, `e.kstack("perf", 3)`: `path` is the name
    /// followed by the arguments as text.
    fn stack_expr(&mut self, path: &[String], pos: Position) -> Result<Expr> {
        let user = path[0] == "ustack";
        let mut depth = self.target.stack_depth;
        let mut mode = StackMode::Bpftrace;
        for arg in &path[1..] {
            if let Ok(n) = arg.parse::<u32>() {
                if n == 0 || n > 127 {
                    return err(pos, "a stack limit must be from 1 to 127 frames");
                }
                depth = n;
            } else if let Some(m) = StackMode::parse(arg) {
                mode = m;
            } else {
                return err(pos, format!("unknown stack mode \"{arg}\" (bpftrace, perf, raw)"));
            }
        }
        if self.target.context == ContextKind::RawTracepoint && !user {
            // Raw tracepoints have no pt_regs for the kernel walker to start from.
        }
        let map = self.target.stack_map(depth, user, mode);
        Ok(Expr::StackId { map, user, lost: self.target.stack_lost })
    }

    fn event_field(&mut self, name: &str, pos: Position) -> Result<Expr> {
        Ok(match name {
            "pid" => Expr::Builtin(Builtin::Pid),
            "tid" => Expr::Builtin(Builtin::Tid),
            "uid" => Expr::Builtin(Builtin::Uid),
            "gid" => Expr::Builtin(Builtin::Gid),
            "cpu" => Expr::Builtin(Builtin::Cpu),
            "nsecs" => Expr::Builtin(Builtin::Nsecs),
            "cgroup" => Expr::Builtin(Builtin::Cgroup),
            "rand" => Expr::Builtin(Builtin::Rand),
            "comm" => Expr::Comm,
            "elapsed" => Expr::Binary(BinOp::Sub, Box::new(Expr::Builtin(Builtin::Nsecs)), Box::new(Expr::Int(self.target.start_ns))),
            "probe" => {
                str_literal(self.target.probe_name)
            }
            "args" => return err(pos, "`e.args` needs a field name, e.g. `e.args.filename`"),
            n if n.starts_with("arg") && n[3..].parse::<u32>().is_ok() => {
                let i: u32 = n[3..].parse().unwrap_or(0);
                match self.target.event.arg(i, self.target.probe_name) {
                    Some(Ok(x)) => x,
                    Some(Err(m)) => return err(pos, m),
                    None => {
                        return err(pos, format!("`{n}` isn't available for this probe type (tracepoints use e.args.NAME)"))
                    }
                }
            }
            "retval" if self.target.event.retval().is_some() => self.target.event.retval().unwrap_or(Expr::Int(0)),
            "func" if self.target.event.func().is_some() => str_literal(self.target.event.func().unwrap_or("")),
            "kstack" | "ustack" => return self.stack_expr(&[name.to_string()], pos),
            "curtask" => Expr::Builtin(Builtin::CurTask),
            "retval" | "func" => {
                return err(pos, format!("`e.{name}` isn't available for this probe type yet"))
            }
            other => {
                return err(
                    pos,
                    format!("unknown event field `{other}` (known: pid tid uid gid comm cpu nsecs elapsed cgroup rand probe args)"),
                )
            }
        })
    }

    /// `e.args.A.B...` and `e.curtask.A...`: a typed start, then struct
    /// members through BTF.
    fn member_chain(&mut self, chain: &[(String, Position)]) -> Result<fields::Access> {
        let ev = self.event.clone().unwrap_or_else(|| "e".into());
        let no_btf =
            |pos| err(pos, "this kernel has no BTF (/sys/kernel/btf/vmlinux), so struct members can't be read");
        let mut user = false;
        let (base, rest) = match chain[0].0.as_str() {
            "curtask" => {
                let Some(btf) = self.target.btf else { return no_btf(chain[0].1) };
                let Some(task) = btf.struct_named("task_struct") else { return no_btf(chain[0].1) };
                let name = format!("{ev}.curtask");
                (fields::Base { value: Expr::Builtin(Builtin::CurTask), ty: task, pointee: true, name }, &chain[1..])
            }
            _ => {
                let (field, fpos) = (&chain[1].0, chain[1].1);
                let name = format!("{ev}.args.{field}");
                if let Some(params) = self.target.event.btf_args() {
                    let Some(i) = params.iter().position(|p| &p.name == field) else {
                        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
                        return err(
                            fpos,
                            format!(
                                "{} has no argument `{field}` (arguments: {})",
                                self.target.probe_name,
                                names.join(", ")
                            ),
                        );
                    };
                    let Some(btf) = self.target.btf else { return no_btf(fpos) };
                    let value = btf_slot(btf, i as u32, params[i].ty);
                    if chain.len() == 2 {
                        let (char_pointer, pointee) = match btf.shape(params[i].ty) {
                            Shape::Pointer { to } => (btf.is_char(to), fields::composite(btf, to)),
                            _ => (false, None),
                        };
                        return Ok(fields::Access { expr: value, char_pointer, pointee });
                    }
                    (fields::Base { value, ty: params[i].ty, pointee: false, name }, &chain[2..])
                } else {
                    let value = self.tracepoint_arg(field, fpos)?;
                    let c_type = self
                        .target
                        .event
                        .format()
                        .and_then(|f| f.field(field))
                        .map(|f| f.c_type.clone())
                        .unwrap_or_default();
                    // A tracepoint field that points to a struct (`struct mm_struct *mm`,
                    // `const struct __kernel_timespec *rqtp`); a system call's
                    // pointers lead to user memory.
                    user = self.user_field(field);
                    let unqualified: Vec<&str> =
                        c_type.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "__user")).collect();
                    let unqualified = unqualified.join(" ");
                    let struct_name =
                        unqualified.strip_prefix("struct ").and_then(|t| t.strip_suffix('*')).map(str::trim);
                    let pointee = struct_name.and_then(|n| self.target.btf?.struct_named(n));
                    if chain.len() == 2 {
                        return Ok(fields::Access { expr: value, char_pointer: false, pointee });
                    }
                    let Some(id) = pointee else {
                        if self.target.btf.is_none() {
                            return no_btf(fpos);
                        }
                        return err(chain[2].1, format!("`{name}` is `{c_type}`, not a pointer to a struct"));
                    };
                    (fields::Base { value, ty: id, pointee: true, name }, &chain[2..])
                }
            }
        };
        let Some(btf) = self.target.btf else { return no_btf(chain[0].1) };
        let names: Vec<String> = rest.iter().map(|c| c.0.clone()).collect();
        fields::walk(btf, base, &names).map(|a| user_access(a, user)).map_err(|(i, msg)| {
            let pos = rest.get(i).or(rest.last()).map(|c| c.1).unwrap_or(chain[0].1);
            LowerError { pos, message: msg, userspace: false }
        })
    }

    /// Tracepoint field `field` is a `__user` pointer.
    fn user_field(&self, field: &str) -> bool {
        matches!(
            self.target.event.format().and_then(|f| f.field(field)).map(|f| &f.kind),
            Some(FieldKind::Pointer { user: true, .. })
        )
    }

    fn tracepoint_arg(&mut self, field: &str, pos: Position) -> Result<Expr> {
        if self.target.event.btf_args().is_some() {
            let chain = [("args".to_string(), pos), (field.to_string(), pos)];
            return self.member_chain(&chain).map(|a| a.expr);
        }
        let Some(format) = self.target.event.format() else {
            return err(pos, "`e.args` is only available for tracepoint probes (raw tracepoints use e.arg0..)");
        };
        let Some(f) = format.field(field) else {
            let names: Vec<&str> = format.event_fields().map(|f| f.name.as_str()).collect();
            return err(
                pos,
                format!(
                    "tracepoint {}:{} has no field `{field}` (fields: {})",
                    format.category,
                    format.name,
                    names.join(", ")
                ),
            );
        };
        Ok(match &f.kind {
            FieldKind::Int if f.size == 8 && c_int_width(&f.c_type).is_some() => {
                // Syscall formats widen every argument to 8 bytes, unsigned;
                // the C type says what the value really is (`int dfd` = -100).
                let (size, signed) = c_int_width(&f.c_type).unwrap_or((8, f.signed));
                Expr::CtxInt { offset: f.offset, size, signed }
            }
            FieldKind::Int | FieldKind::Pointer { .. } if f.size <= 8 && f.size.is_power_of_two() => Expr::CtxInt {
                offset: f.offset,
                size: f.size,
                signed: f.signed && !matches!(f.kind, FieldKind::Pointer { .. }),
            },
            FieldKind::CharArray => Expr::CtxCharArray { offset: f.offset, len: f.size },
            FieldKind::DataLocString => Expr::CtxDataLocStr { offset: f.offset, max: self.target.str_max },
            _ => return err(pos, format!("field `{field}` has type `{}`, which probes can't read yet", f.c_type)),
        })
    }
}

/// A member chain's reads, from user memory when `user`.
fn user_access(mut a: fields::Access, user: bool) -> fields::Access {
    if user {
        a.expr = fields::in_user_memory(a.expr);
    }
    a
}

/// The property names of a dot chain (`args.prev.pid` → args, prev, pid)
/// with their positions, and whether something else (a method call, an
/// index) follows them.
fn property_chain(rhs: &RExpr) -> (Vec<(String, Position)>, bool) {
    let mut out = Vec::new();
    let mut cur = rhs;
    loop {
        match cur {
            RExpr::Property(p, pos) => {
                out.push((p.2.to_string(), *pos));
                return (out, false);
            }
            RExpr::Dot(x, _, _) => match &x.lhs {
                RExpr::Property(p, pos) => {
                    out.push((p.2.to_string(), *pos));
                    cur = &x.rhs;
                }
                _ => return (out, true),
            },
            _ => return (out, true),
        }
    }
}

/// `e.pid` → ["pid"]; `e.args.filename` → ["args", "filename"]; `e.comm.len()` → ["comm"].
/// Stack arguments are constants (`resolve` gives their text).
fn event_path(rhs: &RExpr, resolve: &dyn Fn(&RExpr) -> Option<String>) -> Option<Vec<String>> {
    match rhs {
        RExpr::Property(p, _) => Some(vec![p.2.to_string()]),
        RExpr::MethodCall(call, _) if matches!(call.name.as_str(), "kstack" | "ustack") => {
            let mut path = vec![call.name.to_string()];
            for a in call.args.iter() {
                path.push(resolve(a)?);
            }
            Some(path)
        }
        RExpr::Dot(..) => {
            // `e.args.F[i]` ships F; userspace takes the element.
            if let Some((field, _, _)) = index::indexed_arg(rhs) {
                return Some(vec!["args".to_string(), field.to_string()]);
            }
            let (chain, _) = property_chain(rhs);
            (!chain.is_empty()).then(|| chain.into_iter().map(|c| c.0).collect())
        }
        _ => None,
    }
}

/// Width and signedness of a plain C integer type name.
fn c_int_width(c_type: &str) -> Option<(u32, bool)> {
    Some(match c_type.trim() {
        "int" | "signed int" | "s32" | "pid_t" | "__s32" => (4, true),
        "unsigned int" | "u32" | "__u32" | "uid_t" | "gid_t" | "umode_t" => (4, false),
        "long" | "long int" | "s64" | "ssize_t" | "loff_t" | "__s64" | "off_t" => (8, true),
        "short" | "s16" => (2, true),
        "unsigned short" | "u16" => (2, false),
        _ => return None,
    })
}

fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::Int => "number",
        Ty::Bytes(_) => "string",
    }
}

/// A statement-level call; `exit()` also ends the probe at once (as in
/// bpftrace), so none of its later statements run.
fn push_call(push: &mut impl FnMut(StmtKind), k: StmtKind) {
    let exit = matches!(k, StmtKind::Control { kind: CONTROL_EXIT, .. });
    push(k);
    if exit {
        push(StmtKind::Return);
    }
}

fn str_literal(s: &str) -> Expr {
    let bytes = s.as_bytes().to_vec();
    let len = bytes.len() as u32 + 1;
    Expr::Str { bytes, len }
}

fn bin_op(name: &str) -> Option<BinOp> {
    Some(match name {
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Mod,
        "&" => BinOp::And,
        "|" => BinOp::Or,
        "^" => BinOp::Xor,
        "<<" => BinOp::Shl,
        ">>" => BinOp::Shr,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        _ => return None,
    })
}

/// Build `a OP b`, folding constants (Rhai semantics: wrapping i64).
fn fold(op: BinOp, a: Expr, b: Expr) -> Expr {
    if let (Expr::Int(x), Expr::Int(y)) = (&a, &b) {
        let (x, y) = (*x, *y);
        let v = match op {
            BinOp::Add => Some(x.wrapping_add(y)),
            BinOp::Sub => Some(x.wrapping_sub(y)),
            BinOp::Mul => Some(x.wrapping_mul(y)),
            BinOp::Div if y != 0 => Some(x.wrapping_div(y)),
            BinOp::Mod if y != 0 => Some(x.wrapping_rem(y)),
            BinOp::And => Some(x & y),
            BinOp::Or => Some(x | y),
            BinOp::Xor => Some(x ^ y),
            BinOp::Shl | BinOp::Shr => Some(probes_ebpf::ir::shift(op == BinOp::Shl, x, y)),
            BinOp::Eq => Some((x == y) as i64),
            BinOp::Ne => Some((x != y) as i64),
            BinOp::Lt => Some((x < y) as i64),
            BinOp::Le => Some((x <= y) as i64),
            BinOp::Gt => Some((x > y) as i64),
            BinOp::Ge => Some((x >= y) as i64),
            _ => None,
        };
        if let Some(v) = v {
            return Expr::Int(v);
        }
    }
    Expr::Binary(op, Box::new(a), Box::new(b))
}
