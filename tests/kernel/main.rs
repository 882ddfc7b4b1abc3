//! The real-kernel integration tests, as one test binary (one build, one
//! link; `harness = false`, run by libtest-mimic). Each module is a topic;
//! `common` holds the shared helpers: run the rtrace binary, make events
//! happen, read its output. Each test is registered beside its function,
//! `kernel_test!(f)` or `kernel_test!(f, needs: Kprobes)`, with what it needs
//! besides root (`kernel_test!(f, without_root)` for the few that only read
//! files); `main` makes one trial of each, named `TOPIC::f`, and one
//! that can't run here (no root, a kernel feature or a program missing) is
//! reported `ignored (REASON)`, never `ok`, and written to
//! `$RTRACE_SKIP_LOG`. Every test body starts with `let _g = setup();`,
//! which runs one test at a time.

#[macro_use]
mod common;

mod actions;
mod attach;
mod btf;
mod builtins;
mod calls;
mod ci;
mod ci_reports;
mod compat;
mod differential;
mod dispatch;
mod docs;
mod emit;
mod errors;
mod examples;
mod exit;
mod filters;
mod helper_errors;
mod kfunc;
mod list;
mod loss;
mod lsm;
mod maps;
mod output;
mod output_parity;
mod perf;
mod probes;
mod safety;
mod semantics;
mod serve;
mod specs;
mod split;
mod split_args;
mod split_flow;
mod split_userspace;
mod stacks;
mod statements;
mod target;
mod tool_options;
mod tools;
mod tools_counting;
mod tools_kernel;
mod tools_snoop;
mod tools_summary;
mod tools_trace;
mod uprobe;
mod user_probes;

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    common::install_panic_hook();
    let trials = common::registered()
        .into_iter()
        .map(|test| libtest_mimic::Trial::ignorable_test(test.name(), move || test.run()))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
