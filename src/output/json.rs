//! NDJSON records in the shapes of `bpftrace -f json`: one object per line,
//! `{"type": ..., "data": ...}`.

use std::fmt::Write;

use super::layout::{average, hist_rows, join_key, lhist_rows, sorted_entries, MapKind, Row, Span};
use super::value::{MapDump, MapValue};
use crate::diag::{Diagnostic, Place};

/// The map as one `map`, `hist` or `stats` record; an empty map gives an
/// empty string, as bpftrace prints nothing for it.
///
/// Keyed maps nest an object whose keys are the key parts joined by `,`:
/// `{"type": "map", "data": {"@c": {"1,a": 1}}}`.
pub fn format_map_json(dump: &MapDump) -> String {
    let Some(kind) = dump.kind() else {
        return String::new();
    };
    let record_type = match kind {
        MapKind::Int | MapKind::Str => "map",
        MapKind::Hist => "hist",
        MapKind::Stats => "stats",
        MapKind::Quantiles => "quantiles",
    };
    let mut out = format!("{{\"type\": \"{record_type}\", \"data\": {{\"@{}\": ", escape_json(&dump.name));
    if !dump.keyless {
        out.push('{');
    }
    for (i, (key, value)) in sorted_entries(dump).into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if !dump.keyless {
            let _ = write!(out, "\"{}\": ", escape_json(&join_key(key, ",")));
        }
        push_json_value(&mut out, value);
    }
    if !dump.keyless {
        out.push('}');
    }
    out.push_str("}}\n");
    out
}

/// `{"type": "printf", "data": "..."}` for the text one printf() produced.
pub fn format_printf_json(text: &str) -> String {
    format!("{{\"type\": \"printf\", \"data\": \"{}\"}}\n", escape_json(text))
}

/// `{"type": "lost_events", "count": N, "data": {"events": N}}`, as
/// bpftrace writes it (the count twice). bpftrace's record does not name
/// the probe, so `_probe` is not part of it.
pub fn format_lost_events_json(_probe: &str, lost: u64) -> String {
    format!("{{\"type\": \"lost_events\", \"count\": {lost}, \"data\": {{\"events\": {lost}}}}}\n")
}

/// `{"type": "attached_probes", "data": {"probes": N}}`.
pub fn format_attached_json(n: usize) -> String {
    format!("{{\"type\": \"attached_probes\", \"data\": {{\"probes\": {n}}}}}\n")
}

fn push_json_value(out: &mut String, value: &MapValue) {
    match value {
        MapValue::Int(v) => {
            let _ = write!(out, "{v}");
        }
        MapValue::Str(s) => {
            let _ = write!(out, "\"{}\"", escape_json(s));
        }
        MapValue::Ptr(p) => {
            let _ = write!(out, "\"{p:#x}\"");
        }
        MapValue::Avg { count, total } => {
            let _ = write!(out, "{}", average(*count, *total));
        }
        MapValue::Stats { count, total } => {
            let _ = write!(
                out,
                "{{\"count\": {}, \"average\": {}, \"total\": {}}}",
                *count as i64,
                average(*count, *total),
                total
            );
        }
        MapValue::Hist { bits, counts } => push_hist_json(out, counts, *bits),
        MapValue::Lhist { min, max, step, counts } => push_lhist_json(out, counts, *min, *max, *step),
        MapValue::Quantiles { unit_ns, counts } => out.push_str(&super::dist::quantiles_json(*unit_ns, counts)),
    }
}

/// `[{"min": 4, "max": 7, "count": 1}, ...]`; the negative bucket has only `"max": -1`.
fn push_hist_json(out: &mut String, counts: &[u64], bits: u8) {
    push_rows_json(out, &hist_rows(counts, bits));
}

/// Like [`push_hist_json`]; the below-min bucket has only `"max": min - 1`,
/// the from-max bucket only `"min": max`.
fn push_lhist_json(out: &mut String, counts: &[u64], min: i64, max: i64, step: i64) {
    push_rows_json(out, &lhist_rows(counts, min, max, step));
}

/// Histogram rows as bpftrace's JSON: inclusive `min` and `max`.
fn push_rows_json(out: &mut String, rows: &[Row]) {
    out.push('[');
    for (n, row) in rows.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        let count = row.count;
        let _ = match row.span {
            Span::Below(below) => write!(out, "{{\"max\": {}, \"count\": {count}}}", below.wrapping_sub(1)),
            Span::From(from) => write!(out, "{{\"min\": {from}, \"count\": {count}}}"),
            Span::Range(low, high) => write!(out, "{{\"min\": {low}, \"max\": {}, \"count\": {count}}}", high - 1),
        };
    }
    out.push(']');
}

/// A [`Diagnostic`] as one record, in bpftrace's record shape:
/// `{"type": "error", "data": {"file": .., "line": .., "col": .., "message":
/// .., "hint": ..}}` (`type` is the severity; `file`, `line`, `col` and
/// `hint` only where known).
pub fn format_diagnostic_json(d: &Diagnostic) -> String {
    let mut data = String::new();
    if d.place != Place::Nowhere {
        let _ = write!(data, "\"file\": \"{}\", ", escape_json(&d.file));
    }
    if let Some(pos) = d.pos() {
        let _ = write!(data, "\"line\": {}, \"col\": {}, ", pos.line, pos.col);
    }
    let _ = write!(data, "\"message\": \"{}\"", escape_json(&d.message));
    if let Some(hint) = &d.hint {
        let _ = write!(data, ", \"hint\": \"{}\"", escape_json(hint));
    }
    format!("{{\"type\": \"{}\", \"data\": {{{data}}}}}\n", d.severity.name())
}

/// bpftrace's JSON string escaping: `"`, `\`, `\n`, `\r`, `\t` by name,
/// other control characters as `\u00XX`, everything else as is.
pub(super) fn escape_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! Expected strings are bpftrace 0.17's `-f json` output for the
    //! statements quoted on the fixtures.

    use super::super::fixtures;
    use super::*;

    #[test]
    fn diagnostics_are_records_with_what_is_known() {
        use crate::diag::{Diagnostic, Pos};
        let d = Diagnostic::new("t.rhai", Some(Pos { line: 2, col: 5 }), "say \"x\"").hint("do y");
        let v: serde_json::Value = serde_json::from_str(&format_diagnostic_json(&d)).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(v["data"]["file"], "t.rhai");
        assert_eq!((v["data"]["line"].as_u64(), v["data"]["col"].as_u64()), (Some(2), Some(5)));
        assert_eq!(v["data"]["message"], "say \"x\"");
        assert_eq!(v["data"]["hint"], "do y");
        let w = format_diagnostic_json(&Diagnostic::tool("lost 3").warning());
        assert_eq!(w, "{\"type\": \"warning\", \"data\": {\"message\": \"lost 3\"}}\n");
    }

    #[test]
    fn keyless_count() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": 3}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::keyless_count()), expected);
    }

    #[test]
    fn int_keys() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": {"3": 1, "-5": 2, "10": 3}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::int_keys()), expected);
    }

    #[test]
    fn string_keys() {
        let expected =
            concat!(r#"{"type": "map", "data": {"@m": {"a b": -3, "b\"q": 5, "x\\y": 7, "tab\there": 100}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::string_keys()), expected);
    }

    #[test]
    fn tuple_keys() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": {"1,a": 1, "2,b": 2, "-1,c": 3}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::tuple_keys()), expected);
    }

    #[test]
    fn hist_keyless() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 0, "max": 0, "count": 1}, {"min": 1, "max": 1, "count": 0}, {"min": 2, "max": 3, "count": 0}, {"min": 4, "max": 7, "count": 1}, {"min": 8, "max": 15, "count": 0}, {"min": 16, "max": 31, "count": 0}, {"min": 32, "max": 63, "count": 0}, {"min": 64, "max": 127, "count": 0}, {"min": 128, "max": 255, "count": 0}, {"min": 256, "max": 511, "count": 0}, {"min": 512, "max": 1023, "count": 0}, {"min": 1024, "max": 2047, "count": 1}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::hist_keyless()), expected);
    }

    #[test]
    fn hist_keyed_negative() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": {"2": [{"min": 1, "max": 1, "count": 1}], "3": [{"min": 1024, "max": 2047, "count": 3}], "1": [{"max": -1, "count": 2}, {"min": 0, "max": 0, "count": 0}, {"min": 1, "max": 1, "count": 1}, {"min": 2, "max": 3, "count": 1}]}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::hist_keyed_negative()), expected);
    }

    #[test]
    fn hist_large() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 4096, "max": 8191, "count": 1}, {"min": 8192, "max": 16383, "count": 0}, {"min": 16384, "max": 32767, "count": 0}, {"min": 32768, "max": 65535, "count": 0}, {"min": 65536, "max": 131071, "count": 0}, {"min": 131072, "max": 262143, "count": 0}, {"min": 262144, "max": 524287, "count": 0}, {"min": 524288, "max": 1048575, "count": 0}, {"min": 1048576, "max": 2097151, "count": 1}, {"min": 2097152, "max": 4194303, "count": 0}, {"min": 4194304, "max": 8388607, "count": 0}, {"min": 8388608, "max": 16777215, "count": 0}, {"min": 16777216, "max": 33554431, "count": 0}, {"min": 33554432, "max": 67108863, "count": 0}, {"min": 67108864, "max": 134217727, "count": 0}, {"min": 134217728, "max": 268435455, "count": 0}, {"min": 268435456, "max": 536870911, "count": 0}, {"min": 536870912, "max": 1073741823, "count": 0}, {"min": 1073741824, "max": 2147483647, "count": 3}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::hist_large()), expected);
    }

    #[test]
    fn lhist_outside() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"max": 1023, "count": 1}, {"min": 1024, "max": 1535, "count": 0}, {"min": 1536, "max": 2047, "count": 1}, {"min": 2048, "max": 2559, "count": 0}, {"min": 2560, "max": 3071, "count": 0}, {"min": 3072, "max": 3583, "count": 0}, {"min": 3584, "max": 4095, "count": 0}, {"min": 4096, "count": 2}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::lhist_outside()), expected);
    }

    #[test]
    fn lhist_km_labels() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 524288, "max": 1048575, "count": 1}, {"min": 1048576, "max": 1572863, "count": 2}, {"min": 1572864, "max": 2097151, "count": 0}, {"min": 2097152, "max": 2621439, "count": 1}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::lhist_km_labels()), expected);
    }

    #[test]
    fn lhist_keyed() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": {"y": [{"min": 100, "count": 1}], "x": [{"min": 0, "max": 9, "count": 1}, {"min": 10, "max": 19, "count": 0}, {"min": 20, "max": 29, "count": 0}, {"min": 30, "max": 39, "count": 0}, {"min": 40, "max": 49, "count": 0}, {"min": 50, "max": 59, "count": 0}, {"min": 60, "max": 69, "count": 0}, {"min": 70, "max": 79, "count": 0}, {"min": 80, "max": 89, "count": 0}, {"min": 90, "max": 99, "count": 1}], "z": [{"min": 0, "max": 9, "count": 3}]}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::lhist_keyed()), expected);
    }

    #[test]
    fn stats_keyed() {
        let expected = concat!(
            r#"{"type": "stats", "data": {"@m": {"3,c": {"count": 2, "average": -4, "total": -9}, "2,b": {"count": 1, "average": 3, "total": 3}, "1,a": {"count": 1, "average": 10, "total": 10}, "4,d": {"count": 2, "average": 500003, "total": 1000007}}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::stats_keyed()), expected);
    }

    #[test]
    fn stats_keyless() {
        let expected = concat!(r#"{"type": "stats", "data": {"@m": {"count": 2, "average": -1, "total": -3}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::stats_keyless()), expected);
    }

    #[test]
    fn avg_keyless() {
        let expected = concat!(r#"{"type": "stats", "data": {"@m": 7}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::avg_keyless()), expected);
    }

    #[test]
    fn avg_keyed() {
        let expected = concat!(r#"{"type": "stats", "data": {"@m": {"1": -7, "2": 3, "3": 50}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::avg_keyed()), expected);
    }

    #[test]
    fn min_keyed() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": {"3": -20, "1": -2, "2": 7}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::min_keyed()), expected);
    }

    #[test]
    fn max_keyed() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": {"c": 1, "b": 7, "a": 50}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::max_keyed()), expected);
    }

    #[test]
    fn string_values() {
        let expected =
            concat!(r#"{"type": "map", "data": {"@m": {"1": "one", "2": "two", "10": "a\"b\\c", "-1": "neg"}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::string_values()), expected);
    }

    #[test]
    fn string_value_keyless() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": "hello world"}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::string_value_keyless()), expected);
    }

    #[test]
    fn tuple_string_values() {
        let expected = concat!(r#"{"type": "map", "data": {"@m": {"a,1": "z", "a,2": "y", "b,1": "x"}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::tuple_string_values()), expected);
    }

    #[test]
    fn empty_count() {
        let expected = "";
        assert_eq!(format_map_json(&fixtures::empty_count()), expected);
    }

    #[test]
    fn zeroed_hist() {
        let expected = concat!(r#"{"type": "hist", "data": {"@m": []}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::zeroed_hist()), expected);
    }

    #[test]
    fn zeroed_lhist_keyed() {
        let expected = concat!(r#"{"type": "hist", "data": {"@m": {"1": [], "2": []}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::zeroed_lhist_keyed()), expected);
    }

    #[test]
    fn hist_ties() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": {"256": [{"min": 4, "max": 7, "count": 1}], "1": [{"min": 4, "max": 7, "count": 1}], "2": [{"min": 4, "max": 7, "count": 2}]}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::hist_ties()), expected);
    }

    #[test]
    fn stats_ties() {
        let expected = concat!(
            r#"{"type": "stats", "data": {"@m": {"2": {"count": 1, "average": 1, "total": 1}, "256": {"count": 1, "average": 5, "total": 5}, "1": {"count": 1, "average": 5, "total": 5}}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::stats_ties()), expected);
    }

    #[test]
    fn tuple_stats_ties() {
        let expected = concat!(
            r#"{"type": "stats", "data": {"@m": {"256,a": {"count": 1, "average": 1, "total": 1}, "#,
            r#""1,a": {"count": 1, "average": 1, "total": 1}, "1,b": {"count": 1, "average": 1, "total": 1}, "#,
            r#""2,a": {"count": 1, "average": 1, "total": 1}}}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::tuple_stats_ties()), expected);
    }

    #[test]
    fn bar_rounding() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 5, "max": 5, "count": 26}, {"min": 6, "max": 6, "count": 15}, {"min": 7, "max": 7, "count": 0}, {"min": 8, "max": 8, "count": 7}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::bar_rounding()), expected);
    }

    #[test]
    fn wide_labels() {
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 1000000, "max": 1000099, "count": 1}, {"min": 1000100, "max": 1000199, "count": 1}, {"min": 1000200, "max": 1000299, "count": 2}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::wide_labels()), expected);
    }

    #[test]
    fn large_sums() {
        let expected =
            concat!(r#"{"type": "map", "data": {"@m": {"n": -1099511627776, "z": 0, "k": 1099511627776}}}"#, "\n");
        assert_eq!(format_map_json(&fixtures::large_sums()), expected);
    }

    #[test]
    fn exit_dump_of_several_maps() {
        let expected = [
            concat!(r#"{"type": "stats", "data": {"@a": 7}}"#, "\n"),
            concat!(r#"{"type": "map", "data": {"@c": {"x": 1, "y": 2}}}"#, "\n"),
            concat!(
                r#"{"type": "hist", "data": {"@h": [{"min": 0, "max": 0, "count": 1}, {"min": 1, "max": 1, "count": 0}, {"min": 2, "max": 3, "count": 0}, {"min": 4, "max": 7, "count": 1}, {"min": 8, "max": 15, "count": 0}, {"min": 16, "max": 31, "count": 0}, {"min": 32, "max": 63, "count": 0}, {"min": 64, "max": 127, "count": 0}, {"min": 128, "max": 255, "count": 0}, {"min": 256, "max": 511, "count": 0}, {"min": 512, "max": 1023, "count": 0}, {"min": 1024, "max": 2047, "count": 1}]}}"#,
                "\n"
            ),
            concat!(r#"{"type": "hist", "data": {"@l": [{"min": 40, "max": 49, "count": 1}]}}"#, "\n"),
            concat!(
                r#"{"type": "stats", "data": {"@s": {"2,b": {"count": 1, "average": 3, "total": 3}, "1,a": {"count": 1, "average": 10, "total": 10}}}}"#,
                "\n"
            ),
        ];
        let records: Vec<String> = fixtures::exit_dump_maps().iter().map(format_map_json).collect();
        assert_eq!(records, expected);
    }

    #[test]
    fn hist_bounds_from_2g_on() {
        // bpftrace 0.17 prints {"min": -2147483648, "max": 0} for [2G, 4G),
        // from 32-bit shifts; these are the bucket's real bounds.
        let expected = concat!(
            r#"{"type": "hist", "data": {"@m": [{"min": 1073741824, "max": 2147483647, "count": 1}, "#,
            r#"{"min": 2147483648, "max": 4294967295, "count": 1}]}}"#,
            "\n"
        );
        assert_eq!(format_map_json(&fixtures::hist_2g()), expected);
        let top =
            MapDump { name: "m".to_string(), keyless: true, entries: vec![(vec![], fixtures::hist_of(&[i64::MAX]))] };
        assert_eq!(
            format_map_json(&top),
            concat!(
                r#"{"type": "hist", "data": {"@m": [{"min": 4611686018427387904, "#,
                r#""max": 9223372036854775807, "count": 1}]}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn printf_record() {
        // printf("a\x01b\x08c\x0cd\x1fe\x7ff\\z\r\"q\"\t\n")
        let expected = concat!(r#"{"type": "printf", "data": "a\u0001b\u0008c\u000cd\u001fef\\z\r\"q\"\t\n"}"#, "\n");
        assert_eq!(format_printf_json("a\x01b\x08c\x0cd\x1fe\x7ff\\z\r\"q\"\t\n"), expected);
    }

    #[test]
    fn non_ascii_passes_through() {
        assert_eq!(format_printf_json("é→"), "{\"type\": \"printf\", \"data\": \"é→\"}\n");
    }

    #[test]
    fn probe_records() {
        assert_eq!(format_attached_json(2), concat!(r#"{"type": "attached_probes", "data": {"probes": 2}}"#, "\n"));
        assert_eq!(
            format_lost_events_json("kprobe:vfs_read", 7),
            concat!(r#"{"type": "lost_events", "count": 7, "data": {"events": 7}}"#, "\n")
        );
    }

    #[test]
    fn hist_bits_record_as_bpftrace() {
        // bpftrace's runtime test: $i from 0 to 1023, @ = hist($i, 3).
        let mut counts = vec![0u64; probes_ebpf::quantile::hist_len(3)];
        for v in 0..1024 {
            counts[probes_ebpf::quantile::hist_bucket(v, 3) as usize] += 1;
        }
        let dump =
            MapDump { name: String::new(), keyless: true, entries: vec![(vec![], MapValue::Hist { bits: 3, counts })] };
        let v: serde_json::Value = serde_json::from_str(&format_map_json(&dump)).unwrap();
        let rows = v["data"]["@"].as_array().unwrap();
        assert_eq!(rows.len(), 64);
        assert_eq!(rows[0], serde_json::json!({"min": 0, "max": 0, "count": 1}));
        assert_eq!(rows[15], serde_json::json!({"min": 15, "max": 15, "count": 1}));
        assert_eq!(rows[16], serde_json::json!({"min": 16, "max": 17, "count": 2}));
        assert_eq!(rows[24], serde_json::json!({"min": 32, "max": 35, "count": 4}));
        assert_eq!(rows[63], serde_json::json!({"min": 960, "max": 1023, "count": 64}));
    }
}
