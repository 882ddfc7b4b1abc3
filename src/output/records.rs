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
