//! What a probe's program can read from its context, answered by the probe
//! type: `e.argN`, `e.retval`, `e.func`, whether pointers are user memory,
//! and the typed arguments behind `e.args.NAME` (a tracepoint's format, or
//! BTF parameters). compile asks an [`EventContext`] and never looks at
//! which probe type it came from. The contexts shared by several probe
//! types (pt_regs, `u64 args[]`) live here; the others beside their type.

use probes_ebpf::ir::{BinOp, Expr, Memory};

use crate::kernel::arch;
use crate::kernel::btf::{BtfTypes, Param, Shape};
use crate::kernel::tracepoint_format::TracepointFormat;

/// The event of one program, as its probe type describes it.
pub trait EventContext: Send + Sync {
    /// `e.argN` in probe `probe`: None when this probe type has no
    /// numbered arguments, else the IR or the reason it can't be read.
    fn arg(&self, _i: u32, _probe: &str) -> Option<Result<Expr, String>> {
        None
    }
    /// `e.retval`: None when this probe type has no return value.
    fn retval(&self) -> Option<Expr> {
        None
    }
    /// `e.func`: the probed function, when one program serves one function.
    fn func(&self) -> Option<&str> {
        None
    }
    /// Pointers read in this probe point into user memory (uprobe, usdt).
    fn user_memory(&self) -> bool {
        false
    }
    /// Frames at the top of a kernel stack taken here that belong to the
    /// BPF machinery, not to the traced code (left out of `e.kstack`).
    fn kernel_stack_skip(&self) -> u32 {
        0
    }
    /// The memory this probe's pointer arguments point to, when nothing
    /// else about a pointer says.
    fn pointer_memory(&self) -> Memory {
        Memory::user(self.user_memory())
    }
    /// A tracepoint's fields, for `e.args.NAME`.
    fn format(&self) -> Option<&TracepointFormat> {
        None
    }
    /// BTF-typed arguments (`u64 args[]` slot i holds argument i), for `e.args.NAME`.
    fn btf_args(&self) -> Option<&[Param]> {
        None
    }
}

/// A context with no arguments (perf events; BEGIN/END have no program).
pub struct NoArgs;

impl EventContext for NoArgs {}

/// A `struct pt_regs` context at function entry or return: kprobes on the
/// kprobe PMU, uprobes. Arguments follow the System V ABI (`kernel::arch`).
pub struct PtRegsEvent {
    pub func: Option<String>,
    pub user: bool,
    /// The integer arguments' and return value's widths and signs, where
    /// BTF describes the function (an `int` returning -1 reads -1).
    pub ints: Option<IntSignature>,
}

/// Which arguments and return value of a function are integers, of what
/// width (bytes) and sign; others (pointers, no BTF) read as whole registers.
#[derive(Default)]
pub struct IntSignature {
    pub args: Vec<Option<(u32, bool)>>,
    pub ret: Option<(u32, bool)>,
}

impl IntSignature {
    pub fn from_btf(btf: &dyn BtfTypes, params: &[Param], ret: u32) -> IntSignature {
        let int = |ty: u32| match btf.shape(ty) {
            Shape::Int { size, signed } if size <= 8 && size.is_power_of_two() => Some((size, signed)),
            _ => None,
        };
        IntSignature { args: params.iter().map(|p| int(p.ty)).collect(), ret: int(ret) }
    }
}

impl PtRegsEvent {
    fn int_arg(&self, i: u32) -> (u32, bool) {
        self.ints.as_ref().and_then(|s| s.args.get(i as usize).copied().flatten()).unwrap_or((8, false))
    }
}

impl EventContext for PtRegsEvent {
    fn arg(&self, i: u32, _probe: &str) -> Option<Result<Expr, String>> {
        // An integer argument is read at its width (the register's low
        // bytes: x86-64 is little-endian) and extended by its sign.
        let (size, signed) = self.int_arg(i);
        if let Some(offset) = arch::argument_offset(i) {
            return Some(Ok(Expr::CtxInt { offset, size, signed }));
        }
        if i >= 10 {
            return None;
        }
        // At function entry the 7th and later arguments are on the stack,
        // above the return address.
        let sp = Expr::CtxInt { offset: arch::SP, size: 8, signed: false };
        let addr = Expr::Binary(BinOp::Add, Box::new(sp), Box::new(Expr::Int(arch::argument_stack_offset(i))));
        Some(Ok(Expr::ReadMem { addr: Box::new(addr), size, signed, mem: Memory::user(self.user) }))
    }
    fn retval(&self) -> Option<Expr> {
        let (size, signed) = self.ints.as_ref().and_then(|s| s.ret).unwrap_or((8, true));
        Some(Expr::CtxInt { offset: arch::RETURN_VALUE, size, signed })
    }
    fn func(&self) -> Option<&str> {
        self.func.as_deref()
    }
    fn user_memory(&self) -> bool {
        self.user
    }
    /// A kernel function's pointer arguments may point to user memory (a
    /// syscall's, `do_sys_openat2`'s filename) as well as kernel memory.
    fn pointer_memory(&self) -> Memory {
        if self.user {
            Memory::User
        } else {
            Memory::KernelThenUser
        }
    }
}

/// A `u64 args[]` context: raw tracepoints, tp_btf, and fentry/fexit
/// trampolines (where the return value follows the arguments).
pub struct RawArgsEvent {
    /// The arguments' names and BTF types, where known.
    pub params: Option<Vec<Param>>,
    /// fexit: the return value, read from the slot after the arguments
    /// as its BTF type says ([`btf_slot`]).
    pub retval: Option<Expr>,
    pub func: Option<String>,
    /// Kernel stack frames above the traced code: an fentry/fexit program
    /// is called by its trampoline, so its stacks start with the program
    /// and the trampoline (2); 0 for raw tracepoints.
    pub stack_skip: u32,
}

impl EventContext for RawArgsEvent {
    fn arg(&self, i: u32, probe: &str) -> Option<Result<Expr, String>> {
        if let Some(params) = &self.params {
            if i as usize >= params.len() {
                return Some(Err(format!("`e.arg{i}`: {probe} has {} argument(s)", params.len())));
            }
        }
        (i < 10).then_some(Ok(Expr::CtxInt { offset: i * 8, size: 8, signed: false }))
    }
    fn retval(&self) -> Option<Expr> {
        self.retval.clone()
    }
    fn func(&self) -> Option<&str> {
        self.func.as_deref()
    }
    fn btf_args(&self) -> Option<&[Param]> {
        self.params.as_deref()
    }
    /// Kernel function and tracepoint arguments may point to user memory
    /// (a syscall's filename) as well as kernel memory.
    fn pointer_memory(&self) -> Memory {
        Memory::KernelThenUser
    }
    fn kernel_stack_skip(&self) -> u32 {
        self.stack_skip
    }
}

/// Argument slot `i` of a BTF-typed context (`u64 args[]`) holding a value
/// of type `ty`: the whole slot is loaded, then cut to the type's width and
/// sign (the bits above a narrow argument are not defined).
pub fn btf_slot(btf: &dyn BtfTypes, i: u32, ty: u32) -> Expr {
    let slot = Expr::CtxInt { offset: i * 8, size: 8, signed: true };
    match btf.shape(ty) {
        Shape::Int { size, signed } if size < 8 => {
            let bits = 64 - size as i64 * 8;
            if signed {
                let up = Expr::Binary(BinOp::Shl, Box::new(slot), Box::new(Expr::Int(bits)));
                Expr::Binary(BinOp::Shr, Box::new(up), Box::new(Expr::Int(bits)))
            } else {
                Expr::Binary(BinOp::And, Box::new(slot), Box::new(Expr::Int((1i64 << (size * 8)) - 1)))
            }
        }
        _ => slot,
    }
}
