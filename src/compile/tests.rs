//! Golden tests of the compiler, run without root against the fixture
//! kernel (`kernel::fake`). Each `golden/NAME.txt` holds a script, a line
//! `----`, and what compile makes of it: the `--explain` text (maps and
//! their layouts, the kernel/userspace split with each record's layout,
//! the disassembly) or the one-line error. The `split_*` goldens are about
//! where statements run: they show the split and the record layouts but
//! not the code, so a code generator change doesn't rewrite them.
//! `UPDATE_GOLDEN=1 cargo test` rewrites the expected part from what
//! compile produces now.

use std::path::{Path, PathBuf};

use crate::config::{Config, Env};
use crate::kernel::fake::FakeKernel;
use crate::script::Session;

const SEPARATOR: &str = "\n----\n";

/// No `RTRACE_*` settings: every golden sees the defaults.
struct NoSettings;

impl Env for NoSettings {
    fn get(&self, _name: &str) -> Option<String> {
        None
    }
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/compile/golden")
}

/// What compiling `script` gives: the explain text, or the error.
fn outcome(script: &str, kernel: &FakeKernel, code: bool) -> String {
    let mut config = Config::from_env(&NoSettings, None).expect("default settings");
    config.start_ns = 0;
    // `// options: --no-split` on the first line.
    let options = script.lines().next().filter(|l| l.starts_with("// options:")).unwrap_or_default();
    config.no_split = options.contains("--no-split");
    config.allow_unsafe = options.contains("--unsafe");
    config.monitor = options.contains("--monitor");
    let mut session = match Session::new("t.rhai", script, &[]) {
        Ok(s) => s,
        Err(e) => return format!("{e:#}\n"),
    };
    if let Err(e) = session.run_top_level() {
        return format!("{e:#}\n");
    }
    match super::compile(&session, &config, kernel) {
        Ok(plan) => super::explain::render_with(&session, &plan, script, code),
        Err(e) => format!("{e:#}\n"),
    }
}

fn check(path: &Path, kernel: &FakeKernel, update: bool) -> Option<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (script, expected) = text.split_once(SEPARATOR).unwrap_or((text.as_str(), ""));
    let split_only = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("split_"));
    let got = outcome(script, kernel, !split_only);
    if got == expected {
        return None;
    }
    if update {
        std::fs::write(path, format!("{script}{SEPARATOR}{got}")).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return None;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let first = got.lines().zip(expected.lines()).position(|(a, b)| a != b).unwrap_or(0);
    Some(format!(
        "{name}: differs from line {} on\n  expected: {}\n  got:      {}",
        first + 1,
        expected.lines().nth(first).unwrap_or("<end>"),
        got.lines().nth(first).unwrap_or("<end>")
    ))
}

#[test]
fn golden_scripts() {
    let kernel = FakeKernel::from_fixtures();
    // UPDATE_GOLDEN=1 rewrites every golden; UPDATE_GOLDEN=NAME those whose file name contains NAME.
    let update = std::env::var("UPDATE_GOLDEN").ok();
    let updates = |p: &Path| {
        update.as_deref().is_some_and(|u| u == "1" || p.file_name().is_some_and(|n| n.to_string_lossy().contains(u)))
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("src/compile/golden")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 40, "{} golden scripts", paths.len());
    let failures: Vec<String> = paths.iter().filter_map(|p| check(p, &kernel, updates(p))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} goldens differ (UPDATE_GOLDEN=1 cargo test rewrites them):\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

/// Each embedded tool (stdlib/tools/), with the arguments of a typical run,
/// compiles against the fixture kernel: the split, lowering and map layout
/// of every tool are checked without root. Tools that take a probe take a
/// tracepoint here (the fixture kernel has no kprobes, as this machine).
#[test]
fn every_tool_compiles_against_the_fixture_kernel() {
    let kernel = FakeKernel::from_fixtures();
    let config = Config::from_env(&NoSettings, None).expect("default settings");
    let args_of = |tool: &str| -> Vec<String> {
        let args: &[&str] = match tool {
            "argdist" => &[
                "-H",
                "t:syscalls:sys_enter_read():u64:args->count",
                "-C",
                "t:syscalls:sys_enter_openat():int:args->dfd",
            ],
            "funccount" => &["t:syscalls:sys_enter_open*"],
            "funclatency" => &["c:malloc"],
            "stackcount" => &["t:syscalls:sys_enter_read"],
            "trace" => &["t:syscalls:sys_enter_openat \"%d\", args->dfd"],
            _ => &[],
        };
        args.iter().map(|a| a.to_string()).collect()
    };
    let mut failures = Vec::new();
    let tools = crate::script::tools::list();
    assert!(tools.len() >= 30, "{} tools", tools.len());
    for (name, _) in &tools {
        let source = crate::script::tools::find(name).expect("an embedded tool");
        let args = args_of(name);
        let outcome = Session::new(&format!("tools/{name}.rhai"), source, &args).and_then(|mut session| {
            session.run_top_level()?;
            super::compile(&session, &config, &kernel).map(|plan| plan.programs.len())
        });
        match outcome {
            Ok(0) => failures.push(format!("{name} {}: no kernel program", args.join(" "))),
            Ok(_) => {}
            Err(e) => failures.push(format!("{name} {}: {e:#}", args.join(" "))),
        }
    }
    assert!(failures.is_empty(), "{} of {} tools don't compile:\n{}", failures.len(), tools.len(), failures.join("\n"));
}
