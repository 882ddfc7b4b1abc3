//! Map access: keys built on the stack, lookups (and insert-if-missing),
//! stores and read-modify-write updates, aggregations (count/sum/min/max/avg/
//! stats/hist/lhist) with their log2 and linear bucket computations.

use super::*;

impl Gen<'_> {
    /// Build the key of `map` on the stack; returns its offset. `bucket` is the
    /// extra trailing part of histogram keys.
    pub(super) fn build_key(&mut self, map: MapId, key: &[Expr], bucket: Option<Reg>) -> Result<i16> {
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
    pub(super) fn lookup(&mut self, map: MapId, key_off: i16) -> Patches {
        self.load_map(R1, map);
        self.emit(Insn::mov_reg(R2, FP));
        self.emit(Insn::alu_imm(Alu::Add, R2, key_off as i32));
        self.emit(Insn::call(h::MAP_LOOKUP_ELEM));
        vec![self.emit(Insn::jmp_imm(Cond::Eq, R0, 0, 0))]
    }

    /// `r0 = pointer to the value of key`, inserting a zeroed value first when
    /// the key is missing. Jumps in the result are taken if that still fails
    /// (map full).
    pub(super) fn lookup_or_init(&mut self, map: MapId, key_off: i16) -> Result<Patches> {
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
        self.check_helper_unless(h::MAP_UPDATE_ELEM, Some(EEXIST))?;
        let failed = self.lookup(map, key_off);
        self.patch_here(found);
        Ok(failed)
    }

    pub(super) fn map_store(&mut self, map: MapId, key: &[Expr], value: &Expr) -> Result<()> {
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
        self.check_helper(h::MAP_UPDATE_ELEM)
    }

    pub(super) fn map_update(&mut self, map: MapId, key: &[Expr], op: BinOp, value: &Expr) -> Result<()> {
        if self.prog.maps[map as usize].value != ValueKind::Value(Ty::Int) {
            return Err(self.err("compound assignment needs a map of integers"));
        }
        let rv = self.int(value)?;
        let key_off = self.build_key(map, key, None)?;
        let failed = self.lookup_or_init(map, key_off)?;
        if op == BinOp::Add {
            if !self.checked_atomic_add(rv) {
                self.emit(Insn::atomic_add64(R0, 0, rv));
            }
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

    pub(super) fn aggregate(&mut self, map: MapId, key: &[Expr], op: AggOp, value: Option<&Expr>) -> Result<()> {
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
            AggOp::HistBits { bits } => {
                let v = rv.ok_or_else(need_value)?;
                Some(self.log2_linear_bucket(v, bits)?)
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
            AggOp::Count | AggOp::Hist | AggOp::HistBits { .. } | AggOp::Lhist { .. } | AggOp::Quantiles { .. } => {
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

    /// r2 += floor(log2 r1) for r1 > 0, by halving searches (r1 and r3 are
    /// clobbered): shared by the log2 and the log2-linear buckets.
    fn add_floor_log2(&mut self) {
        for shift in [32, 16, 8, 4, 2, 1] {
            self.emit(Insn::mov_reg(R3, R1));
            self.emit(Insn::alu_imm(Alu::Rsh, R3, shift));
            self.emit(Insn::jmp_imm(Cond::Eq, R3, 0, 2));
            self.emit(Insn::alu_imm(Alu::Add, R2, shift));
            self.emit(Insn::mov_reg(R1, R3));
        }
    }

    /// Bucket of a log2 histogram: 0 for negatives, 1 for 0, 2 + floor(log2 v) above.
    pub(super) fn log2_bucket(&mut self, v: Reg) -> Result<Reg> {
        // r1 = working value, r2 = result; the bucket goes back into a temp.
        self.emit(Insn::mov_reg(R1, v));
        self.emit(Insn::mov_imm(R2, 0));
        let negative = self.emit(Insn::jmp_imm(Cond::Slt, R1, 0, 0));
        self.emit(Insn::mov_imm(R2, 1));
        let zero = self.emit(Insn::jmp_imm(Cond::Eq, R1, 0, 0));
        self.emit(Insn::mov_imm(R2, 2));
        self.add_floor_log2();
        self.patch_here(negative);
        self.patch_here(zero);
        let b = self.reg()?;
        self.emit(Insn::mov_reg(b, R2));
        Ok(b)
    }

    /// Bucket of `hist(v, bits)`: 0 for negatives, `v + 1` up to
    /// `2^bits - 1`, then `2^bits` linear sub-buckets per power of two
    /// (`quantile::hist_bucket`, bpftrace's `log2(n, k)`).
    pub(super) fn log2_linear_bucket(&mut self, v: Reg, bits: u8) -> Result<Reg> {
        let k = i32::from(bits.min(5));
        let mask = (1i32 << k) - 1;
        // r1 = working value, r2 = floor(log2 v), r3 = scratch; the bucket ends in r2.
        self.emit(Insn::mov_imm(R2, 0));
        let negative = self.emit(Insn::jmp_imm(Cond::Slt, v, 0, 0));
        self.emit(Insn::mov_reg(R2, v));
        self.emit(Insn::alu_imm(Alu::Add, R2, 1));
        let small = self.emit(Insn::jmp_imm(Cond::Sle, v, mask, 0));
        self.emit(Insn::mov_reg(R1, v));
        self.emit(Insn::mov_imm(R2, 0));
        self.add_floor_log2();
        // r2 = l - k; r1 = the k bits after the leading 1.
        self.emit(Insn::alu_imm(Alu::Sub, R2, k));
        self.emit(Insn::mov_reg(R1, v));
        self.emit(Insn::alu_reg(Alu::Rsh, R1, R2));
        self.emit(Insn::alu_imm(Alu::And, R1, mask));
        // ((l - k + 1) << k) + x + 1
        self.emit(Insn::alu_imm(Alu::Add, R2, 1));
        self.emit(Insn::alu_imm(Alu::Lsh, R2, k));
        self.emit(Insn::alu_reg(Alu::Add, R2, R1));
        self.emit(Insn::alu_imm(Alu::Add, R2, 1));
        self.patch_here(negative);
        self.patch_here(small);
        let b = self.reg()?;
        self.emit(Insn::mov_reg(b, R2));
        Ok(b)
    }

    /// Bucket of a linear histogram: 0 below min, 1 + (v-min)/step inside, n+1 at or above max.
    pub(super) fn linear_bucket(&mut self, v: Reg, min: i64, max: i64, step: i64) -> Result<Reg> {
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
}
