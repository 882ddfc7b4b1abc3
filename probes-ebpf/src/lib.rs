//! rtrace's eBPF back end. It takes the IR the script compiler produces
//! ([`ir::Program`]) and turns it into eBPF instructions ([`codegen::generate`]),
//! with a disassembler for `--explain` and error reports. It never touches the
//! kernel: loading and attaching live in the `rtrace` crate.

pub mod codegen;
pub mod disasm;
pub mod helpers;
pub mod insn;
pub mod ir;
pub mod record;

pub use codegen::{generate, CodegenError, Generated};
