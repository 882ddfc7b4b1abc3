//! Script tests as data: each `tests/scripts/*.case` file holds cases in
//! the spirit of bpftrace's runtime tests — a script, how it is run, the
//! workload, and what it must print — and this runner turns each into one
//! test. A case that can't run here (no root, a kernel feature missing) is
//! reported as ignored with the reason, never as passed. Waits are on
//! conditions (the attach line, the workload's end, rtrace's end, the
//! expected lines); TIMEOUT only bounds a hung case.
//!
//! The format (one directive per line; `#` starts a comment line):
//!
//! ```text
//! NAME opens are counted by command         starts a case
//! PROG let m = map();                       the script (given with -e); PROG lines
//! PROG probe("tracepoint:...", |e| {         and the indented lines after one
//!         m[e.comm] = count();               join into one script
//!     });
//! ARGS -c "cat /etc/hostname"               more rtrace arguments (shell words)
//! AFTER sh -c 'exec cat /etc/hostname'      a workload run (by sh) once attached;
//!                                           then rtrace is interrupted (Ctrl-C)
//! ENV RTRACE_X=1                            an environment variable for rtrace
//! EXPECT @m[cat]: 1                          a whole stdout line (trailing spaces aside)
//! EXPECT_REGEX ^@m\[cat\]: [1-9]\d*$         a stdout line matching
//! ORDERED                                   the EXPECT lines appear in this order
//! EXPECT_NONE Attaching 2 probes...          no stdout line equal to this
//! EXPECT_NONE_REGEX ^@m\[sh\]                no stdout line matching
//! STDERR 3:5: error:                        stderr contains this text
//! EXIT 1                                    the exit status (default 0)
//! REQUIRES kprobes                          kprobes | fentry (root always)
//! TIMEOUT 60                                seconds before the case has hung (30)
//! ```
//!
//! Without AFTER, rtrace ends by itself (`-c`, `exit()`, `-d`, an error),
//! or once every EXPECT line has appeared it is interrupted.
//! `{{RTRACE}}` in ARGS, AFTER and PROG is the rtrace binary under test.

#[allow(dead_code, unused_imports)]
#[path = "kernel/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use regex::Regex;

use common::{kernel_lacks, rtrace_bin, Needs, Tracer, Waited};

/// One case of a `.case` file.
#[derive(Clone, Debug, Default)]
struct Case {
    /// `FILE::name_of_the_case`.
    name: String,
    /// Where it starts: `FILE.case:LINE`.
    at: String,
    prog: Option<String>,
    args: Vec<String>,
    after: Option<String>,
    env: Vec<(String, String)>,
    expect: Vec<String>,
    /// The `expect` lines must appear in their order.
    ordered: bool,
    expect_regex: Vec<Regex>,
    expect_none: Vec<String>,
    expect_none_regex: Vec<Regex>,
    stderr: Vec<String>,
    exit: i32,
    requires: Vec<String>,
    timeout: Option<u64>,
}

const DEFAULT_TIMEOUT: u64 = 30;

/// The cases of one file (`file` names them); an error names the line.
fn parse(file: &str, text: &str) -> Result<Vec<Case>, String> {
    let mut cases: Vec<Case> = Vec::new();
    let mut in_prog = false;
    for (i, raw) in text.lines().enumerate() {
        let at = || format!("{file}.case:{}", i + 1);
        let line = raw.trim_end();
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            in_prog = in_prog && !line.trim().is_empty();
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match (in_prog, cases.last_mut().and_then(|c| c.prog.as_mut())) {
                (true, Some(p)) => {
                    p.push('\n');
                    p.push_str(line);
                    continue;
                }
                _ => return Err(format!("{}: an indented line continues only a PROG", at())),
            }
        }
        let (key, value) = line.split_once(' ').map(|(k, v)| (k, v.trim())).unwrap_or((line, ""));
        in_prog = key == "PROG";
        if key == "NAME" {
            let words: Vec<String> = value
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_ascii_lowercase)
                .collect();
            let slug = words.join("_");
            let name = format!("{file}::{slug}");
            if cases.iter().any(|c| c.name == name) {
                return Err(format!("{}: a second case named {value:?}", at()));
            }
            cases.push(Case { name, at: at(), ..Case::default() });
            continue;
        }
        let Some(case) = cases.last_mut() else {
            return Err(format!("{}: {key} before the first NAME", at()));
        };
        let number =
            |what: &str| value.parse::<i64>().map_err(|_| format!("{}: {what} takes a number, not {value:?}", at()));
        match key {
            "PROG" => match case.prog.as_mut() {
                Some(p) => {
                    p.push('\n');
                    p.push_str(value);
                }
                None => case.prog = Some(value.to_string()),
            },
            "ARGS" => {
                case.args.extend(shlex::split(value).ok_or_else(|| format!("{}: unbalanced quotes in ARGS", at()))?)
            }
            "AFTER" => case.after = Some(value.to_string()),
            "ENV" => {
                let (k, v) = value.split_once('=').ok_or_else(|| format!("{}: ENV takes NAME=VALUE", at()))?;
                case.env.push((k.to_string(), v.to_string()));
            }
            "EXPECT" => case.expect.push(value.to_string()),
            "ORDERED" => case.ordered = true,
            "EXPECT_REGEX" | "EXPECT_NONE_REGEX" => {
                let re = Regex::new(value).map_err(|e| format!("{}: {e}", at()))?;
                let list = if key == "EXPECT_REGEX" { &mut case.expect_regex } else { &mut case.expect_none_regex };
                list.push(re);
            }
            "EXPECT_NONE" => case.expect_none.push(value.to_string()),
            "STDERR" => case.stderr.push(value.to_string()),
            "EXIT" => case.exit = number("EXIT")? as i32,
            "TIMEOUT" => case.timeout = Some(number("TIMEOUT")?.max(1) as u64),
            "REQUIRES" => {
                for need in value.split_whitespace() {
                    if !matches!(need, "kprobes" | "fentry") {
                        return Err(format!("{}: REQUIRES knows kprobes and fentry, not {need:?}", at()));
                    }
                    case.requires.push(need.to_string());
                }
            }
            _ => return Err(format!("{}: unknown directive {key:?}", at())),
        }
    }
    for c in &cases {
        if c.prog.is_none() && c.args.is_empty() {
            return Err(format!("{}: case {} has neither PROG nor ARGS", c.at, c.name));
        }
    }
    Ok(cases)
}

/// Why this machine can't run `case`, if it can't.
fn cannot_run(case: &Case) -> Option<String> {
    if let Some(why) = common::lacks_root() {
        return Some(why.into());
    }
    case.requires.iter().find_map(|need| {
        let need = if need == "kprobes" { Needs::Kprobes } else { Needs::Fentry };
        kernel_lacks(need).map(|why| format!("{why} (kernel {})", common::kernel_release()))
    })
}

fn with_bin(s: &str) -> String {
    s.replace("{{RTRACE}}", rtrace_bin())
}

/// Run one case: Ok, or what differed, with everything rtrace printed.
fn run(case: &Case) -> Result<(), Failed> {
    let mut args: Vec<String> = Vec::new();
    if let Some(p) = &case.prog {
        args.push("-e".into());
        args.push(with_bin(p));
    }
    args.extend(case.args.iter().map(|a| with_bin(a)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let timeout = Duration::from_secs(case.timeout.unwrap_or(DEFAULT_TIMEOUT));
    let mut t = Tracer::start_env(&args, &env);
    // The `Attaching N probes...` line, or its record under `-f json`.
    let attached = |lines: &[String]| {
        lines.iter().any(|l| common::parse_attaching(l).is_some() || l.starts_with(r#"{"type": "attached_probes""#))
    };
    let mut waited = t.wait_for(timeout, attached);
    if waited == Waited::Met {
        if let Some(cmd) = &case.after {
            let st = std::process::Command::new("sh").arg("-c").arg(with_bin(cmd)).status();
            if !matches!(&st, Ok(s) if s.success()) {
                let out = t.abort();
                return Err(format!("{}: the workload `{cmd}` failed: {st:?}\n{out}", case.at).into());
            }
            if t.is_running() {
                t.interrupt();
            }
        } else {
            let expected = |lines: &[String]| {
                case.expect.iter().all(|e| lines.iter().any(|l| l.trim_end() == e))
                    && case.expect_regex.iter().all(|re| lines.iter().any(|l| re.is_match(l)))
                    && !(case.expect.is_empty() && case.expect_regex.is_empty())
            };
            waited = t.wait_for(timeout, expected);
            if waited == Waited::Met && t.is_running() {
                t.interrupt();
            }
        }
    }
    if waited == Waited::TimedOut {
        let out = t.abort();
        return Err(format!("{}: no end after {timeout:?} (hung)\n{out}", case.at).into());
    }
    let out = t.finish_within(timeout);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
    let mut wrong = Vec::new();
    if out.code != Some(case.exit) {
        wrong.push(format!("exit status {:?}, not {}", out.code, case.exit));
    }
    let mut from = 0;
    for e in &case.expect {
        match lines.iter().skip(from).position(|l| l == e) {
            Some(i) if case.ordered => from += i + 1,
            Some(_) => {}
            None if case.ordered && lines.contains(&e.as_str()) => wrong.push(format!("the line {e:?} out of order")),
            None => wrong.push(format!("no line {e:?}")),
        }
    }
    for e in &case.expect_none {
        if lines.contains(&e.as_str()) {
            wrong.push(format!("a line {e:?}"));
        }
    }
    for (re, want) in
        case.expect_regex.iter().map(|r| (r, true)).chain(case.expect_none_regex.iter().map(|r| (r, false)))
    {
        if lines.iter().any(|l| re.is_match(l)) != want {
            wrong.push(format!("{} line matching /{re}/", if want { "no" } else { "a" }));
        }
    }
    for s in &case.stderr {
        if !out.stderr.contains(s.as_str()) {
            wrong.push(format!("stderr lacks {s:?}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{}: {}\n{out}", case.at, wrong.join("; ")).into())
    }
}

/// Every case of every file under `dir`, by file name.
fn load(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let stem = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        cases.extend(parse(&stem, &text)?);
    }
    Ok(cases)
}

fn main() {
    let args = Arguments::from_args();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let mut trials: Vec<Trial> = format_checks();
    match load(&dir) {
        Ok(cases) => trials.extend(cases.into_iter().map(|case| {
            // `ignored (REASON)` after the name, which stays as listed (a
            // kind tag would pad every line and change `--list`).
            Trial::ignorable_test(case.name.clone(), move || match cannot_run(&case) {
                Some(why) => {
                    common::log_skip(&case.name, &why);
                    Ok(Completion::ignored_with(why))
                }
                None => run(&case).map(|()| Completion::Completed),
            })
        })),
        // A broken case file fails the run, naming its line.
        Err(e) => trials.push(Trial::test("format::the_case_files_parse", move || Err(e.clone().into()))),
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Root-free checks of the format itself.
fn format_checks() -> Vec<Trial> {
    let check = |name: &str, f: fn() -> Result<(), String>| {
        Trial::test(format!("format::{name}"), move || f().map_err(Failed::from))
    };
    vec![
        check("a_case_gathers_its_directives", || {
            let text = "# c\nNAME Opens by comm!\nPROG let m = map();\nPROG probe(\"x\", |e| {\n    m[1] = 2;\n  });\nARGS -c \"cat /x y\"\nEXPECT a b\nEXIT 1\nREQUIRES kprobes\n\nNAME two\nARGS -l\n";
            let cases = parse("f", text)?;
            let c = &cases[0];
            let ok = cases.len() == 2
                && c.name == "f::opens_by_comm"
                && c.at == "f.case:2"
                && c.prog.as_deref() == Some("let m = map();\nprobe(\"x\", |e| {\n    m[1] = 2;\n  });")
                && c.args == ["-c", "cat /x y"]
                && c.expect == ["a b"]
                && c.exit == 1
                && c.requires == ["kprobes"]
                && cases[1].args == ["-l"];
            ok.then_some(()).ok_or(format!("{cases:#?}"))
        }),
        check("mistakes_name_their_line", || {
            for (text, want) in [
                ("PROG x\n", "f.case:1: PROG before the first NAME"),
                ("NAME a\nPROG x\nBOGUS 1\n", "f.case:3: unknown directive \"BOGUS\""),
                ("NAME a\nPROG x\nEXIT one\n", "f.case:3: EXIT takes a number"),
                ("NAME a\nPROG x\nEXPECT_REGEX (\n", "f.case:3:"),
                ("NAME a\nPROG x\nREQUIRES gpu\n", "f.case:3: REQUIRES knows"),
                ("NAME a\nARGS -c \"x\n", "f.case:2: unbalanced quotes"),
                ("NAME a\nPROG x\nNAME a\nPROG y\n", "f.case:3: a second case"),
                ("NAME a\nEXPECT x\n", "has neither PROG nor ARGS"),
                ("NAME a\nEXPECT x\n    more\n", "f.case:3: an indented line continues only a PROG"),
            ] {
                match parse("f", text) {
                    Err(e) if e.contains(want) => {}
                    other => return Err(format!("{text:?}: {other:?}, wanted {want:?}")),
                }
            }
            Ok(())
        }),
    ]
}
