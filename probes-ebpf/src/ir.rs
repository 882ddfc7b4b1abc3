//! The intermediate representation between the script compiler (`src/compile`)
//! and the code generator: typed, structured statements over 64-bit integers
//! and fixed-size byte strings, with map operations as first-class statements.
//!
//! Every value is either an `Int` (i64, Rhai's integer) or `Bytes(n)` (a
//! NUL-padded buffer of n bytes: `comm`, captured strings, literals).

/// A script position, carried through to disassembly and verifier errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    Bytes(u32),
}

impl Ty {
    /// Bytes a value of this type takes in a key, record or value slot (8-aligned).
    pub fn slot_size(&self) -> u32 {
        match self {
            Ty::Int => 8,
            Ty::Bytes(n) => (n + 7) & !7,
        }
    }
}

/// What the program's context pointer (r1 at entry) points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextKind {
    /// A tracepoint's raw record, laid out as its tracefs format file says.
    Tracepoint,
    /// `u64 args[]` of a raw tracepoint.
    RawTracepoint,
    /// `struct pt_regs` (kprobe, uprobe).
    PtRegs,
    /// `struct bpf_perf_event_data` (profile, interval, software events).
    PerfEvent,
}

pub type LocalId = u32;
pub type MapId = u32;

/// Values the kernel provides about the current task and event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Pid,
    Tid,
    Uid,
    Gid,
    Cpu,
    Nsecs,
    Cgroup,
    Rand,
    /// The current task_struct pointer.
    CurTask,
    /// The kernel's jiffies counter (bpf_jiffies64).
    Jiffies,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// `x << y` (`left`) or `x >> y` as Rhai computes them, which generated code
/// matches: a negative amount shifts the other way; shifting left by 64 or
/// more gives 0, right by 64 or more gives the sign (0, or -1 for a negative
/// `x`); `>>` is arithmetic.
pub fn shift(left: bool, x: i64, y: i64) -> i64 {
    let n = y.unsigned_abs();
    if left == (y >= 0) {
        if n < 64 {
            x << n
        } else {
            0
        }
    } else {
        x >> n.min(63)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
}

/// Slots of a `StackId`'s `lost` array (part of the wire format).
pub use crate::record::{STACK_LOST_COLLISION, STACK_LOST_FULL};

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Int(i64),
    /// A byte string literal, NUL-padded to `len`.
    Str {
        bytes: Vec<u8>,
        len: u32,
    },
    Local(LocalId),
    Builtin(Builtin),
    /// `comm` of the current task (16 bytes).
    Comm,
    /// An integer field of the context at a fixed offset.
    CtxInt {
        offset: u32,
        size: u32,
        signed: bool,
    },
    /// A `char[len]` array inside the context.
    CtxCharArray {
        offset: u32,
        len: u32,
    },
    /// A `__data_loc char[]` string of a tracepoint record, read up to `max`.
    CtxDataLocStr {
        offset: u32,
        max: u32,
    },
    /// `bpf_get_stackid` into the stack map `map`: the stack id (negative on
    /// failure). For user stacks the pid is packed above it: `pid << 32 | id`.
    /// Taken once per event and map (later uses reuse it); a failed capture
    /// adds 1 to slot [`STACK_LOST_COLLISION`] or [`STACK_LOST_FULL`] of the
    /// per-CPU array `lost`.
    StackId {
        map: MapId,
        user: bool,
        lost: MapId,
        /// Frames to leave out at the top of a kernel stack: the BPF
        /// program's own and its trampoline's (fentry/fexit), so the stack
        /// starts at the probed function.
        skip: u32,
    },
    /// An integer of `size` bytes read from memory at `addr` (0 if unreadable).
    ReadMem {
        addr: Box<Expr>,
        size: u32,
        signed: bool,
        mem: Memory,
    },
    /// A NUL-terminated string read from memory at `ptr`, up to `max` bytes.
    ReadStr {
        ptr: Box<Expr>,
        max: u32,
        mem: Memory,
    },
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    /// Short-circuit `&&` / `||`, yielding 0 or 1.
    LogicalAnd(Box<Expr>, Box<Expr>),
    LogicalOr(Box<Expr>, Box<Expr>),
    /// `if c { a } else { b }` as a value.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// String equality of two byte values (compared up to the shorter length,
    /// both NUL-terminated), yielding 0 or 1.
    StrEq(Box<Expr>, Box<Expr>),
    /// A search in runtime strings (see [`StrOp`]), yielding an integer.
    StrSearch(StrOp, Box<Expr>, Box<Expr>),
    /// `buf(ptr, len)`: up to `max` bytes of memory at `ptr`, as a byte
    /// value of `8 + max` bytes: the length read (`len` clamped to
    /// `0..=max`, little-endian u64), then the bytes, zero-padded.
    ReadBuf {
        ptr: Box<Expr>,
        len: Box<Expr>,
        max: u32,
        mem: Memory,
    },
    /// A map's integer value for `key`, 0 when the key is missing.
    MapGet {
        map: MapId,
        key: Vec<Expr>,
    },
    /// 1 when `key` is in the map, else 0.
    MapContains {
        map: MapId,
        key: Vec<Expr>,
    },
}

/// Which memory a pointer read reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    Kernel,
    User,
    /// Kernel memory first, user memory when that read fails: a kernel
    /// function's pointer arguments, which may point to either (a syscall's
    /// `const char __user *filename` as well as a `struct file *`). On
    /// x86-64 a kernel read of a user address always fails, so the fallback
    /// never reads the wrong one.
    KernelThenUser,
}

impl Memory {
    pub fn user(user: bool) -> Memory {
        if user {
            Memory::User
        } else {
            Memory::Kernel
        }
    }
}

impl Expr {
    /// The type of the value, given the types of the program's locals.
    pub fn ty(&self, locals: &[Ty]) -> Ty {
        match self {
            Expr::Str { len, .. } => Ty::Bytes(*len),
            Expr::Comm => Ty::Bytes(16),
            Expr::CtxCharArray { len, .. } => Ty::Bytes(*len),
            Expr::CtxDataLocStr { max, .. } | Expr::ReadStr { max, .. } => Ty::Bytes(*max),
            Expr::ReadBuf { max, .. } => Ty::Bytes(8 + *max),
            Expr::Local(id) => locals[*id as usize],
            // A string if-expression is as long as its longer branch.
            Expr::Cond(_, a, b) => match (a.ty(locals), b.ty(locals)) {
                (Ty::Bytes(x), Ty::Bytes(y)) => Ty::Bytes(x.max(y)),
                (t, _) => t,
            },
            _ => Ty::Int,
        }
    }
}

/// Searches in strings read at run time (both sides NUL-terminated or
/// as long as their buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrOp {
    /// `strncmp(a, b, n)`: 0 when the first `n` bytes of `a` and `b` agree
    /// (a NUL in both ends the comparison early), else 1 (bpftrace).
    Ncmp(u32),
    /// `strcontains(a, b)`: 1 when `b` occurs in `a` (an empty `b` does), else 0.
    Contains,
}

/// Aggregating map updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggOp {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Stats,
    Hist,
    /// `hist(x, bits)` with bits in 1..=5: each power of two split into
    /// `2^bits` linear sub-buckets, bucketed as bpftrace's `hist(x, k)`
    /// (see [`crate::quantile::hist_bucket`]).
    HistBits {
        bits: u8,
    },
    Lhist {
        min: i64,
        max: i64,
        step: i64,
    },
    /// `quantiles(x[, unit])`: log-linear buckets (see [`crate::quantile`]),
    /// stored as a histogram. `unit_ns`: nanoseconds per unit of x when x
    /// is a duration (only printing uses it), 0 for plain numbers.
    Quantiles {
        unit_ns: u32,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// Declare or assign a local.
    SetLocal(LocalId, Expr),
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `for var in 0..count { body }`, unrolled.
    Repeat {
        var: LocalId,
        start: i64,
        count: u32,
        body: Vec<Stmt>,
    },
    /// `m[key] = value` on a value map.
    MapStore {
        map: MapId,
        key: Vec<Expr>,
        value: Expr,
    },
    /// `m[key] += value` (and other compound ops) on a value map: read-modify-write.
    MapUpdate {
        map: MapId,
        key: Vec<Expr>,
        op: BinOp,
        value: Expr,
    },
    /// `m[key] = count()` and friends.
    Aggregate {
        map: MapId,
        key: Vec<Expr>,
        op: AggOp,
        value: Option<Expr>,
    },
    MapDelete {
        map: MapId,
        key: Vec<Expr>,
    },
    /// Send a fixed-size control message `{kind, probe, arg}` on the control
    /// ring. A failed reserve adds 1 to the second `u64` of slot `probe` of the
    /// per-CPU `lost` array (the first counts lost records, see `Emit`).
    Control {
        ring: MapId,
        lost: MapId,
        kind: u32,
        probe: u32,
        arg: Expr,
    },
    /// Send the record `{u32 site, u32 0, fields...}` (each field in its
    /// 8-aligned slot) to the `ring` buffer for userspace. Wake-ups are batched:
    /// the reader is only woken once `wake_bytes` are pending (it also polls on
    /// a timer), or at once when slot 0 of the one-slot array `wake` is
    /// non-zero: the reader raised it before going to sleep, and the first
    /// record after that lowers it and wakes the reader (one wake-up per
    /// sleep). A failed send adds 1 to slot `probe` of the `lost` array.
    Emit {
        ring: MapId,
        lost: MapId,
        wake: Option<MapId>,
        site: u32,
        probe: u32,
        fields: Vec<Expr>,
        wake_bytes: u32,
    },
    /// An action at the event (`signal()`, `deny()`): first an audit
    /// message on the control `ring` (a [`crate::record::CONTROL_ACTION`]
    /// with `code` and the current task; a full ring adds 1 to the control
    /// count of slot `probe` of `lost`), then, when `perform`, the action.
    /// A deny leaves the program either way (returning 0 when not performed).
    Act {
        action: KernelAction,
        ring: MapId,
        lost: MapId,
        probe: u32,
        code: i64,
        perform: bool,
    },
    /// Leave the program.
    Return,
}

/// What a kernel action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelAction {
    /// Send this signal to the current process (`bpf_send_signal`: it is
    /// delivered on the way back to user space).
    Signal(u32),
    /// Return `-errno` from the program: an LSM hook's operation fails.
    Deny(u32),
    /// Return this value from an `fmod_ret` program: the kernel function
    /// is not run and returns it instead.
    Override(i16),
}

impl KernelAction {
    /// What the program returns when the action is taken (`None`: the
    /// program goes on).
    pub fn program_return(self) -> Option<i32> {
        match self {
            KernelAction::Signal(_) => None,
            KernelAction::Deny(errno) => Some(-(errno as i32)),
            KernelAction::Override(value) => Some(value as i32),
        }
    }
}

/// How a map is stored, as far as generated code is concerned.
#[derive(Clone, Debug, PartialEq)]
pub struct MapLayout {
    /// Type of each key part; empty for a keyless map (`total = count()`).
    pub key: Vec<Ty>,
    pub value: ValueKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A plain value map (`m[k] = v`, `m[k] += v`): one slot of this type.
    Value(Ty),
    /// An aggregation, stored per CPU.
    Agg(AggKind),
    /// A BPF ring buffer (records and control messages).
    RingBuf,
    /// A stack trace map holding up to `depth` frames per stack.
    StackTrace { depth: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggKind {
    /// count(), sum(): one i64.
    Sum,
    /// min()/max(): { i64 value, u64 seen }.
    Min,
    Max,
    /// avg()/stats(): { u64 count, i64 total }.
    Avg,
    /// hist()/lhist()/quantiles(): the key gets one more u64 part, the bucket; value u64.
    Hist,
}

impl MapLayout {
    /// Key size in bytes as the map is created (keyless maps use a u32 0 key).
    pub fn key_size(&self) -> u32 {
        let parts: u32 = self.key.iter().map(Ty::slot_size).sum();
        match self.value {
            ValueKind::Agg(AggKind::Hist) => parts + 8,
            ValueKind::RingBuf => 0,
            ValueKind::StackTrace { .. } => 4,
            _ if self.key.is_empty() => 4,
            _ => parts,
        }
    }
    pub fn value_size(&self) -> u32 {
        match self.value {
            ValueKind::Value(ty) => ty.slot_size(),
            ValueKind::Agg(AggKind::Sum) | ValueKind::Agg(AggKind::Hist) => 8,
            ValueKind::Agg(_) => 16,
            ValueKind::RingBuf => 0,
            ValueKind::StackTrace { depth } => depth * 8,
        }
    }
    /// Keyless aggregations (other than histograms) are single-slot per-CPU
    /// arrays; everything else is a hash.
    pub fn is_array(&self) -> bool {
        self.key.is_empty() && matches!(self.value, ValueKind::Agg(k) if k != AggKind::Hist)
    }
    pub fn is_percpu(&self) -> bool {
        matches!(self.value, ValueKind::Agg(_))
    }
}

/// One probe's kernel program, ready for code generation.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub context: ContextKind,
    /// Types of locals, indexed by `LocalId`.
    pub locals: Vec<Ty>,
    /// Layouts of the maps the program may reference, indexed by `MapId`
    /// (shared by all programs of one script).
    pub maps: Vec<MapLayout>,
    pub body: Vec<Stmt>,
    /// CPUs a per-CPU map has a slot for: reading an aggregation in the
    /// kernel combines all of them (0 is taken as 1).
    pub possible_cpus: u32,
    /// `-k`/`-kk`: count failed helper calls per call site. `None`: no
    /// check, and not one instruction more.
    pub helper_checks: Option<HelperChecks>,
    /// Integer arithmetic as Rhai does it: an overflow or a division by zero
    /// stops the program and sends a [`crate::record::CONTROL_ERROR`]
    /// message `(ring, lost, probe)`. `None`: wrapping, as the hardware.
    pub arith_errors: Option<(MapId, MapId, u32)>,
}

/// Which helper calls a program checks, and where it counts their failures:
/// after a checked call, a negative result adds 1 to the count of the call
/// site's slot in the per-CPU array `map` and keeps the error there (the
/// layout is in [`crate::record`]); the sites are listed in
/// `Generated::helper_sites`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperChecks {
    pub map: MapId,
    /// The slot of this program's first checked call (programs of one
    /// script share the map, each from its own first slot).
    pub first_slot: u32,
    /// `-kk`: memory reads (`probe_read_*`) are checked too; `-k` leaves
    /// them out (bpftrace: a read that fails is usually a page not
    /// present, not a script bug).
    pub reads: bool,
}
