//! IR → eBPF instructions.
//!
//! One pass over the structured IR. Temporaries live in the callee-saved
//! registers r6–r9 (so helper calls never clobber them) and spill to the stack
//! when an expression needs more; r0–r5 are scratch around helper calls; the
//! context pointer is kept at `fp-8`. Locals, map keys, strings and values get
//! stack slots from a bump allocator that is rewound after every statement.
//! Every instruction records the script position of the statement it came
//! from, for `--explain` and for translating verifier errors.
//!
//! This file holds the driver and statement dispatch; `alloc` the registers,
//! stack and jump patching; `expr` expressions and conditions; `maps` map
//! keys, lookups, updates and aggregations; `aggread` kernel reads of
//! aggregation maps; `emit` records and control messages; `checks` the
//! `-k` counting of failed helper calls.

use crate::helpers as h;
use crate::insn::*;
use crate::ir::*;

mod aggread;
mod alloc;
mod arith;
mod checks;
mod control;
mod emit;
mod expr;
mod maps;
mod shift;
mod strings;

/// Kernel limit on a BPF program's stack.
pub const MAX_STACK: i32 = 512;
/// Upper bound on generated instructions (the kernel allows 1M for root; the
/// verifier gets slow long before that).
pub const MAX_INSNS: usize = 100_000;

const CTX_SLOT: i16 = -8;
/// Holds the right operand for one instruction when `int_keeping` had to give
/// the held register to it (not a temporary: never in the free list).
const SPILL_SCRATCH: Reg = R5;
const BPF_ANY: i32 = 0;
/// A stack memo slot not taken yet in this event (`get_stackid` returns an
/// id or a small negative errno, never this).
const STACK_UNSET: i32 = i32::MIN;
const BPF_NOEXIST: i32 = 1;
/// Errors that are ordinary outcomes of a map call: the key is missing
/// (delete), or another CPU inserted it first (insert-if-missing).
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;

/// Generated code for one program.
#[derive(Clone, Debug)]
pub struct Generated {
    pub insns: Vec<Insn>,
    /// Script position of each instruction (same length as `insns`).
    pub spans: Vec<Span>,
    /// `(instruction index, map id)` of every `BPF_LD_IMM64` that needs a map fd.
    pub map_relocs: Vec<(usize, MapId)>,
    /// Stack bytes used.
    pub stack_size: u32,
    /// The helper calls checked under `-k`/`-kk`, by slot (empty without).
    pub helper_sites: Vec<HelperSite>,
}

pub use checks::HelperSite;

#[derive(Clone, Debug, PartialEq)]
pub struct CodegenError {
    pub span: Span,
    pub message: String,
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.span, self.message)
    }
}

impl std::error::Error for CodegenError {}

type Result<T> = std::result::Result<T, CodegenError>;

/// Generate code for `prog`.
pub fn generate(prog: &Program) -> Result<Generated> {
    let mut g = Gen {
        prog,
        insns: Vec::new(),
        spans: Vec::new(),
        map_relocs: Vec::new(),
        span: Span::default(),
        free: vec![R9, R8, R7, R6],
        stack_used: 8,
        stack_max: 8,
        local_slots: Vec::new(),
        stack_memo: Vec::new(),
        long_jump: None,
        helper_sites: Vec::new(),
        arith_fails: Vec::new(),
        arith_exits: Vec::new(),
        wrapping: false,
    };
    g.emit(Insn::store(8, FP, CTX_SLOT, R1));
    for ty in &prog.locals {
        let off = g.alloc(ty.slot_size())?;
        g.local_slots.push(off);
    }
    let mut stack_maps = Vec::new();
    stack_ids_in(&prog.body, &mut stack_maps);
    for map in stack_maps {
        let off = g.alloc(8)?;
        g.emit(Insn::store_imm(8, FP, off, STACK_UNSET));
        g.stack_memo.push((map, off));
    }
    if !g.block(&prog.body)? {
        g.emit(Insn::mov_imm(R0, 0));
        g.emit(Insn::exit());
    }
    g.arith_fail_exits(true)?;
    if let Some(span) = g.long_jump {
        return Err(CodegenError {
            span,
            message: "a jump here spans more than 32767 BPF instructions; lower loop counts".into(),
        });
    }
    if g.insns.len() > MAX_INSNS {
        return Err(g.err(format!(
            "the probe compiles to {} BPF instructions (limit {MAX_INSNS}); reduce loop counts",
            g.insns.len()
        )));
    }
    Ok(Generated {
        insns: g.insns,
        spans: g.spans,
        map_relocs: g.map_relocs,
        stack_size: g.stack_max as u32,
        helper_sites: g.helper_sites,
    })
}

struct Gen<'a> {
    prog: &'a Program,
    insns: Vec<Insn>,
    spans: Vec<Span>,
    map_relocs: Vec<(usize, MapId)>,
    span: Span,
    /// Free temporaries; allocation pops from the end.
    free: Vec<Reg>,
    stack_used: i32,
    stack_max: i32,
    local_slots: Vec<i16>,
    /// Per stack map used: the slot holding this event's `get_stackid` result
    /// ([`STACK_UNSET`] until taken).
    stack_memo: Vec<(MapId, i16)>,
    /// Span of the first jump whose offset does not fit in 16 bits.
    long_jump: Option<Span>,
    /// Jumps taken on an arithmetic error, with the error's code.
    arith_fails: Vec<(usize, i64)>,
    /// Error exits made so far: where, and for which error.
    arith_exits: Vec<(usize, i64)>,
    /// Arithmetic rtrace adds itself (an average's division): no checks.
    wrapping: bool,
    /// Helper calls checked so far (`-k`).
    helper_sites: Vec<HelperSite>,
}

/// Indices of forward jumps waiting for their target.
type Patches = Vec<usize>;

impl Gen<'_> {
    // ---- statements ----

    /// Code for `stmts`; true when control never falls out of the end (the
    /// block returns on every path). Statements after a `Return` are never
    /// reached and get no code (the verifier refuses unreachable code).
    fn block(&mut self, stmts: &[Stmt]) -> Result<bool> {
        for s in stmts {
            let ends = self.stmt(s)?;
            // A statement's arithmetic error exits come right after it, so
            // that its checks jump a short way.
            self.arith_fail_exits(ends)?;
            if ends {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn stmt(&mut self, s: &Stmt) -> Result<bool> {
        let saved_span = self.span;
        let mark = self.stack_used;
        self.span = s.span;
        let mut ends = false;
        match &s.kind {
            StmtKind::SetLocal(id, e) => self.set_local(*id, e)?,
            StmtKind::If { cond, then, otherwise } => {
                let to_else = self.branch_unless(cond)?;
                let then_ends = self.block(then)?;
                if otherwise.is_empty() {
                    self.patch_all_here(to_else);
                } else {
                    let to_end = (!then_ends).then(|| self.emit(Insn::ja(0)));
                    self.patch_all_here(to_else);
                    ends = self.block(otherwise)? && then_ends;
                    if let Some(j) = to_end {
                        self.patch_here(j);
                    }
                }
            }
            StmtKind::Repeat { var, start, count, body } => {
                let slot = self.local_slots[*var as usize];
                for i in 0..*count as i64 {
                    self.load_imm(R0, start + i);
                    self.emit(Insn::store(8, FP, slot, R0));
                    if self.block(body)? {
                        // The first pass returns: later ones are never reached.
                        ends = true;
                        break;
                    }
                    if self.insns.len() > MAX_INSNS {
                        return Err(self
                            .err(format!("the unrolled loop exceeds {MAX_INSNS} BPF instructions; lower its count")));
                    }
                }
            }
            StmtKind::MapStore { map, key, value } => self.map_store(*map, key, value)?,
            StmtKind::MapUpdate { map, key, op, value } => self.map_update(*map, key, *op, value)?,
            StmtKind::Aggregate { map, key, op, value } => self.aggregate(*map, key, *op, value.as_ref())?,
            StmtKind::MapDelete { map, key } => {
                let key_off = self.build_key(*map, key, None)?;
                self.load_map(R1, *map);
                self.emit(Insn::mov_reg(R2, FP));
                self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
                self.emit(Insn::call(h::MAP_DELETE_ELEM));
                self.check_helper_unless(h::MAP_DELETE_ELEM, Some(ENOENT))?;
            }
            StmtKind::Control { ring, lost, kind, probe, arg } => self.control((*ring, *lost), *kind, *probe, arg)?,
            StmtKind::Emit { ring, lost, wake, site, probe, fields, wake_bytes } => {
                // What a record carries for userspace is evaluated there
                // again where it is used (a map read's key): an error is
                // Rhai's to raise, at its place in the statements.
                self.wrapping = true;
                let sent = self.emit_record((*ring, *lost, *wake), *site, *probe, fields, *wake_bytes);
                self.wrapping = false;
                sent?;
            }
            StmtKind::Act { action, ring, lost, probe, code, perform } => {
                self.audit((*ring, *lost), *probe, *code)?;
                match action {
                    KernelAction::Signal(sig) if *perform => {
                        self.emit(Insn::mov_imm(R1, *sig as i32));
                        self.emit(Insn::call(h::SEND_SIGNAL));
                    }
                    KernelAction::Signal(_) => {}
                    KernelAction::Deny(_) | KernelAction::Override(_) => {
                        let value = action.program_return().filter(|_| *perform).unwrap_or(0);
                        self.emit(Insn::mov_imm(R0, value));
                        self.emit(Insn::exit());
                        ends = true;
                    }
                }
            }
            StmtKind::Return => {
                self.emit(Insn::mov_imm(R0, 0));
                self.emit(Insn::exit());
                ends = true;
            }
        }
        self.stack_used = mark;
        self.span = saved_span;
        Ok(ends)
    }

    fn set_local(&mut self, id: LocalId, e: &Expr) -> Result<()> {
        let slot = self.local_slots[id as usize];
        match self.local_ty(id) {
            Ty::Int => {
                let r = self.int(e)?;
                self.emit(Insn::store(8, FP, slot, r));
                self.release(r);
            }
            Ty::Bytes(n) => self.bytes(e, slot, n)?,
        }
        Ok(())
    }
}

/// The stack maps `StackId`s in `stmts` capture into, each once.
fn stack_ids_in(stmts: &[Stmt], out: &mut Vec<MapId>) {
    fn expr(e: &Expr, out: &mut Vec<MapId>) {
        match e {
            Expr::StackId { map, .. } => {
                if !out.contains(map) {
                    out.push(*map);
                }
            }
            Expr::ReadMem { addr: a, .. } | Expr::ReadStr { ptr: a, .. } | Expr::Unary(_, a) => expr(a, out),
            Expr::Binary(_, a, b)
            | Expr::LogicalAnd(a, b)
            | Expr::LogicalOr(a, b)
            | Expr::StrEq(a, b)
            | Expr::StrSearch(_, a, b)
            | Expr::ReadBuf { ptr: a, len: b, .. } => {
                expr(a, out);
                expr(b, out);
            }
            Expr::Cond(c, a, b) => {
                expr(c, out);
                expr(a, out);
                expr(b, out);
            }
            Expr::MapGet { key, .. } | Expr::MapContains { key, .. } => key.iter().for_each(|k| expr(k, out)),
            Expr::Int(_)
            | Expr::Str { .. }
            | Expr::Local(_)
            | Expr::Builtin(_)
            | Expr::Comm
            | Expr::CtxInt { .. }
            | Expr::CtxCharArray { .. }
            | Expr::CtxDataLocStr { .. } => {}
        }
    }
    for s in stmts {
        match &s.kind {
            StmtKind::SetLocal(_, e) | StmtKind::Control { arg: e, .. } => expr(e, out),
            StmtKind::If { cond, then, otherwise } => {
                expr(cond, out);
                stack_ids_in(then, out);
                stack_ids_in(otherwise, out);
            }
            StmtKind::Repeat { body, .. } => stack_ids_in(body, out),
            StmtKind::MapStore { key, value, .. } | StmtKind::MapUpdate { key, value, .. } => {
                key.iter().for_each(|k| expr(k, out));
                expr(value, out);
            }
            StmtKind::Aggregate { key, value, .. } => {
                key.iter().for_each(|k| expr(k, out));
                value.iter().for_each(|v| expr(v, out));
            }
            StmtKind::MapDelete { key, .. } => key.iter().for_each(|k| expr(k, out)),
            StmtKind::Emit { fields, .. } => fields.iter().for_each(|f| expr(f, out)),
            StmtKind::Return | StmtKind::Act { .. } => {}
        }
    }
}
