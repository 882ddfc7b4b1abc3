//! Maps and rtrace's own counters as Prometheus metrics: the text format
//! 0.0.4 and OpenMetrics 1.0, chosen from the scraper's `Accept` header.
//!
//! Callers decode BPF maps into a [`MapDump`] first (the same dumps `print`
//! uses); [`map_family`] turns one into a metric family (count/sum maps are
//! counters, min/max/avg/plain values gauges, hist/lhist histograms, stats
//! summaries with `_count` and `_sum`) and [`render`] writes families out.
//! Nothing here touches the kernel.

use std::fmt::Write;

use super::layout::{lhist_bucket_bounds, lhist_inner_buckets, KeyPart, MapDump, MapValue};

/// The exposition format of one scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`: what every Prometheus understands.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`, ending in `# EOF`.
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when the scraper accepts it (Prometheus asks for it
    /// first), the 0.0.4 text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Prometheus };
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            if !media.eq_ignore_ascii_case("application/openmetrics-text") {
                continue;
            }
            let mut q = 1.0f64;
            let mut version_ok = true;
            for p in parts {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                match k.trim() {
                    "q" => q = v.trim().parse().unwrap_or(0.0),
                    "version" => version_ok = matches!(v.trim(), "1.0.0" | "0.0.1"),
                    _ => {}
                }
            }
            if q > 0.0 && version_ok {
                return Format::OpenMetrics;
            }
        }
        Format::Prometheus
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
    Summary,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
            Type::Summary => "summary",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) if x.is_nan() => f.write_str("NaN"),
            Number::Float(x) if x.is_infinite() => f.write_str(if *x > 0.0 { "+Inf" } else { "-Inf" }),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

/// One line of a family: `name{labels} value`, where the name is the
/// family's plus `suffix` (`_total`, `_bucket`, `_count`, `_sum` or none).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub suffix: &'static str,
    pub labels: Vec<(String, String)>,
    pub value: Number,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The full metric name without type suffixes (`rtrace_opens`).
    pub name: String,
    pub help: String,
    pub kind: Type,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: impl Into<String>, kind: Type, help: impl Into<String>) -> Family {
        Family { name: name.into(), help: help.into(), kind, samples: Vec::new() }
    }

    /// Add a sample of a counter or gauge (the suffix follows the type).
    pub fn push(&mut self, labels: Vec<(String, String)>, value: Number) {
        let suffix = if self.kind == Type::Counter { "_total" } else { "" };
        self.samples.push(Sample { suffix, labels, value });
    }
}

/// What `map(name, #{ ... })` says about a map's metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricOptions {
    /// Label names, one per key part (`labels: ["comm", "pid"]`).
    pub labels: Option<Vec<String>>,
    /// `help: "..."`: the family's `# HELP` text.
    pub help: Option<String>,
    /// `reset_on_scrape: true`: every scrape empties the map (interval counts).
    pub reset_on_scrape: bool,
    /// `folded_stacks: true`: a stack-keyed map is served with one folded
    /// `root;...;leaf` label; without it such maps are left out.
    pub folded_stacks: bool,
    /// `metrics: false` leaves the map out of `/metrics`.
    pub enabled: bool,
}

impl Default for MetricOptions {
    fn default() -> MetricOptions {
        MetricOptions { labels: None, help: None, reset_on_scrape: false, folded_stacks: false, enabled: true }
    }
}

/// The `map()` options this module owns.
pub const OPTION_NAMES: &[&str] = &["labels", "help", "reset_on_scrape", "folded_stacks", "metrics"];

impl MetricOptions {
    /// Apply option `key` (one of [`OPTION_NAMES`]) from a script.
    pub fn set(&mut self, key: &str, value: &rhai::Dynamic) -> Result<(), String> {
        let flag = |what: &str| value.as_bool().map_err(|_| format!("{what} must be true or false"));
        match key {
            "labels" => {
                let items = value
                    .clone()
                    .into_typed_array::<rhai::ImmutableString>()
                    .map_err(|_| "labels must be an array of label names, e.g. [\"comm\", \"pid\"]".to_string())?;
                let names: Vec<String> = items.iter().map(|s| s.to_string()).collect();
                for (i, n) in names.iter().enumerate() {
                    check_label_name(n)?;
                    if names[..i].contains(n) {
                        return Err(format!("label '{n}' is named twice"));
                    }
                }
                self.labels = Some(names);
            }
            "help" => {
                self.help =
                    Some(value.clone().into_string().map_err(|_| "help must be a string".to_string())?.to_string())
            }
            "reset_on_scrape" => self.reset_on_scrape = flag("reset_on_scrape")?,
            "folded_stacks" => self.folded_stacks = flag("folded_stacks")?,
            "metrics" => self.enabled = flag("metrics")?,
            other => return Err(format!("'{other}' is not a metrics option")),
        }
        Ok(())
    }

    /// The label names for keys of `parts` parts: the declared ones, else
    /// `key` for one part and `key0`, `key1`, ... for tuples (`stack` for
    /// a folded stack).
    pub fn label_names(&self, parts: usize, folded: bool) -> Vec<String> {
        match &self.labels {
            Some(l) if l.len() == parts => l.clone(),
            _ if folded => vec!["stack".to_string()],
            _ if parts == 1 => vec!["key".to_string()],
            _ => (0..parts).map(|i| format!("key{i}")).collect(),
        }
    }
}

fn check_label_name(n: &str) -> Result<(), String> {
    let mut chars = n.chars();
    let ok_first = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !ok_first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("'{n}' is not a label name: use letters, digits and '_', not starting with a digit"));
    }
    if n.starts_with("__") || n == "le" || n == "quantile" {
        return Err(format!("label '{n}' is reserved by Prometheus; choose another name"));
    }
    Ok(())
}

/// A metric name from a prefix and a map name: characters Prometheus
/// doesn't allow become `_`.
pub fn metric_name(prefix: &str, name: &str) -> String {
    let mut out: String = format!("{prefix}{name}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The metric family of a map, or `None` when its values have no metric
/// form (string values). `counter` says an integer map counts (count/sum);
/// otherwise its values are gauges.
pub fn map_family(name: &str, help: &str, dump: &MapDump, counter: bool, labels: &[String]) -> Option<Family> {
    let mut entries: Vec<&(Vec<KeyPart>, MapValue)> = dump.entries.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let kind = match entries.first().map(|(_, v)| v) {
        None if counter => Type::Counter,
        None => Type::Gauge,
        Some(MapValue::Int(_)) if counter => Type::Counter,
        Some(MapValue::Int(_) | MapValue::Ptr(_) | MapValue::Avg { .. }) => Type::Gauge,
        Some(MapValue::Str(_)) => return None,
        Some(MapValue::Stats { .. } | MapValue::Quantiles { .. }) => Type::Summary,
        Some(MapValue::Hist { .. } | MapValue::Lhist { .. }) => Type::Histogram,
    };
    let mut family = Family::new(name, kind, help);
    if dump.keyless && counter && entries.is_empty() {
        // A keyless counter nothing has counted yet is 0, not absent.
        family.push(Vec::new(), Number::Int(0));
    }
    let hist_top = entries
        .iter()
        .filter_map(|(_, v)| match v {
            MapValue::Hist { counts: c, .. } => c.iter().rposition(|&n| n > 0),
            _ => None,
        })
        .max();
    let hist_negative =
        entries.iter().any(|(_, v)| matches!(v, MapValue::Hist { counts: c, .. } if c.first().is_some_and(|&n| n > 0)));
    let lhist_below = entries
        .iter()
        .any(|(_, v)| matches!(v, MapValue::Lhist { counts, .. } if counts.first().is_some_and(|&n| n > 0)));
    for (key, value) in entries {
        let labels: Vec<(String, String)> =
            if dump.keyless { Vec::new() } else { labels.iter().cloned().zip(key.iter().map(key_text)).collect() };
        match value {
            MapValue::Int(i) => family.push(labels, Number::Int(*i)),
            MapValue::Ptr(p) => family.push(labels, Number::Int(*p as i64)),
            MapValue::Str(_) => {}
            MapValue::Avg { count, total } => {
                family.push(labels, Number::Float(*total as f64 / (*count).max(1) as f64))
            }
            MapValue::Stats { count, total } => {
                family.samples.push(Sample {
                    suffix: "_count",
                    labels: labels.clone(),
                    value: Number::Int(*count as i64),
                });
                family.samples.push(Sample { suffix: "_sum", labels, value: Number::Int(*total) });
            }
            MapValue::Quantiles { counts, .. } => push_quantiles(&mut family, &labels, counts),
            MapValue::Hist { bits, counts } => {
                let first = if hist_negative { 0 } else { 1 };
                let top = hist_top.unwrap_or(1).clamp(1, probes_ebpf::quantile::hist_len(*bits) - 1);
                let bounds: Vec<(String, usize)> = (first..=top).map(|i| (hist_le(i, *bits), i)).collect();
                push_buckets(&mut family, &labels, counts, &bounds);
            }
            MapValue::Lhist { min, max, step, counts } => {
                let inner = lhist_inner_buckets(*min, *max, *step) as usize;
                let first = if lhist_below { 0 } else { 1 };
                let bounds: Vec<(String, usize)> = (first..=inner)
                    .map(|i| {
                        let upper = if i == 0 { *min } else { lhist_bucket_bounds(i, *min, *step).1 };
                        (upper.wrapping_sub(1).to_string(), i)
                    })
                    .collect();
                push_buckets(&mut family, &labels, counts, &bounds);
            }
        }
    }
    Some(family)
}

/// A quantiles() entry as a summary: p50, p90, p99 and p99.9 (within 1%,
/// from its log-linear buckets), `_sum` estimated from the buckets, `_count`.
fn push_quantiles(family: &mut Family, labels: &[(String, String)], counts: &[u64]) {
    use probes_ebpf::quantile;
    let total: u64 = counts.iter().sum();
    if total > 0 {
        for (q, p) in [("0.5", 50.0), ("0.9", 90.0), ("0.99", 99.0), ("0.999", 99.9)] {
            let mut l = labels.to_vec();
            l.push(("quantile".into(), q.into()));
            let v = quantile::percentile(counts, p).unwrap_or(0);
            family.samples.push(Sample { suffix: "", labels: l, value: Number::Int(v) });
        }
    }
    let sum: i64 = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| quantile::estimate(i).saturating_mul(n as i64))
        .fold(0, i64::saturating_add);
    family.samples.push(Sample { suffix: "_sum", labels: labels.to_vec(), value: Number::Int(sum) });
    family.samples.push(Sample { suffix: "_count", labels: labels.to_vec(), value: Number::Int(total as i64) });
}

/// The inclusive upper bound of log2 bucket `i`: the values are integers,
/// so bucket `[2^k, 2^(k+1))` ends at `2^(k+1) - 1`.
fn hist_le(i: usize, bits: u8) -> String {
    match super::layout::hist_span(i, bits) {
        super::layout::Span::Range(_, high) => (high - 1).to_string(),
        _ => "-1".into(),
    }
}

/// Cumulative `_bucket` samples at `bounds` (label, last bucket index
/// included), then `+Inf` and `_count`. hist() keeps no sum of the values,
/// so there is no `_sum`.
fn push_buckets(family: &mut Family, labels: &[(String, String)], counts: &[u64], bounds: &[(String, usize)]) {
    let total: u64 = counts.iter().sum();
    let mut next = 0usize;
    let mut cumulative = 0u64;
    let mut bucket = |le: String, value: u64| {
        let mut l = labels.to_vec();
        l.push(("le".into(), le));
        family.samples.push(Sample { suffix: "_bucket", labels: l, value: Number::Int(value as i64) });
    };
    for (le, upto) in bounds {
        while next <= *upto {
            cumulative += counts.get(next).copied().unwrap_or(0);
            next += 1;
        }
        bucket(le.clone(), cumulative);
    }
    bucket("+Inf".into(), total);
    family.samples.push(Sample { suffix: "_count", labels: labels.to_vec(), value: Number::Int(total as i64) });
}

fn key_text(part: &KeyPart) -> String {
    match part {
        KeyPart::Int(i) => i.to_string(),
        KeyPart::Str(s) => s.clone(),
        KeyPart::Ptr(p) => format!("{p:#x}"),
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(v: &str, format: Format) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// The families as one exposition in `format`.
pub fn render(families: &[Family], format: Format) -> String {
    let mut out = String::new();
    for f in families {
        // The 0.0.4 format names a counter by its sample name.
        let meta_name = match (f.kind, format) {
            (Type::Counter, Format::Prometheus) => format!("{}_total", f.name),
            _ => f.name.clone(),
        };
        let _ = writeln!(out, "# HELP {meta_name} {}", escape_help(&f.help, format));
        let _ = writeln!(out, "# TYPE {meta_name} {}", f.kind.name());
        for s in &f.samples {
            out.push_str(&f.name);
            out.push_str(s.suffix);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {}", s.value);
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::HIST_LEN;

    fn dump(keyless: bool, entries: Vec<(Vec<KeyPart>, MapValue)>) -> MapDump {
        MapDump { name: "m".into(), keyless, entries }
    }

    fn s(v: &str) -> KeyPart {
        KeyPart::Str(v.into())
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn counter_with_tuple_keys_in_both_formats() {
        let d = dump(
            false,
            vec![
                (vec![s("sh"), KeyPart::Int(7)], MapValue::Int(3)),
                (vec![s("bash"), KeyPart::Int(12)], MapValue::Int(5)),
            ],
        );
        let f = map_family("rtrace_opens", "opens by comm", &d, true, &names(&["comm", "pid"])).unwrap();
        assert_eq!(
            render(std::slice::from_ref(&f), Format::Prometheus),
            "# HELP rtrace_opens_total opens by comm\n# TYPE rtrace_opens_total counter\n\
             rtrace_opens_total{comm=\"bash\",pid=\"12\"} 5\nrtrace_opens_total{comm=\"sh\",pid=\"7\"} 3\n"
        );
        assert_eq!(
            render(&[f], Format::OpenMetrics),
            "# HELP rtrace_opens opens by comm\n# TYPE rtrace_opens counter\n\
             rtrace_opens_total{comm=\"bash\",pid=\"12\"} 5\nrtrace_opens_total{comm=\"sh\",pid=\"7\"} 3\n# EOF\n"
        );
    }

    #[test]
    fn an_empty_keyless_counter_is_zero() {
        let f = map_family("c", "h", &dump(true, vec![]), true, &[]).unwrap();
        assert_eq!(f.samples, vec![Sample { suffix: "_total", labels: vec![], value: Number::Int(0) }]);
        assert!(map_family("g", "h", &dump(true, vec![]), false, &[]).unwrap().samples.is_empty());
    }

    #[test]
    fn keyless_gauge_and_avg() {
        let f = map_family("rtrace_m", "h", &dump(true, vec![(vec![], MapValue::Int(-4))]), false, &[]).unwrap();
        assert_eq!(render(&[f], Format::Prometheus), "# HELP rtrace_m h\n# TYPE rtrace_m gauge\nrtrace_m -4\n");
        let d = dump(false, vec![(vec![KeyPart::Int(1)], MapValue::Avg { count: 4, total: 10 })]);
        let f = map_family("rtrace_m", "h", &d, false, &names(&["key"])).unwrap();
        assert_eq!(f.kind, Type::Gauge);
        assert_eq!(
            f.samples,
            vec![Sample { suffix: "", labels: vec![("key".into(), "1".into())], value: Number::Float(2.5) }]
        );
    }

    #[test]
    fn log2_histogram_buckets_are_cumulative_up_to_the_highest_used() {
        // 0 once, 1 twice, 2..3 once, 4..7 three times.
        let mut counts = vec![0u64; HIST_LEN];
        counts[1] = 1;
        counts[2] = 2;
        counts[3] = 1;
        counts[5] = 3;
        let f =
            map_family("rtrace_lat", "h", &dump(true, vec![(vec![], MapValue::Hist { bits: 0, counts })]), false, &[])
                .unwrap();
        assert_eq!(
            render(&[f], Format::Prometheus),
            "# HELP rtrace_lat h\n# TYPE rtrace_lat histogram\n\
             rtrace_lat_bucket{le=\"0\"} 1\nrtrace_lat_bucket{le=\"1\"} 3\nrtrace_lat_bucket{le=\"3\"} 4\n\
             rtrace_lat_bucket{le=\"7\"} 4\nrtrace_lat_bucket{le=\"15\"} 7\nrtrace_lat_bucket{le=\"+Inf\"} 7\n\
             rtrace_lat_count 7\n"
        );
    }

    #[test]
    fn histogram_keys_share_buckets_and_negatives_get_their_own() {
        let mut a = vec![0u64; HIST_LEN];
        a[0] = 2;
        let mut b = vec![0u64; HIST_LEN];
        b[64] = 1;
        let d = dump(
            false,
            vec![
                (vec![s("b")], MapValue::Hist { bits: 0, counts: b }),
                (vec![s("a")], MapValue::Hist { bits: 0, counts: a }),
            ],
        );
        let f = map_family("h", "h", &d, false, &names(&["k"])).unwrap();
        let a_rows: Vec<String> = f
            .samples
            .iter()
            .filter(|s| s.labels[0].1 == "a")
            .map(|s| format!("{}{:?}={}", s.suffix, s.labels.get(1).map(|l| l.1.as_str()), s.value))
            .collect();
        // Buckets -1, 0, 1, ..., 2^63-1, +Inf, then _count.
        assert_eq!(a_rows.len(), 65 + 2, "{a_rows:?}");
        assert_eq!(a_rows[0], "_bucketSome(\"-1\")=2");
        assert_eq!(a_rows[a_rows.len() - 3], "_bucketSome(\"9223372036854775807\")=2");
        assert_eq!(a_rows[a_rows.len() - 2], "_bucketSome(\"+Inf\")=2");
        assert_eq!(a_rows[a_rows.len() - 1], "_countNone=2");
    }

    #[test]
    fn linear_histogram_bounds() {
        // lhist(x, 0, 30, 10): [0,10) [10,20) [20,30) then >= 30.
        let counts = vec![0, 1, 0, 2, 4];
        let d = dump(true, vec![(vec![], MapValue::Lhist { min: 0, max: 30, step: 10, counts })]);
        let f = map_family("l", "h", &d, false, &[]).unwrap();
        let rows: Vec<String> = f.samples.iter().map(|s| format!("{}{:?} {}", s.suffix, s.labels, s.value)).collect();
        assert_eq!(
            rows,
            vec![
                "_bucket[(\"le\", \"9\")] 1",
                "_bucket[(\"le\", \"19\")] 1",
                "_bucket[(\"le\", \"29\")] 3",
                "_bucket[(\"le\", \"+Inf\")] 7",
                "_count[] 7",
            ]
        );
    }

    #[test]
    fn stats_are_summaries_and_strings_have_no_metric() {
        let d = dump(false, vec![(vec![KeyPart::Int(3)], MapValue::Stats { count: 2, total: 30 })]);
        let f = map_family("s", "h", &d, false, &names(&["pid"])).unwrap();
        assert_eq!(
            render(&[f], Format::OpenMetrics),
            "# HELP s h\n# TYPE s summary\ns_count{pid=\"3\"} 2\ns_sum{pid=\"3\"} 30\n# EOF\n"
        );
        assert!(map_family("s", "h", &dump(true, vec![(vec![], MapValue::Str("x".into()))]), false, &[]).is_none());
    }

    #[test]
    fn escaping() {
        assert_eq!(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let d = dump(false, vec![(vec![s("we\"ird\\")], MapValue::Int(1))]);
        let f = map_family("x", "line\none \"q\"", &d, true, &names(&["k"])).unwrap();
        assert_eq!(
            render(std::slice::from_ref(&f), Format::Prometheus),
            "# HELP x_total line\\none \"q\"\n# TYPE x_total counter\nx_total{k=\"we\\\"ird\\\\\"} 1\n"
        );
        assert!(render(&[f], Format::OpenMetrics).starts_with("# HELP x line\\none \\\"q\\\"\n"));
    }

    #[test]
    fn names_and_label_defaults() {
        assert_eq!(metric_name("rtrace_", "read-bytes"), "rtrace_read_bytes");
        assert_eq!(metric_name("", "9x"), "_9x");
        let o = MetricOptions::default();
        assert_eq!(o.label_names(1, false), names(&["key"]));
        assert_eq!(o.label_names(3, false), names(&["key0", "key1", "key2"]));
        assert_eq!(o.label_names(1, true), names(&["stack"]));
        let mut o = MetricOptions::default();
        o.set("labels", &rhai::Dynamic::from(vec![rhai::Dynamic::from("comm"), rhai::Dynamic::from("pid")])).unwrap();
        assert_eq!(o.label_names(2, false), names(&["comm", "pid"]));
        for bad in ["le", "__x", "1a", "a-b", ""] {
            assert!(o.set("labels", &rhai::Dynamic::from(vec![rhai::Dynamic::from(bad)])).is_err(), "{bad}");
        }
        assert!(o
            .set("labels", &rhai::Dynamic::from(vec![rhai::Dynamic::from("a"), rhai::Dynamic::from("a")]))
            .is_err());
        assert!(o.set("reset_on_scrape", &rhai::Dynamic::from(1i64)).is_err());
    }

    #[test]
    fn negotiation() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                    text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text; q=0")), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text; version=2.0.0")), Format::Prometheus);
    }
}
