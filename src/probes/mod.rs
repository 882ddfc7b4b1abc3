//! The probe types, each one module that answers for itself ([`ProbeType`]):
//! how a spec expands to attach points, the program for a point (program
//! type, context, load attributes, and the [`EventContext`] that resolves
//! `e.argN`, `e.args.X`, `e.retval` and `e.func`), and attaching. [`TYPES`]
//! is the one list of probe types and their implementations for `-l` and
//! compile; their spellings are in `spec::SPELLINGS`.

pub mod check;
pub mod event;
pub mod kernel_function;
pub mod listing;
pub mod lsm;
pub mod perf_event;
pub mod rawtracepoint;
pub mod spec;
pub mod special;
pub mod tp_btf;
pub mod tracepoint;
pub mod uprobe;
pub mod usdt;

use std::os::fd::BorrowedFd;

use anyhow::Result;
use probes_ebpf::ir::ContextKind;

use crate::config::Trace;
use crate::kernel::link::{Attachment, LoadAttrs};
use crate::kernel::Kernel;
pub use event::EventContext;
use spec::{ProbeKind, ProbeSpec};

/// One place a program attaches to.
#[derive(Clone, Debug)]
pub struct AttachPoint {
    /// Full probe name as bpftrace prints it (`tracepoint:syscalls:sys_enter_read`).
    pub name: String,
    pub target: AttachTarget,
}

#[derive(Clone, Debug)]
pub enum AttachTarget {
    Tracepoint {
        category: String,
        event: String,
    },
    RawTracepoint {
        event: String,
    },
    /// tp_btf: a raw tracepoint attached by its BTF prototype.
    BtfTracepoint {
        event: String,
    },
    /// profile/interval/software/hardware: a perf event type and config,
    /// sampled every `period` events or at `freq` Hz, on `cpus`.
    PerfEvent {
        type_: u32,
        config: u64,
        period: u64,
        freq: Option<u64>,
        cpus: Vec<i32>,
    },
    /// uprobe/uretprobe: a file and an offset into it.
    Uprobe {
        path: String,
        offset: u64,
        retprobe: bool,
        symbol: String,
    },
    /// kprobe/kretprobe/fentry/fexit on a kernel function; `offset` (a
    /// kprobe at `FN+OFF`) is bytes into it.
    KernelFunction {
        function: String,
        ret: bool,
        offset: u64,
    },
    /// lsm: a security hook (`file_open`), its program on `bpf_lsm_HOOK`.
    Lsm {
        hook: String,
    },
    /// usdt: a probe site at `offset` in `path`, its argument specs, and the
    /// file offset of its semaphore (0: none).
    Usdt {
        path: String,
        offset: u64,
        provider: String,
        name: String,
        args: Vec<usdt::UsdtArg>,
        semaphore: u64,
    },
}

/// How the program of one attach point (or of several sharing one
/// program) is loaded, and what it can read: decided once, by the probe type.
pub struct ProgramSpec {
    /// Program type for `bpf_prog_load`.
    pub prog_type: u32,
    pub context: ContextKind,
    /// Load attributes (BTF attach target); an error here is reported when
    /// the program is loaded, at the probe's position.
    pub load: Result<LoadAttrs, String>,
    pub event: Box<dyn EventContext>,
    /// The program runs with interrupts off (perf events, irq and timer
    /// tracepoints): the maps it writes are preallocated.
    pub irqs_off: bool,
    /// What the program's return value does.
    pub verdict: Verdict,
}

/// What a program's return value means to the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing: a tracing program.
    #[default]
    Ignored,
    /// An `lsm:` hook's answer: 0 lets the operation go on, `-errno` fails it.
    Errno,
    /// An `lsm:` hook that returns nothing: its operation can't be failed.
    Void,
    /// An `fmod_ret:` program's: 0 lets the function run, another value is
    /// returned in its place (the function is not run).
    Return,
}

impl ProgramSpec {
    pub fn new(prog_type: u32, context: ContextKind, event: impl EventContext + 'static) -> ProgramSpec {
        let irqs_off = context == ContextKind::PerfEvent;
        let load = Ok(LoadAttrs::default());
        ProgramSpec { prog_type, context, load, event: Box::new(event), irqs_off, verdict: Verdict::Ignored }
    }
}

/// What rtrace needs to know about one kind of probe. compile and runtime
/// only call these; only the module a [`AttachTarget`] variant is named after
/// looks inside it.
pub trait ProbeType: Sync {
    /// Expand wildcards in the spec's target into attach points.
    fn expand(&self, spec: &ProbeSpec, trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>>;
    /// Each of these points needs a program of its own (BTF-attached
    /// programs, USDT sites with different operands).
    fn per_point(&self, _points: &[AttachPoint], _k: &dyn Kernel) -> bool {
        false
    }
    /// The program for `point`; with `per_point` false the program is
    /// shared by every point of its spec, so only what they share is known
    /// (no tracepoint format, BTF arguments or function name).
    fn program(&self, point: &AttachPoint, per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec>;
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment>;
    /// Of several programs attached to one place, the kernel runs the one
    /// attached last first (uprobe consumers), so they attach in reverse to
    /// run in registration order.
    fn newest_runs_first(&self) -> bool {
        false
    }
    /// `-l`: the probes of this type that `q` matches, as bpftrace names
    /// them. Rates (profile, interval) and BEGIN/END list nothing.
    fn list(&self, _q: &listing::ListQuery, _k: &dyn Kernel) -> Result<listing::Listing> {
        Ok(listing::Listing::default())
    }
}

/// One probe type and the module that answers for it (its spelling is in
/// [`spec::SPELLINGS`]).
pub struct TypeEntry {
    pub kind: ProbeKind,
    /// Spelled `TYPE:target` and listed by `-l` (not BEGIN/END).
    pub listed: bool,
    pub imp: &'static dyn ProbeType,
}

impl TypeEntry {
    /// Its full name, as bpftrace spells it.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }
}

const fn entry(kind: ProbeKind, imp: &'static dyn ProbeType) -> TypeEntry {
    TypeEntry { kind, listed: true, imp }
}

/// The probe types, in bpftrace's order: the one list that `-l` and
/// compile use.
pub static TYPES: &[TypeEntry] = &[
    TypeEntry { kind: ProbeKind::Begin, listed: false, imp: &special::Special },
    TypeEntry { kind: ProbeKind::End, listed: false, imp: &special::Special },
    entry(ProbeKind::Tracepoint, &tracepoint::Tracepoint),
    entry(ProbeKind::RawTracepoint, &rawtracepoint::RawTracepoint),
    entry(ProbeKind::TpBtf, &tp_btf::TpBtf),
    entry(ProbeKind::Kprobe, &kernel_function::KPROBE),
    entry(ProbeKind::Kretprobe, &kernel_function::KRETPROBE),
    entry(ProbeKind::Fentry, &kernel_function::FENTRY),
    entry(ProbeKind::Fexit, &kernel_function::FEXIT),
    entry(ProbeKind::FmodRet, &kernel_function::FMOD_RET),
    entry(ProbeKind::Lsm, &lsm::Lsm),
    entry(ProbeKind::Uprobe, &uprobe::UPROBE),
    entry(ProbeKind::Uretprobe, &uprobe::URETPROBE),
    entry(ProbeKind::Usdt, &usdt::Usdt),
    entry(ProbeKind::Profile, &perf_event::PROFILE),
    entry(ProbeKind::Interval, &perf_event::INTERVAL),
    entry(ProbeKind::Software, &perf_event::SOFTWARE),
    entry(ProbeKind::Hardware, &perf_event::HARDWARE),
];

/// The implementation for a probe kind.
pub fn probe_type(kind: ProbeKind) -> &'static dyn ProbeType {
    TYPES.iter().find(|t| t.kind == kind).map(|t| t.imp).unwrap_or(&special::Special)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type that is spelled has one implementation, in the same
    /// (bpftrace's) order, and only BEGIN/END are left unlisted.
    #[test]
    fn each_spelled_type_has_its_implementation() {
        let spelled: Vec<ProbeKind> = spec::SPELLINGS.iter().map(|(kind, ..)| *kind).collect();
        let implemented: Vec<ProbeKind> = TYPES.iter().map(|t| t.kind).collect();
        assert_eq!(spelled, implemented);
        assert!(TYPES.iter().all(|t| t.listed != t.kind.is_userspace()));
        assert_eq!(spec::kind_named("kfunc"), Some(ProbeKind::Fentry));
        assert_eq!(spec::kind_named("BEGIN"), None, "BEGIN is not written TYPE:target");
    }
}
