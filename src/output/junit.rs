//! The results of `check()`, `fail()` and `assert()`: the list printed at
//! the end of a run (`PASS name` / `FAIL name: detail`), their `check` JSON
//! records, and the JUnit XML report `--junit FILE` writes (one testcase
//! each, so GitHub Actions, GitLab and Jenkins show them).

use std::fmt::Write;

/// One recorded result.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    pub name: String,
    pub ok: bool,
    /// Why it failed (also kept for passing checks, as the script gave it).
    pub detail: String,
    /// An error of the run rather than a check (`<error>` in JUnit).
    pub error: bool,
    /// The script line of the check() call, when there is one.
    pub line: Option<usize>,
    /// What a budget measured (`budget()`, or check()'s properties).
    pub measure: Option<Measure>,
    /// How long it took (the `-c` command's run), in seconds.
    pub seconds: Option<f64>,
    /// Not made here (`skip()`): `ok`, and `detail` says why.
    pub skipped: bool,
}

/// A measured value against its budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Measure {
    pub value: f64,
    pub budget: Option<f64>,
    /// `ns`, `us`, `calls`, ... (empty: none given).
    pub unit: String,
}

impl Measure {
    /// `309 us (budget 250 us)`.
    pub fn shown(&self) -> String {
        match self.budget {
            Some(b) => format!("{} (budget {})", self.in_unit(self.value), self.in_unit(b)),
            None => self.in_unit(self.value),
        }
    }

    /// `v` with this measure's unit: `309 us`.
    pub fn in_unit(&self, v: f64) -> String {
        if self.unit.is_empty() {
            number(v)
        } else {
            format!("{} {}", number(v), self.unit)
        }
    }
}

/// A number as written by hand: integers without a fraction.
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl CheckResult {
    pub fn new(name: &str, ok: bool, detail: String) -> CheckResult {
        CheckResult {
            name: name.to_string(),
            ok,
            detail,
            error: false,
            line: None,
            measure: None,
            seconds: None,
            skipped: false,
        }
    }

    /// A check that could not be made, and why.
    pub fn skipped(name: &str, why: String) -> CheckResult {
        CheckResult { skipped: true, ..CheckResult::new(name, true, why) }
    }
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
    CheckResult::new("command", ok, detail)
}

/// `PASS name` or `FAIL name: detail`, one line each.
pub fn checks_text(checks: &[CheckResult]) -> String {
    let mut out = String::new();
    for c in checks {
        match (c.ok, c.detail.is_empty()) {
            _ if c.skipped => writeln!(out, "SKIP {}: {}", c.name, c.detail),
            (true, _) => writeln!(out, "PASS {}", c.name),
            (false, true) => writeln!(out, "FAIL {}", c.name),
            (false, false) => writeln!(out, "FAIL {}: {}", c.name, c.detail),
        }
        .ok();
    }
    out
}

/// One `{"type": "check", "data": {"name": .., "ok": .., ...}}` record per result.
pub fn checks_json(checks: &[CheckResult]) -> String {
    checks.iter().map(|c| format!("{{\"type\": \"check\", \"data\": {}}}\n", check_json(c))).collect()
}

/// One result as a JSON object: name, ok, the script line, the measured
/// value, budget and unit where there are some, and the detail of a
/// failure (a passing check carries its measure, never a failure's text).
pub fn check_json(c: &CheckResult) -> String {
    let esc = super::json::escape_json;
    let mut d = format!("{{\"name\": \"{}\", \"ok\": {}", esc(&c.name), c.ok);
    if let Some(line) = c.line {
        d += &format!(", \"line\": {line}");
    }
    if let Some(m) = &c.measure {
        d += &format!(", \"value\": {}", number(m.value));
        if let Some(b) = m.budget {
            d += &format!(", \"budget\": {}", number(b));
        }
        if !m.unit.is_empty() {
            d += &format!(", \"unit\": \"{}\"", esc(&m.unit));
        }
    }
    if let Some(s) = c.seconds {
        d += &format!(", \"seconds\": {s:.3}");
    }
    if c.skipped {
        d += ", \"skipped\": true";
    }
    if !c.ok || c.skipped {
        d += &format!(", \"detail\": \"{}\"", esc(&c.detail));
    }
    d + "}"
}

/// Where and when a run's report was made.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// The suite's name (the script's file name).
    pub suite: String,
    /// The script as named on the command line.
    pub file: String,
    /// When the run started, ISO 8601 UTC (`2026-12-03T06:20:00Z`).
    pub timestamp: String,
    pub hostname: String,
    /// How long the run took.
    pub seconds: f64,
}

/// A JUnit XML document: one testsuite named after the script (with its
/// timestamp and host), one testcase per result (with the script `file`,
/// the check's line and time where known, and a measured value, budget
/// and unit as properties).
pub fn junit_xml(run: &RunInfo, checks: &[CheckResult]) -> String {
    let failures = checks.iter().filter(|c| !c.ok && !c.error).count();
    let errors = checks.iter().filter(|c| c.error).count();
    let skipped = checks.iter().filter(|c| c.skipped).count();
    let suite = xml_escape(&run.suite);
    let seconds = run.seconds;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let mut counts = format!("tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\"", checks.len());
    if skipped > 0 {
        counts += &format!(" skipped=\"{skipped}\"");
    }
    let _ = writeln!(out, "<testsuites name=\"rtrace\" {counts} time=\"{seconds:.3}\">");
    let _ = writeln!(
        out,
        "  <testsuite name=\"{suite}\" {counts} time=\"{seconds:.3}\" timestamp=\"{}\" hostname=\"{}\">",
        xml_escape(&run.timestamp),
        xml_escape(&run.hostname)
    );
    for c in checks {
        let name = xml_escape(&c.name);
        let line = c.line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default();
        let time = c.seconds.unwrap_or(0.0);
        let open = format!(
            "    <testcase classname=\"{suite}\" name=\"{name}\" file=\"{}\"{line} time=\"{time:.3}\"",
            xml_escape(&run.file)
        );
        let mut inner = String::new();
        if let Some(m) = &c.measure {
            inner += "      <properties>\n";
            let mut prop = |k: &str, v: String| {
                inner += &format!("        <property name=\"{k}\" value=\"{}\"/>\n", xml_escape(&v))
            };
            prop("value", number(m.value));
            if let Some(b) = m.budget {
                prop("budget", number(b));
            }
            if !m.unit.is_empty() {
                prop("unit", m.unit.clone());
            }
            inner += "      </properties>\n";
        }
        if c.skipped {
            inner += &format!("      <skipped message=\"{}\"/>\n", xml_escape(&c.detail));
        }
        if !c.ok {
            let tag = if c.error { "error" } else { "failure" };
            let detail = xml_escape(&c.detail);
            inner += &format!("      <{tag} message=\"{detail}\">{detail}</{tag}>\n");
        }
        if inner.is_empty() {
            let _ = writeln!(out, "{open}/>");
        } else {
            let _ = write!(out, "{open}>\n{inner}    </testcase>\n");
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text for an XML attribute or element: markup characters as entities,
/// control characters other than tab and newline dropped (XML 1.0 has no
/// way to write them).
pub fn xml_escape(s: &str) -> String {
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
        CheckResult::new(name, ok, detail.into())
    }

    fn run(suite: &str, file: &str, seconds: f64) -> RunInfo {
        RunInfo {
            suite: suite.into(),
            file: file.into(),
            timestamp: "2026-12-03T06:20:00Z".into(),
            hostname: "ci-1".into(),
            seconds,
        }
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
        // A passing budget carries its measure, not the text a failure would show.
        let mut p = check("p99", true, "p99 over budget");
        p.line = Some(4);
        p.measure = Some(Measure { value: 12.5, budget: Some(20.0), unit: "ms".into() });
        assert_eq!(
            check_json(&p),
            r#"{"name": "p99", "ok": true, "line": 4, "value": 12.5, "budget": 20, "unit": "ms"}"#
        );
        assert_eq!(p.measure.unwrap().shown(), "12.5 ms (budget 20 ms)");
    }

    #[test]
    fn junit_document() {
        let mut err = check("END", false, "map 'lat' has no samples");
        err.error = true;
        let mut p99 = check("p99 < 2ms", true, "");
        p99.line = Some(7);
        p99.measure = Some(Measure { value: 1500.0, budget: Some(2000.0), unit: "us".into() });
        let c = [p99, check("opens", false, "a<b & \"c\""), err];
        let xml = junit_xml(&run("budget.rhai", "ci/budget.rhai", 1.5), &c);
        assert_eq!(
            xml,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="rtrace" tests="3" failures="1" errors="1" time="1.500">
  <testsuite name="budget.rhai" tests="3" failures="1" errors="1" time="1.500" timestamp="2026-12-03T06:20:00Z" hostname="ci-1">
    <testcase classname="budget.rhai" name="p99 &lt; 2ms" file="ci/budget.rhai" line="7" time="0.000">
      <properties>
        <property name="value" value="1500"/>
        <property name="budget" value="2000"/>
        <property name="unit" value="us"/>
      </properties>
    </testcase>
    <testcase classname="budget.rhai" name="opens" file="ci/budget.rhai" time="0.000">
      <failure message="a&lt;b &amp; &quot;c&quot;">a&lt;b &amp; &quot;c&quot;</failure>
    </testcase>
    <testcase classname="budget.rhai" name="END" file="ci/budget.rhai" time="0.000">
      <error message="map &apos;lat&apos; has no samples">map &apos;lat&apos; has no samples</error>
    </testcase>
  </testsuite>
</testsuites>
"#
        );
    }

    #[test]
    fn a_skipped_check_says_why_everywhere() {
        let mut c = CheckResult::skipped("instructions", "no PMU".into());
        c.line = Some(3);
        assert!(c.ok);
        assert_eq!(checks_text(std::slice::from_ref(&c)), "SKIP instructions: no PMU\n");
        assert_eq!(
            check_json(&c),
            r#"{"name": "instructions", "ok": true, "line": 3, "skipped": true, "detail": "no PMU"}"#
        );
        let xml = junit_xml(&run("b.rhai", "b.rhai", 0.5), &[c]);
        assert!(xml.contains(r#"tests="1" failures="0" errors="0" skipped="1""#), "{xml}");
        assert!(xml.contains("      <skipped message=\"no PMU\"/>\n"), "{xml}");
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
        let xml = junit_xml(&run("b.rhai", "b.rhai", 0.5), &[killed]);
        assert!(xml.contains(r#"tests="1" failures="1" errors="0""#), "{xml}");
        assert!(xml.contains(r#"<testcase classname="b.rhai" name="command" file="b.rhai" time="0.000">"#), "{xml}");
    }
}
