//! The names a probe closure may use beyond plain Rhai, one row each: the
//! event's fields (`e.pid` ...), the aggregations (`count()` ...) and the
//! kernel built-in calls (`str()`, `ksym()` ...). The call checker
//! (`script/calls.rs`), the split (`compile/split.rs`), lowering
//! (`compile/event.rs`, `compile/lower/`) and the userspace stand-ins
//! (`script/api.rs`) all read these rows, so they can't disagree on what
//! exists, how many arguments it takes, where it may run and what it gives.
//! Lowering matches each row's enum exhaustively: a new row doesn't compile
//! until it is lowered.

pub use crate::util::names::NameTable;

/// What a value is, as far as the split needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    Str,
    /// A pointer into a BTF struct: members can be read.
    Pointer,
    /// Known only once lowered (a map value, a buffer).
    Any,
}

// ---------------------------------------------------------------------------
// Event fields

/// An event field, `e.NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Pid,
    Tid,
    Uid,
    Gid,
    Comm,
    Cpu,
    Nsecs,
    Elapsed,
    Cgroup,
    Rand,
    Probe,
    Func,
    Retval,
    Curtask,
    Args,
    Kstack,
    Ustack,
    /// `e.jiffies`: the kernel's jiffies counter (bpf_jiffies64).
    Jiffies,
    /// `e.usermode`: 1 when the event interrupted user mode, else 0.
    Usermode,
    /// `e.ns_pid` / `e.ns_tid`: the process and thread id as the task's own
    /// (innermost) pid namespace numbers them.
    NsPid,
    NsTid,
    /// `e.arg0`, `e.arg1` ...: the probe type's positional arguments.
    Arg(u32),
}

/// One event field's row.
pub struct FieldRow {
    pub name: &'static str,
    pub field: Field,
    /// Its kind as the split sees it (`e.args.X` has its own per field).
    pub kind: Kind,
    /// Shipped with every whole `e` that reaches userspace.
    pub common: bool,
    /// Read from the clock or the random source: one value per event,
    /// however often the closure reads it.
    pub once_per_event: bool,
    /// Differs between the attach points of one probe (a program per point).
    pub per_point: bool,
}

const fn field(name: &'static str, field: Field, kind: Kind) -> FieldRow {
    FieldRow { name, field, kind, common: false, once_per_event: false, per_point: false }
}

const fn common(mut r: FieldRow) -> FieldRow {
    r.common = true;
    r
}

const fn once(mut r: FieldRow) -> FieldRow {
    r.once_per_event = true;
    r
}

const fn per_point(mut r: FieldRow) -> FieldRow {
    r.per_point = true;
    r
}

/// Every named event field (`e.argN` is [`event_field`]'s pattern).
pub const FIELDS: &[FieldRow] = &[
    common(field("pid", Field::Pid, Kind::Int)),
    common(field("tid", Field::Tid, Kind::Int)),
    common(field("uid", Field::Uid, Kind::Int)),
    common(field("gid", Field::Gid, Kind::Int)),
    common(field("comm", Field::Comm, Kind::Str)),
    common(field("cpu", Field::Cpu, Kind::Int)),
    common(once(field("nsecs", Field::Nsecs, Kind::Int))),
    once(field("elapsed", Field::Elapsed, Kind::Int)),
    field("cgroup", Field::Cgroup, Kind::Int),
    once(field("rand", Field::Rand, Kind::Int)),
    per_point(field("probe", Field::Probe, Kind::Str)),
    per_point(field("func", Field::Func, Kind::Str)),
    field("retval", Field::Retval, Kind::Int),
    field("curtask", Field::Curtask, Kind::Pointer),
    per_point(field("args", Field::Args, Kind::Pointer)),
    field("kstack", Field::Kstack, Kind::Int),
    field("ustack", Field::Ustack, Kind::Int),
    field("jiffies", Field::Jiffies, Kind::Int),
    field("usermode", Field::Usermode, Kind::Int),
    field("ns_pid", Field::NsPid, Kind::Int),
    field("ns_tid", Field::NsTid, Kind::Int),
];

const ARG: FieldRow = field("argN", Field::Arg(0), Kind::Int);

/// The row of `e.NAME`, `e.argN` included.
pub fn event_field(name: &str) -> Option<(Field, &'static FieldRow)> {
    if let Some(r) = FIELDS.iter().find(|r| r.name == name) {
        return Some((r.field, r));
    }
    let n: u32 = name.strip_prefix("arg")?.parse().ok()?;
    Some((Field::Arg(n), &ARG))
}

/// The field names, for messages and hints.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|r| r.name)
}

/// `e.kstack` / `e.ustack` (also called as methods: `e.kstack(5)`).
pub fn is_stack(name: &str) -> bool {
    matches!(event_field(name), Some((Field::Kstack | Field::Ustack, _)))
}

// ---------------------------------------------------------------------------
// Aggregations

/// An aggregation, the right side of a map assignment in a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Stats,
    Hist,
    Lhist,
    Quantiles,
}

/// One aggregation's row.
pub struct AggregationRow {
    pub name: &'static str,
    pub aggregation: Aggregation,
    /// The argument counts it takes.
    pub arities: &'static [usize],
    /// Rhai has a function of this name too (`min(a, b)`): only the
    /// aggregation's own arities are the aggregation.
    pub shares_rhai_name: bool,
}

const fn agg(name: &'static str, aggregation: Aggregation, arities: &'static [usize]) -> AggregationRow {
    AggregationRow { name, aggregation, arities, shares_rhai_name: false }
}

/// Every aggregation.
pub const AGGREGATIONS: &[AggregationRow] = &[
    agg("count", Aggregation::Count, &[0]),
    agg("sum", Aggregation::Sum, &[1]),
    AggregationRow { shares_rhai_name: true, ..agg("min", Aggregation::Min, &[1]) },
    AggregationRow { shares_rhai_name: true, ..agg("max", Aggregation::Max, &[1]) },
    agg("avg", Aggregation::Avg, &[1]),
    agg("stats", Aggregation::Stats, &[1]),
    agg("hist", Aggregation::Hist, &[1, 2]),
    agg("lhist", Aggregation::Lhist, &[4]),
    agg("quantiles", Aggregation::Quantiles, &[1, 2]),
];

/// The row of the aggregation `name`.
pub fn aggregation(name: &str) -> Option<&'static AggregationRow> {
    AGGREGATIONS.iter().find(|r| r.name == name)
}

/// Whether `name` names an aggregation.
pub fn is_aggregation(name: &str) -> bool {
    aggregation(name).is_some()
}

// ---------------------------------------------------------------------------
// Kernel built-in calls

/// A built-in function a probe's kernel side lowers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `str(ptr[, len])`: a string read from memory (userspace: the string itself).
    Str,
    /// `ksym(addr)`: an address printed as a kernel symbol.
    Ksym,
    /// `uptr(p)`: a pointer to user memory.
    Uptr,
    /// `kptr(p)` / `kptr(v, "struct T")`: kernel memory, or a typed pointer.
    Kptr,
    /// `buf(ptr, len)`: bytes read from memory.
    Buf,
    /// `strncmp(a, b, n)`.
    Strncmp,
    /// `strcontains(haystack, needle)`.
    Strcontains,
    /// `emit(value)`: a record for the probe's `.on_event` callback.
    Emit,
    /// `exit([code])`.
    Exit,
    /// `signal(SIG)`: a signal to the process the event is in (`--unsafe`).
    Signal,
    /// `deny([ERRNO])`: an `lsm:` hook's operation fails (`--unsafe`).
    Deny,
    /// `override(VALUE)`: an `fmod_ret:` function returns VALUE, not run (`--unsafe`).
    Override,
    /// `print(m)`, `clear(m)`, `zero(m)` of a map.
    Print,
    Clear,
    Zero,
    /// `i8(x)` ... `u64(x)`: `x` cut to `bits` bits, sign- or zero-extended.
    Cast {
        bits: u8,
        signed: bool,
    },
    /// `ncpus()`: the number of possible CPUs, a constant.
    Ncpus,
    /// `syscall_name(n)`, `signal_name(n)`, `errno_name(n)`, `strerror(n)`:
    /// the kernel keeps the integer, which prints as the name; userspace
    /// gives the name.
    Name(NameTable),
}

/// Where a call may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// In the kernel only: a statement using it runs in the kernel.
    Kernel,
    /// In the kernel, and as a userspace function of the same meaning.
    Both,
}

/// One built-in call's row.
pub struct CallRow {
    pub name: &'static str,
    pub call: Call,
    pub arities: &'static [usize],
    pub runs: Runs,
    /// What it gives, for the split; `None`: a statement, not a value.
    pub gives: Option<Kind>,
}

const fn call(name: &'static str, call: Call, arities: &'static [usize], runs: Runs, gives: Option<Kind>) -> CallRow {
    CallRow { name, call, arities, runs, gives }
}

/// Every kernel built-in call.
pub const CALLS: &[CallRow] = &[
    call("str", Call::Str, &[1, 2], Runs::Both, Some(Kind::Str)),
    call("ksym", Call::Ksym, &[1], Runs::Both, Some(Kind::Int)),
    call("uptr", Call::Uptr, &[1], Runs::Both, Some(Kind::Int)),
    call("kptr", Call::Kptr, &[1, 2], Runs::Both, Some(Kind::Pointer)),
    call("buf", Call::Buf, &[2], Runs::Kernel, Some(Kind::Any)),
    call("strncmp", Call::Strncmp, &[3], Runs::Both, Some(Kind::Int)),
    call("strcontains", Call::Strcontains, &[2], Runs::Both, Some(Kind::Int)),
    call("emit", Call::Emit, &[1], Runs::Kernel, None),
    call("exit", Call::Exit, &[0, 1], Runs::Both, None),
    call("signal", Call::Signal, &[1], Runs::Kernel, None),
    call("deny", Call::Deny, &[0, 1], Runs::Kernel, None),
    call("override", Call::Override, &[1], Runs::Kernel, None),
    call("print", Call::Print, &[1], Runs::Both, None),
    call("clear", Call::Clear, &[1], Runs::Both, None),
    call("zero", Call::Zero, &[1], Runs::Both, None),
    call("i8", Call::Cast { bits: 8, signed: true }, &[1], Runs::Both, Some(Kind::Int)),
    call("i16", Call::Cast { bits: 16, signed: true }, &[1], Runs::Both, Some(Kind::Int)),
    call("i32", Call::Cast { bits: 32, signed: true }, &[1], Runs::Both, Some(Kind::Int)),
    call("i64", Call::Cast { bits: 64, signed: true }, &[1], Runs::Both, Some(Kind::Int)),
    call("u8", Call::Cast { bits: 8, signed: false }, &[1], Runs::Both, Some(Kind::Int)),
    call("u16", Call::Cast { bits: 16, signed: false }, &[1], Runs::Both, Some(Kind::Int)),
    call("u32", Call::Cast { bits: 32, signed: false }, &[1], Runs::Both, Some(Kind::Int)),
    call("u64", Call::Cast { bits: 64, signed: false }, &[1], Runs::Both, Some(Kind::Int)),
    call("ncpus", Call::Ncpus, &[0], Runs::Both, Some(Kind::Int)),
    // Kind::Int as for ksym(): the kernel holds the number (it prints as the name).
    call("syscall_name", Call::Name(NameTable::Syscall), &[1], Runs::Both, Some(Kind::Int)),
    call("signal_name", Call::Name(NameTable::Signal), &[1], Runs::Both, Some(Kind::Int)),
    call("errno_name", Call::Name(NameTable::Errno), &[1], Runs::Both, Some(Kind::Int)),
    call("strerror", Call::Name(NameTable::Strerror), &[1], Runs::Both, Some(Kind::Int)),
];

impl CallRow {
    /// A statement only the kernel can do (`emit()`): the statement holding it runs there.
    pub fn kernel_only_statement(&self) -> bool {
        self.runs == Runs::Kernel && self.gives.is_none()
    }
}

/// The row of the built-in call `name`.
pub fn builtin_call(name: &str) -> Option<&'static CallRow> {
    CALLS.iter().find(|r| r.name == name)
}

/// The built-in `name` called with `args` arguments, when it takes that many.
pub fn builtin_call_with(name: &str, args: usize) -> Option<Call> {
    builtin_call(name).filter(|r| r.arities.contains(&args)).map(|r| r.call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_within_and_across_tables() {
        let mut names: Vec<&str> = FIELDS.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FIELDS.len());
        for a in AGGREGATIONS {
            assert!(builtin_call(a.name).is_none(), "{} is a call and an aggregation", a.name);
            assert_eq!(AGGREGATIONS.iter().filter(|b| b.name == a.name).count(), 1);
        }
        for c in CALLS {
            assert_eq!(CALLS.iter().filter(|d| d.name == c.name).count(), 1);
        }
    }

    #[test]
    fn positional_arguments_are_a_pattern() {
        assert_eq!(event_field("arg0").map(|f| f.0), Some(Field::Arg(0)));
        assert_eq!(event_field("arg11").map(|f| f.0), Some(Field::Arg(11)));
        assert!(event_field("argx").is_none());
        assert!(event_field("arg").is_none());
        assert!(is_stack("kstack") && is_stack("ustack") && !is_stack("comm"));
    }
}
