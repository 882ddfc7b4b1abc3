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

/// A JUnit XML document: one testsuite named `suite`, one testcase per result.
pub fn junit_xml(suite: &str, checks: &[CheckResult], seconds: f64) -> String {
    let failures = checks.iter().filter(|c| !c.ok && !c.error).count();
    let errors = checks.iter().filter(|c| c.error).count();
    let suite = xml_escape(suite);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!("tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\"", checks.len());
    let _ = writeln!(out, "<testsuites name=\"rtrace\" {counts} time=\"{seconds:.3}\">");
    let _ = writeln!(out, "  <testsuite name=\"{suite}\" {counts} time=\"{seconds:.3}\">");
    for c in checks {
        let name = xml_escape(&c.name);
        let open = format!("    <testcase classname=\"{suite}\" name=\"{name}\"");
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
        CheckResult { name: name.into(), ok, detail: detail.into(), error: false }
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
        let c = [check("p99 < 2ms", true, ""), check("opens", false, "a<b & \"c\""), err];
        let xml = junit_xml("budget.rhai", &c, 1.5);
        assert_eq!(
            xml,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="rtrace" tests="3" failures="1" errors="1" time="1.500">
  <testsuite name="budget.rhai" tests="3" failures="1" errors="1" time="1.500">
    <testcase classname="budget.rhai" name="p99 &lt; 2ms"/>
    <testcase classname="budget.rhai" name="opens">
      <failure message="a&lt;b &amp; &quot;c&quot;">a&lt;b &amp; &quot;c&quot;</failure>
    </testcase>
    <testcase classname="budget.rhai" name="END">
      <error message="map &apos;lat&apos; has no samples">map &apos;lat&apos; has no samples</error>
    </testcase>
  </testsuite>
</testsuites>
"#
        );
    }
}
