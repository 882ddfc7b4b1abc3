//! IR → eBPF instructions.
//!
//! One pass over the structured IR. Temporaries live in the callee-saved
//! registers r6–r9 (so helper calls never clobber them) and spill to the stack
//! when an expression needs more; r0–r5 are scratch around helper calls; the
//! context pointer is kept at `fp-8`. Locals, map keys, strings and values get
//! stack slots from a bump allocator that is rewound after every statement.
//! Every instruction records the script position of the statement it came
//! from, for `--explain` and for translating verifier errors.

use crate::helpers as h;
use crate::insn::*;
use crate::ir::*;

mod aggread;
mod control;
mod shift;

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
}

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
    Ok(Generated { insns: g.insns, spans: g.spans, map_relocs: g.map_relocs, stack_size: g.stack_max as u32 })
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
}

/// Indices of forward jumps waiting for their target.
type Patches = Vec<usize>;

impl<'a> Gen<'a> {
    fn err(&self, message: impl Into<String>) -> CodegenError {
        CodegenError { span: self.span, message: message.into() }
    }

    fn emit(&mut self, insn: Insn) -> usize {
        self.insns.push(insn);
        self.spans.push(self.span);
        self.insns.len() - 1
    }

    fn emit2(&mut self, pair: [Insn; 2]) -> usize {
        let at = self.emit(pair[0]);
        self.emit(pair[1]);
        at
    }

    fn load_imm(&mut self, reg: Reg, v: i64) {
        if v >= i32::MIN as i64 && v <= i32::MAX as i64 {
            self.emit(Insn::mov_imm(reg, v as i32));
        } else {
            self.emit2(Insn::ld_imm64(reg, v));
        }
    }

    fn load_map(&mut self, reg: Reg, map: MapId) {
        let at = self.emit2(Insn::ld_map(reg, map));
        self.map_relocs.push((at, map));
    }

    fn here(&self) -> usize {
        self.insns.len()
    }

    /// Point the jump at `at` to the next instruction emitted.
    fn patch_here(&mut self, at: usize) {
        let off = self.here() as i64 - at as i64 - 1;
        if off > i16::MAX as i64 && self.long_jump.is_none() {
            self.long_jump = Some(self.spans[at]);
        }
        self.insns[at].off = off as i16;
    }

    fn patch_all_here(&mut self, patches: Patches) {
        for at in patches {
            self.patch_here(at);
        }
    }

    fn alloc(&mut self, size: u32) -> Result<i16> {
        let size = ((size + 7) & !7) as i32;
        self.stack_used += size;
        if self.stack_used > MAX_STACK {
            return Err(
                self.err("the probe needs more than 512 bytes of BPF stack; use shorter str() lengths or smaller keys")
            );
        }
        self.stack_max = self.stack_max.max(self.stack_used);
        Ok(-self.stack_used as i16)
    }

    fn reg(&mut self) -> Result<Reg> {
        self.free.pop().ok_or_else(|| self.err("expression too complex; split it with `let`"))
    }

    fn release(&mut self, r: Reg) {
        if r == SPILL_SCRATCH {
            return;
        }
        debug_assert!(!self.free.contains(&r));
        self.free.push(r);
    }

    fn take_specific(&mut self, r: Reg) {
        let i = self.free.iter().position(|&x| x == r).expect("register is free");
        self.free.remove(i);
    }

    fn zero_stack(&mut self, off: i16, size: u32) {
        for i in (0..size as i16).step_by(8) {
            self.emit(Insn::store_imm(8, FP, off + i, 0));
        }
    }

    fn local_ty(&self, id: LocalId) -> Ty {
        self.prog.locals[id as usize]
    }

    // ---- statements ----

    /// Code for `stmts`; true when control never falls out of the end (the
    /// block returns on every path). Statements after a `Return` are never
    /// reached and get no code (the verifier refuses unreachable code).
    fn block(&mut self, stmts: &[Stmt]) -> Result<bool> {
        for s in stmts {
            if self.stmt(s)? {
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
            }
            StmtKind::Control { ring, lost, kind, probe, arg } => self.control((*ring, *lost), *kind, *probe, arg)?,
            StmtKind::Emit { ring, lost, wake, site, probe, fields, wake_bytes } => {
                self.emit_record((*ring, *lost, *wake), *site, *probe, fields, *wake_bytes)?;
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

    /// Assemble a record on the stack and `ringbuf_output` it.
    fn emit_record(
        &mut self,
        (ring, lost, wake): (MapId, MapId, Option<MapId>),
        site: u32,
        probe: u32,
        fields: &[Expr],
        wake_bytes: u32,
    ) -> Result<()> {
        let size: u32 = 8 + fields.iter().map(|f| self.ty(f).slot_size()).sum::<u32>();
        let buf = self.alloc(size)?;
        self.emit(Insn::store_imm(4, FP, buf, site as i32));
        self.emit(Insn::store_imm(4, FP, buf + 4, 0));
        let mut off = buf + 8;
        for f in fields {
            match self.ty(f) {
                Ty::Int => {
                    let r = self.int(f)?;
                    self.emit(Insn::store(8, FP, off, r));
                    self.release(r);
                }
                Ty::Bytes(n) => self.bytes(f, off, n)?,
            }
            off += self.ty(f).slot_size() as i16;
        }
        // Batched wake-ups: wake the reader only when enough data is pending,
        // or when it said it is about to sleep (the first record after that
        // lowers the flag and wakes it).
        const BPF_RB_AVAIL_DATA: i32 = 0;
        const BPF_RB_NO_WAKEUP: i32 = 1;
        const BPF_RB_FORCE_WAKEUP: i32 = 2;
        let flags = self.alloc(8)?;
        let mut woken = None;
        if let Some(wake) = wake {
            let key = self.alloc(8)?;
            self.emit(Insn::store_imm(8, FP, key, 0));
            let missing = self.lookup(wake, key);
            self.emit(Insn::load(8, R1, R0, 0));
            let awake = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
            self.emit(Insn::store_imm(8, R0, 0, 0));
            self.emit(Insn::store_imm(8, FP, flags, BPF_RB_FORCE_WAKEUP));
            woken = Some(self.emit(Insn::ja(0)));
            self.patch_all_here(missing);
            self.patch_here(awake);
        }
        self.load_map(R1, ring);
        self.emit(Insn::mov_imm(R2, BPF_RB_AVAIL_DATA));
        self.emit(Insn::call(h::RINGBUF_QUERY));
        self.emit(Insn::mov_imm(R4, BPF_RB_NO_WAKEUP));
        self.emit(Insn::jmp_imm(Cond::Lt, R0, wake_bytes as i32, 1));
        self.emit(Insn::mov_imm(R4, BPF_RB_FORCE_WAKEUP));
        self.emit(Insn::store(8, FP, flags, R4));
        if let Some(at) = woken {
            self.patch_here(at);
        }
        self.emit(Insn::load(8, R4, FP, flags));
        self.load_map(R1, ring);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, buf as i32));
        self.emit(Insn::mov_imm(R3, size as i32));
        self.emit(Insn::call(h::RINGBUF_OUTPUT));
        let sent = self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0));
        // Count the loss in lost[probe].
        let key = self.alloc(8)?;
        self.emit(Insn::store_imm(8, FP, key, probe as i32));
        let missing = self.lookup(lost, key);
        self.emit(Insn::load(8, R1, R0, 0));
        self.emit(Insn::alu_imm(Alu::Add, R1, 1));
        self.emit(Insn::store(8, R0, 0, R1));
        self.patch_all_here(missing);
        self.patch_here(sent);
        Ok(())
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

    /// Build the key of `map` on the stack; returns its offset. `bucket` is the
    /// extra trailing part of histogram keys.
    fn build_key(&mut self, map: MapId, key: &[Expr], bucket: Option<Reg>) -> Result<i16> {
        let layout = self.prog.maps[map as usize].clone();
        if layout.key.len() != key.len() {
            return Err(self.err(format!(
                "map used with {} key parts here but {} elsewhere",
                key.len(),
                layout.key.len()
            )));
        }
        let size = layout.key_size().max(8);
        let base = self.alloc(size)?;
        if layout.key.is_empty() && bucket.is_none() {
            self.emit(Insn::store_imm(8, FP, base, 0));
            return Ok(base);
        }
        let mut off = base;
        for (part, ty) in key.iter().zip(&layout.key) {
            match ty {
                Ty::Int => {
                    let r = self.int(part)?;
                    self.emit(Insn::store(8, FP, off, r));
                    self.release(r);
                }
                Ty::Bytes(n) => self.bytes(part, off, *n)?,
            }
            off += ty.slot_size() as i16;
        }
        if let Some(b) = bucket {
            self.emit(Insn::store(8, FP, off, b));
        }
        Ok(base)
    }

    /// `r0 = lookup(map, key)`; jumps collected in the result are taken when
    /// the key is missing.
    fn lookup(&mut self, map: MapId, key_off: i16) -> Patches {
        self.load_map(R1, map);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
        self.emit(Insn::call(h::MAP_LOOKUP_ELEM));
        vec![self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0))]
    }

    /// `r0 = pointer to the value of key`, inserting a zeroed value first when
    /// the key is missing. Jumps in the result are taken if that still fails
    /// (map full).
    fn lookup_or_init(&mut self, map: MapId, key_off: i16) -> Result<Patches> {
        let value_size = self.prog.maps[map as usize].value_size();
        let missing = self.lookup(map, key_off);
        let found = self.emit(Insn::ja(0));
        self.patch_all_here(missing);
        let zero = self.alloc(value_size)?;
        self.zero_stack(zero, value_size);
        self.load_map(R1, map);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
        self.emit(Insn::mov_reg(R3, FP));
        self.emit(Insn::alu_imm(Alu::Add, R3, zero as i32));
        self.emit(Insn::mov_imm(R4, BPF_NOEXIST));
        self.emit(Insn::call(h::MAP_UPDATE_ELEM));
        let failed = self.lookup(map, key_off);
        self.patch_here(found);
        Ok(failed)
    }

    fn map_store(&mut self, map: MapId, key: &[Expr], value: &Expr) -> Result<()> {
        let ValueKind::Value(ty) = self.prog.maps[map as usize].value else {
            return Err(self.err("cannot assign a plain value to an aggregation map"));
        };
        let val_off = self.alloc(ty.slot_size())?;
        match ty {
            Ty::Int => {
                let r = self.int(value)?;
                self.emit(Insn::store(8, FP, val_off, r));
                self.release(r);
            }
            Ty::Bytes(n) => self.bytes(value, val_off, n)?,
        }
        let key_off = self.build_key(map, key, None)?;
        self.load_map(R1, map);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
        self.emit(Insn::mov_reg(R3, FP));
        self.emit(Insn::alu_imm(Alu::Add, R3, val_off as i32));
        self.emit(Insn::mov_imm(R4, BPF_ANY));
        self.emit(Insn::call(h::MAP_UPDATE_ELEM));
        Ok(())
    }

    fn map_update(&mut self, map: MapId, key: &[Expr], op: BinOp, value: &Expr) -> Result<()> {
        if self.prog.maps[map as usize].value != ValueKind::Value(Ty::Int) {
            return Err(self.err("compound assignment needs a map of integers"));
        }
        let rv = self.int(value)?;
        let key_off = self.build_key(map, key, None)?;
        let failed = self.lookup_or_init(map, key_off)?;
        if op == BinOp::Add {
            self.emit(Insn::atomic_add64(R0, 0, rv));
        } else {
            let cur = self.reg()?;
            self.emit(Insn::mov_reg(R1, R0));
            self.emit(Insn::load(8, cur, R0, 0));
            // Keep the value pointer across the arithmetic (which may use r0/r1).
            let ptr = self.alloc(8)?;
            self.emit(Insn::store(8, FP, ptr, R1));
            self.binary_regs(op, cur, rv)?;
            self.emit(Insn::load(8, R1, FP, ptr));
            self.emit(Insn::store(8, R1, 0, cur));
            self.release(cur);
        }
        self.patch_all_here(failed);
        self.release(rv);
        Ok(())
    }

    fn aggregate(&mut self, map: MapId, key: &[Expr], op: AggOp, value: Option<&Expr>) -> Result<()> {
        let rv = match value {
            Some(v) => Some(self.int(v)?),
            None => None,
        };
        let span = self.span;
        let need_value = || CodegenError { span, message: "aggregation needs a value".into() };
        let bucket = match op {
            AggOp::Hist => {
                let v = rv.ok_or_else(need_value)?;
                Some(self.log2_bucket(v)?)
            }
            AggOp::Lhist { min, max, step } => {
                let v = rv.ok_or_else(need_value)?;
                Some(self.linear_bucket(v, min, max, step)?)
            }
            AggOp::Quantiles { .. } => {
                let v = rv.ok_or_else(need_value)?;
                let b = self.reg()?;
                for insn in crate::quantile::bucket_insns(v, b) {
                    self.emit(insn);
                }
                Some(b)
            }
            _ => None,
        };
        let key_off = self.build_key(map, key, bucket)?;
        let failed = self.lookup_or_init(map, key_off)?;
        match op {
            AggOp::Count | AggOp::Hist | AggOp::Lhist { .. } | AggOp::Quantiles { .. } => {
                self.emit(Insn::load(8, R1, R0, 0));
                self.emit(Insn::alu_imm(Alu::Add, R1, 1));
                self.emit(Insn::store(8, R0, 0, R1));
            }
            AggOp::Sum => {
                let v = rv.ok_or_else(need_value)?;
                self.emit(Insn::load(8, R1, R0, 0));
                self.emit(Insn::alu_reg(Alu::Add, R1, v));
                self.emit(Insn::store(8, R0, 0, R1));
            }
            AggOp::Min | AggOp::Max => {
                let v = rv.ok_or_else(need_value)?;
                // { value, seen }: take v when nothing was seen yet or v is better.
                self.emit(Insn::load(8, R1, R0, 8));
                let take_first = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
                self.emit(Insn::load(8, R1, R0, 0));
                let keep = if op == AggOp::Min { Cond::Sge } else { Cond::Sle };
                let skip = self.emit(Insn::jmp_reg(keep, v, R1, 0));
                self.patch_here(take_first);
                self.emit(Insn::store(8, R0, 0, v));
                self.emit(Insn::store_imm(8, R0, 8, 1));
                self.patch_here(skip);
            }
            AggOp::Avg | AggOp::Stats => {
                let v = rv.ok_or_else(need_value)?;
                self.emit(Insn::load(8, R1, R0, 0));
                self.emit(Insn::alu_imm(Alu::Add, R1, 1));
                self.emit(Insn::store(8, R0, 0, R1));
                self.emit(Insn::load(8, R1, R0, 8));
                self.emit(Insn::alu_reg(Alu::Add, R1, v));
                self.emit(Insn::store(8, R0, 8, R1));
            }
        }
        self.patch_all_here(failed);
        if let Some(b) = bucket {
            self.release(b);
        }
        if let Some(v) = rv {
            self.release(v);
        }
        Ok(())
    }

    /// Bucket of a log2 histogram: 0 for negatives, 1 for 0, 2 + floor(log2 v) above.
    fn log2_bucket(&mut self, v: Reg) -> Result<Reg> {
        // r1 = working value, r2 = result; the bucket goes back into a temp.
        self.emit(Insn::mov_reg(R1, v));
        self.emit(Insn::mov_imm(R2, 0));
        let negative = self.emit(Insn::jmp_imm(Cond::Slt, R1, 0, 0));
        self.emit(Insn::mov_imm(R2, 1));
        let zero = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
        self.emit(Insn::mov_imm(R2, 2));
        for shift in [32, 16, 8, 4, 2, 1] {
            self.emit(Insn::mov_reg(R3, R1));
            self.emit(Insn::alu_imm(Alu::Rsh, R3, shift));
            self.emit(Insn::jmp_imm(Cond::Eq, R3, 0, 2));
            self.emit(Insn::alu_imm(Alu::Add, R2, shift));
            self.emit(Insn::mov_reg(R1, R3));
        }
        self.patch_here(negative);
        self.patch_here(zero);
        let b = self.reg()?;
        self.emit(Insn::mov_reg(b, R2));
        Ok(b)
    }

    /// Bucket of a linear histogram: 0 below min, 1 + (v-min)/step inside, n+1 at or above max.
    fn linear_bucket(&mut self, v: Reg, min: i64, max: i64, step: i64) -> Result<Reg> {
        if step <= 0 || max <= min {
            return Err(self.err("lhist needs min < max and step > 0"));
        }
        let n = (max - min) / step;
        let b = self.reg()?;
        self.emit(Insn::mov_imm(b, 0));
        self.load_imm(R1, min);
        let below = self.emit(Insn::jmp_reg(Cond::Slt, v, R1, 0));
        self.load_imm(b, n + 1);
        self.load_imm(R1, max);
        let above = self.emit(Insn::jmp_reg(Cond::Sge, v, R1, 0));
        self.emit(Insn::mov_reg(b, v));
        self.load_imm(R1, min);
        self.emit(Insn::alu_reg(Alu::Sub, b, R1));
        self.load_imm(R1, step);
        self.emit(Insn::alu_reg(Alu::Div, b, R1));
        self.emit(Insn::alu_imm(Alu::Add, b, 1));
        self.patch_here(below);
        self.patch_here(above);
        Ok(b)
    }

    // ---- conditions ----

    /// Emit jumps taken when `cond` is false; fall through when true.
    fn branch_unless(&mut self, cond: &Expr) -> Result<Patches> {
        match cond {
            Expr::Unary(UnOp::Not, inner) => self.branch_if(inner),
            Expr::LogicalAnd(a, b) => {
                let mut p = self.branch_unless(a)?;
                p.extend(self.branch_unless(b)?);
                Ok(p)
            }
            Expr::LogicalOr(a, b) => {
                let taken = self.branch_if(a)?;
                let p = self.branch_unless(b)?;
                self.patch_all_here(taken);
                Ok(p)
            }
            Expr::Binary(op, a, b) if compare_cond(*op).is_some() => {
                let c = invert(compare_cond(*op).unwrap());
                self.compare_jump(c, a, b)
            }
            _ => {
                let r = self.int(cond)?;
                let j = self.emit(Insn::jmp_imm(Cond::Eq, r, 0, 0));
                self.release(r);
                Ok(vec![j])
            }
        }
    }

    /// Emit jumps taken when `cond` is true; fall through when false.
    fn branch_if(&mut self, cond: &Expr) -> Result<Patches> {
        match cond {
            Expr::Unary(UnOp::Not, inner) => self.branch_unless(inner),
            Expr::LogicalOr(a, b) => {
                let mut p = self.branch_if(a)?;
                p.extend(self.branch_if(b)?);
                Ok(p)
            }
            Expr::LogicalAnd(a, b) => {
                let not_taken = self.branch_unless(a)?;
                let p = self.branch_if(b)?;
                self.patch_all_here(not_taken);
                Ok(p)
            }
            Expr::Binary(op, a, b) if compare_cond(*op).is_some() => {
                self.compare_jump(compare_cond(*op).unwrap(), a, b)
            }
            _ => {
                let r = self.int(cond)?;
                let j = self.emit(Insn::jmp_imm(Cond::Ne, r, 0, 0));
                self.release(r);
                Ok(vec![j])
            }
        }
    }

    fn compare_jump(&mut self, c: Cond, a: &Expr, b: &Expr) -> Result<Patches> {
        if self.is_bytes(a) || self.is_bytes(b) {
            let eq = Expr::StrEq(Box::new(a.clone()), Box::new(b.clone()));
            let r = self.int(&eq)?;
            let want = match c {
                Cond::Eq => Cond::Ne,
                Cond::Ne => Cond::Eq,
                _ => return Err(self.err("strings can only be compared with == and !=")),
            };
            let j = self.emit(Insn::jmp_imm(want, r, 0, 0));
            self.release(r);
            return Ok(vec![j]);
        }
        let ra = self.int(a)?;
        let j = match small_const(b) {
            Some(k) => self.emit(Insn::jmp_imm(c, ra, k, 0)),
            None => {
                let rb = self.int_keeping(ra, b)?;
                let j = self.emit(Insn::jmp_reg(c, ra, rb, 0));
                self.release(rb);
                j
            }
        };
        self.release(ra);
        Ok(vec![j])
    }

    // ---- expressions ----

    fn is_bytes(&self, e: &Expr) -> bool {
        matches!(self.ty(e), Ty::Bytes(_))
    }

    /// The type of an expression.
    pub fn ty(&self, e: &Expr) -> Ty {
        e.ty(&self.prog.locals)
    }

    /// Evaluate `e` while `held` stays live, spilling `held` if registers run out.
    /// Returns the register of `e`; `held` is still valid afterwards.
    fn int_keeping(&mut self, held: Reg, e: &Expr) -> Result<Reg> {
        if !self.free.is_empty() {
            return self.int(e);
        }
        let slot = self.alloc(8)?;
        self.emit(Insn::store(8, FP, slot, held));
        self.release(held);
        let mut r = self.int(e)?;
        if r == held {
            // `e` was evaluated into the only free register, held's own.
            self.emit(Insn::mov_reg(SPILL_SCRATCH, r));
            self.release(r);
            r = SPILL_SCRATCH;
        }
        self.take_specific(held);
        self.emit(Insn::load(8, held, FP, slot));
        Ok(r)
    }

    /// Evaluate an integer expression into a fresh temporary.
    fn int(&mut self, e: &Expr) -> Result<Reg> {
        match e {
            Expr::Int(v) => {
                let r = self.reg()?;
                self.load_imm(r, *v);
                Ok(r)
            }
            Expr::Local(id) => {
                if self.local_ty(*id) != Ty::Int {
                    return Err(self.err("a string is used where a number is expected"));
                }
                let r = self.reg()?;
                let slot = self.local_slots[*id as usize];
                self.emit(Insn::load(8, r, FP, slot));
                Ok(r)
            }
            Expr::Builtin(b) => self.builtin(*b),
            Expr::CtxInt { offset, size, signed } => {
                let r = self.reg()?;
                self.emit(Insn::load(8, R1, FP, CTX_SLOT));
                self.emit(Insn::load(*size, r, R1, *offset as i16));
                if *signed && *size < 8 {
                    let bits = (64 - size * 8) as i32;
                    self.emit(Insn::alu_imm(Alu::Lsh, r, bits));
                    self.emit(Insn::alu_imm(Alu::Arsh, r, bits));
                }
                Ok(r)
            }
            Expr::StackId { map, user, lost } => {
                const BPF_F_USER_STACK: i32 = 1 << 8;
                let memo = self.stack_memo.iter().find(|(m, _)| m == map).map(|&(_, off)| off);
                let Some(memo) = memo else { return Err(self.err("internal error: stack map without a memo slot")) };
                let r = self.reg()?;
                // Once per event: later uses (a key and a print) get the same id
                // and a lost stack is counted once.
                self.emit(Insn::load(8, r, FP, memo));
                let taken = self.emit(Insn::jmp_imm(Cond::Ne, r, STACK_UNSET, 0));
                self.emit(Insn::load(8, R1, FP, CTX_SLOT));
                self.load_map(R2, *map);
                self.emit(Insn::mov_imm(R3, if *user { BPF_F_USER_STACK } else { 0 }));
                self.emit(Insn::call(h::GET_STACKID));
                self.emit(Insn::mov_reg(r, R0));
                self.emit(Insn::store(8, FP, memo, r));
                // Count collisions and a full map in lost[slot].
                const EEXIST: i32 = 17;
                const ENOMEM: i32 = 12;
                let key = self.alloc(8)?;
                let mut counted = Vec::new();
                self.emit(Insn::store_imm(8, FP, key, STACK_LOST_COLLISION as i32));
                let collision = self.emit(Insn::jmp_imm(Cond::Eq, r, -EEXIST, 0));
                counted.push(self.emit(Insn::jmp_imm(Cond::Ne, r, -ENOMEM, 0)));
                self.emit(Insn::store_imm(8, FP, key, STACK_LOST_FULL as i32));
                self.patch_here(collision);
                counted.extend(self.lookup(*lost, key));
                self.emit(Insn::load(8, R1, R0, 0));
                self.emit(Insn::alu_imm(Alu::Add, R1, 1));
                self.emit(Insn::store(8, R0, 0, R1));
                self.patch_all_here(counted);
                self.patch_here(taken);
                if *user {
                    // pid << 32 | (u32)id
                    self.emit(Insn::alu_imm(Alu::Lsh, r, 32));
                    self.emit(Insn::alu_imm(Alu::Rsh, r, 32));
                    self.emit(Insn::call(h::GET_CURRENT_PID_TGID));
                    self.emit(Insn::alu_imm(Alu::Rsh, R0, 32));
                    self.emit(Insn::alu_imm(Alu::Lsh, R0, 32));
                    self.emit(Insn::alu_reg(Alu::Or, r, R0));
                }
                Ok(r)
            }
            Expr::ReadMem { addr, size, signed, user } => {
                let a = self.int(addr)?;
                let slot = self.alloc(8)?;
                self.emit(Insn::store_imm(8, FP, slot, 0));
                self.emit(Insn::mov_reg(R1, FP));
                self.emit(Insn::alu_imm(Alu::Add, R1, slot as i32));
                self.emit(Insn::mov_imm(R2, (*size).min(8) as i32));
                self.emit(Insn::mov_reg(R3, a));
                self.emit(Insn::call(if *user { h::PROBE_READ_USER } else { h::PROBE_READ_KERNEL }));
                self.emit(Insn::load((*size).min(8), a, FP, slot));
                if *signed && *size < 8 {
                    let bits = (64 - size * 8) as i32;
                    self.emit(Insn::alu_imm(Alu::Lsh, a, bits));
                    self.emit(Insn::alu_imm(Alu::Arsh, a, bits));
                }
                Ok(a)
            }
            Expr::Binary(op, a, b) => {
                if let Some(c) = compare_cond(*op) {
                    if self.is_bytes(a) || self.is_bytes(b) {
                        let eq = self.str_eq(a, b)?;
                        if c == Cond::Ne {
                            self.emit(Insn::alu_imm(Alu::Xor, eq, 1));
                        } else if c != Cond::Eq {
                            return Err(self.err("strings can only be compared with == and !="));
                        }
                        return Ok(eq);
                    }
                    return self.materialize(e);
                }
                let ra = self.int(a)?;
                if let (Some(k), true) = (
                    small_const(b),
                    matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor)
                        || (matches!(op, BinOp::Shl | BinOp::Shr) && (0..64).contains(&small_const(b).unwrap_or(-1))),
                ) {
                    let alu = alu_of(*op);
                    self.emit(Insn::alu_imm(alu, ra, k));
                    return Ok(ra);
                }
                let rb = self.int_keeping(ra, b)?;
                self.binary_regs(*op, ra, rb)?;
                self.release(rb);
                Ok(ra)
            }
            Expr::Unary(op, a) => match op {
                UnOp::Not => self.materialize(e),
                UnOp::Neg => {
                    let r = self.int(a)?;
                    self.emit(Insn::alu_imm(Alu::Neg, r, 0));
                    Ok(r)
                }
                UnOp::BitNot => {
                    let r = self.int(a)?;
                    self.emit(Insn::alu_imm(Alu::Xor, r, -1));
                    Ok(r)
                }
            },
            Expr::LogicalAnd(..) | Expr::LogicalOr(..) => self.materialize(e),
            Expr::Cond(c, a, b) => {
                if self.is_bytes(a) {
                    return Err(self.err("a string-valued if-expression must be assigned to a variable"));
                }
                let to_else = self.branch_unless(c)?;
                let ra = self.int(a)?;
                self.release(ra);
                let to_end = self.emit(Insn::ja(0));
                self.patch_all_here(to_else);
                let rb = self.int(b)?;
                if rb != ra {
                    self.emit(Insn::mov_reg(ra, rb));
                }
                self.release(rb);
                self.patch_here(to_end);
                self.take_specific(ra);
                Ok(ra)
            }
            Expr::StrEq(a, b) => self.str_eq(a, b),
            Expr::MapGet { map, key } => {
                match self.prog.maps[*map as usize].value {
                    ValueKind::Agg(kind) => return self.agg_read(*map, key, kind),
                    ValueKind::Value(Ty::Bytes(_)) => {
                        return Err(self.err(
                            "this map holds strings, which a probe can't read as a value yet; read it in userspace",
                        ))
                    }
                    _ => {}
                }
                let key_off = self.build_key(*map, key, None)?;
                let r = self.reg()?;
                self.emit(Insn::mov_imm(r, 0));
                let missing = self.lookup(*map, key_off);
                self.emit(Insn::load(8, r, R0, 0));
                self.patch_all_here(missing);
                Ok(r)
            }
            Expr::MapContains { map, key } => {
                let key_off = self.build_key(*map, key, None)?;
                let r = self.reg()?;
                self.emit(Insn::mov_imm(r, 0));
                let missing = self.lookup(*map, key_off);
                self.emit(Insn::mov_imm(r, 1));
                self.patch_all_here(missing);
                Ok(r)
            }
            Expr::Str { .. }
            | Expr::Comm
            | Expr::CtxCharArray { .. }
            | Expr::CtxDataLocStr { .. }
            | Expr::ReadStr { .. } => Err(self.err("a string is used where a number is expected")),
        }
    }

    /// A boolean-valued expression as 0/1 via its branch form.
    fn materialize(&mut self, e: &Expr) -> Result<Reg> {
        let to_false = self.branch_unless(e)?;
        let r = self.reg()?;
        self.emit(Insn::mov_imm(r, 1));
        let to_end = self.emit(Insn::ja(0));
        self.patch_all_here(to_false);
        self.emit(Insn::mov_imm(r, 0));
        self.patch_here(to_end);
        Ok(r)
    }

    /// `a = a OP b` for two temporaries with Rhai's (signed, i64) semantics.
    fn binary_regs(&mut self, op: BinOp, a: Reg, b: Reg) -> Result<()> {
        match op {
            BinOp::Div | BinOp::Mod => {
                // Signed division on unsigned hardware ops: divide magnitudes,
                // then fix the sign (quotient: sign of a^b; remainder: sign of a).
                self.emit(Insn::mov_reg(R1, a));
                if op == BinOp::Div {
                    self.emit(Insn::alu_reg(Alu::Xor, R1, b));
                }
                self.emit(Insn::mov_reg(R2, b));
                self.emit(Insn::jmp_imm(Cond::Sge, a, 0, 1));
                self.emit(Insn::alu_imm(Alu::Neg, a, 0));
                self.emit(Insn::jmp_imm(Cond::Sge, R2, 0, 1));
                self.emit(Insn::alu_imm(Alu::Neg, R2, 0));
                let alu = if op == BinOp::Div { Alu::Div } else { Alu::Mod };
                self.emit(Insn::alu_reg(alu, a, R2));
                self.emit(Insn::jmp_imm(Cond::Sge, R1, 0, 1));
                self.emit(Insn::alu_imm(Alu::Neg, a, 0));
            }
            BinOp::Shl | BinOp::Shr => self.shift_regs(op == BinOp::Shl, a, b)?,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let c = compare_cond(op).unwrap();
                self.emit(Insn::jmp_reg(c, a, b, 2));
                self.emit(Insn::mov_imm(a, 0));
                self.emit(Insn::ja(1));
                self.emit(Insn::mov_imm(a, 1));
            }
            _ => {
                self.emit(Insn::alu_reg(alu_of(op), a, b));
            }
        }
        Ok(())
    }

    fn builtin(&mut self, b: Builtin) -> Result<Reg> {
        let r = self.reg()?;
        match b {
            Builtin::Pid | Builtin::Tid => {
                self.emit(Insn::call(h::GET_CURRENT_PID_TGID));
                if b == Builtin::Pid {
                    self.emit(Insn::mov_reg(r, R0));
                    self.emit(Insn::alu_imm(Alu::Rsh, r, 32));
                } else {
                    self.emit(Insn::mov32_reg(r, R0));
                }
            }
            Builtin::Uid | Builtin::Gid => {
                self.emit(Insn::call(h::GET_CURRENT_UID_GID));
                if b == Builtin::Gid {
                    self.emit(Insn::mov_reg(r, R0));
                    self.emit(Insn::alu_imm(Alu::Rsh, r, 32));
                } else {
                    self.emit(Insn::mov32_reg(r, R0));
                }
            }
            Builtin::Cpu => {
                self.emit(Insn::call(h::GET_SMP_PROCESSOR_ID));
                self.emit(Insn::mov_reg(r, R0));
            }
            Builtin::Nsecs => {
                self.emit(Insn::call(h::KTIME_GET_NS));
                self.emit(Insn::mov_reg(r, R0));
            }
            Builtin::Cgroup => {
                self.emit(Insn::call(h::GET_CURRENT_CGROUP_ID));
                self.emit(Insn::mov_reg(r, R0));
            }
            Builtin::Rand => {
                self.emit(Insn::call(h::GET_PRANDOM_U32));
                self.emit(Insn::mov_reg(r, R0));
            }
            Builtin::CurTask => {
                self.emit(Insn::call(h::GET_CURRENT_TASK));
                self.emit(Insn::mov_reg(r, R0));
            }
        }
        Ok(r)
    }

    /// Write a byte-string value into the stack buffer at `dst` (`len` bytes,
    /// NUL-padded).
    fn bytes(&mut self, e: &Expr, dst: i16, len: u32) -> Result<()> {
        let slot = (len + 7) & !7;
        match e {
            Expr::Str { bytes, .. } => {
                for (i, chunk) in (0..slot as usize).step_by(8).map(|i| (i, word_at(bytes, i))) {
                    if chunk == 0 {
                        self.emit(Insn::store_imm(8, FP, dst + i as i16, 0));
                    } else {
                        self.load_imm(R0, chunk);
                        self.emit(Insn::store(8, FP, dst + i as i16, R0));
                    }
                }
            }
            Expr::Comm => {
                self.zero_stack(dst, slot);
                self.emit(Insn::mov_reg(R1, FP));
                self.emit(Insn::alu_imm(Alu::Add, R1, dst as i32));
                self.emit(Insn::mov_imm(R2, len.min(16) as i32));
                self.emit(Insn::call(h::GET_CURRENT_COMM));
            }
            Expr::CtxCharArray { offset, len: src_len } => {
                self.zero_stack(dst, slot);
                self.emit(Insn::mov_reg(R1, FP));
                self.emit(Insn::alu_imm(Alu::Add, R1, dst as i32));
                self.emit(Insn::mov_imm(R2, (*src_len).min(len) as i32));
                self.emit(Insn::load(8, R3, FP, CTX_SLOT));
                self.emit(Insn::alu_imm(Alu::Add, R3, *offset as i32));
                self.emit(Insn::call(h::PROBE_READ_KERNEL));
            }
            Expr::CtxDataLocStr { offset, max } => {
                self.zero_stack(dst, slot);
                self.emit(Insn::load(8, R3, FP, CTX_SLOT));
                self.emit(Insn::load(4, R0, R3, *offset as i16));
                self.emit(Insn::alu_imm(Alu::And, R0, 0xffff));
                self.emit(Insn::alu_reg(Alu::Add, R3, R0));
                self.emit(Insn::mov_reg(R1, FP));
                self.emit(Insn::alu_imm(Alu::Add, R1, dst as i32));
                self.emit(Insn::mov_imm(R2, (*max).min(len) as i32));
                self.emit(Insn::call(h::PROBE_READ_KERNEL_STR));
            }
            Expr::ReadStr { ptr, max, user } => {
                self.zero_stack(dst, slot);
                let p = self.int(ptr)?;
                self.emit(Insn::mov_reg(R1, FP));
                self.emit(Insn::alu_imm(Alu::Add, R1, dst as i32));
                self.emit(Insn::mov_imm(R2, (*max).min(len) as i32));
                self.emit(Insn::mov_reg(R3, p));
                self.emit(Insn::call(if *user { h::PROBE_READ_USER_STR } else { h::PROBE_READ_KERNEL_STR }));
                self.release(p);
            }
            Expr::Local(id) => {
                let Ty::Bytes(n) = self.local_ty(*id) else {
                    return Err(self.err("a number is used where a string is expected"));
                };
                let src = self.local_slots[*id as usize];
                let copy = ((n.min(len) + 7) & !7) as i16;
                for i in (0..copy).step_by(8) {
                    self.emit(Insn::load(8, R0, FP, src + i));
                    self.emit(Insn::store(8, FP, dst + i, R0));
                }
                for i in (copy..slot as i16).step_by(8) {
                    self.emit(Insn::store_imm(8, FP, dst + i, 0));
                }
            }
            Expr::Cond(c, a, b) => {
                // Each branch writes the whole buffer.
                let to_else = self.branch_unless(c)?;
                self.bytes(a, dst, len)?;
                let to_end = self.emit(Insn::ja(0));
                self.patch_all_here(to_else);
                self.bytes(b, dst, len)?;
                self.patch_here(to_end);
            }
            _ => return Err(self.err("a number is used where a string is expected")),
        }
        Ok(())
    }

    /// 1 when two strings are equal. Both sides are NUL-padded buffers, so
    /// comparing them word by word over the longer length is exact.
    fn str_eq(&mut self, a: &Expr, b: &Expr) -> Result<Reg> {
        let (Ty::Bytes(la), Ty::Bytes(lb)) = (self.ty(a), self.ty(b)) else {
            return Err(self.err("a string can only be compared with another string"));
        };
        let len = la.max(lb);
        let slot = (len + 7) & !7;
        let buf_a = self.alloc(slot)?;
        self.bytes(a, buf_a, la)?;
        for i in ((la + 7) & !7..slot).step_by(8) {
            self.emit(Insn::store_imm(8, FP, buf_a + i as i16, 0));
        }
        let r = self.reg()?;
        let mut to_false = Vec::new();
        if let Expr::Str { bytes, .. } = b {
            // Compare against the literal's words directly.
            let words = ((bytes.len() as u32 + 1 + 7) & !7).min(slot);
            for i in (0..words as usize).step_by(8) {
                self.emit(Insn::load(8, R1, FP, buf_a + i as i16));
                self.load_imm(R2, word_at(bytes, i));
                to_false.push(self.emit(Insn::jmp_reg(Cond::Ne, R1, R2, 0)));
            }
        } else {
            let buf_b = self.alloc(slot)?;
            self.bytes(b, buf_b, lb)?;
            for i in ((lb + 7) & !7..slot).step_by(8) {
                self.emit(Insn::store_imm(8, FP, buf_b + i as i16, 0));
            }
            for i in (0..slot as i16).step_by(8) {
                self.emit(Insn::load(8, R1, FP, buf_a + i));
                self.emit(Insn::load(8, R2, FP, buf_b + i));
                to_false.push(self.emit(Insn::jmp_reg(Cond::Ne, R1, R2, 0)));
            }
        }
        self.emit(Insn::mov_imm(r, 1));
        let end = self.emit(Insn::ja(0));
        self.patch_all_here(to_false);
        self.emit(Insn::mov_imm(r, 0));
        self.patch_here(end);
        Ok(r)
    }
}

/// Little-endian word of `bytes` starting at `i`, zero past the end.
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
            Expr::Binary(_, a, b) | Expr::LogicalAnd(a, b) | Expr::LogicalOr(a, b) | Expr::StrEq(a, b) => {
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
            StmtKind::Return => {}
        }
    }
}

fn word_at(bytes: &[u8], i: usize) -> i64 {
    let mut w = [0u8; 8];
    for (k, slot) in w.iter_mut().enumerate() {
        *slot = bytes.get(i + k).copied().unwrap_or(0);
    }
    i64::from_le_bytes(w)
}

fn small_const(e: &Expr) -> Option<i32> {
    match e {
        Expr::Int(v) if *v >= i32::MIN as i64 && *v <= i32::MAX as i64 => Some(*v as i32),
        _ => None,
    }
}

fn compare_cond(op: BinOp) -> Option<Cond> {
    Some(match op {
        BinOp::Eq => Cond::Eq,
        BinOp::Ne => Cond::Ne,
        BinOp::Lt => Cond::Slt,
        BinOp::Le => Cond::Sle,
        BinOp::Gt => Cond::Sgt,
        BinOp::Ge => Cond::Sge,
        _ => return None,
    })
}

fn invert(c: Cond) -> Cond {
    match c {
        Cond::Eq => Cond::Ne,
        Cond::Ne => Cond::Eq,
        Cond::Slt => Cond::Sge,
        Cond::Sge => Cond::Slt,
        Cond::Sle => Cond::Sgt,
        Cond::Sgt => Cond::Sle,
        Cond::Lt => Cond::Ge,
        Cond::Ge => Cond::Lt,
        Cond::Le => Cond::Gt,
        Cond::Gt => Cond::Le,
        other => other,
    }
}

fn alu_of(op: BinOp) -> Alu {
    match op {
        BinOp::Add => Alu::Add,
        BinOp::Sub => Alu::Sub,
        BinOp::Mul => Alu::Mul,
        BinOp::Div => Alu::Div,
        BinOp::Mod => Alu::Mod,
        BinOp::And => Alu::And,
        BinOp::Or => Alu::Or,
        BinOp::Xor => Alu::Xor,
        BinOp::Shl => Alu::Lsh,
        BinOp::Shr => Alu::Arsh,
        _ => Alu::Mov,
    }
}
