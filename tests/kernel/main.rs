//! The real-kernel integration tests, as one test binary (one build, one
//! link). Each module is a topic; `common` holds the shared helpers: run the
//! rtrace binary, make events happen, read its output. Every test starts with
//! `common::setup()`, which skips without root and runs one test at a time.

mod common;

mod btf;
mod calls;
mod ci;
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
mod maps;
mod output;
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
mod tools;
mod tools_kernel;
mod uprobe;
