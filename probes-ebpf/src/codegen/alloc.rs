//! Registers and stack: the temporaries r6–r9 (popped from a free list, with
//! `SPILL_SCRATCH` for the one operand `int_keeping` cannot hold), the stack
//! bump allocator rewound after every statement, instruction emission with
//! its span, and forward-jump patching.

use super::*;

impl Gen<'_> {
    pub(super) fn err(&self, message: impl Into<String>) -> CodegenError {
        CodegenError { span: self.span, message: message.into() }
    }

    pub(super) fn emit(&mut self, insn: Insn) -> usize {
        self.insns.push(insn);
        self.spans.push(self.span);
        self.insns.len() - 1
    }

    pub(super) fn emit2(&mut self, pair: [Insn; 2]) -> usize {
        let at = self.emit(pair[0]);
        self.emit(pair[1]);
        at
    }

    pub(super) fn load_imm(&mut self, reg: Reg, v: i64) {
        if v >= i32::MIN as i64 && v <= i32::MAX as i64 {
            self.emit(Insn::mov_imm(reg, v as i32));
        } else {
            self.emit2(Insn::ld_imm64(reg, v));
        }
    }

    pub(super) fn load_map(&mut self, reg: Reg, map: MapId) {
        let at = self.emit2(Insn::ld_map(reg, map));
        self.map_relocs.push((at, map));
    }

    pub(super) fn here(&self) -> usize {
        self.insns.len()
    }

    /// Point the jump at `at` to the next instruction emitted.
    pub(super) fn patch_here(&mut self, at: usize) {
        let off = self.here() as i64 - at as i64 - 1;
        if off > i16::MAX as i64 && self.long_jump.is_none() {
            self.long_jump = Some(self.spans[at]);
        }
        self.insns[at].off = off as i16;
    }

    pub(super) fn patch_all_here(&mut self, patches: Patches) {
        for at in patches {
            self.patch_here(at);
        }
    }

    pub(super) fn alloc(&mut self, size: u32) -> Result<i16> {
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

    pub(super) fn reg(&mut self) -> Result<Reg> {
        self.free.pop().ok_or_else(|| self.err("expression too complex; split it with `let`"))
    }

    pub(super) fn release(&mut self, r: Reg) {
        if r == SPILL_SCRATCH {
            return;
        }
        debug_assert!(!self.free.contains(&r));
        self.free.push(r);
    }

    pub(super) fn take_specific(&mut self, r: Reg) {
        let i = self.free.iter().position(|&x| x == r).expect("register is free");
        self.free.remove(i);
    }

    pub(super) fn zero_stack(&mut self, off: i16, size: u32) {
        for i in (0..size as i16).step_by(8) {
            self.emit(Insn::store_imm(8, FP, off + i, 0));
        }
    }

    pub(super) fn local_ty(&self, id: LocalId) -> Ty {
        self.prog.locals[id as usize]
    }
}
