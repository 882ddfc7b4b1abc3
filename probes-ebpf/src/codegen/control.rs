//! Control messages (`exit()`, `print(m)`, `m.clear()`, `m.zero()` from a
//! probe): a fixed-size `{u32 kind, u32 probe, u64 arg}` reserved on the
//! control ring. When the ring has no room the message is counted in the
//! second `u64` of the probe's slot of the per-CPU lost array, so userspace
//! reports it like a lost record (the first `u64` counts those). `exit()`
//! isn't counted: its status also goes into the stop flag.

use super::*;
use crate::record::{
    CONTROL_ACTION, CONTROL_ACTION_SIZE, CONTROL_ARG_AT, CONTROL_COMM_AT, CONTROL_KIND_AT, CONTROL_PID_TGID_AT,
    CONTROL_PROBE_AT, CONTROL_SIZE,
};

impl Gen<'_> {
    /// The audit message of an action: [`CONTROL_ACTION`] with `code` and
    /// the current task's pid_tgid and comm, built on the stack and copied
    /// to the control ring (a full ring is counted as a lost control message).
    pub(super) fn audit(&mut self, (ring, lost): (MapId, MapId), probe: u32, code: i64) -> Result<()> {
        let buf = self.alloc(CONTROL_ACTION_SIZE)?;
        self.emit(Insn::store_imm(4, FP, buf + CONTROL_KIND_AT, CONTROL_ACTION as i32));
        self.emit(Insn::store_imm(4, FP, buf + CONTROL_PROBE_AT, probe as i32));
        self.load_imm(R1, code);
        self.emit(Insn::store(8, FP, buf + CONTROL_ARG_AT, R1));
        self.emit(Insn::call(h::GET_CURRENT_PID_TGID));
        self.emit(Insn::store(8, FP, buf + CONTROL_PID_TGID_AT, R0));
        self.emit(Insn::mov_reg(R1, FP));
        self.emit(Insn::alu_imm(Alu::Add, R1, (buf + CONTROL_COMM_AT) as i32));
        self.emit(Insn::mov_imm(R2, 16));
        self.emit(Insn::call(h::GET_CURRENT_COMM));
        self.load_map(R1, ring);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, buf as i32));
        self.emit(Insn::mov_imm(R3, CONTROL_ACTION_SIZE as i32));
        self.emit(Insn::mov_imm(R4, 0));
        self.emit(Insn::call(h::RINGBUF_OUTPUT));
        let sent = self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0));
        self.count_in_slot(lost, probe, 8)?;
        self.patch_here(sent);
        Ok(())
    }

    pub(super) fn control(&mut self, (ring, lost): (MapId, MapId), kind: u32, probe: u32, arg: &Expr) -> Result<()> {
        let rv = self.int(arg)?;
        self.load_map(R1, ring);
        self.emit(Insn::mov_imm(R2, CONTROL_SIZE as i32));
        self.emit(Insn::mov_imm(R3, 0));
        self.emit(Insn::call(h::RINGBUF_RESERVE));
        let full = self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0));
        self.emit(Insn::store_imm(4, R0, CONTROL_KIND_AT, kind as i32));
        self.emit(Insn::store_imm(4, R0, CONTROL_PROBE_AT, probe as i32));
        self.emit(Insn::store(8, R0, CONTROL_ARG_AT, rv));
        self.emit(Insn::mov_reg(R1, R0));
        self.emit(Insn::mov_imm(R2, 0));
        self.emit(Insn::call(h::RINGBUF_SUBMIT));
        if kind == crate::record::CONTROL_EXIT {
            // Not lost: exit() also raises the stop flag, which userspace reads.
            self.patch_here(full);
            self.release(rv);
            return Ok(());
        }
        let sent = self.emit(Insn::ja(0));
        self.patch_here(full);
        // Count the loss in lost[probe].control.
        self.count_in_slot(lost, probe, 8)?;
        self.patch_here(sent);
        self.release(rv);
        Ok(())
    }
}
