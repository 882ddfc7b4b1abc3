//! Everything rtrace asks of the running kernel, and the only code that
//! talks to it directly: the raw bpf/perf system calls and feature probes
//! (`sys`), attachments (`link`), verifier logs (`verifier`), tracefs and
//! tracepoint formats, BTF, kernel symbols and the machine's register
//! layout (`arch`). Nothing here imports another rtrace folder except `util`.

pub mod arch;
pub mod btf;
mod btf_lazy;
pub mod btf_print;
#[cfg(test)]
pub mod fake;
#[cfg(test)]
pub mod fake_btf;
pub mod functions;
pub mod introspect;
pub mod link;
pub mod sys;
pub mod syscalls;
pub mod tracefs;
pub mod tracepoint_format;
pub mod verifier;

use anyhow::Result;

use btf::BtfTypes;
use functions::KernelFunction;
use tracepoint_format::TracepointFormat;

/// What compile (and the probe types, while expanding specs and deciding
/// programs) ask of the kernel: tracepoints and their formats, raw
/// tracepoints, kernel functions, kernel types (BTF), feature probes.
/// [`LiveKernel`] asks the running kernel; [`fake::FakeKernel`] answers
/// from fixtures, so the compiler runs without root and gives the same
/// answers on every machine.
pub trait Kernel: Sync {
    /// A tracepoint's parsed format; an unknown one is a one-line error
    /// with close names.
    fn tracepoint_format(&self, category: &str, name: &str) -> Result<TracepointFormat>;
    /// Whether tracepoint `category:name` exists.
    fn tracepoint_exists(&self, category: &str, name: &str) -> Result<bool>;
    /// The event names of one category (empty when it does not exist).
    fn category_events(&self, category: &str) -> Result<Vec<String>>;
    /// All tracepoints as sorted (category, name) pairs.
    fn tracepoints(&self) -> Result<&[(String, String)]>;
    /// Raw tracepoint names, sorted.
    fn raw_tracepoints(&self) -> Result<&[String]>;
    /// Traceable kernel functions (modules included), sorted by name.
    fn kernel_functions(&self) -> &[KernelFunction];
    /// fentry/fexit programs load on this kernel.
    fn fentry_available(&self) -> bool;
    /// An fentry/fexit program on `function` loads (its arguments fit a
    /// trampoline, its address is known): asked once per function.
    fn trampoline_loads(&self, function: &str) -> bool;
    /// The kprobe PMU exists (CONFIG_KPROBES).
    fn kprobes_available(&self) -> bool;
    /// Why BPF LSM programs (`lsm:` probes) can't run here; None when they can.
    fn bpf_lsm_refused(&self) -> Option<String>;
    /// The kernel's types; None when it has no BTF.
    fn btf(&self) -> Option<&dyn BtfTypes>;
    /// CPUs a per-CPU map has a slot for (kernel reads of aggregations combine them).
    fn possible_cpus(&self) -> u32;
}

/// The running kernel.
pub struct LiveKernel;

impl Kernel for LiveKernel {
    fn tracepoint_format(&self, category: &str, name: &str) -> Result<TracepointFormat> {
        tracefs::read_format(category, name)
    }
    fn tracepoint_exists(&self, category: &str, name: &str) -> Result<bool> {
        Ok(tracefs::event_exists(&tracefs::tracefs_root()?, category, name))
    }
    fn category_events(&self, category: &str) -> Result<Vec<String>> {
        Ok(tracefs::events_in_category(&tracefs::tracefs_root()?, category))
    }
    fn tracepoints(&self) -> Result<&[(String, String)]> {
        Ok(tracefs::tracepoints()?)
    }
    fn raw_tracepoints(&self) -> Result<&[String]> {
        Ok(tracefs::raw_tracepoints()?)
    }
    fn kernel_functions(&self) -> &[KernelFunction] {
        functions::kernel_functions()
    }
    fn fentry_available(&self) -> bool {
        sys::fentry_available()
    }
    fn trampoline_loads(&self, function: &str) -> bool {
        sys::trampoline_loads(function)
    }
    fn kprobes_available(&self) -> bool {
        sys::kprobes_available()
    }
    fn bpf_lsm_refused(&self) -> Option<String> {
        sys::bpf_lsm_refused()
    }
    fn btf(&self) -> Option<&dyn BtfTypes> {
        btf_lazy::types()
    }
    fn possible_cpus(&self) -> u32 {
        libbpf_rs::num_possible_cpus().map_or(1, |n| n as u32)
    }
}
