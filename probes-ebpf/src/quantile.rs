//! The log-linear buckets of `quantiles(x)`, in one place: the bucket index
//! as Rust (for userspace and tests) and as BPF instructions (for the
//! kernel side), the bounds of each bucket, and the value a percentile
//! query answers for it.
//!
//! Values below 64 each have a bucket of their own. Above, every power of
//! two `[2^e, 2^(e+1))` is cut into 64 equal buckets (HdrHistogram's layout
//! with 6 significant bits), so a bucket is never wider than 1/64 of its
//! lower bound. Answering with the bucket's middle is then within 1/128
//! (0.78%) of any value in it, for every value from 1 to 2^63 - 1.
//! Negative values count as 0.

use crate::insn::{Alu, Cond, Insn, Reg, R1, R2, R3};

/// Significant bits kept: 2^SUB_BITS buckets per power of two.
pub const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Number of buckets: the exact ones below 64, then 64 per power of two up
/// to 2^62 (the top bucket ends at 2^63).
pub const BUCKETS: usize = ((62 - SUB_BITS as usize + 1) * SUB as usize) + SUB as usize;

/// The bucket of `v`.
pub fn bucket(v: i64) -> usize {
    if v < SUB as i64 {
        return v.max(0) as usize;
    }
    let v = v as u64;
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The values bucket `i` holds: `[lo, hi)`.
pub fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let shift = (i / SUB - 1) as u32;
    let sub = i % SUB;
    let lo = (SUB + sub) << shift;
    (lo, lo + (1u64 << shift))
}

/// What a query answers for a value in bucket `i`: its middle (exact below 128).
pub fn estimate(i: usize) -> i64 {
    let (lo, hi) = bounds(i);
    (lo + (hi - lo - 1) / 2) as i64
}

/// BPF code that puts the bucket of the signed value in `v` into `out`.
/// Uses r1-r3 as scratch; `v` and `out` must be other registers. Straight
/// code with forward jumps only, the same index as [`bucket`].
pub fn bucket_insns(v: Reg, out: Reg) -> Vec<Insn> {
    let mut code = vec![Insn::mov_imm(out, 0)];
    // Filled in below: negatives leave 0, small values are their own bucket.
    let negative = code.len();
    code.push(Insn::jmp_imm(Cond::Slt, v, 0, 0));
    code.push(Insn::mov_reg(out, v));
    let small = code.len();
    code.push(Insn::jmp_imm(Cond::Lt, v, SUB as i32, 0));
    // r2 = floor(log2 v), by halving the search range.
    code.push(Insn::mov_reg(R1, v));
    code.push(Insn::mov_imm(R2, 0));
    for shift in [32, 16, 8, 4, 2, 1] {
        code.push(Insn::mov_reg(R3, R1));
        code.push(Insn::alu_imm(Alu::Rsh, R3, shift));
        code.push(Insn::jmp_imm(Cond::Eq, R3, 0, 2));
        code.push(Insn::alu_imm(Alu::Add, R2, shift));
        code.push(Insn::mov_reg(R1, R3));
    }
    // r3 = the 6 bits after the leading one: (v >> (e - 6)) & 63.
    code.push(Insn::mov_reg(R3, v));
    code.push(Insn::mov_reg(R1, R2));
    code.push(Insn::alu_imm(Alu::Sub, R1, SUB_BITS as i32));
    code.push(Insn::alu_reg(Alu::Rsh, R3, R1));
    code.push(Insn::alu_imm(Alu::And, R3, (SUB - 1) as i32));
    // out = (e - 5) * 64 + r3
    code.push(Insn::alu_imm(Alu::Sub, R2, SUB_BITS as i32 - 1));
    code.push(Insn::alu_imm(Alu::Lsh, R2, SUB_BITS as i32));
    code.push(Insn::alu_reg(Alu::Add, R2, R3));
    code.push(Insn::mov_reg(out, R2));
    let end = code.len();
    for at in [negative, small] {
        code[at].off = (end - at - 1) as i16;
    }
    code
}

/// The nearest-rank percentile `p` (0-100) of bucket counts, answered with
/// [`estimate`]; `None` when there are no samples.
pub fn percentile(counts: &[u64], p: f64) -> Option<i64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(estimate(i));
        }
    }
    None
}

/// The bucket of a log2 histogram (`hist()`): 0 for negatives, 1 for 0,
/// 2 + floor(log2 v) above, as the generated code computes it.
pub fn log2_bucket(v: i64) -> u64 {
    match v {
        i64::MIN..=-1 => 0,
        0 => 1,
        _ => 2 + (63 - v.leading_zeros() as u64),
    }
}

/// The bucket of `hist(v, bits)` (bpftrace's `hist(n, k)`): 0 for
/// negatives, `v + 1` for `v < 2^bits`, then `2^bits` linear sub-buckets
/// per power of two: `((l - bits + 1) << bits) + x + 1`, `l = floor(log2 v)`
/// and `x` the `bits` bits after the leading 1. `bits = 0` is [`log2_bucket`].
pub fn hist_bucket(v: i64, bits: u8) -> u64 {
    let k = u32::from(bits.min(5));
    let mask = (1i64 << k) - 1;
    if v < 0 {
        return 0;
    }
    if v <= mask {
        return v as u64 + 1;
    }
    let shift = (63 - v.leading_zeros()) - k;
    let x = ((v >> shift) & mask) as u64;
    ((u64::from(shift) + 1) << k) + x + 1
}

/// Buckets `hist(v, bits)` uses: index 0 (negatives) up to that of `i64::MAX`.
pub fn hist_len(bits: u8) -> usize {
    hist_bucket(i64::MAX, bits) as usize + 1
}

/// The bucket of a linear histogram (`lhist(v, min, max, step)`): 0 below
/// min, 1 + (v - min) / step inside, n + 1 at or above max.
pub fn linear_bucket(v: i64, min: i64, max: i64, step: i64) -> u64 {
    if step <= 0 || max <= min || v < min {
        return 0;
    }
    if v >= max {
        return ((max - min) / step) as u64 + 1;
    }
    ((v - min) as u64) / (step as u64) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values around every power of two and their neighbours.
    fn probes() -> Vec<i64> {
        let mut v = vec![0, 1, 2, 63, 64, 65, 127, 128, 129, 1000, 12345, i64::MAX, i64::MAX - 1];
        for e in 1..63 {
            let p = 1i64 << e;
            v.extend([p - 1, p, p + 1, p + p / 3, p + p / 2 + 7]);
        }
        v
    }

    #[test]
    fn buckets_hold_their_values() {
        for v in probes() {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v}: bucket {i}");
            let (lo, hi) = bounds(i);
            assert!(lo <= v as u64 && (v as u64) < hi, "{v} not in bucket {i} [{lo}, {hi})");
        }
        assert_eq!(bucket(i64::MAX), BUCKETS - 1);
        assert_eq!(bounds(BUCKETS - 1).1, 1u64 << 63);
        assert_eq!(bucket(-5), 0);
        assert_eq!(bucket(i64::MIN), 0);
    }

    #[test]
    fn buckets_are_contiguous() {
        for i in 1..BUCKETS {
            assert_eq!(bounds(i - 1).1, bounds(i).0, "gap before bucket {i}");
        }
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(bucket(lo as i64), i);
            assert_eq!(bucket((hi - 1) as i64), i);
        }
    }

    #[test]
    fn estimates_are_within_one_percent() {
        for v in probes().into_iter().filter(|&v| v >= 1) {
            let e = estimate(bucket(v));
            let err = (e as f64 - v as f64).abs() / v as f64;
            assert!(err <= 1.0 / 128.0 + 1e-12, "{v}: estimate {e}, error {err}");
        }
        for v in 0..128 {
            assert_eq!(estimate(bucket(v)), v, "small values are exact");
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut counts = vec![0u64; BUCKETS];
        for v in 1..=100 {
            counts[bucket(v)] += 1;
        }
        assert_eq!(percentile(&counts, 50.0), Some(50));
        assert_eq!(percentile(&counts, 99.0), Some(99));
        assert_eq!(percentile(&counts, 100.0), Some(100));
        assert_eq!(percentile(&counts, 0.0), Some(1));
        assert_eq!(percentile(&vec![0; BUCKETS], 50.0), None);
    }

    #[test]
    fn code_is_forward_only() {
        let code = bucket_insns(6, 7);
        for (i, insn) in code.iter().enumerate() {
            if insn.is_jump() {
                assert!(insn.off >= 0 && i + (insn.off as usize) < code.len(), "jump at {i}");
            }
        }
    }
}
