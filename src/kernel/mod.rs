//! Everything rtrace asks of the running kernel, and the only code that
//! talks to it directly: the raw bpf/perf system calls and feature probes
//! (`sys`), attachments (`link`), verifier logs (`verifier`), tracefs and
//! tracepoint formats, BTF, kernel symbols and the machine's register
//! layout (`arch`). Nothing here imports another rtrace folder except `util`.

pub mod arch;
pub mod btf;
pub mod kallsyms;
pub mod link;
pub mod sys;
pub mod tracefs;
pub mod tracepoint_format;
pub mod verifier;
