//! rtrace: a Linux tracer whose Rhai scripts register eBPF probes.
//!
//! The pipeline (design.md §3; ARCHITECTURE.md maps the tree), one folder per stage:
//! 1. `cli` parses the command line; `config` resolves every flag and
//!    `RTRACE_*` variable once into a `Config`.
//! 2. `script` runs the Rhai top level, producing probe definitions and maps.
//! 3. `compile` asks `probes` to expand each spec and decide each point's
//!    program (program type, context, `EventContext` for `e.argN`, `e.args`,
//!    `e.retval`, `e.func`), splits each closure into kernel and userspace
//!    statements, lowers the kernel ones to IR and each userspace run to a
//!    record, unifies map layouts, adds the stop and pid filters, and
//!    generates BPF with `probes_ebpf`. What it needs from the kernel it
//!    asks through `kernel::Kernel` (live, or fixtures in tests). It hands
//!    the runtime a `plan::Plan`.
//! 4. `runtime` loads the programs (`kernel::sys`), attaches them through
//!    their probe types, and runs the event loop: reader thread → channel →
//!    userspace continuations.
//! 5. `output` formats maps and events; `symbols` symbolizes stacks.
//!
//! Below them: `kernel` (every raw bpf/perf call, tracefs, BTF, kallsyms,
//! the x86-64 register table), `util` (wildcards, suggestions), `diag`
//! (located errors) and `config`.

mod builtins;
mod cli;
mod compile;
mod config;
mod diag;
mod kernel;
mod output;
mod plan;
mod probes;
mod runtime;
mod script;
mod symbols;
mod util;

fn main() {
    std::process::exit(cli::main());
}
