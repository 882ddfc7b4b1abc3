//! Shifts by an amount known only at run time, with Rhai's semantics
//! ([`crate::ir::shift`]) so that the kernel and userspace agree: a
//! negative amount shifts the other way, and an amount of 64 or more gives
//! 0 (left) or the sign (right) instead of the hardware's masked amount.

use super::*;

impl Gen<'_> {
    /// `a = a << b` (`left`) or `a = a >> b`; clobbers `b`.
    pub(super) fn shift_regs(&mut self, left: bool, a: Reg, b: Reg) -> Result<()> {
        let negative = self.emit(Insn::jmp_imm(Cond::Slt, b, 0, 0));
        let mut ends = self.shift_by_magnitude(left, a, b);
        self.patch_here(negative);
        self.emit(Insn::alu_imm(Alu::Neg, b, 0));
        ends.extend(self.shift_by_magnitude(!left, a, b));
        for at in ends {
            self.patch_here(at);
        }
        Ok(())
    }

    /// Shift `a` by the unsigned amount in `b`; returns the jumps to the end.
    fn shift_by_magnitude(&mut self, left: bool, a: Reg, b: Reg) -> Vec<usize> {
        let in_range = self.emit(Insn::jmp_imm(Cond::Lt, b, 64, 0));
        if left {
            self.emit(Insn::mov_imm(a, 0));
        } else {
            self.emit(Insn::alu_imm(Alu::Arsh, a, 63));
        }
        let over = self.emit(Insn::ja(0));
        self.patch_here(in_range);
        self.emit(Insn::alu_reg(if left { Alu::Lsh } else { Alu::Arsh }, a, b));
        vec![over, self.emit(Insn::ja(0))]
    }
}
