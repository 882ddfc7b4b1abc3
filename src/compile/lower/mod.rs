//! Rhai closure AST → kernel IR for one attach point, over the statements
//! the split (`compile/split.rs`) put in the kernel: event fields
//! (`compile/event.rs`), captured top-level values (constants become
//! immediates, maps become map references), locals, control flow
//! (`stmt.rs`), expressions (`expr.rs`), map operations and aggregations
//! (`aggregate.rs`) become IR.

use std::collections::HashMap;

use probes_ebpf::ir::{AggOp, BinOp, Builtin, ContextKind, Expr, LocalId, MapId, Span, Stmt, StmtKind, Ty, UnOp};
use rhai::{ASTNode, Expr as RExpr, Position, Stmt as RStmt};

mod aggregate;
mod expr;
pub(crate) mod index;
mod record;
mod stmt;
pub(crate) mod strings;
mod whole_args;

pub(crate) use super::closure::{event_path, property_chain, ClosureBody};
pub(crate) use super::syntax::{is_aggregation, span};
pub(crate) use super::values::CapturedValue;
pub(crate) use crate::builtins::{builtin_call, builtin_call_with, Call};
pub(crate) use crate::util::{errno, signals};
pub(crate) use expr::{bin_op, fold, str_literal, ty_name};

use super::maps::{MapUse, UseKind};
use super::split::Split;
use crate::config::Config;
use crate::kernel::btf::BtfTypes;
use crate::kernel::tracepoint_format::FieldKind;
use crate::plan::maps::MapTable;
use crate::plan::site::{RecordField, Site, ValueMeaning};
use crate::probes::event::EventContext;
use crate::probes::Verdict;
use crate::script::MapHandle;
use crate::symbols::stacks::StackMode;
use probes_ebpf::ir::KernelAction;
use probes_ebpf::record::{action_code, CONTROL_CLEAR, CONTROL_EXIT, CONTROL_PRINT, CONTROL_ZERO};

/// What a closure is being compiled for: the program point (its probe,
/// context and event), the run's settings, and the maps every program
/// shares.
pub struct ProgramCtx<'a> {
    /// Full probe name (`tracepoint:syscalls:sys_enter_read`), the value of `e.probe`.
    pub probe_name: &'a str,
    /// Index of this probe, reported in control messages.
    pub probe_index: u32,
    pub context: ContextKind,
    /// What the program's return does (`deny()` needs an `lsm:` hook's).
    pub verdict: crate::probes::Verdict,
    /// What the probe type says the event holds: `e.argN`, `e.retval`,
    /// `e.func`, `e.args.*`, and whether pointers are user memory.
    pub event: &'a dyn EventContext,
    /// The kernel's types (`e.curtask`, member chains); None without BTF.
    pub btf: Option<&'a dyn BtfTypes>,
    /// Id of this probe's first userspace site (ids are global).
    pub first_site: u32,
    /// The run's settings: `--no-split`, `--unsafe`, the start time (for
    /// `e.elapsed`), `str()`'s default length, RTRACE_JOIN_MAX, the stack
    /// depth, the ring size.
    pub settings: &'a Config,
    /// Every map id (the rings, the loss counters); stack maps are added as
    /// probes ask for them.
    pub maps: &'a std::cell::RefCell<MapTable>,
}

impl ProgramCtx<'_> {
    /// The stack map for stacks of this shape.
    pub(crate) fn stack_map(&self, depth: u32, user: bool, mode: StackMode) -> MapId {
        self.maps.borrow_mut().stack(depth, user, mode)
    }

    pub(crate) fn stack_info(&self, map: MapId) -> Option<(u32, bool, StackMode)> {
        self.maps.borrow().stack_info(map)
    }

    /// The control ring buffer (print/clear/zero/exit, runtime errors).
    pub(crate) fn control_ring(&self) -> MapId {
        self.maps.borrow().control_ring()
    }

    /// The data ring buffer (userspace statements' records).
    pub(crate) fn data_ring(&self) -> MapId {
        self.maps.borrow().data_ring()
    }

    /// The per-probe lost-records array.
    pub(crate) fn lost_map(&self) -> MapId {
        self.maps.borrow().lost()
    }

    /// The reader's "about to sleep" flag (see `ir::StmtKind::Emit`).
    pub(crate) fn wake_map(&self) -> MapId {
        self.maps.borrow().wake()
    }

    /// The per-CPU counts of failed stack captures.
    pub(crate) fn stack_lost(&self) -> MapId {
        self.maps.borrow().stack_lost()
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

pub(crate) type Result<T> = std::result::Result<T, LowerError>;

pub(crate) fn err<T>(pos: Position, message: impl Into<String>) -> Result<T> {
    Err(LowerError { pos, message: message.into(), userspace: false })
}

/// The IR of one probe plus how it uses maps.
pub struct Lowered {
    pub locals: Vec<Ty>,
    pub body: Vec<Stmt>,
    pub uses: Vec<MapUse>,
    /// Userspace statements and what their records carry.
    pub sites: Vec<Site>,
    /// Where each statement runs, in source order (for `--explain`).
    pub split: Vec<crate::plan::site::Placement>,
}

/// What one closure is lowered from: its body, the values it captured
/// (`values.rs`), the name of its event parameter, and the split
/// (`split.rs`) that put each statement in the kernel or in userspace.
pub struct Closure<'a> {
    pub body: &'a ClosureBody,
    pub captures: &'a HashMap<String, CapturedValue>,
    pub event: Option<&'a str>,
    pub split: &'a Split,
}

/// Lower a split closure for `target`. A string local is as wide as the
/// longest value any assignment stores in it: when a later assignment is
/// longer than the `let`, the closure is lowered again with the wider size.
pub fn lower(closure: &Closure, target: &ProgramCtx) -> Result<Lowered> {
    let mut widths = HashMap::new();
    for _ in 0..8 {
        let (lowered, wanted) = lower_pass(closure, target, &widths)?;
        if wanted.iter().all(|(at, w)| widths.get(at).is_some_and(|h| h >= w)) {
            return Ok(lowered);
        }
        for (at, w) in wanted {
            let h = widths.entry(at).or_insert(0);
            *h = (*h).max(w);
        }
    }
    lower_pass(closure, target, &widths).map(|(l, _)| l)
}

/// One lowering pass; string locals declared at a position in `widths` are
/// at least that wide. Returns the widths assignments asked for too.
pub(crate) fn lower_pass(
    closure: &Closure,
    target: &ProgramCtx,
    widths: &HashMap<Span, u32>,
) -> Result<(Lowered, HashMap<Span, u32>)> {
    let Closure { body, captures, event, split } = *closure;
    // Top-level variables the closure assigns live in userspace.
    let mut userspace_vars = HashMap::new();
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            if let Some(ASTNode::Stmt(RStmt::Assignment(x))) = path.last() {
                if let RExpr::Variable(v, _, pos) = &x.1.lhs {
                    if matches!(captures.get(v.1.as_str()), Some(c) if !matches!(c, CapturedValue::Map(_))) {
                        userspace_vars.entry(v.1.to_string()).or_insert((*pos, None));
                    }
                }
            }
            true
        });
    }
    let order = split.order.clone();
    let mut l = Lowerer {
        split,
        target,
        captures,
        event: event.map(str::to_string),
        scopes: vec![Vec::new()],
        locals: Vec::new(),
        uses: Vec::new(),
        sites: Vec::new(),
        next_site: target.first_site,
        userspace_vars,
        local_sems: HashMap::new(),
        pointers: Vec::new(),
        local_btf: HashMap::new(),
        widths,
        local_user: Default::default(),
        local_decl: HashMap::new(),
        wanted_widths: HashMap::new(),
        next_decl: 0,
        entry_nsecs: None,
        entry_rand: None,
        read_once: read_once(body, event, split),
    };
    let mut stmts = l.block(&body.body)?;
    let entry = [(l.entry_nsecs, Builtin::Nsecs), (l.entry_rand, Builtin::Rand)];
    for (local, value) in entry.into_iter().rev() {
        if let Some(id) = local {
            stmts.insert(0, Stmt { kind: StmtKind::SetLocal(id, Expr::Builtin(value)), span: Span::default() });
        }
    }
    Ok((Lowered { locals: l.locals, body: stmts, uses: l.uses, sites: l.sites, split: order }, l.wanted_widths))
}

/// Whether `e.nsecs` (with `e.elapsed`) and `e.rand` are each read at one
/// place only, outside loops, and no record needs the event's time.
fn read_once(body: &ClosureBody, event: Option<&str>, split: &Split) -> (bool, bool) {
    let (mut time, mut rand, mut loops) = (0, 0, false);
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            match path.last() {
                Some(ASTNode::Stmt(RStmt::For(..) | RStmt::While(..) | RStmt::Do(..))) => loops = true,
                Some(ASTNode::Expr(RExpr::Dot(x, _, _))) if name_is(&x.lhs, event) => {
                    if let RExpr::Property(p, _) = &x.rhs {
                        match crate::builtins::event_field(p.2.as_str()).map(|f| f.0) {
                            Some(crate::builtins::Field::Nsecs | crate::builtins::Field::Elapsed) => time += 1,
                            Some(crate::builtins::Field::Rand) => rand += 1,
                            _ => {}
                        }
                    }
                }
                Some(ASTNode::Expr(me @ RExpr::Variable(v, _, _)))
                    if Some(v.1.as_str()) == event
                        && !matches!(path.len().checked_sub(2).map(|i| &path[i]),
                            Some(ASTNode::Expr(RExpr::Dot(x, _, _))) if std::ptr::eq(&x.lhs, *me)) =>
                {
                    // A whole `e` holds both.
                    time += 2;
                    rand += 2;
                }
                _ => {}
            }
            true
        });
    }
    let once = !loops && !split.carries();
    (once && time <= 1, once && rand <= 1)
}

fn name_is(e: &RExpr, name: Option<&str>) -> bool {
    matches!(e, RExpr::Variable(v, _, _) if Some(v.1.as_str()) == name)
}

pub(crate) struct Lowerer<'a> {
    /// Where each statement runs, decided before lowering.
    pub(crate) split: &'a Split,
    pub(crate) target: &'a ProgramCtx<'a>,
    pub(crate) captures: &'a HashMap<String, CapturedValue>,
    pub(crate) event: Option<String>,
    /// Declarations visible in each open block, in order, as Rhai's scope
    /// holds them: kernel locals (`Some(id)`) and userspace ones (`None`).
    pub(crate) scopes: Vec<Vec<(String, Option<LocalId>, u32)>>,
    /// The next declaration id (see `Site::decls`).
    pub(crate) next_decl: u32,
    /// The event's time and random number, read once at the start of the
    /// program when the closure uses them: one event, one value.
    pub(crate) entry_nsecs: Option<LocalId>,
    pub(crate) entry_rand: Option<LocalId>,
    /// The closure reads the time or random number at one place that runs
    /// at most once per event: no local is needed.
    pub(crate) read_once: (bool, bool),
    pub(crate) locals: Vec<Ty>,
    pub(crate) uses: Vec<MapUse>,
    pub(crate) sites: Vec<Site>,
    pub(crate) next_site: u32,
    /// Variables computed in userspace: where, and by which site (None: a
    /// top-level variable the closure assigns).
    pub(crate) userspace_vars: HashMap<String, (Position, Option<u32>)>,
    /// Locals holding stacks or symbols.
    pub(crate) local_sems: HashMap<LocalId, ValueMeaning>,
    /// Kernel values of pointer type (BTF members), which print in hex.
    pub(crate) pointers: Vec<Expr>,
    /// Locals holding kernel pointers to BTF structs: the struct's type id.
    pub(crate) local_btf: HashMap<LocalId, u32>,
    /// Locals holding pointers to structs in user memory.
    pub(crate) local_user: std::collections::HashSet<LocalId>,
    /// Least widths of string locals, by the position of their `let`.
    pub(crate) widths: &'a HashMap<Span, u32>,
    /// Where each local was declared.
    pub(crate) local_decl: HashMap<LocalId, Span>,
    /// Widths later assignments need (see [`lower`]).
    pub(crate) wanted_widths: HashMap<Span, u32>,
}

pub(crate) fn at(pos: Position) -> String {
    crate::script::position_text(pos)
}

pub(crate) fn userspace_only(what: &str, pos: Position) -> LowerError {
    LowerError { pos, message: format!("{what} runs in userspace"), userspace: true }
}

/// A userspace-only value reached a statement that must run in the kernel
/// (an aggregation): that is an error naming both places.
pub(crate) fn kernel_needs(e: LowerError) -> LowerError {
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
pub(crate) const KSYM_TAG: i64 = 0;

impl<'a> Lowerer<'a> {
    pub(crate) fn lookup_local(&self, name: &str) -> Option<LocalId> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|(n, _, _)| n == name).and_then(|(_, id, _)| *id)
    }

    pub(crate) fn new_local(&mut self, name: &str, ty: Ty) -> LocalId {
        let id = self.locals.len() as LocalId;
        self.locals.push(ty);
        let decl = self.new_decl();
        self.scopes.last_mut().unwrap().push((name.to_string(), Some(id), decl));
        id
    }

    pub(crate) fn new_decl(&mut self) -> u32 {
        self.next_decl += 1;
        self.next_decl
    }

    /// A local outside every scope, set once at the start of the program.
    fn entry_local(slot: &mut Option<LocalId>, locals: &mut Vec<Ty>) -> LocalId {
        *slot.get_or_insert_with(|| {
            locals.push(Ty::Int);
            locals.len() as LocalId - 1
        })
    }

    /// `e.nsecs`: the time the program started, read once per event.
    pub(crate) fn event_nsecs(&mut self) -> Expr {
        if self.read_once.0 {
            return Expr::Builtin(Builtin::Nsecs);
        }
        Expr::Local(Self::entry_local(&mut self.entry_nsecs, &mut self.locals))
    }

    /// `e.rand`: one random number per event.
    pub(crate) fn event_rand(&mut self) -> Expr {
        if self.read_once.1 {
            return Expr::Builtin(Builtin::Rand);
        }
        Expr::Local(Self::entry_local(&mut self.entry_rand, &mut self.locals))
    }

    pub(crate) fn ty(&self, e: &Expr) -> Ty {
        e.ty(&self.locals)
    }

    pub(crate) fn const_int(&self, e: &RExpr) -> Option<i64> {
        match e {
            RExpr::IntegerConstant(v, _) => Some(*v),
            RExpr::Variable(v, _, _) => match self.captures.get(v.1.as_str()) {
                Some(CapturedValue::Int(i)) if self.lookup_local(v.1.as_str()).is_none() => Some(*i),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a kernel value is a boolean in Rhai (a comparison, `&&`,
    /// `||`, `!`, `in`, `true`/`false`, a bool local, an if-expression of
    /// bools): userspace gets it back as a bool, not 0/1.
    pub(crate) fn is_bool(&self, e: &RExpr) -> bool {
        match e {
            RExpr::BoolConstant(..) | RExpr::And(..) | RExpr::Or(..) => true,
            RExpr::FnCall(call, _) => {
                matches!(call.name.as_str(), "==" | "!=" | "<" | "<=" | ">" | ">=" | "!" | "contains" | "strcontains")
            }
            RExpr::Variable(v, _, _) => match self.lookup_local(v.1.as_str()) {
                Some(id) => self.local_sems.get(&id) == Some(&ValueMeaning::Bool),
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
    pub(crate) fn const_arg(&self, e: &RExpr) -> Option<String> {
        match e {
            RExpr::StringConstant(m, _) => Some(m.to_string()),
            RExpr::Variable(v, _, _) if self.lookup_local(v.1.as_str()).is_none() => {
                match self.captures.get(v.1.as_str()) {
                    Some(CapturedValue::Int(i)) => Some(i.to_string()),
                    Some(CapturedValue::Str(s)) => Some(s.clone()),
                    _ => None,
                }
            }
            other => self.const_int(other).map(|i| i.to_string()),
        }
    }

    /// A captured map referenced by a variable expression.
    pub(crate) fn map_of(&self, e: &RExpr) -> Option<MapHandle> {
        if let RExpr::Variable(v, _, _) = e {
            if self.lookup_local(v.1.as_str()).is_none() {
                if let Some(CapturedValue::Map(m)) = self.captures.get(v.1.as_str()) {
                    return Some(m.clone());
                }
            }
        }
        None
    }

    pub(crate) fn key(&mut self, e: &RExpr) -> Result<Vec<Expr>> {
        match e {
            RExpr::Array(parts, _) => parts.iter().map(|p| self.expr(p)).collect(),
            // `m[()]`: the one value of a keyless map.
            RExpr::Unit(_) => Ok(Vec::new()),
            other => Ok(vec![self.expr(other)?]),
        }
    }

    pub(crate) fn record_use(&mut self, map: &MapHandle, key: &[Expr], kind: UseKind, pos: Position) {
        let key_sems = key.iter().map(|k| self.sem(k)).collect();
        let key = key.iter().map(|k| self.ty(k)).collect();
        let value_meaning = ValueMeaning::Plain;
        self.uses.push(MapUse { map: map.id(), key, key_sems, value_meaning, kind, at: at(pos) });
    }

    /// How a value prints: stacks and `ksym()` are integers shown as symbols.
    pub(crate) fn sem(&self, e: &Expr) -> ValueMeaning {
        match e {
            Expr::StackId { map, user, .. } => match self.target.stack_info(*map) {
                Some((_, _, mode)) => ValueMeaning::Stack { map: *map, user: *user, mode },
                None => ValueMeaning::Plain,
            },
            Expr::Local(id) => self.local_sems.get(id).copied().unwrap_or(ValueMeaning::Plain),
            Expr::ReadBuf { .. } => ValueMeaning::Buf,
            e if self.is_pointer(e) => ValueMeaning::Ptr,
            Expr::Binary(BinOp::Or, a, b) if **b == Expr::Int(KSYM_TAG) => {
                let _ = a;
                ValueMeaning::Ksym
            }
            e => crate::compile::syntax::name_meaning(e).map_or(ValueMeaning::Plain, ValueMeaning::Name),
        }
    }
}
