//! `Emit` statements: a record assembled on the stack and sent to the data
//! ring with batched wake-ups (a failed send counts in the probe's lost
//! slot). `Control` statements are in `control.rs`; both count what they
//! lose with [`Gen::count_in_slot`], as do stack captures and `-k` checks.

use super::*;
use crate::record::field_offsets;

impl Gen<'_> {
    /// Assemble a record on the stack and `ringbuf_output` it.
    pub(super) fn emit_record(
        &mut self,
        (ring, lost, wake): (MapId, MapId, Option<MapId>),
        site: u32,
        probe: u32,
        fields: &[Expr],
        wake_bytes: u32,
    ) -> Result<()> {
        let (offsets, size) = field_offsets(fields.iter().map(|f| self.ty(f)));
        let buf = self.alloc(size).map_err(|_| {
            self.err(format!(
                "these statements send {} kernel values ({size} bytes) to userspace in one record, more than fits the \
                 {MAX_STACK}-byte BPF stack: send fewer values, or shorter strings (str(p, LEN))",
                fields.len()
            ))
        })?;
        self.emit(Insn::store_imm(4, FP, buf, site as i32));
        self.emit(Insn::store_imm(4, FP, buf + 4, 0));
        for (f, at) in fields.iter().zip(offsets) {
            let off = buf + at as i16;
            match self.ty(f) {
                Ty::Int => {
                    let r = self.int(f)?;
                    self.emit(Insn::store(8, FP, off, r));
                    self.release(r);
                }
                Ty::Bytes(n) => self.bytes(f, off, n)?,
            }
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
        self.count_in_slot(lost, probe, 0)?;
        self.patch_here(sent);
        Ok(())
    }

    /// Add 1 to the `u64` at `at` in slot `slot` of the per-CPU counters
    /// `map` (lost records and control messages, failed helper calls).
    pub(super) fn count_in_slot(&mut self, map: MapId, slot: u32, at: i16) -> Result<()> {
        let key = self.alloc(8)?;
        self.emit(Insn::store_imm(8, FP, key, slot as i32));
        self.count_at(map, key, at);
        Ok(())
    }

    /// Add 1 to the `u64` at `at` of `map[key]` (nothing when the key is missing).
    pub(super) fn count_at(&mut self, map: MapId, key: i16, at: i16) {
        let missing = self.lookup(map, key);
        self.emit(Insn::load(8, R1, R0, at));
        self.emit(Insn::alu_imm(Alu::Add, R1, 1));
        self.emit(Insn::store(8, R0, at, R1));
        self.patch_all_here(missing);
    }
}
