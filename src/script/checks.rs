//! `check(name, ok[, detail])`: a named result recorded without stopping the
//! run. At the end every check is listed (`PASS name` / `FAIL name: detail`,
//! or `check` JSON records) and the run exits 1 if any failed; `--junit
//! FILE` writes them, with `fail()`, `assert()` and a run's error, as JUnit
//! XML. `assert` and `fail` still stop the run at once.

use std::sync::Mutex;
use std::time::Instant;

use rhai::{Dynamic, Engine, NativeCallContext};

use super::{Registry, SharedRegistry};
use crate::output::junit::{self, CheckResult};
use crate::output::sink;

/// `--junit FILE`: where the report goes, the suite's name and when the run started.
struct Report {
    path: String,
    suite: String,
    /// The script as named on the command line (`-e` for one given there).
    file: String,
    started: Instant,
    results: Vec<CheckResult>,
    /// The `-c` command's fate, a testcase of its own.
    command: Option<CheckResult>,
}

static REPORT: Mutex<Option<Report>> = Mutex::new(None);

pub fn install(engine: &mut Engine, registry: &SharedRegistry) {
    let r = registry.clone();
    engine.register_fn("check", move |ctx: NativeCallContext, name: Dynamic, ok: Dynamic, detail: Dynamic| {
        check(&ctx, &r, name, ok, detail.to_string())
    });
    let r = registry.clone();
    engine.register_fn("check", move |ctx: NativeCallContext, name: Dynamic, ok: Dynamic| {
        check(&ctx, &r, name, ok, String::new())
    });
}

/// Record one check; returns `ok`, so a script can also branch on it.
fn check(
    ctx: &NativeCallContext,
    registry: &SharedRegistry,
    name: Dynamic,
    ok: Dynamic,
    detail: String,
) -> Result<bool, Box<rhai::EvalAltResult>> {
    match (name.clone().into_immutable_string(), ok.as_bool()) {
        (Ok(name), Ok(ok)) => {
            record(registry, &name, ok, detail, ctx.call_position().line());
            Ok(ok)
        }
        _ => {
            let msg = format!(
                "check(name, ok, detail) takes a string name and a bool (got {} and {}), e.g. check(\"p99\", p99 < 2_000_000, `p99 ${{p99}} ns`)",
                name.type_name(),
                ok.type_name()
            );
            Err(Box::new(rhai::EvalAltResult::ErrorRuntime(Dynamic::from(msg), ctx.call_position())))
        }
    }
}

fn record(registry: &SharedRegistry, name: &str, ok: bool, detail: String, line: Option<usize>) {
    let mut reg = registry.lock().unwrap();
    reg.checks.push(CheckResult { name: name.to_string(), ok, detail, error: false, line });
}

/// How the `-c` command ended, for the JUnit report.
pub fn record_command(command: &str, end: junit::CommandEnd) {
    if let Some(report) = REPORT.lock().unwrap().as_mut() {
        report.command = Some(junit::command_result(command, end));
    }
}

/// The script's own decision on the exit status: a non-zero `exit(code)`,
/// else 1 when a check failed, else what `exit()` gave (`None`: undecided).
pub fn script_decision(reg: &Registry) -> Option<i32> {
    match reg.exit_code {
        Some(code) if code != 0 => Some(code),
        _ if reg.checks.iter().any(|c| !c.ok) => Some(1),
        other => other,
    }
}

/// `--junit FILE`: write the report there at the end of the run.
pub fn set_junit(path: &str, script: &str) {
    let suite = std::path::Path::new(script).file_name().map_or(script.to_string(), |n| n.to_string_lossy().into());
    let report = Report {
        path: path.to_string(),
        suite,
        file: script.to_string(),
        started: Instant::now(),
        results: vec![],
        command: None,
    };
    *REPORT.lock().unwrap() = Some(report);
}

/// The end of a run: list the checks (text or JSON) and keep them, with a
/// `fail()`/`assert()` that stopped the run, for the JUnit report.
pub fn finish(registry: &SharedRegistry) {
    let reg = registry.lock().unwrap();
    if !reg.checks.is_empty() {
        match sink::format() {
            sink::Format::Text => sink::raw(&junit::checks_text(&reg.checks)),
            sink::Format::Json => sink::raw(&junit::checks_json(&reg.checks)),
        }
        sink::flush();
    }
    let mut results = reg.checks.clone();
    if let Some(msg) = &reg.failure {
        let name = if msg.starts_with("assertion failed") { "assert" } else { "fail" };
        results.push(CheckResult { name: name.into(), ok: false, detail: msg.clone(), error: false, line: None });
    }
    if let Some(report) = REPORT.lock().unwrap().as_mut() {
        report.results = results;
    }
}

/// Write the JUnit report, if one was asked for; `error` is the run's
/// error line, if it ended with one. Returns a write error as one line.
pub fn write_junit(error: Option<&str>) -> Result<(), crate::diag::Diagnostic> {
    let Some(mut report) = REPORT.lock().unwrap().take() else { return Ok(()) };
    if let Some(e) = error {
        report.results.push(CheckResult {
            name: "rtrace".into(),
            ok: false,
            detail: e.to_string(),
            error: true,
            line: None,
        });
    }
    report.results.extend(report.command.take());
    let xml = junit::junit_xml(&report.suite, &report.file, &report.results, report.started.elapsed().as_secs_f64());
    std::fs::write(&report.path, xml)
        .map_err(|e| crate::diag::Diagnostic::tool(format!("--junit {}: {e}", report.path)))
}
