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
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("src/compile/golden")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 40, "{} golden scripts", paths.len());
    let failures: Vec<String> = paths.iter().filter_map(|p| check(p, &kernel, update)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} goldens differ (UPDATE_GOLDEN=1 cargo test rewrites them):\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}
