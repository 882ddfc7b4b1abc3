//! Integer arithmetic with Rhai's errors. Rhai stops a statement on an
//! integer overflow and on a division by zero; so that a closure means the
//! same in the kernel, the generated code checks each `+ - * / %` and
//! unary `-` and, on such an error, sends a `CONTROL_ERROR` message naming
//! the error and the statement, and ends the program (the rest of the
//! closure doesn't run for this event, as in Rhai). Programs without
//! `Program::arith_errors` (rtrace's own) keep the hardware's wrapping.

use super::*;
use crate::record::{arith_error_code, CONTROL_ERROR};

const ADD: u8 = 1;
const SUB: u8 = 2;
const MUL: u8 = 3;
const DIV_ZERO: u8 = 4;
const DIV_OVERFLOW: u8 = 5;
const MOD: u8 = 6;
const NEG: u8 = 7;
/// How far back (instructions) an error exit may be to be jumped to again.
const REUSE_WITHIN: usize = 4096;

impl Gen<'_> {
    fn checking(&self) -> bool {
        self.prog.arith_errors.is_some() && !self.wrapping
    }

    /// A jump to the error exit for `what` at the current statement.
    fn fail_on(&mut self, jump: Insn, what: u8) {
        let at = self.emit(jump);
        let code = arith_error_code(what, self.span.line, self.span.col);
        self.arith_fails.push((at, code));
    }

    /// `a = a + k` / `a = a - k` / `a = a * k` for a constant `k`.
    pub(super) fn checked_imm(&mut self, op: BinOp, a: Reg, k: i32) -> bool {
        if !self.checking() || !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
            return false;
        }
        let k64 = k as i64;
        match op {
            BinOp::Add | BinOp::Sub => {
                // a + k overflows exactly when a > MAX - k (k > 0) or a < MIN - k
                // (k < 0); a - k when a < MIN + k (k > 0) or a > MAX + k (k < 0).
                let what = if op == BinOp::Add { ADD } else { SUB };
                let (above, below) = if op == BinOp::Add { (k64 > 0, k64 < 0) } else { (k64 < 0, k64 > 0) };
                if above {
                    let limit = if op == BinOp::Add { i64::MAX - k64 } else { i64::MAX + k64 };
                    self.load_imm(R1, limit);
                    self.fail_on(Insn::jmp_reg(Cond::Sgt, a, R1, 0), what);
                }
                if below {
                    let limit = if op == BinOp::Add { i64::MIN - k64 } else { i64::MIN + k64 };
                    self.load_imm(R1, limit);
                    self.fail_on(Insn::jmp_reg(Cond::Slt, a, R1, 0), what);
                }
                self.emit(Insn::alu_imm(if op == BinOp::Add { Alu::Add } else { Alu::Sub }, a, k));
            }
            _ => {
                // a * k fits exactly when a is within [lo, hi].
                if k64 != 0 && k64 != 1 {
                    // (k = -1: every a but MIN; MIN / -1 itself overflows.)
                    let (lo, hi) = if k64 > 0 {
                        (i64::MIN / k64, i64::MAX / k64)
                    } else {
                        (i64::MAX / k64, i64::MIN.checked_div(k64).unwrap_or(i64::MAX))
                    };
                    self.load_imm(R1, lo);
                    self.fail_on(Insn::jmp_reg(Cond::Slt, a, R1, 0), MUL);
                    self.load_imm(R1, hi);
                    self.fail_on(Insn::jmp_reg(Cond::Sgt, a, R1, 0), MUL);
                }
                self.emit(Insn::alu_imm(Alu::Mul, a, k));
            }
        }
        true
    }

    /// `a = a OP b` for `+ - *` with the overflow check. Uses r0..r4 (b may be r5).
    pub(super) fn checked_regs(&mut self, op: BinOp, a: Reg, b: Reg) -> bool {
        if !self.checking() {
            return false;
        }
        match op {
            BinOp::Add | BinOp::Sub => {
                // r = a ± b overflows when the sign of r differs from a's and
                // (add) from b's, (sub) a and b differ in sign.
                self.emit(Insn::mov_reg(R1, a));
                self.emit(Insn::alu_reg(if op == BinOp::Add { Alu::Add } else { Alu::Sub }, a, b));
                self.emit(Insn::mov_reg(R2, R1));
                self.emit(Insn::alu_reg(Alu::Xor, R2, a));
                self.emit(Insn::mov_reg(R3, if op == BinOp::Add { b } else { R1 }));
                if op == BinOp::Add {
                    self.emit(Insn::alu_reg(Alu::Xor, R3, a));
                } else {
                    self.emit(Insn::alu_reg(Alu::Xor, R3, b));
                }
                self.emit(Insn::alu_reg(Alu::And, R2, R3));
                self.fail_on(Insn::jmp_imm(Cond::Slt, R2, 0, 0), if op == BinOp::Add { ADD } else { SUB });
            }
            BinOp::Mul => {
                // Magnitudes |a|, |b| as unsigned; their product must fit in
                // 64 bits and be at most 2^63 - 1 (2^63 for a negative result).
                self.emit(Insn::mov_reg(R2, b));
                self.emit(Insn::mov_reg(R1, a));
                self.emit(Insn::mov_reg(R3, a));
                self.emit(Insn::alu_reg(Alu::Xor, R3, b));
                self.emit(Insn::alu_reg(Alu::Mul, a, b));
                self.emit(Insn::jmp_imm(Cond::Sge, R1, 0, 1));
                self.emit(Insn::alu_imm(Alu::Neg, R1, 0));
                self.emit(Insn::jmp_imm(Cond::Sge, R2, 0, 1));
                self.emit(Insn::alu_imm(Alu::Neg, R2, 0));
                let zero = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
                self.emit(Insn::mov_reg(R4, R1));
                self.emit(Insn::alu_reg(Alu::Mul, R4, R2));
                self.emit(Insn::mov_reg(R0, R4));
                self.emit(Insn::alu_reg(Alu::Div, R0, R1));
                self.fail_on(Insn::jmp_reg(Cond::Ne, R0, R2, 0), MUL);
                let negative = self.emit(Insn::jmp_imm(Cond::Slt, R3, 0, 0));
                self.fail_on(Insn::jmp_imm(Cond::Slt, R4, 0, 0), MUL);
                let done = self.emit(Insn::ja(0));
                self.patch_here(negative);
                self.load_imm(R0, i64::MIN);
                self.fail_on(Insn::jmp_reg(Cond::Gt, R4, R0, 0), MUL);
                self.patch_here(done);
                self.patch_here(zero);
            }
            _ => return false,
        }
        true
    }

    /// `*(r0) += v` as one atomic add that gives back the old value. On an
    /// overflow the add is taken back (another atomic add, of -v: adds of
    /// other CPUs in between commute) and the error reported, so the map
    /// keeps its value, as in Rhai.
    pub(super) fn checked_atomic_add(&mut self, v: Reg) -> bool {
        if !self.checking() {
            return false;
        }
        self.emit(Insn::mov_reg(R4, v));
        self.emit(Insn::mov_reg(R1, v));
        self.emit(Insn::atomic_fetch_add64(R0, 0, R1));
        self.emit(Insn::mov_reg(R3, R1));
        self.emit(Insn::alu_reg(Alu::Add, R3, R4));
        self.emit(Insn::alu_reg(Alu::Xor, R1, R3));
        self.emit(Insn::mov_reg(R2, R4));
        self.emit(Insn::alu_reg(Alu::Xor, R2, R3));
        self.emit(Insn::alu_reg(Alu::And, R1, R2));
        let fine = self.emit(Insn::jmp_imm(Cond::Sge, R1, 0, 0));
        self.emit(Insn::alu_imm(Alu::Neg, R4, 0));
        self.emit(Insn::atomic_add64(R0, 0, R4));
        self.fail_on(Insn::ja(0), ADD);
        self.patch_here(fine);
        true
    }

    /// Before `a / b` or `a % b`: division by zero, and MIN / -1.
    pub(super) fn check_division(&mut self, op: BinOp, a: Reg, b: Reg) {
        if !self.checking() {
            return;
        }
        let (zero, overflow) = if op == BinOp::Div { (DIV_ZERO, DIV_OVERFLOW) } else { (MOD, MOD) };
        self.fail_on(Insn::jmp_imm(Cond::Eq, b, 0, 0), zero);
        let fine = self.emit(Insn::jmp_imm(Cond::Ne, b, -1, 0));
        self.load_imm(R1, i64::MIN);
        self.fail_on(Insn::jmp_reg(Cond::Eq, a, R1, 0), overflow);
        self.patch_here(fine);
    }

    /// Before `-a`: MIN has no negation.
    pub(super) fn check_negation(&mut self, a: Reg) {
        if !self.checking() {
            return;
        }
        self.load_imm(R1, i64::MIN);
        self.fail_on(Insn::jmp_reg(Cond::Eq, a, R1, 0), NEG);
    }

    /// The error exits of the checks so far (after a statement): send the
    /// error, return 0. An exit for the same error made not long before is
    /// reused (a jump back; the syscall dispatch repeats one closure per
    /// syscall), else one is made here, which the code before jumps over
    /// unless it `ended`.
    pub(super) fn arith_fail_exits(&mut self, ended: bool) -> Result<()> {
        let Some((ring, lost, probe)) = self.prog.arith_errors else { return Ok(()) };
        let mut fails = std::mem::take(&mut self.arith_fails);
        let here = self.here();
        fails.retain(|&(at, code)| match self.arith_exits.iter().rev().find(|e| e.1 == code) {
            Some(&(exit, _)) if here - exit < REUSE_WITHIN => {
                self.insns[at].off = (exit as i64 - at as i64 - 1) as i16;
                false
            }
            _ => true,
        });
        if fails.is_empty() {
            return Ok(());
        }
        let over = (!ended).then(|| self.emit(Insn::ja(0)));
        fails.sort_by_key(|f| f.1);
        let mark = self.stack_used;
        let mut i = 0;
        while i < fails.len() {
            let code = fails[i].1;
            self.arith_exits.push((self.here(), code));
            while i < fails.len() && fails[i].1 == code {
                self.patch_here(fails[i].0);
                i += 1;
            }
            self.control((ring, lost), CONTROL_ERROR, probe, &Expr::Int(code))?;
            self.emit(Insn::mov_imm(R0, 0));
            self.emit(Insn::exit());
            self.stack_used = mark;
        }
        if let Some(j) = over {
            self.patch_here(j);
        }
        Ok(())
    }
}
