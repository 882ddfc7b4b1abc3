//! `--info`: what this kernel offers rtrace — each probe type and why one is
//! missing, kernel BTF, the BPF ring buffer and stack maps, a few helpers,
//! and whether this process may load programs. Like `bpftrace --info`.

use anyhow::Result;

use crate::kernel::introspect::{self as k, helper_supported as helper, map_type_supported as map_type};
use crate::kernel::{sys, tracefs};

const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// One line: `  NAME: yes` or `  NAME: no (why)`.
fn line(name: &str, result: Result<(), String>) -> String {
    match result {
        Ok(()) => format!("  {name}: yes"),
        Err(why) => format!("  {name}: no ({why})"),
    }
}

fn exists(path: &str, why: &str) -> Result<(), String> {
    if std::path::Path::new(path).exists() {
        Ok(())
    } else {
        Err(why.to_string())
    }
}

fn kernel_release() -> String {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let bytes: Vec<u8> = u.release.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn tracepoints() -> Result<(), String> {
    match tracefs::tracefs_root() {
        Ok(root) if root.join("events").is_dir() => Ok(()),
        Ok(root) => Err(format!("{} has no events directory", root.display())),
        Err(e) => Err(format!("{e:#}")),
    }
}

fn software_events() -> Result<(), String> {
    sys::open(sys::PERF_TYPE_SOFTWARE, 0, 1_000_000, -1, 0).map(drop).map_err(|e| format!("perf_event_open: {e}"))
}

fn hardware_events() -> Result<(), String> {
    sys::open(sys::PERF_TYPE_HARDWARE, 0, 1_000_000, -1, 0)
        .map(drop)
        .map_err(|e| format!("no hardware performance counters: perf_event_open: {e}"))
}

fn btf() -> Result<(), String> {
    exists(VMLINUX_BTF, "no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF is off)")
}

fn kprobes() -> Result<(), String> {
    if sys::kprobes_available() {
        return Ok(());
    }
    let instead = if sys::fentry_available() { "; fentry/fexit are used instead" } else { "" };
    Err(format!("CONFIG_KPROBES is off: no kprobe PMU{instead}"))
}

fn fentry() -> Result<(), String> {
    if btf().is_err() {
        return Err("needs kernel BTF".into());
    }
    if sys::fentry_available() {
        Ok(())
    } else {
        Err("the kernel refuses BPF trampoline programs".into())
    }
}

fn privileges() -> Result<(), String> {
    super::check_privileges().map_err(|e| e.to_string())
}

/// The report, one fact a line.
pub fn report() -> Vec<String> {
    let kp = sys::BPF_PROG_TYPE_KPROBE;
    let mut out = vec![
        "System".to_string(),
        format!("  kernel: {}", kernel_release()),
        line("privileges to load BPF", privileges()),
        line("kernel BTF", btf()),
        line("tracefs", tracepoints().map_err(|_| "not mounted and cannot be mounted".to_string())),
        "Maps".to_string(),
        line("ring buffer", map_type(k::BPF_MAP_TYPE_RINGBUF)),
        line("stack trace", map_type(k::BPF_MAP_TYPE_STACK_TRACE)),
        line("per-CPU hash", map_type(k::BPF_MAP_TYPE_PERCPU_HASH)),
        line("LRU hash", map_type(k::BPF_MAP_TYPE_LRU_HASH)),
        "Probe types".to_string(),
        line("tracepoint", tracepoints()),
        line("rawtracepoint", tracepoints()),
        line("tp_btf", btf()),
        line("kprobe/kretprobe", kprobes()),
        line("fentry/fexit", fentry()),
        line("lsm", sys::bpf_lsm_refused().map_or(Ok(()), Err)),
        line("uprobe/uretprobe", exists(UPROBE_PMU, "CONFIG_UPROBES is off: no uprobe PMU")),
        line("usdt", exists(UPROBE_PMU, "needs uprobes")),
        line("profile/interval/software", software_events()),
        line("hardware", hardware_events()),
        "Helpers (tracing programs)".to_string(),
        line("probe_read_kernel", helper(kp, k::BPF_FUNC_PROBE_READ_KERNEL)),
        line("probe_read_user_str", helper(kp, k::BPF_FUNC_PROBE_READ_USER_STR)),
        line("get_stackid", helper(kp, k::BPF_FUNC_GET_STACKID)),
        line("ringbuf_reserve", helper(kp, k::BPF_FUNC_RINGBUF_RESERVE)),
        line("get_current_task_btf", helper(sys::BPF_PROG_TYPE_TRACING, k::BPF_FUNC_GET_CURRENT_TASK_BTF)),
        line("ktime_get_ns", helper(kp, k::BPF_FUNC_KTIME_GET_NS)),
    ];
    out.push(format!("rtrace {}", env!("CARGO_PKG_VERSION")));
    out
}

pub fn run() -> Result<i32> {
    let text: String = report().iter().map(|l| format!("{l}\n")).collect();
    Ok(crate::util::print_out(&text))
}
