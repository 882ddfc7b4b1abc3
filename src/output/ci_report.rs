//! Reports of a run's checks in the forms CI systems read, besides JUnit
//! (junit.rs): GitHub Actions workflow commands (an `::error` annotation at
//! each failed check's script line) and a Markdown job summary; a GitLab
//! metrics report (`metrics.txt`, OpenMetrics text); and a JSON summary of
//! the run. Pure functions of the results: nothing here writes files.

use std::fmt::Write;

use super::junit::{check_json, number, CheckResult, RunInfo};

/// Which CI system's outputs a run writes (`--ci-report`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CiSystem {
    None,
    GitHub,
    GitLab,
}

impl CiSystem {
    /// `auto`: GitHub Actions when `GITHUB_ACTIONS=true`, GitLab CI when
    /// `GITLAB_CI=true` (as those systems set them), else none.
    pub fn chosen(flag: &str, env: impl Fn(&str) -> Option<String>) -> Result<CiSystem, String> {
        match flag {
            "github" => Ok(CiSystem::GitHub),
            "gitlab" => Ok(CiSystem::GitLab),
            "none" => Ok(CiSystem::None),
            "auto" if env("GITHUB_ACTIONS").as_deref() == Some("true") => Ok(CiSystem::GitHub),
            "auto" if env("GITLAB_CI").as_deref() == Some("true") => Ok(CiSystem::GitLab),
            "auto" => Ok(CiSystem::None),
            other => Err(format!("--ci-report {other}: give auto, github, gitlab or none")),
        }
    }
}

/// A workflow command's data: `%`, CR and LF escaped.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One `::error file=F,line=L,title=T::message` line per failed result
/// (the run's error and the command's fate too, at the script's top).
pub fn github_annotations(run: &RunInfo, results: &[CheckResult]) -> String {
    let mut out = String::new();
    for c in results.iter().filter(|c| !c.ok) {
        let line = c.line.unwrap_or(1);
        let title = format!("{}: {}", if c.error { "error" } else { "failed" }, c.name);
        let message = match &c.measure {
            Some(m) if c.detail.is_empty() => m.shown(),
            _ => c.detail.clone(),
        };
        let _ = writeln!(
            out,
            "::error file={},line={line},title={}::{}",
            gh_property(&run.file),
            gh_property(&title),
            gh_data(&message)
        );
    }
    out
}

/// A Markdown cell: `|` escaped, one line.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The job summary: a heading with the verdict, then one table row per
/// result (check, value, budget, verdict).
pub fn github_summary(run: &RunInfo, results: &[CheckResult]) -> String {
    let failed = results.iter().filter(|c| !c.ok).count();
    let verdict = if failed == 0 { "all passed".to_string() } else { format!("{failed} failed") };
    let n = results.len();
    let mut out = format!("### rtrace {}: {n} {}, {verdict}\n\n", md_cell(&run.file), plural(n));
    out.push_str("| Check | Value | Budget | Result |\n|---|---|---|---|\n");
    for c in results {
        let (value, budget) = match &c.measure {
            Some(m) => (m.in_unit(m.value), m.budget.map(|b| m.in_unit(b)).unwrap_or_default()),
            None => (String::new(), String::new()),
        };
        // A check's detail says why it failed: a passing one shows none.
        let result = match (c.skipped, c.ok) {
            (true, _) => format!("⏭️ skipped: {}", md_cell(&c.detail)),
            (false, true) => "✅ pass".to_string(),
            (false, false) => format!("❌ {}", md_cell(&c.detail)),
        };
        let _ = writeln!(out, "| {} | {value} | {budget} | {result} |", md_cell(&c.name));
    }
    out.push('\n');
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "check"
    } else {
        "checks"
    }
}

/// A label value in OpenMetrics text: `\`, `"` and newlines escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// GitLab's metrics report (`artifacts: reports: metrics: metrics.txt`):
/// per result `rtrace_check_passed{check="..."} 1|0`, and for a budget its
/// `rtrace_check_value` and `rtrace_check_budget`, so merge requests show
/// how each moved. A skipped check has no verdict, so no line.
pub fn gitlab_metrics(results: &[CheckResult]) -> String {
    let mut out = String::new();
    for c in results.iter().filter(|c| !c.skipped) {
        let l = format!("{{check=\"{}\"}}", label(&c.name));
        let _ = writeln!(out, "rtrace_check_passed{l} {}", c.ok as u8);
        if let Some(m) = &c.measure {
            let _ = writeln!(out, "rtrace_check_value{l} {}", number(m.value));
            if let Some(b) = m.budget {
                let _ = writeln!(out, "rtrace_check_budget{l} {}", number(b));
            }
        }
    }
    out
}

/// The run as one JSON object: script, host, start, duration, exit status,
/// counts and every result (as the `check` records have them).
pub fn summary_json(run: &RunInfo, results: &[CheckResult], exit_status: i32) -> String {
    let esc = super::json::escape_json;
    let skipped = results.iter().filter(|c| c.skipped).count();
    let passed = results.iter().filter(|c| c.ok).count() - skipped;
    let errors = results.iter().filter(|c| c.error).count();
    let failed = results.len() - passed - skipped - errors;
    let checks: Vec<String> = results.iter().map(check_json).collect();
    format!(
        "{{\"script\": \"{}\", \"hostname\": \"{}\", \"timestamp\": \"{}\", \"seconds\": {:.3}, \"exit_status\": {exit_status}, \
         \"passed\": {passed}, \"failed\": {failed}, \"skipped\": {skipped}, \"errors\": {errors}, \"checks\": [{}]}}\n",
        esc(&run.file),
        esc(&run.hostname),
        esc(&run.timestamp),
        run.seconds,
        checks.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::junit::{command_result, CommandEnd, Measure};

    fn run() -> RunInfo {
        RunInfo {
            suite: "budget.rhai".into(),
            file: "ci/budget.rhai".into(),
            timestamp: "2026-12-03T06:20:00Z".into(),
            hostname: "ci-1".into(),
            seconds: 2.0,
        }
    }

    fn results() -> Vec<CheckResult> {
        let mut called = CheckResult::new("spin was called", true, "no call, seen".into());
        called.line = Some(30);
        let mut p99 = CheckResult::new("p99 <= 250 us", false, "p99 is 309 us: 100% | over".into());
        p99.line = Some(34);
        p99.measure = Some(Measure { value: 309.0, budget: Some(250.0), unit: "us".into() });
        vec![called, p99, command_result("./bench", CommandEnd::Killed(libc::SIGSEGV))]
    }

    #[test]
    fn chosen_from_the_flag_or_the_environment() {
        let none = |_: &str| None;
        let gh = |k: &str| (k == "GITHUB_ACTIONS").then(|| "true".to_string());
        let gl = |k: &str| (k == "GITLAB_CI").then(|| "true".to_string());
        assert_eq!(CiSystem::chosen("auto", none), Ok(CiSystem::None));
        assert_eq!(CiSystem::chosen("auto", gh), Ok(CiSystem::GitHub));
        assert_eq!(CiSystem::chosen("auto", gl), Ok(CiSystem::GitLab));
        assert_eq!(CiSystem::chosen("none", gh), Ok(CiSystem::None));
        assert_eq!(CiSystem::chosen("gitlab", gh), Ok(CiSystem::GitLab));
        assert!(CiSystem::chosen("jenkins", none).is_err());
    }

    #[test]
    fn github_annotations_at_the_failed_lines() {
        assert_eq!(
            github_annotations(&run(), &results()),
            "::error file=ci/budget.rhai,line=34,title=failed%3A p99 <= 250 us::p99 is 309 us: 100%25 | over\n\
             ::error file=ci/budget.rhai,line=1,title=failed%3A command::`./bench` was killed by signal 11 (SIGSEGV)\n"
        );
    }

    #[test]
    fn github_summary_table() {
        assert_eq!(
            github_summary(&run(), &results()),
            "### rtrace ci/budget.rhai: 3 checks, 2 failed\n\n\
             | Check | Value | Budget | Result |\n|---|---|---|---|\n\
             | spin was called |  |  | ✅ pass |\n\
             | p99 <= 250 us | 309 us | 250 us | ❌ p99 is 309 us: 100% \\| over |\n\
             | command |  |  | ❌ `./bench` was killed by signal 11 (SIGSEGV) |\n\n"
        );
    }

    #[test]
    fn gitlab_metrics_lines() {
        assert_eq!(
            gitlab_metrics(&results()),
            "rtrace_check_passed{check=\"spin was called\"} 1\n\
             rtrace_check_passed{check=\"p99 <= 250 us\"} 0\n\
             rtrace_check_value{check=\"p99 <= 250 us\"} 309\n\
             rtrace_check_budget{check=\"p99 <= 250 us\"} 250\n\
             rtrace_check_passed{check=\"command\"} 0\n"
        );
    }

    #[test]
    fn summary_counts_and_results() {
        let s = summary_json(&run(), &results(), 139);
        assert!(s.starts_with(
            "{\"script\": \"ci/budget.rhai\", \"hostname\": \"ci-1\", \"timestamp\": \"2026-12-03T06:20:00Z\", \
             \"seconds\": 2.000, \"exit_status\": 139, \"passed\": 1, \"failed\": 2, \"skipped\": 0, \"errors\": 0, \"checks\": [{\"name\""
        ));
        assert!(s.contains("\"value\": 309, \"budget\": 250, \"unit\": \"us\""), "{s}");
    }
}
