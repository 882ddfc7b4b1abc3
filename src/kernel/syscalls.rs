//! x86-64 syscall numbers by the name of their `syscalls:sys_enter_NAME`
//! tracepoint (the kernel's `SYSCALL_DEFINE` name: `newstat` is `stat`'s).
//! `tracepoint:syscalls:sys_enter_*` wildcards dispatch on these from one
//! `raw_syscalls` program (compile/dispatch.rs). Names missing here keep a
//! tracepoint each. The table is `util::syscalls` (scripts' `syscall_name(n)`
//! reads it too).

pub use crate::util::syscalls::number;
