//! Searches in strings read at run time ([`StrOp`]): `strncmp(a, b, n)` and
//! `strcontains(hay, needle)`, and reading a buffer (`buf(ptr, len)`).
//!
//! Both strings are copied into NUL-padded stack buffers, then compared
//! byte by byte with constant offsets, fully unrolled: the program has no
//! loop for the verifier to bound, and a literal needle is compared against
//! its bytes directly. Bytes past a buffer's end read as NUL.

use super::*;

/// Largest `strcontains` a probe compiles: haystack bytes × needle bytes
/// (each pair costs about four instructions).
const MAX_CONTAINS_PAIRS: u32 = 64 * 64;

/// One side of a comparison: a stack buffer (offset, capacity) or a
/// literal's bytes up to its first NUL.
enum Operand {
    Buf(i16, u32),
    Lit(Vec<u8>),
}

impl Gen<'_> {
    /// A string operand in a fresh stack buffer, or the literal's bytes.
    fn str_operand(&mut self, e: &Expr, what: &str) -> Result<Operand> {
        let Ty::Bytes(len) = self.ty(e) else {
            return Err(self.err(format!("{what} works on strings; this is a number")));
        };
        if let Expr::Str { bytes, .. } = e {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            return Ok(Operand::Lit(bytes[..end].to_vec()));
        }
        let off = self.alloc(len)?;
        self.bytes(e, off, len)?;
        Ok(Operand::Buf(off, len))
    }

    /// Byte `i` of an operand into `reg` (0 past its end).
    fn byte_at(&mut self, op: &Operand, i: u32, reg: Reg) {
        match op {
            Operand::Buf(off, len) if i < *len => {
                self.emit(Insn::load(1, reg, FP, off + i as i16));
            }
            Operand::Buf(..) => {
                self.emit(Insn::mov_imm(reg, 0));
            }
            Operand::Lit(lit) => {
                self.emit(Insn::mov_imm(reg, lit.get(i as usize).copied().unwrap_or(0) as i32));
            }
        }
    }

    pub(super) fn str_search(&mut self, op: StrOp, a: &Expr, b: &Expr) -> Result<Reg> {
        let name = match op {
            StrOp::Ncmp(_) => "strncmp()",
            StrOp::Contains => "strcontains()",
        };
        let sa = self.str_operand(a, name)?;
        let sb = self.str_operand(b, name)?;
        let (mut to_true, mut to_false) = (Vec::new(), Vec::new());
        match op {
            StrOp::Ncmp(n) => self.ncmp(&sa, &sb, n, &mut to_true, &mut to_false),
            StrOp::Contains => self.contains(&sa, &sb, &mut to_true, &mut to_false)?,
        }
        // strncmp: "true" is "equal", which is 0.
        let (yes, no) = if matches!(op, StrOp::Ncmp(_)) { (0, 1) } else { (1, 0) };
        let r = self.reg()?;
        self.patch_all_here(to_false);
        self.emit(Insn::mov_imm(r, no));
        let end = self.emit(Insn::ja(0));
        self.patch_all_here(to_true);
        self.emit(Insn::mov_imm(r, yes));
        self.patch_here(end);
        Ok(r)
    }

    fn cap(op: &Operand) -> u32 {
        match op {
            Operand::Buf(_, len) => *len,
            Operand::Lit(lit) => lit.len() as u32 + 1,
        }
    }

    /// Equal in the first `n` bytes → `to_true`, else `to_false` (the code
    /// ends in a jump).
    fn ncmp(&mut self, a: &Operand, b: &Operand, n: u32, to_true: &mut Patches, to_false: &mut Patches) {
        let upto = n.min(Self::cap(a).max(Self::cap(b)));
        for i in 0..upto {
            self.byte_at(a, i, R1);
            match b {
                Operand::Lit(lit) => {
                    let c = lit.get(i as usize).copied().unwrap_or(0) as i32;
                    to_false.push(self.emit(Insn::jmp_imm(Cond::Ne, R1, c, 0)));
                    if c == 0 {
                        // Both ended here: equal.
                        to_true.push(self.emit(Insn::ja(0)));
                        return;
                    }
                }
                Operand::Buf(..) => {
                    self.byte_at(b, i, R2);
                    to_false.push(self.emit(Insn::jmp_reg(Cond::Ne, R1, R2, 0)));
                    to_true.push(self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0)));
                }
            }
        }
        to_true.push(self.emit(Insn::ja(0)));
    }

    /// `b` occurs in `a` → `to_true`, else `to_false`.
    fn contains(&mut self, a: &Operand, b: &Operand, to_true: &mut Patches, to_false: &mut Patches) -> Result<()> {
        let Operand::Buf(hay, hay_len) = *a else {
            // A literal haystack: copy it like any other string.
            return Err(self.err("strcontains(): the first argument must be a string read at run time"));
        };
        let needle_len = match b {
            Operand::Buf(_, len) => *len,
            Operand::Lit(lit) => lit.len() as u32,
        };
        if needle_len == 0 {
            to_true.push(self.emit(Insn::ja(0)));
            return Ok(());
        }
        if hay_len * needle_len > MAX_CONTAINS_PAIRS {
            return Err(self.err(format!(
                "strcontains() of a {hay_len}-byte string and a {needle_len}-byte one is too large to unroll (at most {MAX_CONTAINS_PAIRS} byte pairs); read shorter strings with str(ptr, len)"
            )));
        }
        for i in 0..hay_len {
            let mut next = Vec::new();
            let mut fits = true;
            for j in 0..needle_len {
                match b {
                    Operand::Lit(lit) => {
                        if i + j >= hay_len {
                            // The haystack ends before the needle: no later start fits either.
                            to_false.push(self.emit(Insn::ja(0)));
                            fits = false;
                            break;
                        }
                        self.emit(Insn::load(1, R1, FP, hay + (i + j) as i16));
                        next.push(self.emit(Insn::jmp_imm(Cond::Ne, R1, lit[j as usize] as i32, 0)));
                    }
                    Operand::Buf(..) => {
                        self.byte_at(b, j, R2);
                        to_true.push(self.emit(Insn::jmp_imm(Cond::Eq, R2, 0, 0)));
                        if i + j >= hay_len {
                            to_false.push(self.emit(Insn::ja(0)));
                            fits = false;
                            break;
                        }
                        self.emit(Insn::load(1, R1, FP, hay + (i + j) as i16));
                        next.push(self.emit(Insn::jmp_reg(Cond::Ne, R1, R2, 0)));
                    }
                }
            }
            if fits {
                // Every byte of the needle matched at i.
                to_true.push(self.emit(Insn::ja(0)));
            }
            if next.is_empty() {
                // Nothing reaches the later starts.
                return Ok(());
            }
            self.patch_all_here(next);
            // The haystack's NUL at i: no later start.
            self.emit(Insn::load(1, R1, FP, hay + i as i16));
            to_false.push(self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0)));
        }
        to_false.push(self.emit(Insn::ja(0)));
        Ok(())
    }

    /// `buf(ptr, len)` into the buffer at `dst` (`slot` bytes): the length
    /// read (clamped to `0..=max`), then the bytes.
    pub(super) fn read_buf(
        &mut self,
        ptr: &Expr,
        len: &Expr,
        max: u32,
        mem: Memory,
        dst: i16,
        slot: u32,
    ) -> Result<()> {
        self.zero_stack(dst, slot);
        let p = self.int(ptr)?;
        let n = self.int_keeping(p, len)?;
        // Unsigned: a negative length clamps to `max` too.
        self.emit(Insn::jmp_imm(Cond::Le, n, max as i32, 1));
        self.emit(Insn::mov_imm(n, max as i32));
        self.emit(Insn::store(8, FP, dst, n));
        self.read_into(mem, [h::PROBE_READ_KERNEL, h::PROBE_READ_USER], dst as i32 + 8, Insn::mov_reg(R2, n), p)?;
        self.release(n);
        self.release(p);
        Ok(())
    }

    /// A read of `mem` into the stack at `FP + dst`: `size` sets r2 (the
    /// byte count), `src` holds the address; `[kernel, user]` are the two
    /// helpers of the read. For `KernelThenUser` a failed kernel read is
    /// made again in user memory (only the second failure is a failed read
    /// for -kk).
    pub(super) fn read_into(
        &mut self,
        mem: Memory,
        [kernel, user]: [u32; 2],
        dst: i32,
        size: Insn,
        src: Reg,
    ) -> Result<()> {
        let call = |g: &mut Self, helper: u32| {
            g.emit(Insn::mov_reg(R1, FP));
            g.emit(Insn::alu_imm(Alu::Add, R1, dst));
            g.emit(size);
            g.emit(Insn::mov_reg(R3, src));
            g.emit(Insn::call(helper));
        };
        let first = if mem == Memory::User { user } else { kernel };
        call(self, first);
        if mem != Memory::KernelThenUser {
            return self.check_helper(first);
        }
        let read = self.emit(Insn::jmp_imm(Cond::Sge, R0, 0, 0));
        call(self, user);
        self.check_helper(user)?;
        self.patch_here(read);
        Ok(())
    }
}
