//! How a map is laid out whatever the format (text, JSON): the kind of its
//! values, bpftrace's print order, key text, averages, and the rows a
//! histogram prints with the values each bucket holds. `maps.rs` (text) and
//! `json.rs` format from these; `metrics.rs` uses the bucket bounds.

use std::cmp::Ordering;
use std::ops::RangeInclusive;

pub use super::dist::lhist_inner_buckets;
pub use super::value::{KeyPart, MapDump, MapValue};

/// Buckets in a log2 histogram: index 0 holds negative values, 1 holds 0,
/// 2 holds 1, and index k >= 3 holds `[2^(k-2), 2^(k-1))`, up to k = 64.
pub const HIST_LEN: usize = 65;

/// How a map is sorted and laid out; follows from the kind of its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// `Int` values: sorted by value, one line per entry.
    Int,
    /// `Str` values: sorted by key, one line per entry.
    Str,
    /// `Hist` / `Lhist` values: sorted by total count, one bar chart per entry.
    Hist,
    /// `Avg` / `Stats` values: sorted by average, followed by a blank line.
    Stats,
    /// `Quantiles` values: sorted by count, one summary line per entry.
    Quantiles,
}

impl MapValue {
    pub fn kind(&self) -> MapKind {
        match self {
            MapValue::Int(_) | MapValue::Ptr(_) => MapKind::Int,
            MapValue::Str(_) => MapKind::Str,
            MapValue::Hist { .. } | MapValue::Lhist { .. } => MapKind::Hist,
            MapValue::Avg { .. } | MapValue::Stats { .. } => MapKind::Stats,
            MapValue::Quantiles { .. } => MapKind::Quantiles,
        }
    }
}

impl MapDump {
    /// The kind of the map's values; `None` when it has no entries.
    pub fn kind(&self) -> Option<MapKind> {
        self.entries.first().map(|(_, value)| value.kind())
    }
}

#[cfg(test)]
/// Log2 histogram bucket of `v` (see [`HIST_LEN`]).
pub fn hist_bucket(v: i64) -> usize {
    match v {
        v if v < 0 => 0,
        0 => 1,
        v => 2 + (63 - v.leading_zeros() as usize),
    }
}

#[cfg(test)]
/// Linear histogram bucket of `v`: 0 below `min`, `1 + (v - min) / step` up
/// to `max`, and `1 + (max - min) / step` from `max` on (the `[max, ...)` bucket).
pub fn lhist_bucket(v: i64, min: i64, max: i64, step: i64) -> usize {
    if v < min {
        return 0;
    }
    let step = step.max(1) as u64;
    let offset = if v > max { max.wrapping_sub(min) } else { v.wrapping_sub(min) };
    1 + (offset as u64 / step) as usize
}

/// Number of buckets of a linear histogram, including the below-min and
/// from-max buckets.
pub fn lhist_len(min: i64, max: i64, step: i64) -> usize {
    lhist_inner_buckets(min, max, step) as usize + 2
}

/// Key parts rendered as bpftrace does (strings unquoted), joined by `separator`.
pub fn join_key(key: &[KeyPart], separator: &str) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|part| match part {
            KeyPart::Int(v) => v.to_string(),
            KeyPart::Str(s) => s.clone(),
            KeyPart::Ptr(p) => format!("{p:#x}"),
        })
        .collect();
    parts.join(separator)
}

/// avg()/stats() average: `total / count` truncated toward zero, 0 when empty.
pub fn average(count: u64, total: i64) -> i64 {
    match count as i64 {
        0 => 0,
        count => total.wrapping_div(count),
    }
}

pub fn bucket(counts: &[u64], index: usize) -> u64 {
    counts.get(index).copied().unwrap_or(0)
}

/// Buckets a `hist(x, bits)` prints: first to last non-empty one.
pub fn hist_visible_range(counts: &[u64], bits: u8) -> Option<RangeInclusive<usize>> {
    non_empty_range(counts, 0..=probes_ebpf::quantile::hist_len(bits) - 1)
}

/// The values bucket `index` of `hist(x, bits)` holds (see
/// `probes_ebpf::quantile::hist_bucket`): below 0 for index 0; one value
/// each up to index `2^(bits+1)`; then `2^bits` buckets per power of two.
pub fn hist_span(index: usize, bits: u8) -> Span {
    let k = u32::from(bits.min(5));
    let n = 1usize << k;
    match index {
        0 => Span::Below(0),
        i if i <= n => Span::Range(i as i128 - 1, i as i128),
        i => {
            let j = i - 1;
            let power = (j >> k) as u32 - 1;
            let low = ((n + (j & (n - 1))) as i128) << power;
            Span::Range(low, low + (1i128 << power))
        }
    }
}

/// Buckets a linear histogram prints: first to last non-empty one.
pub fn lhist_visible_range(counts: &[u64], min: i64, max: i64, step: i64) -> Option<RangeInclusive<usize>> {
    let last = lhist_inner_buckets(min, max, step) as usize + 1;
    non_empty_range(counts, 0..=last)
}

fn non_empty_range(counts: &[u64], range: RangeInclusive<usize>) -> Option<RangeInclusive<usize>> {
    let mut non_empty = range.filter(|&i| bucket(counts, i) > 0);
    let first = non_empty.next()?;
    let last = non_empty.next_back().unwrap_or(first);
    Some(first..=last)
}

/// `[low, high)` of inner linear histogram bucket `index` (1-based).
pub fn lhist_bucket_bounds(index: usize, min: i64, step: i64) -> (i64, i64) {
    let index = index as i64;
    let low = (index - 1).wrapping_mul(step).wrapping_add(min);
    let high = index.wrapping_mul(step).wrapping_add(min);
    (low, high)
}

/// Entries in bpftrace's print order.
///
/// Int maps sort by value, hist maps by total count, avg/stats maps by
/// average, all ascending; string-valued maps sort by key. Ties between
/// equal values, which bpftrace leaves in hash-table order, go by key; for
/// hist and avg/stats maps in bpftrace's order of the raw key bytes.
pub fn sorted_entries(dump: &MapDump) -> Vec<&(Vec<KeyPart>, MapValue)> {
    let mut entries: Vec<&(Vec<KeyPart>, MapValue)> = dump.entries.iter().collect();
    match dump.kind() {
        None => {}
        Some(MapKind::Int) => {
            entries.sort_by(|(key_a, a), (key_b, b)| int_value(a).cmp(&int_value(b)).then_with(|| key_a.cmp(key_b)))
        }
        Some(MapKind::Str) => entries.sort_by(|(key_a, _), (key_b, _)| compare_keys(key_a, key_b, key_part_order)),
        Some(MapKind::Hist | MapKind::Quantiles) => entries.sort_by(|(key_a, a), (key_b, b)| {
            hist_total(a).cmp(&hist_total(b)).then_with(|| compare_keys(key_a, key_b, key_part_byte_order))
        }),
        Some(MapKind::Stats) => entries.sort_by(|(key_a, a), (key_b, b)| {
            stats_average(a).cmp(&stats_average(b)).then_with(|| compare_keys(key_a, key_b, key_part_byte_order))
        }),
    }
    entries
}

fn int_value(value: &MapValue) -> i64 {
    match value {
        MapValue::Int(v) => *v,
        _ => 0,
    }
}

fn hist_total(value: &MapValue) -> u64 {
    match value {
        MapValue::Hist { counts, .. } | MapValue::Lhist { counts, .. } | MapValue::Quantiles { counts, .. } => {
            counts.iter().fold(0u64, |sum, &c| sum.wrapping_add(c))
        }
        _ => 0,
    }
}

fn stats_average(value: &MapValue) -> i64 {
    match value {
        MapValue::Avg { count, total } | MapValue::Stats { count, total } => average(*count, *total),
        _ => 0,
    }
}

fn compare_keys(a: &[KeyPart], b: &[KeyPart], compare_part: fn(&KeyPart, &KeyPart) -> Ordering) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| compare_part(x, y))
        .find(|order| order.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// bpftrace's key order for maps sorted by key: integers as unsigned
/// 64-bit numbers (negative after positive), strings bytewise.
fn key_part_order(x: &KeyPart, y: &KeyPart) -> Ordering {
    match (integer_bits(x), integer_bits(y)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => x.cmp(y),
    }
}

/// Order of the raw key bytes: integers as little-endian bytes, strings bytewise.
fn key_part_byte_order(x: &KeyPart, y: &KeyPart) -> Ordering {
    match (integer_bits(x), integer_bits(y)) {
        (Some(a), Some(b)) => a.to_le_bytes().cmp(&b.to_le_bytes()),
        _ => x.cmp(y),
    }
}

fn integer_bits(part: &KeyPart) -> Option<u64> {
    match part {
        KeyPart::Int(v) => Some(*v as u64),
        KeyPart::Ptr(p) => Some(*p),
        KeyPart::Str(_) => None,
    }
}

/// The values a printed histogram bucket holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Below this value: a log2 histogram's negative bucket (below 0), a
    /// linear one's below-min bucket.
    Below(i64),
    /// From `low` up to `high`, `high` excluded (`[2, 4)`; `[0, 1)` is 0 alone).
    Range(i128, i128),
    /// From this value up: a linear histogram's from-max bucket.
    From(i64),
}

/// One bucket a histogram prints: its index in the counts, its count and
/// the values it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub index: usize,
    pub count: u64,
    pub span: Span,
}

/// The rows a `hist(x, bits)` prints: first to last non-empty bucket.
pub fn hist_rows(counts: &[u64], bits: u8) -> Vec<Row> {
    let rows = hist_visible_range(counts, bits).into_iter().flatten();
    rows.map(|index| Row { index, count: bucket(counts, index), span: hist_span(index, bits) }).collect()
}

/// The rows a linear histogram prints: first to last non-empty bucket.
pub fn lhist_rows(counts: &[u64], min: i64, max: i64, step: i64) -> Vec<Row> {
    let last = lhist_inner_buckets(min, max, step) as usize + 1;
    let span = |i: usize| {
        if i == 0 {
            Span::Below(min)
        } else if i == last {
            Span::From(max)
        } else {
            let (low, high) = lhist_bucket_bounds(i, min, step);
            Span::Range(low as i128, high as i128)
        }
    };
    let rows = lhist_visible_range(counts, min, max, step).into_iter().flatten();
    rows.map(|index| Row { index, count: bucket(counts, index), span: span(index) }).collect()
}
