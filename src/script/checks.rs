//! `check(name, ok[, detail[, measure]])` and `budget(name, value, max[,
//! unit])`: named results recorded without stopping the run. At the end
//! every check is listed (`PASS name` / `FAIL name: detail`, or `check`
//! JSON records) and the run exits 1 if any failed. The reports CI systems
//! read are written whatever the exit path, with `fail()`, `assert()`, the
//! run's error and the `-c` command's fate as results of their own:
//! `--junit FILE` (JUnit XML), `--ci-report` (GitHub Actions annotations
//! and job summary, GitLab's metrics.txt; detected from the environment)
//! and `--summary FILE` (the run as JSON). `assert` and `fail` still stop
//! the run at once.

use std::sync::Mutex;
use std::time::Instant;

use rhai::{Dynamic, Engine, NativeCallContext};

use super::{Registry, SharedRegistry};
use crate::output::ci_report::{self, CiSystem};
use crate::output::junit::{self, CheckResult, Measure, RunInfo};
use crate::output::sink;

/// Where the reports go, the script's name and when the run started.
struct Report {
    junit: Option<String>,
    ci: CiSystem,
    summary: Option<String>,
    /// The script as named on the command line (`-e` for one given there).
    file: String,
    started: Instant,
    timestamp: String,
    results: Vec<CheckResult>,
    /// The `-c` command's fate, a testcase of its own (one per run with `--repeat`).
    command: Vec<CheckResult>,
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
    let r = registry.clone();
    engine.register_fn(
        "check",
        move |ctx: NativeCallContext, name: Dynamic, ok: Dynamic, detail: Dynamic, measure: rhai::Map| {
            check_measured(&ctx, &r, name, ok, detail.to_string(), measure)
        },
    );
    let r = registry.clone();
    engine.register_fn("skip", move |ctx: NativeCallContext, name: Dynamic, reason: Dynamic| {
        skip(&ctx, &r, name, reason.to_string())
    });
    let r = registry.clone();
    engine.register_fn("budget", move |ctx: NativeCallContext, name: Dynamic, value: Dynamic, max: Dynamic| {
        budget(&ctx, &r, name, value, max, String::new())
    });
    let r = registry.clone();
    engine.register_fn(
        "budget",
        move |ctx: NativeCallContext, name: Dynamic, value: Dynamic, max: Dynamic, unit: rhai::ImmutableString| {
            budget(&ctx, &r, name, value, max, unit.to_string())
        },
    );
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
            record(registry, CheckResult::new(&name, ok, detail), ctx);
            Ok(ok)
        }
        _ => {
            let msg = format!(
                "check(name, ok, detail) takes a string name and a bool (got {} and {}), e.g. check(\"p99\", p99 < 2_000_000, `p99 ${{p99}} ns`)",
                name.type_name(),
                ok.type_name()
            );
            Err(runtime_error(ctx, msg))
        }
    }
}

fn runtime_error(ctx: &NativeCallContext, msg: String) -> Box<rhai::EvalAltResult> {
    Box::new(rhai::EvalAltResult::ErrorRuntime(Dynamic::from(msg), ctx.call_position()))
}

fn number_of(v: &Dynamic) -> Option<f64> {
    v.as_int().map(|i| i as f64).or_else(|_| v.as_float()).ok()
}

/// `check(name, ok, detail, #{value: v, budget: b, unit: "us"})`: a check
/// with its measure, for the reports.
fn check_measured(
    ctx: &NativeCallContext,
    registry: &SharedRegistry,
    name: Dynamic,
    ok: Dynamic,
    detail: String,
    props: rhai::Map,
) -> Result<bool, Box<rhai::EvalAltResult>> {
    let bad = || {
        runtime_error(
            ctx,
            "check()'s fourth argument is a map with a number `value` and optionally a number `budget` and a \
             string `unit`: #{value: p99, budget: 250, unit: \"us\"}"
                .to_string(),
        )
    };
    let value = props.get("value").and_then(number_of).ok_or_else(bad)?;
    let budget = match props.get("budget") {
        Some(b) => Some(number_of(b).ok_or_else(bad)?),
        None => None,
    };
    let unit = props.get("unit").map(|u| u.to_string()).unwrap_or_default();
    let ok = check(ctx, registry, name, ok, detail)?;
    if let Some(last) = registry.lock().unwrap().checks.last_mut() {
        last.measure = Some(Measure { value, budget, unit });
    }
    Ok(ok)
}

/// `skip(name, reason)`: a check that could not be made here (no hardware
/// counters, no such measure), reported as skipped with its reason; it
/// neither passes nor fails the run. Returns `true`, so `skip(..) || ..` chains.
fn skip(
    ctx: &NativeCallContext,
    registry: &SharedRegistry,
    name: Dynamic,
    reason: String,
) -> Result<bool, Box<rhai::EvalAltResult>> {
    let Ok(name) = name.clone().into_immutable_string() else {
        let msg = format!("skip(name, reason) takes a string name (got {})", name.type_name());
        return Err(runtime_error(ctx, msg));
    };
    record(registry, CheckResult::skipped(&name, reason), ctx);
    Ok(true)
}

/// `budget(name, value, max[, unit])`: passes when `value <= max`; the
/// measure is kept for the reports, and a failure says it. A `value` of
/// `()` (nothing measured, as `command_runs()`' `instructions` where
/// there are no hardware counters) skips the check.
fn budget(
    ctx: &NativeCallContext,
    registry: &SharedRegistry,
    name: Dynamic,
    value: Dynamic,
    max: Dynamic,
    unit: String,
) -> Result<bool, Box<rhai::EvalAltResult>> {
    if value.is_unit() && number_of(&max).is_some() {
        if let Ok(name) = name.clone().into_immutable_string() {
            record(registry, CheckResult::skipped(&name, "no value was measured".into()), ctx);
            return Ok(true);
        }
    }
    let (Ok(name), Some(v), Some(b)) = (name.clone().into_immutable_string(), number_of(&value), number_of(&max))
    else {
        let msg = format!(
            "budget(name, value, max[, unit]) takes a string name and two numbers (got {}, {} and {}), e.g. \
             budget(\"p99\", lat.percentile(99), 250, \"us\")",
            name.type_name(),
            value.type_name(),
            max.type_name()
        );
        return Err(runtime_error(ctx, msg));
    };
    let measure = Measure { value: v, budget: Some(b), unit };
    let ok = v <= b;
    let detail = if ok { measure.shown() } else { format!("{} is over its budget", measure.shown()) };
    let mut result = CheckResult::new(&name, ok, detail);
    result.measure = Some(measure);
    record(registry, result, ctx);
    Ok(ok)
}

fn record(registry: &SharedRegistry, mut result: CheckResult, ctx: &NativeCallContext) {
    result.line = ctx.call_position().line();
    registry.lock().unwrap().checks.push(result);
}

/// How a run of the `-c` command ended (and how long it ran), for the
/// reports; `run` is (K, N) for run K of `--repeat N`.
pub fn record_command(command: &str, end: junit::CommandEnd, seconds: f64, run: Option<(u32, u32)>) {
    if let Some(report) = REPORT.lock().unwrap().as_mut() {
        let mut result = junit::command_result(command, end);
        if let Some((k, n)) = run {
            result.name = format!("command run {k} of {n}");
        }
        result.seconds = Some(seconds);
        report.command.push(result);
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

/// Before the script runs: which reports to write at the end.
pub fn set_reports(script: &str, junit: Option<&str>, ci: CiSystem, summary: Option<&str>) {
    let report = Report {
        junit: junit.map(str::to_string),
        ci,
        summary: summary.map(str::to_string),
        file: script.to_string(),
        started: Instant::now(),
        timestamp: utc_now(),
        results: vec![],
        command: vec![],
    };
    *REPORT.lock().unwrap() = Some(report);
}

/// Now as ISO 8601 UTC, to the second.
fn utc_now() -> String {
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    unsafe { libc::gmtime_r(&now, &mut tm) };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
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
        results.push(CheckResult::new(name, false, msg.clone()));
    }
    if let Some(report) = REPORT.lock().unwrap().as_mut() {
        report.results = results;
    }
}

/// Write the reports asked for; `error` is the run's error line (and its
/// script line), if it ended with one, and `exit_status` the status it
/// ends with. Returns the first write error as one line.
pub fn write_reports(error: Option<(String, Option<usize>)>, exit_status: i32) -> Result<(), crate::diag::Diagnostic> {
    let Some(mut report) = REPORT.lock().unwrap().take() else { return Ok(()) };
    if let Some((e, line)) = error {
        let mut result = CheckResult::new("rtrace", false, e);
        result.error = true;
        result.line = line;
        report.results.push(result);
    }
    report.results.append(&mut report.command);
    let suite =
        std::path::Path::new(&report.file).file_name().map_or(report.file.clone(), |n| n.to_string_lossy().into());
    let run = RunInfo {
        suite,
        file: report.file.clone(),
        timestamp: report.timestamp.clone(),
        hostname: hostname(),
        seconds: report.started.elapsed().as_secs_f64(),
    };
    let results = &report.results;
    let write = |what: &str, path: &str, text: String, append: bool| {
        use std::io::Write;
        let file = std::fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(path);
        file.and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| crate::diag::Diagnostic::tool(format!("{what} {path}: {e}")))
    };
    let mut first_error = Ok(());
    let mut note = |r: Result<(), crate::diag::Diagnostic>| {
        if first_error.is_ok() {
            first_error = r;
        }
    };
    if let Some(path) = &report.junit {
        note(write("--junit", path, junit::junit_xml(&run, results), false));
    }
    if let Some(path) = &report.summary {
        note(write("--summary", path, ci_report::summary_json(&run, results, exit_status), false));
    }
    match report.ci {
        CiSystem::None => {}
        CiSystem::GitHub => {
            // Workflow commands are read from the step's output; stderr keeps stdout parseable.
            crate::util::errtext!("{}", ci_report::github_annotations(&run, results));
            if let Some(path) = std::env::var("GITHUB_STEP_SUMMARY").ok().filter(|p| !p.is_empty()) {
                note(write("$GITHUB_STEP_SUMMARY", &path, ci_report::github_summary(&run, results), true));
            }
        }
        CiSystem::GitLab => {
            note(write("--ci-report gitlab:", "metrics.txt", ci_report::gitlab_metrics(results), false))
        }
    }
    first_error
}
