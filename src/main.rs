//! rtrace: a Linux tracer whose Rhai scripts register eBPF probes.
//!
//! The pipeline (design.md §3), one folder per stage:
//! `cli` → `script` (Rhai top level) → `compile` (closure AST → IR → split) →
//! `probes_ebpf` (IR → BPF) → `attach` (load + attach) → `runtime` (event
//! loop, maps) → `output`.

mod cli;
mod compile;
mod config;
mod kernel;
mod output;
mod probes;
mod runtime;
mod script;
mod symbols;
mod util;

fn main() {
    std::process::exit(cli::main());
}
