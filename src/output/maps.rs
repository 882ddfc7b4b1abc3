//! Decoded map contents, bpftrace's sort orders, histogram buckets, and the
//! text layout of `print(@m)` / the exit dump.

use std::cmp::Ordering;
use std::fmt::Write;
use std::ops::RangeInclusive;

pub use super::dist::lhist_inner_buckets;
pub use super::value::{KeyPart, MapDump, MapValue};

/// Buckets in a log2 histogram: index 0 holds negative values, 1 holds 0,
/// 2 holds 1, and index k >= 3 holds `[2^(k-2), 2^(k-1))`, up to k = 64.
pub const HIST_LEN: usize = 65;

/// Width of the `|@@@...|` bar column.
const BAR_WIDTH: usize = 52;

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
            MapValue::Int(_) => MapKind::Int,
            MapValue::Str(_) => MapKind::Str,
            MapValue::Hist(_) | MapValue::Lhist { .. } => MapKind::Hist,
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

/// The map as bpftrace prints it with `print(@m)` or at exit, ending in a
/// newline (two after avg/stats maps). An empty map prints as one newline;
/// use [`format_empty_map_text`] when the kind of an empty map is known.
pub fn format_map_text(dump: &MapDump) -> String {
    let Some(kind) = dump.kind() else {
        return format_empty_map_text(MapKind::Int);
    };
    let mut out = String::new();
    for (i, (key, value)) in sorted_entries(dump).into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push('@');
        out.push_str(&dump.name);
        if !dump.keyless {
            out.push('[');
            out.push_str(&join_key(key, ", "));
            out.push(']');
        }
        out.push_str(": ");
        push_text_value(&mut out, value);
    }
    out.push('\n');
    if kind == MapKind::Stats {
        out.push('\n');
    }
    out
}

/// What bpftrace prints for a map without entries.
pub fn format_empty_map_text(kind: MapKind) -> String {
    match kind {
        MapKind::Stats => "\n\n".to_string(),
        MapKind::Int | MapKind::Str | MapKind::Hist | MapKind::Quantiles => "\n".to_string(),
    }
}

/// `Attaching N probes...` line.
pub fn format_attached_text(n: usize) -> String {
    if n == 1 {
        "Attaching 1 probe...\n".to_string()
    } else {
        format!("Attaching {n} probes...\n")
    }
}

#[cfg(test)]
/// `Lost N events` line.
pub fn format_lost_events_text(lost: u64) -> String {
    format!("Lost {lost} events\n")
}

fn push_text_value(out: &mut String, value: &MapValue) {
    match value {
        MapValue::Int(v) => {
            let _ = write!(out, "{v}");
        }
        MapValue::Str(s) => out.push_str(s),
        MapValue::Avg { count, total } => {
            let _ = write!(out, "{}", average(*count, *total));
        }
        MapValue::Stats { count, total } => {
            let _ = write!(out, "count {}, average {}, total {}", *count as i64, average(*count, *total), total);
        }
        MapValue::Hist(counts) => {
            out.push('\n');
            push_hist_text(out, counts);
        }
        MapValue::Lhist { min, max, step, counts } => {
            out.push('\n');
            push_lhist_text(out, counts, *min, *max, *step);
        }
        MapValue::Quantiles { unit_ns, counts } => out.push_str(&super::dist::quantiles_text(*unit_ns, counts)),
    }
}

fn push_hist_text(out: &mut String, counts: &[u64]) {
    let Some(rows) = hist_visible_range(counts) else {
        return;
    };
    let max_count = max_count(counts, 0..=HIST_LEN - 1);
    for i in rows {
        push_bar_row(out, &hist_bucket_label(i), bucket(counts, i), max_count);
    }
}

fn push_lhist_text(out: &mut String, counts: &[u64], min: i64, max: i64, step: i64) {
    let inner = lhist_inner_buckets(min, max, step);
    let Some(rows) = lhist_visible_range(counts, min, max, step) else {
        return;
    };
    let max_count = max_count(counts, 0..=inner as usize + 1);
    for i in rows {
        let label = if i == 0 {
            format!("(..., {})", lhist_number_label(min))
        } else if i as i64 == inner + 1 {
            format!("[{}, ...)", lhist_number_label(max))
        } else {
            let (low, high) = lhist_bucket_bounds(i, min, step);
            format!("[{}, {})", lhist_number_label(low), lhist_number_label(high))
        };
        push_bar_row(out, &label, bucket(counts, i), max_count);
    }
}

fn push_bar_row(out: &mut String, label: &str, count: u64, max_count: u64) {
    // Single-precision arithmetic, as bpftrace computes the width.
    let width = ((count as f32 / max_count as f32) * BAR_WIDTH as f32) as usize;
    let bar = "@".repeat(width.min(BAR_WIDTH));
    let _ = writeln!(out, "{label:<16}{count:>8} |{bar:<BAR_WIDTH$}|");
}

/// `(..., 0)`, `[0]`, `[1]`, `[2, 4)`, ..., `[1K, 2K)`, ..., `[4E, 8E)`.
fn hist_bucket_label(index: usize) -> String {
    match index {
        0 => "(..., 0)".to_string(),
        1 => "[0]".to_string(),
        2 => "[1]".to_string(),
        i => format!("[{}, {})", power_of_two_label(i - 2), power_of_two_label(i - 1)),
    }
}

/// `2^power` with a binary suffix: 512, 1K, 2M, 4G, ...
fn power_of_two_label(power: usize) -> String {
    const SUFFIXES: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    format!("{}{}", 1u64 << (power % 10), SUFFIXES[power / 10])
}

/// Linear histogram bound: exact multiples of 1M and 1K get a suffix.
fn lhist_number_label(n: i64) -> String {
    const KILO: i64 = 1024;
    const MEGA: i64 = 1024 * 1024;
    if n == 0 {
        "0".to_string()
    } else if n % MEGA == 0 {
        format!("{}M", n / MEGA)
    } else if n % KILO == 0 {
        format!("{}K", n / KILO)
    } else {
        n.to_string()
    }
}

/// Key parts rendered as bpftrace does (strings unquoted), joined by `separator`.
pub(super) fn join_key(key: &[KeyPart], separator: &str) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|part| match part {
            KeyPart::Int(v) => v.to_string(),
            KeyPart::Str(s) => s.clone(),
        })
        .collect();
    parts.join(separator)
}

/// avg()/stats() average: `total / count` truncated toward zero, 0 when empty.
pub(super) fn average(count: u64, total: i64) -> i64 {
    match count as i64 {
        0 => 0,
        count => total.wrapping_div(count),
    }
}

pub(super) fn bucket(counts: &[u64], index: usize) -> u64 {
    counts.get(index).copied().unwrap_or(0)
}

fn max_count(counts: &[u64], range: RangeInclusive<usize>) -> u64 {
    range.map(|i| bucket(counts, i)).max().unwrap_or(0)
}

/// Buckets a log2 histogram prints: first to last non-empty one.
pub(super) fn hist_visible_range(counts: &[u64]) -> Option<RangeInclusive<usize>> {
    non_empty_range(counts, 0..=HIST_LEN - 1)
}

/// Buckets a linear histogram prints: first to last non-empty one.
pub(super) fn lhist_visible_range(counts: &[u64], min: i64, max: i64, step: i64) -> Option<RangeInclusive<usize>> {
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
pub(super) fn lhist_bucket_bounds(index: usize, min: i64, step: i64) -> (i64, i64) {
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
pub(super) fn sorted_entries(dump: &MapDump) -> Vec<&(Vec<KeyPart>, MapValue)> {
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
        MapValue::Hist(counts) | MapValue::Lhist { counts, .. } | MapValue::Quantiles { counts, .. } => {
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
        KeyPart::Str(_) => None,
    }
}

/// Maps filled like the bpftrace statements quoted on each function, shared by
/// the text and JSON tests, which compare against bpftrace 0.17's output.
#[cfg(test)]
pub(super) mod fixtures {
    use super::*;

    fn int(v: i64) -> KeyPart {
        KeyPart::Int(v)
    }

    fn s(v: &str) -> KeyPart {
        KeyPart::Str(v.to_string())
    }

    pub fn hist_of(values: &[i64]) -> MapValue {
        let mut counts = vec![0; HIST_LEN];
        for &v in values {
            counts[hist_bucket(v)] += 1;
        }
        MapValue::Hist(counts)
    }

    pub fn lhist_of(values: &[i64], min: i64, max: i64, step: i64) -> MapValue {
        let mut counts = vec![0; lhist_len(min, max, step)];
        for &v in values {
            counts[lhist_bucket(v, min, max, step)] += 1;
        }
        MapValue::Lhist { min, max, step, counts }
    }

    fn keyed(entries: Vec<(Vec<KeyPart>, MapValue)>) -> MapDump {
        MapDump { name: "m".to_string(), keyless: false, entries }
    }

    fn keyless(value: MapValue) -> MapDump {
        MapDump { name: "m".to_string(), keyless: true, entries: vec![(vec![], value)] }
    }

    /// `@m = count()` three times.
    pub fn keyless_count() -> MapDump {
        keyless(MapValue::Int(3))
    }

    /// `@m[3] = count()` once, `@m[-5]` twice, `@m[10]` three times.
    pub fn int_keys() -> MapDump {
        keyed(vec![
            (vec![int(10)], MapValue::Int(3)),
            (vec![int(3)], MapValue::Int(1)),
            (vec![int(-5)], MapValue::Int(2)),
        ])
    }

    /// `@m["b\"q"] = sum(5); @m["a b"] = sum(-3); @m["tab\there"] = sum(100); @m["x\\y"] = sum(7)`.
    pub fn string_keys() -> MapDump {
        keyed(vec![
            (vec![s("b\"q")], MapValue::Int(5)),
            (vec![s("tab\there")], MapValue::Int(100)),
            (vec![s("a b")], MapValue::Int(-3)),
            (vec![s("x\\y")], MapValue::Int(7)),
        ])
    }

    /// `@m[1, "a"] = count()` once, `@m[2, "b"]` twice, `@m[-1, "c"]` three times.
    pub fn tuple_keys() -> MapDump {
        keyed(vec![
            (vec![int(-1), s("c")], MapValue::Int(3)),
            (vec![int(1), s("a")], MapValue::Int(1)),
            (vec![int(2), s("b")], MapValue::Int(2)),
        ])
    }

    /// `@m = hist(5); @m = hist(0); @m = hist(1500)`.
    pub fn hist_keyless() -> MapDump {
        keyless(hist_of(&[5, 0, 1500]))
    }

    /// `@m[1] = hist()` of -3, -1, 1, 2; `@m[2] = hist(1)`; `@m[3] = hist(1024)` three times.
    pub fn hist_keyed_negative() -> MapDump {
        keyed(vec![
            (vec![int(1)], hist_of(&[-3, -1, 1, 2])),
            (vec![int(2)], hist_of(&[1])),
            (vec![int(3)], hist_of(&[1024, 1024, 1024])),
        ])
    }

    /// `@m = hist()` of 1048576, 1073741824, 1500000000, 1073741824, 5000.
    pub fn hist_large() -> MapDump {
        keyless(hist_of(&[1048576, 1073741824, 1500000000, 1073741824, 5000]))
    }

    /// `@m = hist(1073741824); @m = hist(3221225472)`.
    pub fn hist_2g() -> MapDump {
        keyless(hist_of(&[1073741824, 3221225472]))
    }

    /// `@m = lhist(v, 1024, 4096, 512)` for v in 50, 5000, 1600, 4096.
    pub fn lhist_outside() -> MapDump {
        keyless(lhist_of(&[50, 5000, 1600, 4096], 1024, 4096, 512))
    }

    /// `@m = lhist(v, 0, 4194304, 524288)` for v in 524288, 1048576, 1048576, 2097152.
    pub fn lhist_km_labels() -> MapDump {
        keyless(lhist_of(&[524288, 1048576, 1048576, 2097152], 0, 4194304, 524288))
    }

    /// `@m[k] = lhist(v, 0, 100, 10)`: "x" gets 5 and 99, "y" 100, "z" 0 three times.
    pub fn lhist_keyed() -> MapDump {
        keyed(vec![
            (vec![s("z")], lhist_of(&[0, 0, 0], 0, 100, 10)),
            (vec![s("x")], lhist_of(&[5, 99], 0, 100, 10)),
            (vec![s("y")], lhist_of(&[100], 0, 100, 10)),
        ])
    }

    /// `@m[1, "a"] = stats(10); @m[2, "b"] = stats(3); @m[3, "c"] = stats(-4);
    /// @m[3, "c"] = stats(-5); @m[4, "d"] = stats(1000000); @m[4, "d"] = stats(7)`.
    pub fn stats_keyed() -> MapDump {
        keyed(vec![
            (vec![int(4), s("d")], MapValue::Stats { count: 2, total: 1000007 }),
            (vec![int(1), s("a")], MapValue::Stats { count: 1, total: 10 }),
            (vec![int(2), s("b")], MapValue::Stats { count: 1, total: 3 }),
            (vec![int(3), s("c")], MapValue::Stats { count: 2, total: -9 }),
        ])
    }

    /// `@m = stats(-5); @m = stats(2)`.
    pub fn stats_keyless() -> MapDump {
        keyless(MapValue::Stats { count: 2, total: -3 })
    }

    /// `@m = avg(7); @m = avg(8)`.
    pub fn avg_keyless() -> MapDump {
        keyless(MapValue::Avg { count: 2, total: 15 })
    }

    /// `@m[1] = avg(-7); @m[1] = avg(-8); @m[2] = avg(3); @m[3] = avg(100); @m[3] = avg(1)`.
    pub fn avg_keyed() -> MapDump {
        keyed(vec![
            (vec![int(3)], MapValue::Avg { count: 2, total: 101 }),
            (vec![int(2)], MapValue::Avg { count: 1, total: 3 }),
            (vec![int(1)], MapValue::Avg { count: 2, total: -15 }),
        ])
    }

    /// `@m[1] = min(5); @m[1] = min(-2); @m[2] = min(7); @m[3] = min(-20)`.
    pub fn min_keyed() -> MapDump {
        keyed(vec![
            (vec![int(1)], MapValue::Int(-2)),
            (vec![int(2)], MapValue::Int(7)),
            (vec![int(3)], MapValue::Int(-20)),
        ])
    }

    /// `@m["a"] = max(5); @m["a"] = max(50); @m["b"] = max(7); @m["c"] = max(1)`.
    pub fn max_keyed() -> MapDump {
        keyed(vec![
            (vec![s("a")], MapValue::Int(50)),
            (vec![s("b")], MapValue::Int(7)),
            (vec![s("c")], MapValue::Int(1)),
        ])
    }

    /// `@m[2] = "two"; @m[1] = "one"; @m[-1] = "neg"; @m[10] = "a\"b\\c"`.
    pub fn string_values() -> MapDump {
        keyed(vec![
            (vec![int(2)], MapValue::Str("two".to_string())),
            (vec![int(1)], MapValue::Str("one".to_string())),
            (vec![int(-1)], MapValue::Str("neg".to_string())),
            (vec![int(10)], MapValue::Str("a\"b\\c".to_string())),
        ])
    }

    /// `@m = "hello world"`.
    pub fn string_value_keyless() -> MapDump {
        keyless(MapValue::Str("hello world".to_string()))
    }

    /// `@m["b", 1] = "x"; @m["a", 2] = "y"; @m["a", 1] = "z"`.
    pub fn tuple_string_values() -> MapDump {
        keyed(vec![
            (vec![s("b"), int(1)], MapValue::Str("x".to_string())),
            (vec![s("a"), int(2)], MapValue::Str("y".to_string())),
            (vec![s("a"), int(1)], MapValue::Str("z".to_string())),
        ])
    }

    /// `@m[1] = count(); delete(@m[1])`.
    pub fn empty_count() -> MapDump {
        keyed(vec![])
    }

    /// `@m = hist(3); zero(@m)`.
    pub fn zeroed_hist() -> MapDump {
        keyless(MapValue::Hist(vec![0; HIST_LEN]))
    }

    /// `@m[1] = lhist(3, 0, 10, 1); @m[2] = lhist(3, 0, 10, 1); zero(@m)`.
    pub fn zeroed_lhist_keyed() -> MapDump {
        let zeroed = lhist_of(&[], 0, 10, 1);
        keyed(vec![(vec![int(2)], zeroed.clone()), (vec![int(1)], zeroed)])
    }

    /// `@m[1] = hist(5); @m[256] = hist(5); @m[2] = hist(5); @m[2] = hist(5)`.
    pub fn hist_ties() -> MapDump {
        keyed(vec![(vec![int(2)], hist_of(&[5, 5])), (vec![int(1)], hist_of(&[5])), (vec![int(256)], hist_of(&[5]))])
    }

    /// `@m[1] = stats(5); @m[256] = stats(5); @m[2] = stats(1)`.
    pub fn stats_ties() -> MapDump {
        keyed(vec![
            (vec![int(1)], MapValue::Stats { count: 1, total: 5 }),
            (vec![int(2)], MapValue::Stats { count: 1, total: 1 }),
            (vec![int(256)], MapValue::Stats { count: 1, total: 5 }),
        ])
    }

    /// `@m[2, "a"] = stats(1); @m[1, "b"] = stats(1); @m[1, "a"] = stats(1); @m[256, "a"] = stats(1)`.
    pub fn tuple_stats_ties() -> MapDump {
        let one = MapValue::Stats { count: 1, total: 1 };
        keyed(vec![
            (vec![int(1), s("a")], one.clone()),
            (vec![int(2), s("a")], one.clone()),
            (vec![int(1), s("b")], one.clone()),
            (vec![int(256), s("a")], one),
        ])
    }

    /// `@m = lhist(v, 0, 10, 1)`: 5 26 times, 6 15 times, 8 7 times.
    pub fn bar_rounding() -> MapDump {
        let mut values = vec![5; 26];
        values.extend([6; 15]);
        values.extend([8; 7]);
        keyless(lhist_of(&values, 0, 10, 1))
    }

    /// `@m = lhist(v, 1000000, 1000300, 100)` for v in 1000123, 1000000, 1000299, 1000299.
    pub fn wide_labels() -> MapDump {
        keyless(lhist_of(&[1000123, 1000000, 1000299, 1000299], 1000000, 1000300, 100))
    }

    /// `@m["k"] = sum(1099511627776); @m["n"] = sum(-1099511627776); @m["z"] = sum(0)`.
    pub fn large_sums() -> MapDump {
        keyed(vec![
            (vec![s("k")], MapValue::Int(1099511627776)),
            (vec![s("n")], MapValue::Int(-1099511627776)),
            (vec![s("z")], MapValue::Int(0)),
        ])
    }

    /// The exit dump of `@h = hist(5); @h = hist(0); @h = hist(1500);
    /// @l = lhist(42, 0, 100, 10); @s[1, "a"] = stats(10); @s[2, "b"] = stats(3);
    /// @a = avg(7); @a = avg(8); @c["x"] = count(); @c["y"] = count(); @c["y"] = count()`,
    /// in bpftrace's order of map names.
    pub fn exit_dump_maps() -> Vec<MapDump> {
        let named = |name: &str, mut dump: MapDump| {
            dump.name = name.to_string();
            dump
        };
        vec![
            named("a", keyless(MapValue::Avg { count: 2, total: 15 })),
            named("c", keyed(vec![(vec![s("y")], MapValue::Int(2)), (vec![s("x")], MapValue::Int(1))])),
            named("h", keyless(hist_of(&[5, 0, 1500]))),
            named("l", keyless(lhist_of(&[42], 0, 100, 10))),
            named(
                "s",
                keyed(vec![
                    (vec![int(1), s("a")], MapValue::Stats { count: 1, total: 10 }),
                    (vec![int(2), s("b")], MapValue::Stats { count: 1, total: 3 }),
                ]),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    //! Expected strings are bpftrace 0.17's output for the statements quoted
    //! on the fixtures.

    use super::*;

    #[test]
    fn keyless_count() {
        let expected = "@m: 3\n";
        assert_eq!(format_map_text(&fixtures::keyless_count()), expected);
    }

    #[test]
    fn int_keys() {
        let expected = concat!("@m[3]: 1\n", "@m[-5]: 2\n", "@m[10]: 3\n",);
        assert_eq!(format_map_text(&fixtures::int_keys()), expected);
    }

    #[test]
    fn string_keys() {
        let expected = concat!("@m[a b]: -3\n", "@m[b\"q]: 5\n", "@m[x\\y]: 7\n", "@m[tab\there]: 100\n",);
        assert_eq!(format_map_text(&fixtures::string_keys()), expected);
    }

    #[test]
    fn tuple_keys() {
        let expected = concat!("@m[1, a]: 1\n", "@m[2, b]: 2\n", "@m[-1, c]: 3\n",);
        assert_eq!(format_map_text(&fixtures::tuple_keys()), expected);
    }

    #[test]
    fn hist_keyless() {
        let expected = concat!(
            "@m: \n",
            "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1]                    0 |                                                    |\n",
            "[2, 4)                 0 |                                                    |\n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[8, 16)                0 |                                                    |\n",
            "[16, 32)               0 |                                                    |\n",
            "[32, 64)               0 |                                                    |\n",
            "[64, 128)              0 |                                                    |\n",
            "[128, 256)             0 |                                                    |\n",
            "[256, 512)             0 |                                                    |\n",
            "[512, 1K)              0 |                                                    |\n",
            "[1K, 2K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_keyless()), expected);
    }

    #[test]
    fn hist_keyed_negative() {
        let expected = concat!(
            "@m[2]: \n",
            "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[3]: \n",
            "[1K, 2K)               3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[1]: \n",
            "(..., 0)               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[0]                    0 |                                                    |\n",
            "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[2, 4)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_keyed_negative()), expected);
    }

    #[test]
    fn hist_large() {
        let expected = concat!(
            "@m: \n",
            "[4K, 8K)               1 |@@@@@@@@@@@@@@@@@                                   |\n",
            "[8K, 16K)              0 |                                                    |\n",
            "[16K, 32K)             0 |                                                    |\n",
            "[32K, 64K)             0 |                                                    |\n",
            "[64K, 128K)            0 |                                                    |\n",
            "[128K, 256K)           0 |                                                    |\n",
            "[256K, 512K)           0 |                                                    |\n",
            "[512K, 1M)             0 |                                                    |\n",
            "[1M, 2M)               1 |@@@@@@@@@@@@@@@@@                                   |\n",
            "[2M, 4M)               0 |                                                    |\n",
            "[4M, 8M)               0 |                                                    |\n",
            "[8M, 16M)              0 |                                                    |\n",
            "[16M, 32M)             0 |                                                    |\n",
            "[32M, 64M)             0 |                                                    |\n",
            "[64M, 128M)            0 |                                                    |\n",
            "[128M, 256M)           0 |                                                    |\n",
            "[256M, 512M)           0 |                                                    |\n",
            "[512M, 1G)             0 |                                                    |\n",
            "[1G, 2G)               3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_large()), expected);
    }

    #[test]
    fn hist_2g() {
        let expected = concat!(
            "@m: \n",
            "[1G, 2G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[2G, 4G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_2g()), expected);
    }

    #[test]
    fn lhist_outside() {
        let expected = concat!(
            "@m: \n",
            "(..., 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1K, 1536)             0 |                                                    |\n",
            "[1536, 2K)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[2K, 2560)             0 |                                                    |\n",
            "[2560, 3K)             0 |                                                    |\n",
            "[3K, 3584)             0 |                                                    |\n",
            "[3584, 4K)             0 |                                                    |\n",
            "[4K, ...)              2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_outside()), expected);
    }

    #[test]
    fn lhist_km_labels() {
        let expected = concat!(
            "@m: \n",
            "[512K, 1M)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1M, 1536K)            2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1536K, 2M)            0 |                                                    |\n",
            "[2M, 2560K)            1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_km_labels()), expected);
    }

    #[test]
    fn lhist_keyed() {
        let expected = concat!(
            "@m[y]: \n",
            "[100, ...)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[x]: \n",
            "[0, 10)                1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[10, 20)               0 |                                                    |\n",
            "[20, 30)               0 |                                                    |\n",
            "[30, 40)               0 |                                                    |\n",
            "[40, 50)               0 |                                                    |\n",
            "[50, 60)               0 |                                                    |\n",
            "[60, 70)               0 |                                                    |\n",
            "[70, 80)               0 |                                                    |\n",
            "[80, 90)               0 |                                                    |\n",
            "[90, 100)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[z]: \n",
            "[0, 10)                3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::lhist_keyed()), expected);
    }

    #[test]
    fn stats_keyed() {
        let expected = concat!(
            "@m[3, c]: count 2, average -4, total -9\n",
            "@m[2, b]: count 1, average 3, total 3\n",
            "@m[1, a]: count 1, average 10, total 10\n",
            "@m[4, d]: count 2, average 500003, total 1000007\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::stats_keyed()), expected);
    }

    #[test]
    fn stats_keyless() {
        let expected = concat!("@m: count 2, average -1, total -3\n", "\n",);
        assert_eq!(format_map_text(&fixtures::stats_keyless()), expected);
    }

    #[test]
    fn avg_keyless() {
        let expected = concat!("@m: 7\n", "\n",);
        assert_eq!(format_map_text(&fixtures::avg_keyless()), expected);
    }

    #[test]
    fn avg_keyed() {
        let expected = concat!("@m[1]: -7\n", "@m[2]: 3\n", "@m[3]: 50\n", "\n",);
        assert_eq!(format_map_text(&fixtures::avg_keyed()), expected);
    }

    #[test]
    fn min_keyed() {
        let expected = concat!("@m[3]: -20\n", "@m[1]: -2\n", "@m[2]: 7\n",);
        assert_eq!(format_map_text(&fixtures::min_keyed()), expected);
    }

    #[test]
    fn max_keyed() {
        let expected = concat!("@m[c]: 1\n", "@m[b]: 7\n", "@m[a]: 50\n",);
        assert_eq!(format_map_text(&fixtures::max_keyed()), expected);
    }

    #[test]
    fn string_values() {
        let expected = concat!("@m[1]: one\n", "@m[2]: two\n", "@m[10]: a\"b\\c\n", "@m[-1]: neg\n",);
        assert_eq!(format_map_text(&fixtures::string_values()), expected);
    }

    #[test]
    fn string_value_keyless() {
        let expected = "@m: hello world\n";
        assert_eq!(format_map_text(&fixtures::string_value_keyless()), expected);
    }

    #[test]
    fn tuple_string_values() {
        let expected = concat!("@m[a, 1]: z\n", "@m[a, 2]: y\n", "@m[b, 1]: x\n",);
        assert_eq!(format_map_text(&fixtures::tuple_string_values()), expected);
    }

    #[test]
    fn empty_count() {
        let expected = "\n";
        assert_eq!(format_map_text(&fixtures::empty_count()), expected);
    }

    #[test]
    fn zeroed_hist() {
        let expected = concat!("@m: \n", "\n",);
        assert_eq!(format_map_text(&fixtures::zeroed_hist()), expected);
    }

    #[test]
    fn zeroed_lhist_keyed() {
        let expected = concat!("@m[1]: \n", "\n", "@m[2]: \n", "\n",);
        assert_eq!(format_map_text(&fixtures::zeroed_lhist_keyed()), expected);
    }

    #[test]
    fn hist_ties() {
        let expected = concat!(
            "@m[256]: \n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[1]: \n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@m[2]: \n",
            "[4, 8)                 2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::hist_ties()), expected);
    }

    #[test]
    fn stats_ties() {
        let expected = concat!(
            "@m[2]: count 1, average 1, total 1\n",
            "@m[256]: count 1, average 5, total 5\n",
            "@m[1]: count 1, average 5, total 5\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::stats_ties()), expected);
    }

    #[test]
    fn tuple_stats_ties() {
        let expected = concat!(
            "@m[256, a]: count 1, average 1, total 1\n",
            "@m[1, a]: count 1, average 1, total 1\n",
            "@m[1, b]: count 1, average 1, total 1\n",
            "@m[2, a]: count 1, average 1, total 1\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::tuple_stats_ties()), expected);
    }

    #[test]
    fn bar_rounding() {
        let expected = concat!(
            "@m: \n",
            "[5, 6)                26 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[6, 7)                15 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                      |\n",
            "[7, 8)                 0 |                                                    |\n",
            "[8, 9)                 7 |@@@@@@@@@@@@@@                                      |\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::bar_rounding()), expected);
    }

    #[test]
    fn wide_labels() {
        let expected = concat!(
            "@m: \n",
            "[1000000, 1000100)       1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1000100, 1000200)       1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n",
            "[1000200, 1000300)       2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
        );
        assert_eq!(format_map_text(&fixtures::wide_labels()), expected);
    }

    #[test]
    fn large_sums() {
        let expected = concat!("@m[n]: -1099511627776\n", "@m[z]: 0\n", "@m[k]: 1099511627776\n",);
        assert_eq!(format_map_text(&fixtures::large_sums()), expected);
    }

    #[test]
    fn exit_dump_of_several_maps() {
        let expected = concat!(
            "\n",
            "\n",
            "@a: 7\n",
            "\n",
            "@c[x]: 1\n",
            "@c[y]: 2\n",
            "@h: \n",
            "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[1]                    0 |                                                    |\n",
            "[2, 4)                 0 |                                                    |\n",
            "[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[8, 16)                0 |                                                    |\n",
            "[16, 32)               0 |                                                    |\n",
            "[32, 64)               0 |                                                    |\n",
            "[64, 128)              0 |                                                    |\n",
            "[128, 256)             0 |                                                    |\n",
            "[256, 512)             0 |                                                    |\n",
            "[512, 1K)              0 |                                                    |\n",
            "[1K, 2K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@l: \n",
            "[40, 50)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "\n",
            "@s[2, b]: count 1, average 3, total 3\n",
            "@s[1, a]: count 1, average 10, total 10\n",
            "\n",
        );
        let mut dump = String::from("\n\n");
        for map in fixtures::exit_dump_maps() {
            dump.push_str(&format_map_text(&map));
        }
        assert_eq!(dump, expected);
    }

    #[test]
    fn empty_stats_map_prints_two_newlines() {
        // `@m = avg(3); clear(@m)`
        assert_eq!(format_empty_map_text(MapKind::Stats), "\n\n");
        assert_eq!(format_empty_map_text(MapKind::Hist), "\n");
    }

    #[test]
    fn probe_and_lost_lines() {
        assert_eq!(format_attached_text(1), "Attaching 1 probe...\n");
        assert_eq!(format_attached_text(2), "Attaching 2 probes...\n");
        assert_eq!(format_lost_events_text(12), "Lost 12 events\n");
    }

    #[test]
    fn hist_buckets() {
        assert_eq!(hist_bucket(i64::MIN), 0);
        assert_eq!(hist_bucket(-1), 0);
        assert_eq!(hist_bucket(0), 1);
        assert_eq!(hist_bucket(1), 2);
        assert_eq!(hist_bucket(2), 3);
        assert_eq!(hist_bucket(3), 3);
        assert_eq!(hist_bucket(4), 4);
        assert_eq!(hist_bucket(1023), 11);
        assert_eq!(hist_bucket(1024), 12);
        assert_eq!(hist_bucket(1 << 40), 42);
        assert_eq!(hist_bucket(i64::MAX), HIST_LEN - 1);
    }

    #[test]
    fn lhist_buckets() {
        assert_eq!(lhist_len(0, 100, 10), 12);
        assert_eq!(lhist_bucket(-1, 0, 100, 10), 0);
        assert_eq!(lhist_bucket(0, 0, 100, 10), 1);
        assert_eq!(lhist_bucket(9, 0, 100, 10), 1);
        assert_eq!(lhist_bucket(10, 0, 100, 10), 2);
        assert_eq!(lhist_bucket(99, 0, 100, 10), 10);
        assert_eq!(lhist_bucket(100, 0, 100, 10), 11);
        assert_eq!(lhist_bucket(i64::MAX, 0, 100, 10), 11);
        assert_eq!(lhist_bucket(1023, 1024, 4096, 512), 0);
        assert_eq!(lhist_bucket(1024, 1024, 4096, 512), 1);
    }

    #[test]
    fn hist_labels_beyond_tera() {
        // bpftrace 0.17 folds values of 2^32 and more into [2G, 4G); these
        // labels follow the same suffix scheme one step further.
        assert_eq!(hist_bucket_label(42), "[1T, 2T)");
        assert_eq!(hist_bucket_label(52), "[1P, 2P)");
        assert_eq!(hist_bucket_label(HIST_LEN - 1), "[4E, 8E)");
        let dump = MapDump {
            name: "m".to_string(),
            keyless: true,
            entries: vec![(vec![], fixtures::hist_of(&[1 << 50, i64::MAX]))],
        };
        let text = format_map_text(&dump);
        assert!(text.starts_with(concat!(
            "@m: \n",
            "[1P, 2P)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
            "[2P, 4P)               0 |                                                    |\n",
        )));
        assert!(text.ends_with("[4E, 8E)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\n"));
        assert_eq!(text.lines().count(), 1 + 13 + 1);
    }

    #[test]
    fn int_ties_sort_by_key() {
        let dump = MapDump {
            name: "m".to_string(),
            keyless: false,
            entries: vec![
                (vec![KeyPart::Str("b".to_string())], MapValue::Int(1)),
                (vec![KeyPart::Str("c".to_string())], MapValue::Int(0)),
                (vec![KeyPart::Str("a".to_string())], MapValue::Int(1)),
            ],
        };
        assert_eq!(format_map_text(&dump), "@m[c]: 0\n@m[a]: 1\n@m[b]: 1\n");
    }
}
