//! `-k`/`-kk` reports: failed helper calls of one statement, as a warning
//! line on stderr or a bpftrace-style `helper_error` NDJSON record.

use super::json::escape_json;
use crate::diag::{Diagnostic, Pos};

/// Failed calls of one helper at one statement of one probe, since the
/// last report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperError<'a> {
    /// The script file, as errors name it.
    pub file: &'a str,
    pub line: u32,
    pub col: u32,
    /// The probe's spec, as written.
    pub probe: &'a str,
    /// The helper's name (`probe_read_user_str`, `map_update_elem`).
    pub helper: &'a str,
    pub count: u64,
    /// The last error: a negative errno.
    pub retcode: i64,
}

/// The error's text without the errno number (`Bad address`).
pub fn errno_text(retcode: i64) -> String {
    let text = std::io::Error::from_raw_os_error(retcode.unsigned_abs() as i32).to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// As a warning: `FILE:L:C: warning: 3 failed probe_read_user_str in PROBE:
/// Bad address (-14)` (bpftrace: `WARNING: Failed to probe_read_user_str:
/// Bad address (-14)`).
pub fn diagnostic(e: &HelperError) -> Diagnostic {
    let msg = format!("{} failed {} in {}: {} ({})", e.count, e.helper, e.probe, errno_text(e.retcode), e.retcode);
    Diagnostic::new(e.file, Some(Pos { line: e.line, col: e.col }), msg).warning()
}

/// bpftrace's `helper_error` record (`msg`, `helper`, `retcode`, `line`,
/// `col`) plus the `count` of failures it stands for and the `probe`.
pub fn format_json(e: &HelperError) -> String {
    format!(
        "{{\"type\": \"helper_error\", \"msg\": \"{}\", \"helper\": \"{}\", \"retcode\": {}, \"line\": {}, \"col\": {}, \
         \"count\": {}, \"probe\": \"{}\"}}\n",
        escape_json(&errno_text(e.retcode)),
        escape_json(e.helper),
        e.retcode,
        e.line,
        e.col,
        e.count,
        escape_json(e.probe)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HelperError<'static> {
        HelperError {
            file: "t.rhai",
            line: 3,
            col: 5,
            probe: "tracepoint:syscalls:sys_enter_openat",
            helper: "probe_read_user_str",
            count: 12,
            retcode: -14,
        }
    }

    #[test]
    fn text_names_the_statement_count_and_error() {
        assert_eq!(
            diagnostic(&sample()).to_string(),
            "t.rhai:3:5: warning: 12 failed probe_read_user_str in tracepoint:syscalls:sys_enter_openat: Bad address (-14)"
        );
        assert_eq!(errno_text(-7), "Argument list too long");
    }

    #[test]
    fn json_is_bpftrace_s_record_with_a_count() {
        let v: serde_json::Value = serde_json::from_str(&format_json(&sample())).unwrap();
        assert_eq!(v["type"], "helper_error");
        assert_eq!(v["msg"], "Bad address");
        assert_eq!(v["helper"], "probe_read_user_str");
        assert_eq!((v["retcode"].as_i64(), v["line"].as_u64(), v["col"].as_u64()), (Some(-14), Some(3), Some(5)));
        assert_eq!(v["count"], 12);
    }
}
