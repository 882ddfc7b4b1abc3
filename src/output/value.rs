//! Decoded map contents: what userspace reads out of a BPF map (per-CPU
//! values already combined), before any layout. Text, JSON, metrics and the
//! distribution readers all format or read these.

/// One part of a map key as userspace decoded it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyPart {
    Int(i64),
    Str(String),
    /// A pointer: printed in hex (`0xffff888003a1c000`), as bpftrace does.
    Ptr(u64),
}

/// A map value as userspace decoded it (per-CPU values already summed / combined).
#[derive(Clone, Debug, PartialEq)]
pub enum MapValue {
    /// count(), sum(), min(), max(), plain `m[k] = v`.
    Int(i64),
    /// A string stored as a value.
    Str(String),
    /// A pointer stored as a value: printed in hex (a JSON string).
    Ptr(u64),
    /// avg(): printed as `total / count`, truncated toward zero.
    Avg { count: u64, total: i64 },
    /// stats(): printed as `count N, average A, total T`.
    Stats { count: u64, total: i64 },
    /// `hist(x, bits)` counts indexed by `layout::hist_bucket`: log2 buckets
    /// (at most `HIST_LEN`) when `bits` is 0, else `2^bits` linear
    /// sub-buckets per power of two (`probes_ebpf::quantile::hist_bucket`).
    Hist { bits: u8, counts: Vec<u64> },
    /// Linear histogram counts indexed by `layout::lhist_bucket`.
    Lhist { min: i64, max: i64, step: i64, counts: Vec<u64> },
    /// quantiles(): counts indexed by `probes_ebpf::quantile::bucket`;
    /// `unit_ns` > 0 when the values are durations in units of that many ns.
    Quantiles { unit_ns: u32, counts: Vec<u64> },
}

/// The decoded contents of one map.
#[derive(Clone, Debug, PartialEq)]
pub struct MapDump {
    /// Map name without the leading `@`.
    pub name: String,
    /// `@total: 5` rather than `@calls[bash]: 12`.
    pub keyless: bool,
    pub entries: Vec<(Vec<KeyPart>, MapValue)>,
}
