//! Every raw bpf and perf system call rtrace makes, and the feature probes
//! built on them: `bpf_prog_load`, `bpf_map_create`,
//! `BPF_RAW_TRACEPOINT_OPEN`, `bpf_link_create`, `perf_event_open` and its
//! ioctls, and "does this kernel load fentry programs / have kprobes". The
//! rest of rtrace calls these typed functions and never libbpf_sys or the
//! syscall numbers itself.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use libbpf_rs::libbpf_sys;
use probes_ebpf::insn::{to_bytes, Insn};

use super::btf::BtfTypes;
use super::link::{Attachment, LoadAttrs};
use super::verifier::LoadError;

/// Program types (`enum bpf_prog_type`).
pub const BPF_PROG_TYPE_KPROBE: u32 = libbpf_sys::BPF_PROG_TYPE_KPROBE;
pub const BPF_PROG_TYPE_TRACEPOINT: u32 = libbpf_sys::BPF_PROG_TYPE_TRACEPOINT;
pub const BPF_PROG_TYPE_PERF_EVENT: u32 = libbpf_sys::BPF_PROG_TYPE_PERF_EVENT;
pub const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT;
pub const BPF_PROG_TYPE_TRACING: u32 = libbpf_sys::BPF_PROG_TYPE_TRACING;
pub const BPF_PROG_TYPE_LSM: u32 = libbpf_sys::BPF_PROG_TYPE_LSM;
pub const BPF_LSM_MAC: u32 = libbpf_sys::BPF_LSM_MAC;
/// Attach types of BTF-attached programs (`enum bpf_attach_type`).
pub const BPF_TRACE_RAW_TP: u32 = libbpf_sys::BPF_TRACE_RAW_TP;
pub const BPF_TRACE_FENTRY: u32 = libbpf_sys::BPF_TRACE_FENTRY;
pub const BPF_TRACE_FEXIT: u32 = libbpf_sys::BPF_TRACE_FEXIT;
pub const BPF_MODIFY_RETURN: u32 = libbpf_sys::BPF_MODIFY_RETURN;
/// `bpf_map_create` flag: allocate hash entries on demand.
pub const BPF_F_NO_PREALLOC: u32 = libbpf_sys::BPF_F_NO_PREALLOC;
/// The kprobe PMU's type file (absent without CONFIG_KPROBES).
pub const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

/// The header page of a perf event's mmapped ring.
pub type PerfEventMmapPage = libbpf_sys::perf_event_mmap_page;

pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: u64 = 8;
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;

/// Open a perf event of `type_`/`config` on `cpu` for all processes (`pid` -1).
pub fn open(type_: u32, config: u64, sample_period: u64, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    let mut attr = new_attr(type_, config);
    attr.__bindgen_anon_1.sample_period = sample_period;
    open_attr(&attr, pid, cpu)
}

/// Like [`open`], but sampling at `sample_freq` Hz (the `freq` attribute bit):
/// the kernel picks the period.
pub fn open_freq(type_: u32, config: u64, sample_freq: u64, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    let mut attr = new_attr(type_, config);
    attr.set_freq(1);
    attr.__bindgen_anon_1.sample_freq = sample_freq;
    open_attr(&attr, pid, cpu)
}

/// Open a software dummy event on `cpu` for all processes that records no
/// samples, only exec (comm), fork, exit and executable-mmap records with
/// their time, into its ring buffer.
pub fn open_mmap_tracking(cpu: i32) -> std::io::Result<OwnedFd> {
    const PERF_COUNT_SW_DUMMY: u64 = 9;
    const PERF_SAMPLE_TIME: u64 = 1 << 2;
    let mut attr = new_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    attr.sample_type = PERF_SAMPLE_TIME;
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    open_attr(&attr, -1, cpu)
}

/// Count the instructions a process retires in user mode, with every
/// process and thread it starts from now on (`inherit`), from its next
/// `exec` on (`enable_on_exec`; `pid` is held before exec). Read the count
/// with [`read_counter`] after it ends. Fails where there is no hardware PMU.
pub fn open_instruction_counter(pid: i32) -> std::io::Result<OwnedFd> {
    const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
    let mut attr = new_attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    open_attr(&attr, pid, -1)
}

/// A counting perf event's value.
pub fn read_counter(fd: &OwnedFd) -> std::io::Result<u64> {
    let mut v = 0u64;
    let n = unsafe { libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut _, 8) };
    if n != 8 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

fn new_attr(type_: u32, config: u64) -> libbpf_sys::perf_event_attr {
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = type_;
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.config = config;
    attr
}

fn open_attr(attr: &libbpf_sys::perf_event_attr, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    let fd =
        unsafe { libc::syscall(libc::SYS_perf_event_open, attr as *const _, pid, cpu, -1i32, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Run `prog` on every occurrence of each perf event. The program is
/// attached through a BPF link where the kernel has them (closing the link
/// detaches it at once; closing a tracepoint's perf event is slow), else
/// with the older ioctl.
pub fn attach_bpf(events: Vec<OwnedFd>, prog: BorrowedFd<'_>) -> Result<Attachment> {
    let mut links = Vec::with_capacity(events.len());
    for event in &events {
        let link = unsafe {
            libbpf_sys::bpf_link_create(
                prog.as_raw_fd(),
                event.as_raw_fd(),
                libbpf_sys::BPF_PERF_EVENT,
                std::ptr::null(),
            )
        };
        if link >= 0 {
            links.push(unsafe { OwnedFd::from_raw_fd(link) });
        } else {
            let rc = unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, prog.as_raw_fd()) };
            if rc < 0 {
                return Err(anyhow!("cannot attach the program: {}", std::io::Error::last_os_error()));
            }
        }
        let rc = unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) };
        if rc < 0 {
            return Err(anyhow!("cannot enable the event: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(Attachment::perf(events, links))
}

/// Open a kprobe/uprobe PMU event: `config` holds the PMU's flag bits (e.g.
/// retprobe), `config1` the function name (or path) pointer, `config2` the
/// offset.
pub fn open_probe(pmu: u32, config: u64, config1: u64, config2: u64, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    let mut attr = new_attr(pmu, config);
    attr.__bindgen_anon_3.config1 = config1;
    attr.__bindgen_anon_4.config2 = config2;
    open_attr(&attr, pid, cpu)
}

/// `BPF_RAW_TRACEPOINT_OPEN`: attach `prog` to the raw tracepoint `name`,
/// or, with `None`, where its BTF attach target says (tp_btf, fentry, fexit).
pub fn raw_tracepoint_open(name: Option<&CStr>, prog: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let name = name.map_or(std::ptr::null(), CStr::as_ptr);
    let fd = unsafe { libbpf_sys::bpf_raw_tracepoint_open(name, prog.as_raw_fd()) };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd));
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bpf_map_create` with runtime sizes and `BPF_F_*` flags.
pub fn map_create(
    map_type: libbpf_rs::MapType,
    name: &str,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> libbpf_rs::Result<libbpf_rs::MapHandle> {
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: flags,
        ..Default::default()
    };
    libbpf_rs::MapHandle::create(map_type, Some(name), key_size, value_size, max_entries, &opts)
}

/// Load `insns` (map fds already patched in) as a program of `prog_type`.
/// The first try has no verifier log (fast path); a refused program is
/// loaded again with one, for the error.
pub fn prog_load(prog_type: u32, attrs: LoadAttrs, name: &str, insns: &[Insn]) -> Result<OwnedFd, LoadError> {
    let bytes = to_bytes(insns);
    let name = CString::new(sanitize_name(name)).unwrap_or_default();
    let fd = unsafe { load_raw(prog_type, attrs, &name, &bytes, None) };
    if fd >= 0 {
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let mut log = vec![0u8; 4 << 20];
    let fd = unsafe { load_raw(prog_type, attrs, &name, &bytes, Some(&mut log)) };
    if fd >= 0 {
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Err(LoadError { errno, log: String::from_utf8_lossy(&log[..end]).into_owned() })
}

unsafe fn load_raw(prog_type: u32, attrs: LoadAttrs, name: &CStr, bytes: &[u8], log: Option<&mut Vec<u8>>) -> i32 {
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attrs.expected_attach_type,
        attach_btf_id: attrs.attach_btf_id,
        ..Default::default()
    };
    if let Some(buf) = log {
        opts.log_level = 1;
        opts.log_size = buf.len() as u32;
        opts.log_buf = buf.as_mut_ptr() as *mut _;
    }
    libbpf_sys::bpf_prog_load(
        prog_type,
        name.as_ptr(),
        c"GPL".as_ptr(),
        bytes.as_ptr() as *const libbpf_sys::bpf_insn,
        (bytes.len() / 8) as _,
        &mut opts,
    )
}

/// Kernel program names: at most 15 chars of `[A-Za-z0-9_.]`.
fn sanitize_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(15).collect()
}

/// `BPF_MAP_LOOKUP_AND_DELETE_ELEM`: 0, or a negative errno.
pub fn map_lookup_and_delete(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> i32 {
    unsafe {
        libbpf_sys::bpf_map_lookup_and_delete_elem(
            map.as_raw_fd(),
            key.as_ptr() as *const _,
            value.as_mut_ptr() as *mut _,
        )
    }
}

/// `BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)`: run statistics are kept while
/// the returned fd is open.
pub fn enable_run_time_stats() -> std::io::Result<OwnedFd> {
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd));
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `(run_cnt, run_time_ns)` of a loaded program, from `bpf_prog_info`.
pub fn prog_run_stats(prog: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    (rc == 0).then_some((info.run_cnt, info.run_time_ns))
}

// ---------------------------------------------------------------------------
// feature probes
// ---------------------------------------------------------------------------

/// Whether this kernel has the kprobe PMU (CONFIG_KPROBES).
pub fn kprobes_available() -> bool {
    std::path::Path::new(KPROBE_PMU).exists()
}

/// Load (and drop) a minimal fentry program on `function`: Ok when the
/// kernel accepts trampoline programs there, else the reason. Tried once
/// per function.
pub fn probe_trampoline(function: &str) -> Result<(), String> {
    static SEEN: std::sync::Mutex<Option<std::collections::HashMap<String, Result<(), String>>>> =
        std::sync::Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(Default::default);
    if let Some(answer) = seen.get(function) {
        return answer.clone();
    }
    let answer = load_trampoline(function);
    seen.insert(function.to_string(), answer.clone());
    answer
}

fn load_trampoline(function: &str) -> Result<(), String> {
    load_minimal(function, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY)
}

/// Where the kernel lists its active LSMs.
const ACTIVE_LSMS: &str = "/sys/kernel/security/lsm";

/// Why BPF LSM programs can't run here, if they can't: `bpf` is not among
/// the active LSMs, or (where the kernel doesn't list them: securityfs is
/// not mounted) a minimal program on `file_open` does not load.
pub fn bpf_lsm_refused() -> Option<String> {
    let Ok(active) = std::fs::read_to_string(ACTIVE_LSMS) else {
        let why = probe_lsm().err()?;
        return Some(format!(
            "this kernel refuses BPF LSM programs ({why}): it needs CONFIG_BPF_LSM=y and `bpf` in its `lsm=` boot \
             parameter"
        ));
    };
    let active = active.trim();
    if active.split(',').any(|l| l == "bpf") {
        return None;
    }
    Some(format!(
        "BPF LSM is not active on this kernel (its LSMs: {active}): boot it with `lsm={active},bpf` on the kernel \
         command line (CONFIG_BPF_LSM=y is needed too)"
    ))
}

/// Load (and drop) a minimal BPF LSM program on `file_open`: Ok when this
/// kernel takes them, else the reason (tried once).
fn probe_lsm() -> Result<(), String> {
    static ANSWER: OnceLock<Result<(), String>> = OnceLock::new();
    ANSWER.get_or_init(|| load_minimal("bpf_lsm_file_open", BPF_PROG_TYPE_LSM, BPF_LSM_MAC)).clone()
}

/// Load (and drop) a program that returns 0, of type `prog_type` attached
/// by BTF to `function` as `attach_type`.
fn load_minimal(function: &str, prog_type: u32, attach_type: u32) -> Result<(), String> {
    let Some(btf) = super::btf::kernel() else { return Err("no kernel BTF".into()) };
    let Some(id) = btf.function_id(function) else { return Err(format!("{function} has no BTF entry")) };
    let attrs = LoadAttrs { expected_attach_type: attach_type, attach_btf_id: id };
    let bytes = to_bytes(&[Insn::mov_imm(0, 0), Insn::exit()]);
    let fd = unsafe { load_raw(prog_type, attrs, c"rtrace_probe", &bytes, None) };
    if fd < 0 {
        let why = match -fd {
            libc::EPERM => "not permitted".to_string(),
            libc::EINVAL => "invalid argument".to_string(),
            524 => "not supported".to_string(),
            n => format!("error {n}"),
        };
        return Err(format!("loading one fails: {why}"));
    }
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

/// Whether an fentry program on `function` loads.
pub fn trampoline_loads(function: &str) -> bool {
    fentry_available() && probe_trampoline(function).is_ok()
}

/// Whether fentry/fexit programs load on this kernel (tried once, on a
/// common function).
pub fn fentry_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        for f in ["vfs_read", "do_sys_openat2", "schedule"] {
            match probe_trampoline(f) {
                Ok(()) => return true,
                Err(e) if e.ends_with("has no BTF entry") => continue,
                Err(_) => return false,
            }
        }
        false
    })
}

/// Raise the open-file limit to its hard maximum: every attached probe
/// holds a file descriptor or more (perf events, links), and a wildcard
/// over hundreds of functions or raw tracepoints passes the usual soft
/// limit of 1024.
pub fn raise_open_file_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
