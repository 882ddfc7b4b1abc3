//! Expressions: integers (context, memory, map and builtin reads, operators
//! with Rhai's signed semantics), conditions compiled to branches, byte
//! strings copied into stack slots, and string equality.

use super::*;

impl Gen<'_> {
    // ---- conditions ----

    /// Emit jumps taken when `cond` is false; fall through when true.
    pub(super) fn branch_unless(&mut self, cond: &Expr) -> Result<Patches> {
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
    pub(super) fn branch_if(&mut self, cond: &Expr) -> Result<Patches> {
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

    pub(super) fn compare_jump(&mut self, c: Cond, a: &Expr, b: &Expr) -> Result<Patches> {
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

    pub(super) fn is_bytes(&self, e: &Expr) -> bool {
        matches!(self.ty(e), Ty::Bytes(_))
    }

    /// The type of an expression.
    pub fn ty(&self, e: &Expr) -> Ty {
        e.ty(&self.prog.locals)
    }

    /// Evaluate `e` while `held` stays live, spilling `held` if registers run out.
    /// Returns the register of `e`; `held` is still valid afterwards.
    pub(super) fn int_keeping(&mut self, held: Reg, e: &Expr) -> Result<Reg> {
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
    pub(super) fn int(&mut self, e: &Expr) -> Result<Reg> {
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
            Expr::StackId { map, user, lost, skip } => {
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
                const BPF_F_SKIP_FIELD_MASK: u32 = 0xff;
                let flags = if *user { BPF_F_USER_STACK } else { (*skip & BPF_F_SKIP_FIELD_MASK) as i32 };
                self.emit(Insn::mov_imm(R3, flags));
                self.emit(Insn::call(h::GET_STACKID));
                self.emit(Insn::mov_reg(r, R0));
                self.emit(Insn::store(8, FP, memo, r));
                // Count collisions and a full map in lost[slot].
                const ENOMEM: i32 = 12;
                let key = self.alloc(8)?;
                let mut counted = Vec::new();
                self.emit(Insn::store_imm(8, FP, key, STACK_LOST_COLLISION as i32));
                let collision = self.emit(Insn::jmp_imm(Cond::Eq, r, -EEXIST, 0));
                counted.push(self.emit(Insn::jmp_imm(Cond::Ne, r, -ENOMEM, 0)));
                self.emit(Insn::store_imm(8, FP, key, STACK_LOST_FULL as i32));
                self.patch_here(collision);
                self.count_at(*lost, key, 0);
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
            Expr::ReadMem { addr, size, signed, mem } => {
                let a = self.int(addr)?;
                let slot = self.alloc(8)?;
                self.emit(Insn::store_imm(8, FP, slot, 0));
                let read = [h::PROBE_READ_KERNEL, h::PROBE_READ_USER];
                self.read_into(*mem, read, slot as i32, Insn::mov_imm(R2, (*size).min(8) as i32), a)?;
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
                    if !self.checked_imm(*op, ra, k) {
                        self.emit(Insn::alu_imm(alu_of(*op), ra, k));
                    }
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
                    self.check_negation(r);
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
            Expr::StrSearch(op, a, b) => self.str_search(*op, a, b),
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
            | Expr::ReadStr { .. }
            | Expr::ReadBuf { .. } => Err(self.err("a string is used where a number is expected")),
        }
    }

    /// A boolean-valued expression as 0/1 via its branch form.
    pub(super) fn materialize(&mut self, e: &Expr) -> Result<Reg> {
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
    pub(super) fn binary_regs(&mut self, op: BinOp, a: Reg, b: Reg) -> Result<()> {
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul if self.checked_regs(op, a, b) => {}
            BinOp::Div | BinOp::Mod => {
                self.check_division(op, a, b);
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

    pub(super) fn builtin(&mut self, b: Builtin) -> Result<Reg> {
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
            Builtin::Jiffies => {
                self.emit(Insn::call(h::JIFFIES64));
                self.emit(Insn::mov_reg(r, R0));
            }
        }
        Ok(r)
    }

    /// Write a byte-string value into the stack buffer at `dst` (`len` bytes,
    /// NUL-padded).
    pub(super) fn bytes(&mut self, e: &Expr, dst: i16, len: u32) -> Result<()> {
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
                self.check_helper(h::PROBE_READ_KERNEL)?;
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
                self.check_helper(h::PROBE_READ_KERNEL_STR)?;
            }
            Expr::ReadStr { ptr, max, mem } => {
                self.zero_stack(dst, slot);
                let p = self.int(ptr)?;
                let read = [h::PROBE_READ_KERNEL_STR, h::PROBE_READ_USER_STR];
                self.read_into(*mem, read, dst as i32, Insn::mov_imm(R2, (*max).min(len) as i32), p)?;
                self.release(p);
            }
            Expr::ReadBuf { ptr, len: n, max, mem } => self.read_buf(ptr, n, *max, *mem, dst, slot)?,
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
    pub(super) fn str_eq(&mut self, a: &Expr, b: &Expr) -> Result<Reg> {
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
