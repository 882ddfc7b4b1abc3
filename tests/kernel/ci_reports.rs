//! The reports a CI system reads, for every way a run can end: all checks
//! pass, a budget fails, the `-c` command exits non-zero, it is killed by a
//! signal, rtrace fails before running. Each run writes JUnit (read back
//! with junitparser, a real consumer), the GitHub Actions annotations and
//! job summary (with the variables GitHub sets), GitLab's metrics.txt (with
//! `GITLAB_CI=true`) and the JSON summary; every one must agree with the
//! exit status.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// One way a run ends.
struct Case {
    what: &'static str,
    command: &'static str,
    /// The budget's measured value (its budget is 10).
    spins: i64,
    /// A script that does not compile (`rtrace` fails before running).
    broken: bool,
    status: i32,
    /// The testcases that fail; `rtrace` is an error, not a failure.
    failing: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case { what: "all pass", command: "true", spins: 5, broken: false, status: 0, failing: &[] },
    Case { what: "a budget fails", command: "true", spins: 50, broken: false, status: 1, failing: &["spins"] },
    Case {
        what: "the command exits 3",
        command: "sh -c 'exit 3'",
        spins: 5,
        broken: false,
        status: 3,
        failing: &["command"],
    },
    Case {
        what: "the command is killed",
        command: "sh -c 'kill -SEGV $$'",
        spins: 5,
        broken: false,
        status: 128 + libc::SIGSEGV,
        failing: &["command"],
    },
    Case { what: "rtrace fails first", command: "true", spins: 5, broken: true, status: 1, failing: &["rtrace"] },
];

fn script(case: &Case) -> String {
    let probe = if case.broken { "tracepoint:nosuch:nothing" } else { "END" };
    format!(
        "// budget.rhai\nprobe(\"{probe}\", || {{\n    check(\"called\", true, \"never called\");\n    budget(\"spins\", {}, 10, \"calls\");\n}});\n",
        case.spins
    )
}

/// (testcase, kind) as junitparser reads the file: kind is `pass`,
/// `failure` or `error`; and the suite's tests/failures/errors/hostname.
fn junit_as_read(path: &Path) -> (BTreeSet<(String, String)>, String) {
    let code = r#"
import sys, junitparser
xml = junitparser.JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    print("suite", suite.tests, suite.failures, suite.errors, bool(suite.hostname), bool(suite.timestamp))
    for case in suite:
        kind = case.result[0]._tag if case.result else "pass"
        props = {p.get("name"): p.get("value") for p in case._elem.iter("property")}
        print("case", kind, case.time >= 0, props.get("value", "-"), case.name, sep="\t")
"#;
    let out = Command::new("/usr/bin/python3").arg("-c").arg(code).arg(path).output().expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "junitparser could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let cases = text
        .lines()
        .filter_map(|l| l.strip_prefix("case\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[3].to_string(), f[0].to_string())
        })
        .collect();
    (cases, text)
}

kernel_test!(
    every_report_agrees_with_the_exit_status,
    needs: Path("/usr/lib/python3/dist-packages/junitparser")
);
fn every_report_agrees_with_the_exit_status() {
    let _g = setup();
    for case in CASES {
        let dir = TempDir::new();
        let file = dir.write("budget.rhai", &script(case));
        let f = file.to_str().unwrap();
        let junit = dir.join("r.xml");
        let summary = dir.join("s.json");
        let step = dir.join("step.md");
        let (j, s, st) = (junit.to_str().unwrap(), summary.to_str().unwrap(), step.to_str().unwrap());
        let env = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", st)];
        let out = run_env(&["-q", "--junit", j, "--summary", s, "-c", case.command, f], &env);
        let what = case.what;
        assert_eq!(out.code, Some(case.status), "{what}\n{out}");

        // JUnit, as a consumer reads it.
        let (cases, text) = junit_as_read(&junit);
        let expected: BTreeSet<(String, String)> = ["called", "spins", "command", "rtrace"]
            .iter()
            .filter(|n| if case.broken { **n == "rtrace" || **n == "command" } else { **n != "rtrace" })
            .map(|n| {
                let kind = match (case.failing.contains(n), *n) {
                    (true, "rtrace") => "error",
                    (true, _) => "failure",
                    (false, _) => "pass",
                };
                (n.to_string(), kind.to_string())
            })
            .collect();
        let command_never_ran = case.broken && !cases.iter().any(|(n, _)| n == "command");
        let expected: BTreeSet<_> =
            expected.into_iter().filter(|(n, _)| !(command_never_ran && n == "command")).collect();
        assert_eq!(cases, expected, "{what}: testcases\n{text}\n{out}");
        assert!(text.contains(" True True"), "{what}: the suite has a hostname and a timestamp\n{text}");
        if !case.broken {
            assert!(text.contains(&format!("\t{}\tspins", case.spins)), "{what}: the value is a property\n{text}");
        }

        // GitHub: one ::error per failed testcase, at its script line.
        let annotations: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("::")).collect();
        let failed: Vec<&str> = case.failing.to_vec();
        assert_eq!(annotations.len(), failed.len(), "{what}: annotations\n{out}");
        for name in &failed {
            let line = match *name {
                "spins" => 4,
                "rtrace" => 2,
                _ => 1,
            };
            let kind = if *name == "rtrace" { "error" } else { "failed" };
            let head = format!("::error file={},line={line},title={kind}%3A {name}::", f.replace(':', "%3A"));
            assert!(annotations.iter().any(|a| a.starts_with(&head)), "{what}: no {head}\n{out}");
        }
        let md = std::fs::read_to_string(&step).unwrap_or_default();
        assert!(md.contains("| Check | Value | Budget | Result |"), "{what}: the job summary\n{md}");
        for (name, kind) in &cases {
            let mark = if kind == "pass" { "✅" } else { "❌" };
            assert!(
                md.lines().any(|l| l.starts_with(&format!("| {name} |")) && l.contains(mark)),
                "{what}: {name} {kind} in the summary\n{md}"
            );
        }
        if !case.broken {
            let v = case.spins;
            assert!(md.contains(&format!("| spins | {v} calls | 10 calls |")), "{what}\n{md}");
        }

        // The JSON summary.
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(json["exit_status"].as_i64(), Some(case.status as i64), "{what}\n{json}");
        let failures = case.failing.iter().filter(|n| **n != "rtrace").count() as u64;
        assert_eq!(json["failed"].as_u64(), Some(failures), "{what}\n{json}");
        assert_eq!(json["errors"].as_u64(), Some(case.broken as u64), "{what}\n{json}");
        for c in json["checks"].as_array().unwrap() {
            if c["ok"] == true {
                assert!(c.get("detail").is_none(), "{what}: a passing check carries no failure text\n{json}");
            }
        }

        // GitLab: metrics.txt in the job's directory.
        let out = Command::new(rtrace_bin())
            .args(["-q", "-c", case.command, f])
            .env("GITLAB_CI", "true")
            .current_dir(dir.join(""))
            .output()
            .expect("rtrace");
        assert_eq!(out.status.code(), Some(case.status), "{what}: GitLab run");
        let metrics = std::fs::read_to_string(dir.join("metrics.txt")).unwrap_or_default();
        for (name, kind) in &cases {
            let line = format!("rtrace_check_passed{{check=\"{name}\"}} {}", (kind == "pass") as u8);
            assert!(metrics.lines().any(|l| l == line), "{what}: no {line}\n{metrics}");
        }
        if !case.broken {
            assert!(metrics.contains(&format!("rtrace_check_value{{check=\"spins\"}} {}\n", case.spins)), "{metrics}");
            assert!(metrics.contains("rtrace_check_budget{check=\"spins\"} 10\n"), "{metrics}");
        }
    }
}

kernel_test!(baselines_catch_a_slower_build_and_never_an_unchanged_one, needs: Program("gcc"));
/// `--save-baseline` from one run of a benchmark (200 calls of a 300 us
/// busy-wait), then `regression(name, m, 10)` against it: 50 runs of the
/// same build never fail, 20 runs of a build 25% slower (375 us) always do.
/// The figures are printed for the record.
fn baselines_catch_a_slower_build_and_never_an_unchanged_one() {
    let _g = setup();
    let dir = TempDir::new();
    let bench = build_c(&dir, &format!("bl_{}", token()), include_str!("../fixtures/ci_target.c"), &["-O2"]);
    let b = bench.display();
    let src = format!(
        r#"let start = map();
let lat = map();
probe("uprobe:{b}:ci_spin", |e| {{ start[e.tid] = e.nsecs; }});
probe("uretprobe:{b}:ci_spin", |e| {{
    if e.tid in start {{ lat = quantiles(e.nsecs - start[e.tid], "ns"); start.remove(e.tid); }}
}});
probe("END", || {{ start.clear(); regression("ci_spin latency", lat, 10); }});
"#
    );
    let base = dir.join("base.txt");
    let base = base.to_str().unwrap();
    let cmd = |us: u32| format!("{b} 200 {us}");
    let out = run(&["-q", "--save-baseline", base, "-c", &cmd(300), "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("no --baseline FILE given, nothing to compare with"), "{out}");
    let saved = std::fs::read_to_string(base).unwrap();
    assert!(saved.starts_with("rtrace-baseline 1\nci_spin latency\tquantiles 1\t"), "{saved}");

    let verdicts = |us: u32, runs: usize| -> (usize, Vec<String>) {
        let mut failed = 0;
        let mut details = Vec::new();
        for _ in 0..runs {
            let out = run(&["-q", "-f", "json", "--baseline", base, "-c", &cmd(us), "-e", &src]);
            let json: String = out.stdout.lines().filter(|l| l.starts_with('{')).map(|l| format!("{l}\n")).collect();
            let records = json_records(&json);
            let checks = json_of_type(&records, "check");
            assert_eq!(checks.len(), 1, "{out}");
            if checks[0]["data"]["ok"] == false {
                failed += 1;
                assert_eq!(out.code, Some(1), "{out}");
                details.push(checks[0]["data"]["detail"].as_str().unwrap_or("").to_string());
            } else {
                assert_eq!(out.code, Some(0), "{out}");
            }
        }
        (failed, details)
    };
    let (false_failures, details) = verdicts(300, 50);
    eprintln!("unchanged build: {false_failures} of 50 runs failed {details:?}");
    assert_eq!(false_failures, 0, "an unchanged build failed against its own baseline: {details:?}");
    let (caught, details) = verdicts(375, 20);
    eprintln!("25% slower build: {caught} of 20 runs failed; first: {:?}", details.first());
    assert_eq!(caught, 20, "a 25% slower build passed");
    assert!(details[0].contains("Mann-Whitney z = ") && details[0].contains("higher by more than 10%"), "{details:?}");

    // A name the baseline lacks fails; a file that is not a baseline is an error before running.
    let other = src.replace("regression(\"ci_spin latency\"", "regression(\"renamed\"");
    let out = run(&["-q", "--baseline", base, "-c", &cmd(300), "-e", &other]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("FAIL renamed: ") && out.stdout.contains("has no distribution named `renamed`"),
        "{out}"
    );
    let line = assert_clean_error(&run(&["--baseline", "/etc/hostname", "-c", &cmd(1), "-e", &src]));
    assert!(line.contains("--baseline /etc/hostname: not an rtrace baseline"), "{line}");
}

kernel_test!(
    repeated_runs_add_up_and_each_is_measured,
    needs: Program("gcc"),
    Path("/usr/lib/python3/dist-packages/junitparser")
);
/// `--repeat 4`: the maps add up over four runs of the command; each run
/// is a testcase and an entry of `command_runs()` with its status, wall and
/// CPU time; instructions are counted where the machine has a PMU and the
/// check is reported skipped, with the reason, where it has none. A failed
/// run ends the series.
fn repeated_runs_add_up_and_each_is_measured() {
    let _g = setup();
    let dir = TempDir::new();
    let bench = build_c(&dir, &format!("rp_{}", token()), include_str!("../fixtures/ci_target.c"), &["-O2"]);
    let b = bench.display();
    let src = format!(
        r#"let calls = map();
probe("uprobe:{b}:ci_value", |e| {{ calls = count(); }});
probe("END", || {{
    let runs = command_runs();
    check("four runs", runs.len() == 4, `${{runs.len()}} runs`);
    for r in runs {{
        check("run measured", r.status == 0 && r.wall_ns >= 20_000_000 && r.cpu_ns > 0 && r.user_ns > 0 && r.max_rss_kb > 0, `${{r}}`);
    }}
    let r = runs[0];
    if r.instructions == () {{ skip("instructions", r.unmeasured.instructions) }} else {{ budget("instructions", r.instructions, 1e12) }}
    check("calls add up", calls[()] == 40, `${{calls[()]}} calls`);
}});
"#
    );
    let junit = dir.join("r.xml");
    let out =
        run(&["-q", "--junit", junit.to_str().unwrap(), "--repeat", "4", "-c", &format!("{b} 10 2000"), "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout.matches("done 10\n").count(), 4, "{out}");
    assert_eq!(out.stdout.matches("PASS run measured\n").count(), 4, "{out}");
    assert!(out.stdout.contains("PASS four runs\n") && out.stdout.contains("PASS calls add up\n"), "{out}");
    let pmu = ["cpu", "cpu_core"].iter().any(|d| Path::new("/sys/bus/event_source/devices").join(d).exists());
    if pmu {
        assert!(out.stdout.contains("PASS instructions\n"), "{out}");
    } else {
        assert!(
            out.stdout
                .contains("SKIP instructions: this machine has no hardware performance counters (perf_event_open: "),
            "{out}"
        );
    }
    let (cases, text) = junit_as_read(&junit);
    for k in 1..=4 {
        assert!(cases.contains(&(format!("command run {k} of 4"), "pass".into())), "{text}");
    }
    let instructions = if pmu { "pass" } else { "skipped" };
    assert!(cases.contains(&("instructions".into(), instructions.into())), "{text}");

    // A run that fails ends the series: one run, its status, a failed testcase.
    let out = run(&[
        "-q",
        "--junit",
        junit.to_str().unwrap(),
        "--repeat",
        "3",
        "-c",
        "sh -c 'exit 3'",
        "-e",
        "probe(\"END\", || { print(`runs ${command_runs().len()}`); });",
    ]);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.stdout.contains("runs 1\n"), "{out}");
    let (cases, text) = junit_as_read(&junit);
    assert_eq!(cases, [("command run 1 of 3".to_string(), "failure".to_string())].into_iter().collect(), "{text}");

    // --repeat without -c says what it needs.
    let line = assert_clean_error(&run(&["--repeat", "3", "-e", "probe(\"END\", || {});"]));
    assert!(line.contains("--repeat N runs the -c command N times"), "{line}");
}

kernel_test!(regressions_over_repeated_runs, needs: Program("gcc"));
/// `regression(name, array, pct)` over `--repeat 10` runs' peak memory of a
/// command that touches a fixed amount of memory: a baseline of 10 runs, then
/// 10 series of the same build never fail and 5 series of a build touching
/// 25% more always do. (Peak memory is the measure here because it is steady
/// on any machine; CPU time on the test VM is not: the same loop measures
/// 44 to 246 ms from run to run, so no fixed effect is caught every time.)
fn regressions_over_repeated_runs() {
    let _g = setup();
    let dir = TempDir::new();
    let src = "#include <stdlib.h>\n#include <string.h>\nint main(int argc, char **argv) {\n    long n = atol(argv[1]) << 20;\n    char *p = malloc(n);\n    memset(p, 1, n);\n    return p[n / 2] == 2;\n}\n";
    let work = build_c(&dir, &format!("cr_{}", token()), src, &["-O1"]);
    let script = r#"probe("END", || { regression("peak memory", command_runs().map(|r| r.max_rss_kb), 10); });"#;
    let base = dir.join("base.txt");
    let base = base.to_str().unwrap();
    let cmd = |mb: u64| format!("{} {mb}", work.display());
    let out = run(&["-q", "--repeat", "10", "--save-baseline", base, "-c", &cmd(40), "-e", script]);
    assert_eq!(out.code, Some(0), "{out}");
    let saved = std::fs::read_to_string(base).unwrap();
    assert!(saved.starts_with("rtrace-baseline 1\npeak memory\tquantiles 0\t"), "{saved}");
    let failed = |mb: u64, series: usize| -> (usize, Vec<String>) {
        let mut details = Vec::new();
        for _ in 0..series {
            let out = run(&["-q", "--repeat", "10", "--baseline", base, "-c", &cmd(mb), "-e", script]);
            match out.code {
                Some(1) => {
                    details.push(out.stdout.lines().find(|l| l.starts_with("FAIL peak memory")).unwrap_or("").into())
                }
                Some(0) => assert!(out.stdout.contains("PASS peak memory"), "{out}"),
                _ => panic!("{out}"),
            }
        }
        (details.len(), details)
    };
    let (false_failures, details) = failed(40, 10);
    eprintln!("unchanged build, 10 runs each: {false_failures} of 10 series failed {details:?}");
    assert_eq!(false_failures, 0, "{details:?}");
    let (caught, details) = failed(50, 5);
    eprintln!("25% more memory, 10 runs each: {caught} of 5 series failed; first: {:?}", details.first());
    assert_eq!(caught, 5, "{details:?}");
    assert!(details[0].contains("over 10 and 10 samples: higher by more than 10%"), "{details:?}");
}

/// The jobs of docs/ci.md, as a list of steps: each `run:` or `script:`
/// line (continuations joined), or a `uses:` step with its inputs.
#[derive(Debug)]
struct DocsJob {
    system: String,
    lines: Vec<String>,
    junit: String,
    metrics: Option<String>,
}

fn docs_ci_jobs() -> Vec<DocsJob> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ci.md")).unwrap();
    let blocks: Vec<&str> = text.split("```yaml\n").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    // PyYAML reads the job files as GitHub and GitLab would; the steps come back as JSON.
    let code = r#"
import json, sys, yaml
out = []
for block in json.load(sys.stdin):
    doc = yaml.safe_load(block)
    if "jobs" in doc:
        for job in doc["jobs"].values():
            steps, junit = [], None
            for s in job["steps"]:
                if "run" in s: steps.append(s["run"])
                if "uses" in s and "junit" in s["uses"]: junit = s["with"]["report_paths"]
            out.append({"system": "github", "runs": steps, "junit": junit, "metrics": None})
    else:
        for job in doc.values():
            rep = job["artifacts"]["reports"]
            out.append({"system": "gitlab", "runs": job["script"], "junit": rep["junit"], "metrics": rep.get("metrics")})
print(json.dumps(out))
"#;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", code])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(serde_json::to_string(&blocks).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read docs/ci.md's job files");
    let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|j| DocsJob {
            system: j["system"].as_str().unwrap().to_string(),
            lines: j["runs"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_str().unwrap().replace("\\\n", " ").lines().map(str::to_string).collect::<Vec<_>>())
                .filter(|l| !l.trim().is_empty())
                .collect(),
            junit: j["junit"].as_str().expect("a JUnit report").to_string(),
            metrics: j["metrics"].as_str().map(str::to_string),
        })
        .collect()
}

kernel_test!(
    the_ci_jobs_in_the_docs_run_as_written,
    needs: Program("gcc"),
    Program("cargo"),
    Path("/usr/lib/python3/dist-packages/junitparser"),
    Path("/usr/lib/python3/dist-packages/yaml")
);
/// docs/ci.md's GitHub Actions and GitLab CI jobs, run line by line as
/// those systems would, with the variables they set: the package installs
/// are checked as installed (no network here), `cargo build --release`
/// runs in this checkout, every other line in a job directory that holds
/// the checkout's `tests/`, `examples/` and built rtrace; `sudo` is the
/// runner's (a pass-through where none is installed: the suite runs as
/// root). Then the reports the jobs publish are read as their consumers
/// read them, and agree with the budget step's exit status.
fn the_ci_jobs_in_the_docs_run_as_written() {
    let _g = setup();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let jobs = docs_ci_jobs();
    assert_eq!(jobs.iter().map(|j| j.system.as_str()).collect::<Vec<_>>(), ["github", "gitlab"], "{jobs:?}");
    for job in &jobs {
        let dir = TempDir::new();
        for d in ["tests", "examples"] {
            std::os::unix::fs::symlink(repo.join(d), dir.join(d)).unwrap();
        }
        std::fs::create_dir_all(dir.join("target/release")).unwrap();
        std::os::unix::fs::symlink(rtrace_bin(), dir.join("target/release/rtrace")).unwrap();
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).unwrap();
        if !on_path("sudo") {
            let shim = dir.write("bin/sudo", "#!/bin/sh\n[ \"$1\" = -E ] && shift\nexec \"$@\"\n");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let summary = dir.join("step-summary.md");
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let env: Vec<(&str, String)> = match job.system.as_str() {
            "github" => vec![
                ("GITHUB_ACTIONS", "true".into()),
                ("CI", "true".into()),
                ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
                ("GITHUB_WORKSPACE", dir.path.display().to_string()),
            ],
            _ => vec![
                ("GITLAB_CI", "true".into()),
                ("CI", "true".into()),
                ("CI_PROJECT_DIR", dir.path.display().to_string()),
            ],
        };
        let mut budget_status = None;
        let mut log = String::new();
        for line in &job.lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let Some(i) = words.iter().position(|w| *w == "install") {
                assert!(words.contains(&"apt-get"), "{line}");
                for pkg in words[i + 1..].iter().filter(|w| !w.starts_with('-') && **w != "cargo") {
                    let ok = Command::new("dpkg").args(["-s", pkg]).output().unwrap().status.success();
                    assert!(ok, "{}: the job installs {pkg}, which this machine lacks", job.system);
                }
                continue;
            }
            let in_repo = line.trim() == "cargo build --release";
            let out = Command::new("bash")
                .args(["-e", "-c", line])
                .current_dir(if in_repo { repo } else { &dir.path })
                .env("PATH", &path)
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .output()
                .unwrap();
            let status = out.status.code();
            log += &format!(
                "$ {line}\n{}{}[{status:?}]\n",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if line.contains("rtrace --junit") {
                budget_status = status;
                // GitHub annotations: one ::error per failed check, at its script line.
                let annotations =
                    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("::error")).count();
                let expected = if job.system == "github" && status == Some(1) { 1 } else { 0 };
                assert_eq!(annotations, expected, "{}: annotations\n{log}", job.system);
            } else {
                assert_eq!(status, Some(0), "{}: a job step failed\n{log}", job.system);
            }
        }
        let status = budget_status.unwrap_or_else(|| panic!("{}: no budget step\n{log}", job.system));
        assert!(status == 0 || status == 1, "{}: the budget step exits 0 or 1\n{log}", job.system);
        let (cases, text) = junit_as_read(&dir.join(&job.junit));
        let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["ci_spin p99 <= 1000 us", "ci_spin was called", "command"], "{text}\n{log}");
        let failed: Vec<&str> = cases.iter().filter(|(_, k)| k != "pass").map(|(n, _)| n.as_str()).collect();
        let expected_failed: &[&str] = if status == 0 { &[] } else { &["ci_spin p99 <= 1000 us"] };
        assert_eq!(failed, expected_failed, "{}: the report agrees with the exit status\n{text}\n{log}", job.system);
        match job.system.as_str() {
            "github" => {
                let md = std::fs::read_to_string(&summary).unwrap_or_default();
                assert!(md.contains("| ci_spin p99 <= 1000 us | "), "the job summary\n{md}\n{log}");
            }
            _ => {
                let metrics = std::fs::read_to_string(dir.join(job.metrics.as_deref().expect("a metrics report")))
                    .unwrap_or_default();
                let line = "rtrace_check_passed{check=\"ci_spin was called\"} 1";
                assert!(metrics.lines().any(|l| l == line), "no {line}\n{metrics}\n{log}");
            }
        }
    }
}
