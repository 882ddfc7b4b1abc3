//! Reading an aggregation map in the kernel (`let v = m[k];` where
//! `m[k] = avg(x)`): the per-CPU slots of the key are combined exactly as
//! userspace combines them when it prints the map, so a kernel read, a
//! filter on it and the printed value agree.
//!
//! - count/sum: the sum of the slots;
//! - min/max: the least/greatest value over the slots that saw one (0 if none);
//! - avg/stats: total / count over all slots, signed, truncated toward zero
//!   (0 when empty), as the printed average.
//!
//! The CPUs are visited with `map_lookup_percpu_elem`, unrolled (one lookup
//! per possible CPU), so the program has no loop for the verifier to bound.

use super::*;

impl Gen<'_> {
    /// The value of aggregation map `map` at `key`, combined over every CPU.
    pub(super) fn agg_read(&mut self, map: MapId, key: &[Expr], kind: AggKind) -> Result<Reg> {
        if kind == AggKind::Hist {
            return Err(self.err(
                "a histogram can't be read as a number in a probe; read it in userspace (m.percentile(p), m.count())",
            ));
        }
        let key_off = self.build_key(map, key, None)?;
        // acc+0: sum / count / best value; acc+8: total / "seen".
        let acc = self.alloc(16)?;
        self.zero_stack(acc, 16);
        let cpus = self.prog.possible_cpus.max(1);
        for cpu in 0..cpus {
            self.load_map(R1, map);
            self.emit(Insn::mov_reg(R2, FP));
            self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
            self.emit(Insn::mov_imm(R3, cpu as i32));
            self.emit(Insn::call(h::MAP_LOOKUP_PERCPU_ELEM));
            let missing = self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0));
            match kind {
                AggKind::Sum => self.add_slot(R0, 0, acc),
                AggKind::Avg => {
                    self.add_slot(R0, 0, acc);
                    self.add_slot(R0, 8, acc + 8);
                }
                AggKind::Min | AggKind::Max => {
                    // This CPU's { value, seen }: take it when seen and either
                    // nothing was taken yet or it is better.
                    self.emit(Insn::load(8, R1, R0, 8));
                    let unseen = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
                    self.emit(Insn::load(8, R1, R0, 0));
                    self.emit(Insn::load(8, R2, FP, acc + 8));
                    let first = self.emit(Insn::jmp_imm(Cond::Eq, R2, 0, 0));
                    self.emit(Insn::load(8, R2, FP, acc));
                    let keep = if kind == AggKind::Min { Cond::Sge } else { Cond::Sle };
                    let worse = self.emit(Insn::jmp_reg(keep, R1, R2, 0));
                    self.patch_here(first);
                    self.emit(Insn::store(8, FP, acc, R1));
                    self.emit(Insn::store_imm(8, FP, acc + 8, 1));
                    self.patch_here(worse);
                    self.patch_here(unseen);
                }
                AggKind::Hist => unreachable!(),
            }
            self.patch_here(missing);
        }
        let r = self.reg()?;
        match kind {
            AggKind::Avg => {
                // total / count; BPF division by zero gives 0, the empty average.
                self.emit(Insn::load(8, r, FP, acc + 8));
                self.emit(Insn::load(8, R3, FP, acc));
                self.wrapping = true;
                let divided = self.binary_regs(BinOp::Div, r, R3);
                self.wrapping = false;
                divided?;
            }
            _ => {
                self.emit(Insn::load(8, r, FP, acc));
            }
        }
        Ok(r)
    }

    /// `fp[acc] += [ptr + off]`.
    fn add_slot(&mut self, ptr: Reg, off: i16, acc: i16) {
        self.emit(Insn::load(8, R1, ptr, off));
        self.emit(Insn::load(8, R2, FP, acc));
        self.emit(Insn::alu_reg(Alu::Add, R2, R1));
        self.emit(Insn::store(8, FP, acc, R2));
    }
}
