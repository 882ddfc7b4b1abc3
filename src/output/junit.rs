//! The results of `check()`, `fail()` and `assert()`: the list printed at
//! the end of a run (`PASS name` / `FAIL name: detail`), their `check` JSON
//! records, and the JUnit XML report `--junit FILE` writes (one testcase
//! each, so GitHub Actions, GitLab and Jenkins show them).

use std::fmt::Write;

/// One recorded result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub name: String,
    pub ok: bool,
    /// Why it failed (also kept for passing checks, as the script gave it).
    pub detail: String,
    /// An error of the run rather than a check (`<error>` in JUnit).
    pub error: bool,
    /// The script line of the check() call, when there is one.
    pub line: Option<usize>,
}

/// How the `-c` command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    Exited(i32),
    /// Killed by this signal.
    Killed(i32),
    /// rtrace ended it (`-d`, Ctrl-C, `exit()`), so it has no verdict of its own.
    EndedByRtrace,
}

/// The `-c` command's fate as a result of its own (named `command`): it
/// fails when the command exited non-zero or was killed by a signal.
pub fn command_result(command: &str, end: CommandEnd) -> CheckResult {
    let (ok, detail) = match end {
        CommandEnd::Exited(0) => (true, format!("`{command}` exited with status 0")),
        CommandEnd::Exited(n) => (false, format!("`{command}` exited with status {n}")),
        CommandEnd::Killed(sig) => {
            let name = crate::util::signals::name(sig).map(|n| format!(" ({n})")).unwrap_or_default();
            (false, format!("`{command}` was killed by signal {sig}{name}"))
        }
        CommandEnd::EndedByRtrace => (true, format!("`{command}` was ended by rtrace when tracing ended")),
    };
    CheckResult { name: "command".into(), ok, detail, error: false, line: None }
}

/// `PASS name` or `FAIL name: detail`, one line each.
pub fn checks_text(checks: &[CheckResult]) -> String {
    let mut out = String::new();
    for c in checks {
        match (c.ok, c.detail.is_empty()) {
            (true, _) => writeln!(out, "PASS {}", c.name),
            (false, true) => writeln!(out, "FAIL {}", c.name),
            (false, false) => writeln!(out, "FAIL {}: {}", c.name, c.detail),
        }
        .ok();
    }
    out
}

/// One `{"type": "check", "data": {"name": .., "ok": .., "detail": ..}}` record per result.
pub fn checks_json(checks: &[CheckResult]) -> String {
    let mut out = String::new();
    for c in checks {
        let _ = writeln!(
            out,
            "{{\"type\": \"check\", \"data\": {{\"name\": \"{}\", \"ok\": {}, \"detail\": \"{}\"}}}}",
            super::json::escape_json(&c.name),
            c.ok,
            super::json::escape_json(&c.detail)
        );
    }
    out
}

/// A JUnit XML document: one testsuite named `suite`, one testcase per
/// result (with the script `file` and the check's line, where known).
pub fn junit_xml(suite: &str, file: &str, checks: &[CheckResult], seconds: f64) -> String {
    let failures = checks.iter().filter(|c| !c.ok && !c.error).count();
    let errors = checks.iter().filter(|c| c.error).count();
    let suite = xml_escape(suite);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!("tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\"", checks.len());
    let _ = writeln!(out, "<testsuites name=\"rtrace\" {counts} time=\"{seconds:.3}\">");
    let _ = writeln!(out, "  <testsuite name=\"{suite}\" {counts} time=\"{seconds:.3}\">");
    for c in checks {
        let name = xml_escape(&c.name);
        let line = c.line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default();
        let open = format!("    <testcase classname=\"{suite}\" name=\"{name}\" file=\"{}\"{line}", xml_escape(file));
        if c.ok {
            let _ = writeln!(out, "{open}/>");
            continue;
        }
        let tag = if c.error { "error" } else { "failure" };
        let detail = xml_escape(&c.detail);
        let _ = writeln!(out, "{open}>\n      <{tag} message=\"{detail}\">{detail}</{tag}>\n    </testcase>");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text for an XML attribute or element: markup characters as entities,
/// control characters other than tab and newline dropped (XML 1.0 has no
/// way to write them).
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push('\t'),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, ok: bool, detail: &str) -> CheckResult {
        CheckResult { name: name.into(), ok, detail: detail.into(), error: false, line: None }
    }

    #[test]
    fn text_lists_every_check() {
        let c = [check("p99", true, "fine"), check("opens", false, "3 unexpected"), check("n", false, "")];
        assert_eq!(checks_text(&c), "PASS p99\nFAIL opens: 3 unexpected\nFAIL n\n");
    }

    #[test]
    fn json_records() {
        let c = [check("a \"b\"", false, "x\ny")];
        assert_eq!(
            checks_json(&c),
            "{\"type\": \"check\", \"data\": {\"name\": \"a \\\"b\\\"\", \"ok\": false, \"detail\": \"x\\ny\"}}\n"
        );
    }

    #[test]
    fn junit_document() {
        let mut err = check("END", false, "map 'lat' has no samples");
        err.error = true;
        let mut p99 = check("p99 < 2ms", true, "");
        p99.line = Some(7);
        let c = [p99, check("opens", false, "a<b & \"c\""), err];
        let xml = junit_xml("budget.rhai", "ci/budget.rhai", &c, 1.5);
        assert_eq!(
            xml,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="rtrace" tests="3" failures="1" errors="1" time="1.500">
  <testsuite name="budget.rhai" tests="3" failures="1" errors="1" time="1.500">
    <testcase classname="budget.rhai" name="p99 &lt; 2ms" file="ci/budget.rhai" line="7"/>
    <testcase classname="budget.rhai" name="opens" file="ci/budget.rhai">
      <failure message="a&lt;b &amp; &quot;c&quot;">a&lt;b &amp; &quot;c&quot;</failure>
    </testcase>
    <testcase classname="budget.rhai" name="END" file="ci/budget.rhai">
      <error message="map &apos;lat&apos; has no samples">map &apos;lat&apos; has no samples</error>
    </testcase>
  </testsuite>
</testsuites>
"#
        );
    }

    #[test]
    fn the_commands_fate_is_a_result() {
        let exited = command_result("bench", CommandEnd::Exited(3));
        assert!(!exited.ok);
        assert_eq!(exited.detail, "`bench` exited with status 3");
        let killed = command_result("bench", CommandEnd::Killed(libc::SIGSEGV));
        assert!(!killed.ok);
        assert_eq!(killed.detail, "`bench` was killed by signal 11 (SIGSEGV)");
        assert!(command_result("bench", CommandEnd::Exited(0)).ok);
        assert!(command_result("bench", CommandEnd::EndedByRtrace).ok);
        let xml = junit_xml("b.rhai", "b.rhai", &[killed], 0.5);
        assert!(xml.contains(r#"tests="1" failures="1" errors="0""#), "{xml}");
        assert!(xml.contains(r#"<testcase classname="b.rhai" name="command" file="b.rhai">"#), "{xml}");
    }
}
