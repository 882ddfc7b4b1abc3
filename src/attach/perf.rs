//! `perf_event_open` for the probe types that attach through perf events
//! (tracepoints, profile/interval/software/hardware, uprobes).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, Result};
use libbpf_rs::libbpf_sys;

use super::Attachment;

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
