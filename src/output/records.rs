//! The other NDJSON record types of `bpftrace -f json`: `value` for
//! `print(number)`, `time`, `join`, and rtrace's `folded` for
//! `print_folded(m)`, with their text forms.

use std::fmt::Write;

use super::json::escape_json;
use super::sink::{self, Format};

/// `{"type": "value", "data": 5}`: a number or bool printed with `print()`.
/// Numbers stay numbers; a float that JSON can't hold (NaN, inf) is a string.
pub fn format_value_json(data_json: &str) -> String {
    format!("{{\"type\": \"value\", \"data\": {data_json}}}\n")
}

/// `{"type": "time", "data": "10:42:01\n"}` and `{"type": "join", "data": "a b"}`.
pub fn format_text_record_json(kind: &str, text: &str) -> String {
    format!("{{\"type\": \"{kind}\", \"data\": \"{}\"}}\n", escape_json(text))
}

/// `{"type": "folded", "data": {"@m": {"comm;main;f": 3, ...}}}` from
/// folded lines (`stack count`).
pub fn format_folded_json(name: &str, lines: &[String]) -> String {
    let mut out = format!("{{\"type\": \"folded\", \"data\": {{\"@{}\": {{", escape_json(name));
    for (i, line) in lines.iter().enumerate() {
        let (stack, count) = match line.rsplit_once(' ') {
            Some((s, c)) if c.parse::<i64>().is_ok() => (s, c),
            _ => (line.as_str(), "0"),
        };
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "\"{}\": {count}", escape_json(stack));
    }
    out.push_str("}}}\n");
    out
}

/// Write a printed number or bool: as text, or a `value` record.
pub fn value(text: &str, data_json: &str) {
    match sink::format() {
        Format::Text => sink::raw(&format!("{text}\n")),
        Format::Json => sink::raw(&format_value_json(data_json)),
    }
}

/// `print([1, 2, "s"])` / `print(#{a: 1})`: Rhai's text, or a `value`
/// record whose data is a JSON array / object.
pub fn script_value(v: &rhai::Dynamic) {
    value(&v.to_string(), &dynamic_json(v));
}

/// A script value as bpftrace writes values in JSON: arrays (its tuples)
/// unspaced, `[1,2,"s",[4,5]]`; object maps (its records) spaced,
/// `{"a": 0, "b": "x"}`; numbers, strings, bools, `()` as `null`; anything
/// else as its text.
pub fn dynamic_json(v: &rhai::Dynamic) -> String {
    if v.is_unit() {
        return "null".to_string();
    }
    if let Ok(i) = v.as_int() {
        return i.to_string();
    }
    if let Ok(f) = v.as_float() {
        return float_json(f);
    }
    if let Ok(b) = v.as_bool() {
        return b.to_string();
    }
    if let Some(a) = v.read_lock::<rhai::Array>() {
        return format!("[{}]", a.iter().map(dynamic_json).collect::<Vec<_>>().join(","));
    }
    if let Some(m) = v.read_lock::<rhai::Map>() {
        let fields: Vec<String> =
            m.iter().map(|(k, v)| format!("\"{}\": {}", escape_json(k), dynamic_json(v))).collect();
        return format!("{{{}}}", fields.join(", "));
    }
    if let Some(b) = v.read_lock::<rhai::Blob>() {
        return format!("[{}]", b.iter().map(u8::to_string).collect::<Vec<_>>().join(","));
    }
    format!("\"{}\"", escape_json(&v.to_string()))
}

/// Write what `time(fmt);` or `join(arr);` print as a statement.
pub fn text_record(kind: &str, text: &str) {
    match sink::format() {
        Format::Text => sink::raw(text),
        Format::Json => sink::raw(&format_text_record_json(kind, text)),
    }
}

/// `print_folded(m)`: one line per stack, or one `folded` record.
pub fn folded(name: &str, lines: &[String]) {
    match sink::format() {
        Format::Text => {
            let mut text = lines.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            sink::raw(&text);
        }
        Format::Json => sink::raw(&format_folded_json(name, lines)),
    }
}

/// JSON for a float: a number, or a string for NaN and infinities.
pub fn float_json(f: f64) -> String {
    if f.is_finite() {
        format!("{f:?}")
    } else {
        format!("\"{f}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_records_keep_numbers_numbers() {
        assert_eq!(format_value_json("5"), "{\"type\": \"value\", \"data\": 5}\n");
        assert_eq!(float_json(1.5), "1.5");
        assert_eq!(float_json(2.0), "2.0");
        assert_eq!(float_json(f64::NAN), "\"NaN\"");
    }

    #[test]
    fn arrays_and_maps_are_json_values() {
        let mut inner = rhai::Map::new();
        inner.insert("x".into(), rhai::Dynamic::from(1_i64));
        inner.insert("s".into(), rhai::Dynamic::from("a\"b".to_string()));
        let v: rhai::Array = vec![
            rhai::Dynamic::from(1_i64),
            rhai::Dynamic::from(2.5_f64),
            rhai::Dynamic::from("s".to_string()),
            rhai::Dynamic::from(vec![rhai::Dynamic::from(4_i64), rhai::Dynamic::from(true)]),
            rhai::Dynamic::from(inner),
            rhai::Dynamic::UNIT,
        ];
        let json = dynamic_json(&rhai::Dynamic::from(v));
        assert_eq!(json, r#"[1,2.5,"s",[4,true],{"s": "a\"b", "x": 1},null]"#);
        let record = format_value_json(&json);
        let parsed: serde_json::Value = serde_json::from_str(&record).unwrap();
        assert_eq!(parsed["type"], "value");
        assert_eq!(parsed["data"][4]["x"], 1);
    }

    #[test]
    fn time_and_join_records() {
        assert_eq!(format_text_record_json("time", "10\n"), "{\"type\": \"time\", \"data\": \"10\\n\"}\n");
        assert_eq!(format_text_record_json("join", "a \"b\""), "{\"type\": \"join\", \"data\": \"a \\\"b\\\"\"}\n");
    }

    #[test]
    fn folded_record_is_valid_json_with_counts() {
        let lines = vec!["bash;main;read 3".to_string(), "a b;x 10".to_string()];
        let text = format_folded_json("f", &lines);
        assert_eq!(text, "{\"type\": \"folded\", \"data\": {\"@f\": {\"bash;main;read\": 3, \"a b;x\": 10}}}\n");
        assert_eq!(format_folded_json("f", &[]), "{\"type\": \"folded\", \"data\": {\"@f\": {}}}\n");
    }
}
