//! Baselines for regression checks: the distributions a run measured, saved
//! by name (`--save-baseline FILE`) and compared with the same names in a
//! later run (`--baseline FILE`, `regression(name, m, pct)`).
//!
//! A comparison needs two things to call a regression: the whole later
//! distribution sits above the baseline's (a one-sided Mann-Whitney U test
//! on the samples, bucketed as the map keeps them, with ties counted; z
//! over [`Z_REGRESSED`], p < 0.0005), and its median moved up by more than
//! the allowed percentage. Noise that moves samples both ways fails the
//! first; a shift too small to matter fails the second.
//!
//! The file is text: a header line, then one line per distribution:
//! `NAME<TAB>KIND<TAB>BUCKET:COUNT,...` (KIND `quantiles UNIT_NS`, `hist`
//! or `lhist MIN MAX STEP`). Pure: nothing here reads or writes files.

use std::collections::BTreeMap;

use super::dist::Distribution;
use super::value::MapValue;

/// The first line of a baseline file.
const HEADER: &str = "rtrace-baseline 1";

/// z of the Mann-Whitney test above which the later run is larger
/// (one-sided p < 0.0005).
pub const Z_REGRESSED: f64 = 3.29;

/// Named distributions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    pub dists: BTreeMap<String, MapValue>,
}

impl Baseline {
    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for (name, v) in &self.dists {
            let (kind, counts) = match v {
                MapValue::Quantiles { unit_ns, counts } => (format!("quantiles {unit_ns}"), counts),
                MapValue::Hist { bits: 0, counts } => ("hist".to_string(), counts),
                MapValue::Hist { bits, counts } => (format!("hist {bits}"), counts),
                MapValue::Lhist { min, max, step, counts } => (format!("lhist {min} {max} {step}"), counts),
                _ => continue,
            };
            let buckets: Vec<String> =
                counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| format!("{i}:{c}")).collect();
            out += &format!("{name}\t{kind}\t{}\n", buckets.join(","));
        }
        out
    }

    /// Read a file's text; the error names the line.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("not an rtrace baseline (the first line is not `{HEADER}`)"));
        }
        let mut dists = BTreeMap::new();
        for (n, line) in lines.enumerate() {
            let bad = |why: &str| format!("line {}: {why}", n + 2);
            let mut f = line.split('\t');
            let (Some(name), Some(kind), Some(buckets), None) = (f.next(), f.next(), f.next(), f.next()) else {
                return Err(bad("expected NAME, KIND and buckets separated by tabs"));
            };
            let mut counts: Vec<u64> = Vec::new();
            for b in buckets.split(',').filter(|b| !b.is_empty()) {
                let (i, c) = b.split_once(':').ok_or_else(|| bad("a bucket is INDEX:COUNT"))?;
                let (i, c): (usize, u64) = match (i.parse(), c.parse()) {
                    (Ok(i), Ok(c)) if i < 1 << 16 => (i, c),
                    _ => return Err(bad("a bucket is INDEX:COUNT (numbers)")),
                };
                if counts.len() <= i {
                    counts.resize(i + 1, 0);
                }
                counts[i] = c;
            }
            let k: Vec<&str> = kind.split(' ').collect();
            let num = |s: &str| s.parse::<i64>().map_err(|_| bad("a number in KIND"));
            let value = match k.as_slice() {
                ["quantiles", unit] => MapValue::Quantiles { unit_ns: num(unit)? as u32, counts },
                ["hist"] => MapValue::Hist { bits: 0, counts },
                ["hist", bits] => match bits.parse::<u8>() {
                    Ok(bits @ 0..=5) => MapValue::Hist { bits, counts },
                    _ => return Err(bad("hist BITS is a number from 0 to 5")),
                },
                ["lhist", min, max, step] => {
                    MapValue::Lhist { min: num(min)?, max: num(max)?, step: num(step)?, counts }
                }
                _ => return Err(bad("KIND is `quantiles UNIT_NS`, `hist [BITS]` or `lhist MIN MAX STEP`")),
            };
            dists.insert(name.to_string(), value);
        }
        Ok(Baseline { dists })
    }
}

/// What a comparison found.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub base_p50: i64,
    pub now_p50: i64,
    /// How far the median moved up, in percent of the baseline's.
    pub shift_pct: f64,
    /// Mann-Whitney z (positive: the later run is larger).
    pub z: f64,
    pub regressed: bool,
    /// The values' unit in ns (`quantiles(x, "us")`: 1000), 0 for none.
    pub unit_ns: u32,
}

impl Comparison {
    /// `p50 301us -> 376us (+24.9%), Mann-Whitney z = 17.3 over 200 and 200 samples`.
    pub fn shown(&self, n_base: i64, n_now: i64) -> String {
        let v = |x: i64| super::dist::readable(x, self.unit_ns);
        format!(
            "p50 {} -> {} ({:+.1}%), Mann-Whitney z = {:.1} over {n_base} and {n_now} samples",
            v(self.base_p50),
            v(self.now_p50),
            self.shift_pct,
            self.z
        )
    }
}

/// Whether `now` regressed from `base` by more than `max_pct` percent.
pub fn compare(base: &Distribution, now: &Distribution, max_pct: f64) -> Result<Comparison, String> {
    let (base_p50, now_p50) = (base.percentile(50.0)?, now.percentile(50.0)?);
    let shift_pct = if base_p50 == 0 { 0.0 } else { (now_p50 - base_p50) as f64 * 100.0 / base_p50 as f64 };
    let z = mann_whitney_z(&base.weighted_values()?, &now.weighted_values()?);
    let unit_ns = match &now.value {
        Some(MapValue::Quantiles { unit_ns, .. }) => *unit_ns,
        _ => 0,
    };
    Ok(Comparison { base_p50, now_p50, shift_pct, z, regressed: z > Z_REGRESSED && shift_pct > max_pct, unit_ns })
}

/// The normal approximation of the Mann-Whitney U statistic of `b` against
/// `a` (samples given as (value, count), each sorted by value), corrected
/// for ties: positive when `b`'s values tend to be larger.
pub fn mann_whitney_z(a: &[(i64, u64)], b: &[(i64, u64)]) -> f64 {
    let (na, nb) = (a.iter().map(|x| x.1).sum::<u64>() as f64, b.iter().map(|x| x.1).sum::<u64>() as f64);
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    // Both samples merged by value: each value's counts in a and in b.
    let mut merged: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for &(v, c) in a {
        merged.entry(v).or_default().0 += c;
    }
    for &(v, c) in b {
        merged.entry(v).or_default().1 += c;
    }
    let n = na + nb;
    let (mut below, mut rank_sum_b, mut ties) = (0.0, 0.0, 0.0);
    for (ca, cb) in merged.values() {
        let t = (ca + cb) as f64;
        let mid_rank = below + (t + 1.0) / 2.0;
        rank_sum_b += *cb as f64 * mid_rank;
        ties += t * t * t - t;
        below += t;
    }
    let u = rank_sum_b - nb * (nb + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 0.0;
    }
    (u - mean) / var.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(counts: Vec<u64>) -> Distribution {
        Distribution { map: "lat".into(), key: None, value: Some(MapValue::Quantiles { unit_ns: 1, counts }) }
    }

    #[test]
    fn a_file_reads_back_as_it_was_written() {
        let mut b = Baseline::default();
        b.dists.insert("p".into(), MapValue::Quantiles { unit_ns: 1000, counts: vec![0, 3, 0, 7] });
        b.dists.insert("h".into(), MapValue::Hist { bits: 0, counts: vec![1, 0, 2] });
        b.dists.insert("l".into(), MapValue::Lhist { min: 0, max: 100, step: 10, counts: vec![0, 5] });
        let text = b.render();
        assert_eq!(text, "rtrace-baseline 1\nh\thist\t0:1,2:2\nl\tlhist 0 100 10\t1:5\np\tquantiles 1000\t1:3,3:7\n");
        assert_eq!(Baseline::parse(&text), Ok(b));
        assert!(Baseline::parse("x").unwrap_err().contains("not an rtrace baseline"));
        assert!(Baseline::parse("rtrace-baseline 1\nn\thist\t1-2\n").unwrap_err().starts_with("line 2: "));
        assert!(Baseline::parse("rtrace-baseline 1\nn\tbogus\t\n").unwrap_err().contains("KIND"));
    }

    #[test]
    fn mann_whitney_on_known_samples() {
        // Identical samples: no difference.
        let a = [(1, 10), (2, 10), (3, 10)];
        assert!(mann_whitney_z(&a, &a).abs() < 1e-9);
        // Every b above every a: U = na*nb, z large and positive.
        let z = mann_whitney_z(&[(1, 20)], &[(2, 20)]);
        assert!(z > 5.0, "{z}");
        assert!(mann_whitney_z(&[(2, 20)], &[(1, 20)]) < -5.0);
        // All one value: no variance, no verdict.
        assert_eq!(mann_whitney_z(&[(5, 3)], &[(5, 4)]), 0.0);
        // A small textbook case without ties: a = 1,2,3; b = 4,5 -> U_b = 6, mean 3, sd sqrt(3).
        let z = mann_whitney_z(&[(1, 1), (2, 1), (3, 1)], &[(4, 1), (5, 1)]);
        assert!((z - 3.0 / 3f64.sqrt()).abs() < 1e-9, "{z}");
    }

    #[test]
    fn a_regression_needs_both_a_shift_and_significance() {
        let base = dist({
            let mut c = vec![0; 300];
            c[200] = 100;
            c[201] = 100;
            c
        });
        // The same: no regression.
        let same = compare(&base, &base, 10.0).unwrap();
        assert!(!same.regressed && same.shift_pct == 0.0, "{same:?}");
        // Every sample in a bucket 25% higher (quantile buckets are ~2% wide: ~11 buckets up).
        let slower = dist({
            let mut c = vec![0; 300];
            c[212] = 200;
            c
        });
        let c = compare(&base, &slower, 10.0).unwrap();
        assert!(c.regressed && c.z > Z_REGRESSED && c.shift_pct > 10.0, "{c:?}");
        // A significant but small shift (one bucket) is not a 10% regression.
        let a_bit = dist({
            let mut c = vec![0; 300];
            c[201] = 200;
            c
        });
        let c = compare(&base, &a_bit, 10.0).unwrap();
        assert!(!c.regressed, "{c:?}");
        // Faster is never a regression.
        assert!(!compare(&slower, &base, 10.0).unwrap().regressed);
    }
}
