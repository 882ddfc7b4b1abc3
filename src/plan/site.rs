//! What compile tells the runtime about values: the userspace sites (runs
//! of statements that run in userspace, with the record fields the kernel
//! ships for them), what a value means when printed (`ValueMeaning`), and
//! each map's final shape.

use probes_ebpf::ir::{AggOp, MapId, MapLayout, Span, Ty, ValueKind};
use rhai::Stmt as RStmt;

/// What one field of a userspace record holds.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordField {
    /// `e.pid` (`["pid"]`), `e.args.filename` (`["args", "filename"]`).
    Event(Vec<String>),
    /// A kernel `let` value: its name and its position in `Site::scope`.
    Local {
        name: String,
        slot: usize,
    },
    /// One value given to `emit()`.
    Emitted,
    /// Element `index` of a `char **` field (`e.args.argv`), shipped as strings.
    EventItem {
        path: Vec<String>,
        index: usize,
    },
    /// The string a `str(ptr)` call at `line:col` of a userspace statement
    /// reads: memory only the probe can read, so the kernel reads it.
    Read {
        line: u32,
        col: u32,
    },
    /// `kptr(v, "struct T").a.b` in a userspace statement (occurrence `id`):
    /// the value `v` the kernel cast, and the member it read there, so that
    /// userspace's `kptr(v, T)` answers with that member.
    KptrBase {
        id: usize,
        ty: String,
    },
    KptrMember {
        id: usize,
        path: Vec<String>,
    },
    /// The value of `m[k]` at `line:col` of a userspace statement whose key
    /// is a kernel value, read by the kernel at that point of the event.
    MapRead {
        line: u32,
        col: u32,
    },
    /// Which event a record belongs to (0: the CPU, 1: the event's time),
    /// when a probe's userspace statements may run more than once per event.
    EventKey(u8),
}

/// A run of consecutive userspace statements, and the values the kernel
/// ships for them in the record.
#[derive(Clone, Debug)]
pub struct Site {
    pub id: u32,
    pub stmts: Vec<RStmt>,
    pub fields: Vec<(RecordField, Ty)>,
    /// How each field prints, parallel to `fields`.
    pub sems: Vec<ValueMeaning>,
    /// Names of the closure's local variables visible at the site, in the
    /// order Rhai's scope holds them (after the parameters); compiled Rhai
    /// code finds variables by position, so the runtime rebuilds this order.
    pub scope: Vec<String>,
    /// Per entry of `scope`: which declaration it is (an id unique within
    /// the closure), and whether it is a kernel local (its value may come
    /// in the record) or a userspace one.
    pub decls: Vec<(u32, bool)>,
    /// The declarations the run's own top-level `let`s make, in order.
    pub own: Vec<u32>,
    /// Records carry [`RecordField::EventKey`]: userspace keeps the event's
    /// variables from one run of statements to the next.
    pub carry: bool,
    /// `line:col` of the first statement.
    pub at: String,
    /// An `emit()`: the fields go to the probe's `.on_event` callback instead
    /// of running `stmts`.
    pub emit: bool,
    /// `emit([a, b])`: the callback gets an array.
    pub emit_array: bool,
}

/// Where one statement of a probe closure runs, for `--explain`.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub at: Span,
    /// Nesting inside kernel `if`s, `for`s and blocks.
    pub depth: u32,
    /// `None`: in the kernel; `Some(why)`: in userspace, and why.
    pub userspace: Option<String>,
}

/// What an integer value means beyond its bits, for printing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueMeaning {
    Plain,
    /// A stack id in stack map `map` (user stacks carry the pid too).
    Stack {
        map: MapId,
        user: bool,
        mode: crate::symbols::stacks::StackMode,
    },
    /// A kernel address shown as its function name.
    Ksym,
    /// A number shown as its name (`syscall_name(n)`, `errno_name(n)` ...).
    Name(crate::util::names::NameTable),
    /// A boolean (0 or 1 in the kernel; `true`/`false` in userspace).
    Bool,
    /// `buf(ptr, len)`: a length and bytes, shown hex-escaped in userspace.
    Buf,
    /// A pointer (a tracepoint field or BTF member of pointer type,
    /// `e.curtask`): map keys and values print it in hex.
    Ptr,
}

/// A map's final shape.
#[derive(Clone, Debug, PartialEq)]
pub struct MapShape {
    pub layout: MapLayout,
    /// How each key part prints.
    pub key_sems: Vec<ValueMeaning>,
    /// How a plain value (`m[k] = v`) prints: a `buf()` escaped, a pointer
    /// in hex.
    pub value_meaning: ValueMeaning,
    /// The aggregation stored, if any (decides how values print).
    pub agg: Option<AggOp>,
    /// A probe that runs with interrupts off (perf events, irq and timer
    /// tracepoints) writes it: its entries are allocated when the map is
    /// created, since on-demand allocation there keeps only one spare entry
    /// per CPU and later inserts of the same firing would fail.
    pub prealloc: bool,
}

impl MapShape {
    /// The shape of a map no probe touches.
    pub fn unused() -> MapShape {
        MapShape {
            layout: MapLayout { key: vec![Ty::Int], value: ValueKind::Value(Ty::Int) },
            key_sems: vec![ValueMeaning::Plain],
            value_meaning: ValueMeaning::Plain,
            agg: None,
            prealloc: false,
        }
    }
}
