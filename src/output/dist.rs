//! Distributions read back from maps: `percentile(p)`, `count()`, `sum()`,
//! `avg()`, `min()`, `max()` over hist, lhist, stats and quantiles values,
//! and the one-line text and JSON forms of `quantiles()` maps.
//!
//! hist/lhist answers are bounds of buckets, taken on the side that never
//! flatters a budget: a percentile or maximum is the upper bound of its
//! bucket, a minimum the lower bound. quantiles answers are within 1% (see
//! `probes_ebpf::quantile`). An empty distribution answers only `count()`
//! (0) and `sum()` (0); everything else is a "no samples" error naming the
//! map, so a budget checked on no data fails.

use std::fmt::Write;

use probes_ebpf::quantile;

use super::value::MapValue;

/// One map's distribution (or one key's), as a script reads it.
#[derive(Clone, Debug)]
pub struct Distribution {
    /// The map's name, for errors.
    pub map: String,
    /// The key read (`m[k]`), for errors.
    pub key: Option<String>,
    /// `None` when the map (or key) has no entry.
    pub value: Option<MapValue>,
}

/// The percentiles a `quantiles()` map prints.
const PRINTED: [(&str, f64); 4] = [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)];

impl Distribution {
    /// All keys' values of one map together (`m.percentile(p)` on a keyed map).
    pub fn merged(map: &str, values: Vec<MapValue>) -> Result<Distribution, String> {
        let mut acc: Option<MapValue> = None;
        for v in values {
            check_kind(map, &v)?;
            acc = Some(match (acc, v) {
                (None, v) => v,
                (Some(MapValue::Stats { count, total }), MapValue::Stats { count: c, total: t })
                | (Some(MapValue::Avg { count, total }), MapValue::Stats { count: c, total: t }) => {
                    MapValue::Stats { count: count + c, total: total.wrapping_add(t) }
                }
                (Some(MapValue::Avg { count, total }), MapValue::Avg { count: c, total: t })
                | (Some(MapValue::Stats { count, total }), MapValue::Avg { count: c, total: t }) => {
                    MapValue::Avg { count: count + c, total: total.wrapping_add(t) }
                }
                (Some(mut a), b) => {
                    let (Some(x), Some(y)) = (counts_mut(&mut a), counts(&b)) else {
                        return Err(format!("map '{map}' mixes kinds of values"));
                    };
                    if x.len() < y.len() {
                        x.resize(y.len(), 0);
                    }
                    for (x, y) in x.iter_mut().zip(y) {
                        *x += y;
                    }
                    a
                }
            });
        }
        Ok(Distribution { map: map.to_string(), key: None, value: acc })
    }

    /// One key's value; `value` None when the key has no entry.
    pub fn of_key(map: &str, key: String, value: Option<MapValue>) -> Result<Distribution, String> {
        if let Some(v) = &value {
            check_kind(map, v)?;
        }
        Ok(Distribution { map: map.to_string(), key: Some(key), value })
    }

    pub fn count(&self) -> i64 {
        match &self.value {
            None | Some(MapValue::Int(_) | MapValue::Str(_) | MapValue::Ptr(_)) => 0,
            Some(MapValue::Avg { count, .. }) | Some(MapValue::Stats { count, .. }) => *count as i64,
            Some(v) => counts(v).map(|c| c.iter().sum::<u64>() as i64).unwrap_or(0),
        }
    }

    pub fn sum(&self) -> Result<i64, String> {
        match &self.value {
            Some(MapValue::Avg { total, .. }) | Some(MapValue::Stats { total, .. }) => Ok(*total),
            Some(v) if self.count() > 0 => {
                let total: i128 = buckets(v).map(|(i, c)| c as i128 * value_at(v, i, Side::High) as i128).sum();
                Ok(total.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
            }
            _ => Ok(0),
        }
    }

    pub fn avg(&self) -> Result<i64, String> {
        let n = self.nonempty()?;
        Ok((self.sum()? as i128 / n as i128) as i64)
    }

    pub fn min(&self) -> Result<i64, String> {
        self.nonempty()?;
        let v = self.bucketed("min()")?;
        let (first, _) = buckets(v).next().ok_or_else(|| self.no_samples())?;
        Ok(value_at(v, first, Side::Low))
    }

    pub fn max(&self) -> Result<i64, String> {
        self.nonempty()?;
        let v = self.bucketed("max()")?;
        let (last, _) = buckets(v).last().ok_or_else(|| self.no_samples())?;
        Ok(value_at(v, last, Side::High))
    }

    /// The nearest-rank p-th percentile (p from 0 to 100).
    pub fn percentile(&self, p: f64) -> Result<i64, String> {
        if !(0.0..=100.0).contains(&p) {
            return Err(format!("percentile({p}): p must be from 0 to 100"));
        }
        let n = self.nonempty()? as u64;
        let v = self.bucketed("percentile()")?;
        let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, c) in buckets(v) {
            seen += c;
            if seen >= rank {
                return Ok(value_at(v, i, Side::High));
            }
        }
        Err(self.no_samples())
    }

    /// The samples as the map keeps them: (the bucket's value, count), in
    /// value order (hist/lhist buckets by their low bound).
    pub fn weighted_values(&self) -> Result<Vec<(i64, u64)>, String> {
        self.nonempty()?;
        let v = self.bucketed("a comparison")?;
        Ok(buckets(v).map(|(i, c)| (value_at(v, i, Side::Low), c)).collect())
    }

    fn nonempty(&self) -> Result<i64, String> {
        match self.count() {
            0 => Err(self.no_samples()),
            n => Ok(n),
        }
    }

    fn no_samples(&self) -> String {
        match &self.key {
            Some(k) => format!("map '{}' has no samples for key {k}", self.map),
            None => format!("map '{}' has no samples", self.map),
        }
    }

    fn bucketed(&self, what: &str) -> Result<&MapValue, String> {
        match &self.value {
            Some(v) if counts(v).is_some() => Ok(v),
            _ => Err(format!(
                "{what} of map '{}': stats() and avg() keep only count and total; use hist() or quantiles()",
                self.map
            )),
        }
    }
}

fn check_kind(map: &str, v: &MapValue) -> Result<(), String> {
    match v {
        MapValue::Int(_) | MapValue::Str(_) | MapValue::Ptr(_) => Err(format!(
            "map '{map}' is not a distribution: percentile(), count(), sum(), avg(), min() and max() read hist(), lhist(), stats() and quantiles() maps"
        )),
        _ => Ok(()),
    }
}

fn counts(v: &MapValue) -> Option<&Vec<u64>> {
    match v {
        MapValue::Hist { counts: c, .. }
        | MapValue::Lhist { counts: c, .. }
        | MapValue::Quantiles { counts: c, .. } => Some(c),
        _ => None,
    }
}

fn counts_mut(v: &mut MapValue) -> Option<&mut Vec<u64>> {
    match v {
        MapValue::Hist { counts: c, .. }
        | MapValue::Lhist { counts: c, .. }
        | MapValue::Quantiles { counts: c, .. } => Some(c),
        _ => None,
    }
}

/// Non-empty buckets, in value order: (index, count).
fn buckets(v: &MapValue) -> impl DoubleEndedIterator<Item = (usize, u64)> + '_ {
    let c: &[u64] = counts(v).map_or(&[], |c| c.as_slice());
    c.iter().copied().enumerate().filter(|&(_, c)| c > 0)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Low,
    High,
}

/// The value bucket `i` stands for: for hist/lhist its lowest or highest
/// value, for quantiles the estimate (the same on both sides).
fn value_at(v: &MapValue, i: usize, side: Side) -> i64 {
    match v {
        MapValue::Hist { bits, .. } => {
            hist_bounds(i, *bits).map_or(0, |(lo, hi)| if side == Side::Low { lo } else { hi })
        }
        MapValue::Lhist { min, max, step, .. } => {
            let (lo, hi) = lhist_bounds(i, *min, *max, *step);
            if side == Side::Low {
                lo
            } else {
                hi
            }
        }
        MapValue::Quantiles { .. } => quantile::estimate(i),
        _ => 0,
    }
}

/// Lowest and highest value of bucket `i` of `hist(x, bits)`.
pub fn hist_bounds(i: usize, bits: u8) -> Option<(i64, i64)> {
    if i >= probes_ebpf::quantile::hist_len(bits) {
        return None;
    }
    Some(match super::layout::hist_span(i, bits) {
        super::layout::Span::Range(low, high) => (low as i64, (high - 1).min(i64::MAX as i128) as i64),
        _ => (i64::MIN, -1),
    })
}

/// Lowest and highest value of linear histogram bucket `i`; the outer
/// buckets are open-ended.
pub fn lhist_bounds(i: usize, min: i64, max: i64, step: i64) -> (i64, i64) {
    let inner = lhist_inner_buckets(min, max, step);
    match i as i64 {
        0 => (i64::MIN, min.saturating_sub(1)),
        k if k > inner => (max, i64::MAX),
        k => (min + (k - 1) * step, (min + k * step - 1).min(max - 1)),
    }
}

/// A `quantiles()` value on one line: `count N, min .., p50 .., p90 ..,
/// p99 .., p99.9 .., max .., mean ..` (durations with their unit).
pub fn quantiles_text(unit_ns: u32, counts: &[u64]) -> String {
    let d = Distribution { map: String::new(), key: None, value: Some(quantiles_value(unit_ns, counts)) };
    let n = d.count();
    let mut out = format!("count {n}");
    if n == 0 {
        return out;
    }
    let show = |v: i64| readable(v, unit_ns);
    let _ = write!(out, ", min {}", show(d.min().unwrap_or(0)));
    for (label, p) in PRINTED {
        let _ = write!(out, ", {label} {}", show(d.percentile(p).unwrap_or(0)));
    }
    let _ = write!(out, ", max {}, mean {}", show(d.max().unwrap_or(0)), show(d.avg().unwrap_or(0)));
    out
}

/// A `quantiles()` value as a JSON object, in the value's own unit:
/// `{"count": N, "min": .., "p50": .., ..., "max": .., "mean": ..}`.
pub fn quantiles_json(unit_ns: u32, counts: &[u64]) -> String {
    let d = Distribution { map: String::new(), key: None, value: Some(quantiles_value(unit_ns, counts)) };
    let n = d.count();
    let mut out = format!("{{\"count\": {n}");
    if n > 0 {
        let _ = write!(out, ", \"min\": {}", d.min().unwrap_or(0));
        for (label, p) in PRINTED {
            let _ = write!(out, ", \"{label}\": {}", d.percentile(p).unwrap_or(0));
        }
        let _ = write!(out, ", \"max\": {}, \"mean\": {}", d.max().unwrap_or(0), d.avg().unwrap_or(0));
    }
    if unit_ns > 0 {
        let _ = write!(out, ", \"unit\": \"{}\"", unit_name(unit_ns));
    }
    out.push('}');
    out
}

fn quantiles_value(unit_ns: u32, counts: &[u64]) -> MapValue {
    MapValue::Quantiles { unit_ns, counts: counts.to_vec() }
}

fn unit_name(unit_ns: u32) -> &'static str {
    match unit_ns {
        1 => "ns",
        1_000 => "us",
        1_000_000 => "ms",
        _ => "s",
    }
}

/// `v` units of `unit_ns` ns each, readable: `850ns`, `12.3us`, `4.56ms`,
/// `1.20s`; plain numbers (unit 0) as they are.
pub fn readable(v: i64, unit_ns: u32) -> String {
    if unit_ns == 0 {
        return v.to_string();
    }
    let ns = v as f64 * unit_ns as f64;
    let (scaled, unit) = match ns.abs() {
        x if x < 1e3 => (ns, "ns"),
        x if x < 1e6 => (ns / 1e3, "us"),
        x if x < 1e9 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    if unit == "ns" {
        return format!("{}ns", ns as i64);
    }
    let digits = if scaled.abs() < 10.0 {
        2
    } else if scaled.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{scaled:.digits$}{unit}")
}

/// Buckets between the below-min and from-max ones: `(max - min) / step`.
pub fn lhist_inner_buckets(min: i64, max: i64, step: i64) -> i64 {
    (max.wrapping_sub(min) / step.max(1)).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantiles_of(values: &[i64]) -> MapValue {
        let mut counts = vec![0; quantile::BUCKETS];
        for &v in values {
            counts[quantile::bucket(v)] += 1;
        }
        MapValue::Quantiles { unit_ns: 1, counts }
    }

    fn dist(v: MapValue) -> Distribution {
        Distribution { map: "lat".into(), key: None, value: Some(v) }
    }

    #[test]
    fn hist_answers_upper_bounds() {
        // 300..=480: every value in the [256, 512) bucket.
        let values: Vec<i64> = (300..=480).collect();
        let d = dist(super::super::fixtures::hist_of(&values));
        assert_eq!(d.percentile(50.0), Ok(511));
        assert_eq!(d.max(), Ok(511));
        assert_eq!(d.min(), Ok(256));
        assert_eq!(d.count(), 181);
        assert!(d.percentile(50.0).unwrap() > 300, "a 300 budget must fail");
    }

    #[test]
    fn lhist_answers_upper_bounds() {
        let d = dist(super::super::fixtures::lhist_of(&[5, 15, 25, 35, 200], 0, 100, 10));
        assert_eq!(d.percentile(20.0), Ok(9));
        assert_eq!(d.percentile(60.0), Ok(29));
        assert_eq!(d.percentile(100.0), Ok(i64::MAX), "the from-max bucket has no upper bound");
        assert_eq!(d.min(), Ok(0));
    }

    #[test]
    fn quantiles_are_within_one_percent() {
        let values: Vec<i64> = (1..=10_000).map(|i| i * 997).collect();
        let d = dist(quantiles_of(&values));
        for p in [1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            let truth = values[rank - 1] as f64;
            let got = d.percentile(p).unwrap() as f64;
            assert!((got - truth).abs() / truth <= 0.01, "p{p}: {got} vs {truth}");
        }
        assert_eq!(d.count(), 10_000);
        let mean = values.iter().sum::<i64>() as f64 / values.len() as f64;
        assert!((d.avg().unwrap() as f64 - mean).abs() / mean <= 0.01);
    }

    #[test]
    fn empty_is_an_error_but_count_is_zero() {
        let d = Distribution { map: "lat".into(), key: None, value: None };
        assert_eq!(d.count(), 0);
        assert_eq!(d.sum(), Ok(0));
        assert_eq!(d.percentile(99.0), Err("map 'lat' has no samples".into()));
        assert_eq!(d.avg(), Err("map 'lat' has no samples".into()));
        assert_eq!(d.min(), Err("map 'lat' has no samples".into()));
        let k = Distribution::of_key("lat", "\"bash\"".into(), None).unwrap();
        assert_eq!(k.max(), Err("map 'lat' has no samples for key \"bash\"".into()));
        let zeroed = dist(quantiles_of(&[]));
        assert_eq!(zeroed.percentile(50.0), Err("map 'lat' has no samples".into()));
    }

    #[test]
    fn stats_answer_count_sum_avg_only() {
        let d = dist(MapValue::Stats { count: 4, total: 10 });
        assert_eq!((d.count(), d.sum(), d.avg()), (4, Ok(10), Ok(2)));
        assert!(d.percentile(50.0).unwrap_err().contains("use hist() or quantiles()"));
        assert!(Distribution::merged("n", vec![MapValue::Int(3)]).unwrap_err().contains("not a distribution"));
    }

    #[test]
    fn merged_keys_add_up() {
        let a = quantiles_of(&[10, 20]);
        let b = quantiles_of(&[30]);
        let d = Distribution::merged("lat", vec![a, b]).unwrap();
        assert_eq!((d.count(), d.max(), d.min()), (3, Ok(30), Ok(10)));
    }

    #[test]
    fn readable_durations() {
        assert_eq!(readable(850, 1), "850ns");
        assert_eq!(readable(12_345, 1), "12.3us");
        assert_eq!(readable(4_560_000, 1), "4.56ms");
        assert_eq!(readable(1_200, 1_000_000), "1.20s");
        assert_eq!(readable(42, 0), "42");
        assert_eq!(quantiles_text(0, &[0; 10]), "count 0");
        let MapValue::Quantiles { counts, .. } = quantiles_of(&[100, 100, 100]) else { unreachable!() };
        assert_eq!(
            quantiles_text(1, &counts),
            "count 3, min 100ns, p50 100ns, p90 100ns, p99 100ns, p99.9 100ns, max 100ns, mean 100ns"
        );
        assert_eq!(
            quantiles_json(0, &counts),
            "{\"count\": 3, \"min\": 100, \"p50\": 100, \"p90\": 100, \"p99\": 100, \"p99.9\": 100, \"max\": 100, \"mean\": 100}"
        );
    }
}
