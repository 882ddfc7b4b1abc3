//! `-k` / `-kk`: after a helper call that can fail, a negative result is
//! counted in the call site's slot of the failed-helper counters and kept
//! as the slot's last error, so userspace reports each failing statement
//! with its count and error (bpftrace's "check helper return values").
//! Without checks (`Program::helper_checks` is `None`) nothing is emitted.

use super::*;
use crate::record::{HELPER_ERROR_CODE_AT, HELPER_ERROR_COUNT_AT};

/// One checked helper call: its counter slot, the helper and the statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperSite {
    pub slot: u32,
    pub helper: u32,
    pub span: Span,
}

/// A memory read (checked only under `-kk`).
fn is_read(helper: u32) -> bool {
    matches!(
        helper,
        h::PROBE_READ
            | h::PROBE_READ_STR
            | h::PROBE_READ_USER
            | h::PROBE_READ_KERNEL
            | h::PROBE_READ_USER_STR
            | h::PROBE_READ_KERNEL_STR
    )
}

impl Gen<'_> {
    /// After a call to `helper` (result in r0): count a failure.
    pub(super) fn check_helper(&mut self, helper: u32) -> Result<()> {
        self.check_helper_unless(helper, None)
    }

    /// After a call to `helper`: count a failure other than `-normal` (an
    /// error that is an ordinary outcome there, such as a missing key).
    pub(super) fn check_helper_unless(&mut self, helper: u32, normal: Option<i32>) -> Result<()> {
        let Some(checks) = self.prog.helper_checks else { return Ok(()) };
        if is_read(helper) && !checks.reads {
            return Ok(());
        }
        let slot = checks.first_slot + self.helper_sites.len() as u32;
        self.helper_sites.push(HelperSite { slot, helper, span: self.span });
        if matches!(helper, h::MAP_UPDATE_ELEM | h::MAP_DELETE_ELEM) {
            // Before Linux 6.4 the map operations these calls are rewritten
            // to return a 32-bit int: the upper half of r0 is not its sign.
            self.emit(Insn::alu_imm(Alu::Lsh, R0, 32));
            self.emit(Insn::alu_imm(Alu::Arsh, R0, 32));
        }
        let mut fine = vec![self.emit(Insn::jmp_imm(Cond::Sge, R0, 0, 0))];
        if let Some(errno) = normal {
            fine.push(self.emit(Insn::jmp_imm(Cond::Eq, R0, -errno, 0)));
        }
        let code = self.alloc(8)?;
        self.emit(Insn::store(8, FP, code, R0));
        let key = self.alloc(8)?;
        self.emit(Insn::store_imm(8, FP, key, slot as i32));
        let missing = self.lookup(checks.map, key);
        self.emit(Insn::load(8, R1, R0, HELPER_ERROR_COUNT_AT));
        self.emit(Insn::alu_imm(Alu::Add, R1, 1));
        self.emit(Insn::store(8, R0, HELPER_ERROR_COUNT_AT, R1));
        self.emit(Insn::load(8, R1, FP, code));
        self.emit(Insn::store(8, R0, HELPER_ERROR_CODE_AT, R1));
        self.patch_all_here(missing);
        self.patch_all_here(fine);
        Ok(())
    }
}
