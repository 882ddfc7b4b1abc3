//! Loading programs into the kernel and attaching them. Each probe type is
//! one small module implementing [`ProbeType`]: how its spec expands to
//! attach points, what its programs' context is, and how to attach.

pub mod kernel_function;
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

use crate::kernel::link::{Attachment, LoadAttrs};
use spec::{ProbeKind, ProbeSpec};

/// One place a program attaches to.
#[derive(Clone, Debug)]
pub struct AttachPoint {
    /// Full probe name as bpftrace prints it (`tracepoint:syscalls:sys_enter_read`).
    pub name: String,
    pub target: Target,
}

#[derive(Clone, Debug)]
pub enum Target {
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
    /// kprobe/kretprobe/fentry/fexit on a kernel function.
    KernelFunction {
        function: String,
        ret: bool,
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

/// What rtrace needs to know about one kind of probe.
pub trait ProbeType: Sync {
    /// Program type for `bpf_prog_load`.
    fn prog_type(&self) -> u32;
    fn context(&self) -> ContextKind;
    /// Expand wildcards in the spec's target into attach points.
    fn expand(&self, spec: &ProbeSpec) -> Result<Vec<AttachPoint>>;
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment>;
    /// Each attach point needs a program of its own (BTF-attached programs).
    fn program_per_point(&self) -> bool {
        false
    }
    /// Extra load attributes for the program of `point`.
    fn load_attrs(&self, _point: &AttachPoint) -> Result<LoadAttrs> {
        Ok(LoadAttrs::default())
    }
    /// BTF-typed arguments at `point`, for `e.args.NAME`.
    fn btf_args(&self, _point: &AttachPoint) -> Option<Vec<crate::kernel::btf::Param>> {
        None
    }
    /// BTF type of the return value at `point` (fexit), for `e.retval`.
    fn btf_return(&self, _point: &AttachPoint) -> Option<u32> {
        None
    }
    /// Program type at `point`, where it depends on the point.
    fn prog_type_at(&self, _point: &AttachPoint) -> u32 {
        self.prog_type()
    }
    /// Program context at `point`, where it depends on the point.
    fn context_at(&self, _point: &AttachPoint) -> ContextKind {
        self.context()
    }
}

/// One probe type: its name and aliases as bpftrace spells them, and the
/// module that answers for it.
pub struct TypeEntry {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub kind: ProbeKind,
    /// Spelled `TYPE:target` and listed by `-l` (not BEGIN/END).
    pub listed: bool,
    pub imp: &'static dyn ProbeType,
}

const fn entry(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: ProbeKind,
    imp: &'static dyn ProbeType,
) -> TypeEntry {
    TypeEntry { name, aliases, kind, listed: true, imp }
}

/// The probe types, in bpftrace's order: the one list that specs, `-l` and
/// compile use.
pub static TYPES: &[TypeEntry] = &[
    TypeEntry { name: "BEGIN", aliases: &[], kind: ProbeKind::Begin, listed: false, imp: &special::Special },
    TypeEntry { name: "END", aliases: &[], kind: ProbeKind::End, listed: false, imp: &special::Special },
    entry("tracepoint", &["t"], ProbeKind::Tracepoint, &tracepoint::Tracepoint),
    entry("rawtracepoint", &["rt"], ProbeKind::RawTracepoint, &rawtracepoint::RawTracepoint),
    entry("tp_btf", &["btf"], ProbeKind::TpBtf, &tp_btf::TpBtf),
    entry("kprobe", &["k"], ProbeKind::Kprobe, &kernel_function::KPROBE),
    entry("kretprobe", &["kr"], ProbeKind::Kretprobe, &kernel_function::KRETPROBE),
    entry("fentry", &["f", "kfunc"], ProbeKind::Fentry, &kernel_function::FENTRY),
    entry("fexit", &["fr", "kretfunc"], ProbeKind::Fexit, &kernel_function::FEXIT),
    entry("uprobe", &["u"], ProbeKind::Uprobe, &uprobe::UPROBE),
    entry("uretprobe", &["ur"], ProbeKind::Uretprobe, &uprobe::URETPROBE),
    entry("usdt", &["U"], ProbeKind::Usdt, &usdt::Usdt),
    entry("profile", &["p"], ProbeKind::Profile, &perf_event::PROFILE),
    entry("interval", &["i"], ProbeKind::Interval, &perf_event::INTERVAL),
    entry("software", &["s"], ProbeKind::Software, &perf_event::SOFTWARE),
    entry("hardware", &["h"], ProbeKind::Hardware, &perf_event::HARDWARE),
];

/// The implementation for a probe kind.
pub fn probe_type(kind: ProbeKind) -> &'static dyn ProbeType {
    TYPES.iter().find(|t| t.kind == kind).map(|t| t.imp).unwrap_or(&special::Special)
}

/// The most probes one script may attach after wildcard expansion
/// (env `RTRACE_MAX_PROBES`, default 1024).
pub fn max_probes() -> usize {
    std::env::var("RTRACE_MAX_PROBES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024)
}

static TARGET_PID: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// The process given with `-p` (or started with `-c`): uprobes attach to it
/// only and every probe filters on it.
pub fn target_pid() -> Option<i32> {
    TARGET_PID.get().copied()
}

pub fn set_target_pid(pid: i32) {
    let _ = TARGET_PID.set(pid);
}

static FOLLOW_CHILDREN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// `-c`: processes the command starts (at any depth) are traced too.
pub fn follow_children() -> bool {
    FOLLOW_CHILDREN.get().copied().unwrap_or(false)
}

pub fn set_follow_children() {
    let _ = FOLLOW_CHILDREN.set(true);
}
