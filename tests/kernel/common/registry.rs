//! How a real-kernel test is registered and run. `kernel_test!(f)` (or
//! `kernel_test!(f, needs: Kprobes, Program("gcc"))`) above `fn f()`
//! registers it, with what it needs besides root; `kernel_test!(f,
//! without_root)` registers one of the few that only read files and run as
//! anyone. tests/kernel/main.rs gathers the registrations into one
//! libtest-mimic trial each, named `TOPIC::f` as libtest named them. A
//! test that can't run here is reported `ignored (REASON)`, never `ok`, and
//! written to `$RTRACE_SKIP_LOG`.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;

use libtest_mimic::{Completion, Failed};

use super::{kernel_lacks, kernel_release, lacks_root, Needs};

/// One real-kernel test: its function and what it needs besides root.
pub struct KernelTest {
    /// `module_path!()` where it was registered (`kernel::TOPIC`).
    pub module: &'static str,
    pub function: &'static str,
    pub body: fn(),
    /// It runs as root (all but a few checks of files do).
    pub root: bool,
    pub needs: &'static [Needs],
}

inventory::collect!(KernelTest);

/// Registers the test `fn NAME()` of this module, placed just above it (and
/// its doc comment): `kernel_test!(NAME);`, or with what it needs besides
/// root, `kernel_test!(NAME, needs: Kprobes, Path("/sys/..."));` (the
/// variants of [`Needs`], written without `Needs::`); a test that neither
/// traces nor needs root, `kernel_test!(NAME, without_root);`.
#[allow(unused_macros)] // tests/scripts.rs includes this module and registers nothing
macro_rules! kernel_test {
    ($f:ident, without_root $(,)?) => {
        inventory::submit! {
            $crate::common::KernelTest {
                module: module_path!(),
                function: stringify!($f),
                body: $f,
                root: false,
                needs: &[],
            }
        }
    };
    ($f:ident $(, needs: $($need:expr),+)? $(,)?) => {
        inventory::submit! {
            $crate::common::KernelTest {
                module: module_path!(),
                function: stringify!($f),
                body: $f,
                root: true,
                needs: {
                    #[allow(unused_imports)]
                    use $crate::common::Needs::*;
                    &[$($($need),+)?]
                },
            }
        }
    };
}

thread_local! {
    /// The test running on this thread.
    static CURRENT: Cell<Option<&'static KernelTest>> = const { Cell::new(None) };
    /// Where the running test panicked, in order (a caught panic too), each
    /// with its backtrace when RUST_BACKTRACE asks for one.
    static PANICS: RefCell<Vec<(String, Option<String>)>> = const { RefCell::new(Vec::new()) };
    /// Why the running test's run could not show what it checks ([`inconclusive`]).
    static INCONCLUSIVE: RefCell<Option<String>> = const { RefCell::new(None) };
}

impl KernelTest {
    /// `TOPIC::function`: the name libtest gave it (the crate name dropped).
    pub fn name(&self) -> String {
        let module = self.module.split_once("::").map_or("", |(_, m)| m);
        format!("{module}::{}", self.function)
    }

    /// Why it can't run here (root first, then its needs in order); None when it can.
    pub fn cannot_run(&self) -> Option<String> {
        if let Some(why) = lacks_root().filter(|_| self.root) {
            return Some(why.to_string());
        }
        self.needs.iter().find_map(|&need| kernel_lacks(need))
    }

    /// Run it: ignored with the reason when it can't run here, or when its
    /// run called [`inconclusive`]; a panic is a failure whose message says
    /// where it panicked.
    pub fn run(&'static self) -> Result<Completion, Failed> {
        if let Some(why) = self.cannot_run() {
            log_skip(&self.name(), &why);
            return Ok(Completion::ignored_with(why));
        }
        CURRENT.set(Some(self));
        PANICS.take();
        INCONCLUSIVE.take();
        let result = catch_unwind(AssertUnwindSafe(self.body));
        CURRENT.set(None);
        let panics = PANICS.take();
        match result {
            Ok(()) => match INCONCLUSIVE.take() {
                Some(why) => {
                    log_skip(&self.name(), &why);
                    Ok(Completion::ignored_with(why))
                }
                None => Ok(Completion::Completed),
            },
            Err(payload) => {
                let what = payload
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| payload.downcast_ref::<&str>().copied())
                    .unwrap_or("(a panic without a message)");
                let mut msg = match panics.last() {
                    Some((at, _)) => format!("panicked at {at}:\n{what}"),
                    None => format!("panicked:\n{what}"),
                };
                if panics.len() > 1 {
                    let earlier: Vec<&str> = panics[..panics.len() - 1].iter().map(|(at, _)| at.as_str()).collect();
                    msg.push_str(&format!("\n(panics caught earlier in the test: at {})", earlier.join(", ")));
                }
                if let Some((_, Some(trace))) = panics.last() {
                    msg.push_str(&format!("\nstack backtrace:\n{trace}"));
                }
                Err(msg.into())
            }
        }
    }
}

/// Every registered test, sorted by name.
pub fn registered() -> Vec<&'static KernelTest> {
    let mut tests: Vec<&'static KernelTest> = inventory::iter::<KernelTest>.into_iter().collect();
    tests.sort_by_cached_key(|t| t.name());
    tests
}

/// A panic on a test's own thread is reported once, in the failure (as
/// libtest does): the hook only notes where it happened (and the backtrace,
/// when RUST_BACKTRACE asks for one). Panics on other threads print as usual.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CURRENT.try_with(Cell::get).ok().flatten().is_none() {
            return default(info);
        }
        let at = info.location().map_or_else(|| "?".to_string(), |l| l.to_string());
        let trace = std::backtrace::Backtrace::capture();
        let trace = (trace.status() == std::backtrace::BacktraceStatus::Captured).then(|| trace.to_string());
        let _ = PANICS.try_with(|p| p.borrow_mut().push((at, trace)));
    }));
}

/// For what only the run itself can tell (no block I/O reached a disk, the
/// kernel threads it waits for did not run): the test returns right after
/// this, and is reported ignored with `why`, never passed. What a test needs
/// of the machine is declared at its registration instead.
pub fn inconclusive(why: impl Into<String>) {
    let why = why.into();
    let _ = INCONCLUSIVE.try_with(|w| *w.borrow_mut() = Some(why));
}

/// `gcc`, for a test that declared `Needs::Program("gcc")`: one that builds
/// C without declaring it fails here, on every machine, rather than on the
/// one without gcc (where it is to be ignored).
#[track_caller]
pub fn gcc() -> Command {
    if let Some(t) = CURRENT.try_with(Cell::get).ok().flatten() {
        assert!(
            t.needs.iter().any(|n| matches!(n, Needs::Program("gcc"))),
            "{} builds C: its registration must say `needs: Program(\"gcc\")`",
            t.name()
        );
    }
    Command::new("gcc")
}

/// A test that can't run here (or whose run was inconclusive) is written to
/// `$RTRACE_SKIP_LOG` (scripts/test.sh lists them as skipped, never passed).
pub fn log_skip(test: &str, reason: &str) {
    if let Ok(path) = std::env::var("RTRACE_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{test}: {reason} (kernel {})", kernel_release());
        }
    }
}
