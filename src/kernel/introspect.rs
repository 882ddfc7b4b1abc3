//! What the kernel says about itself and about what rtrace loaded: whether
//! a map type or a helper is supported (for `--info`), and the kernel's view
//! of a loaded program and its maps (`bpf_prog_info`, `bpf_map_info`, for
//! `-v`). Raw libbpf_sys calls, kept beside `sys.rs`.

use std::os::fd::{AsRawFd, BorrowedFd};

use libbpf_rs::libbpf_sys;

pub use libbpf_sys::{BPF_MAP_TYPE_LRU_HASH, BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_RINGBUF, BPF_MAP_TYPE_STACK_TRACE};

/// Helper ids (`enum bpf_func_id`) that `--info` asks about.
pub const BPF_FUNC_KTIME_GET_NS: u32 = 5;
pub const BPF_FUNC_GET_STACKID: u32 = 27;
pub const BPF_FUNC_PROBE_READ_KERNEL: u32 = 113;
pub const BPF_FUNC_PROBE_READ_USER_STR: u32 = 114;
pub const BPF_FUNC_RINGBUF_RESERVE: u32 = 131;
pub const BPF_FUNC_GET_CURRENT_TASK_BTF: u32 = 158;

fn probe_result(rc: i32, no: &str) -> Result<(), String> {
    match rc {
        1 => Ok(()),
        0 => Err(no.to_string()),
        e => Err(std::io::Error::from_raw_os_error(-e).to_string()),
    }
}

/// Whether this kernel creates maps of type `t`; else why not.
pub fn map_type_supported(t: u32) -> Result<(), String> {
    probe_result(unsafe { libbpf_sys::libbpf_probe_bpf_map_type(t, std::ptr::null()) }, "not supported by this kernel")
}

/// Whether programs of `prog_type` may call helper `id`; else why not.
pub fn helper_supported(prog_type: u32, id: u32) -> Result<(), String> {
    probe_result(
        unsafe { libbpf_sys::libbpf_probe_bpf_helper(prog_type, id, std::ptr::null()) },
        "not available to this program type",
    )
}

/// A loaded program as the kernel reports it.
#[derive(Debug, Default)]
pub struct ProgInfo {
    /// Instructions the verifier processed.
    pub verified_insns: u32,
    /// Bytes of JITed code.
    pub jited_len: u32,
    /// Ids of the maps it uses.
    pub map_ids: Vec<u32>,
}

/// A map as the kernel reports it.
#[derive(Debug)]
pub struct MapInfo {
    pub name: String,
    pub type_: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

/// `bpf_prog_info` of a loaded program (up to 64 map ids).
pub fn prog_info(prog: BorrowedFd<'_>) -> Option<ProgInfo> {
    let mut ids = vec![0u32; 64];
    let mut info = libbpf_sys::bpf_prog_info { nr_map_ids: ids.len() as u32, ..Default::default() };
    info.map_ids = ids.as_mut_ptr() as u64;
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if rc != 0 {
        return None;
    }
    ids.truncate((info.nr_map_ids as usize).min(64));
    Some(ProgInfo { verified_insns: info.verified_insns, jited_len: info.jited_prog_len, map_ids: ids })
}

/// `bpf_map_info` of the map with kernel id `id`.
pub fn map_info_by_id(id: u32) -> Option<MapInfo> {
    let fd = unsafe { libbpf_sys::bpf_map_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    let mut info = libbpf_sys::bpf_map_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_map_info>() as u32;
    let rc = unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) };
    unsafe { libc::close(fd) };
    if rc != 0 {
        return None;
    }
    let name: String = info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect();
    Some(MapInfo {
        name,
        type_: info.type_,
        key_size: info.key_size,
        value_size: info.value_size,
        max_entries: info.max_entries,
    })
}

/// A map type's short name.
pub fn map_type_name(t: u32) -> &'static str {
    match t {
        libbpf_sys::BPF_MAP_TYPE_HASH => "hash",
        libbpf_sys::BPF_MAP_TYPE_ARRAY => "array",
        libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH => "percpu_hash",
        libbpf_sys::BPF_MAP_TYPE_PERCPU_ARRAY => "percpu_array",
        libbpf_sys::BPF_MAP_TYPE_STACK_TRACE => "stack_trace",
        libbpf_sys::BPF_MAP_TYPE_LRU_HASH => "lru_hash",
        libbpf_sys::BPF_MAP_TYPE_LRU_PERCPU_HASH => "lru_percpu_hash",
        libbpf_sys::BPF_MAP_TYPE_RINGBUF => "ringbuf",
        _ => "other",
    }
}
