//! `-v`: what was loaded and attached, per program: its instructions, what
//! the verifier processed and the JIT made, the maps with their sizes, and
//! its attach points. On stderr, once everything is attached.

use std::os::fd::AsRawFd;

use libbpf_rs::libbpf_sys;

use crate::compile::Plan;

use super::Loaded;

/// One program's kernel view: (verified instructions, JITed bytes, map ids).
fn prog_info(fd: i32) -> Option<(u32, u32, Vec<u32>)> {
    let mut ids = vec![0u32; 64];
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    info.nr_map_ids = ids.len() as u32;
    info.map_ids = ids.as_mut_ptr() as u64;
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let r = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if r != 0 {
        return None;
    }
    ids.truncate((info.nr_map_ids as usize).min(64));
    Some((info.verified_insns, info.jited_prog_len, ids))
}

/// (kernel name, type, key size, value size, max entries) of a map fd.
fn map_info(fd: i32) -> Option<(u32, String, u32, u32, u32, u32)> {
    let mut info: libbpf_sys::bpf_map_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_map_info>() as u32;
    let r = unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) };
    if r != 0 {
        return None;
    }
    let name: String = info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect();
    Some((info.id, name, info.type_, info.key_size, info.value_size, info.max_entries))
}

fn map_by_id(id: u32) -> Option<(u32, String, u32, u32, u32, u32)> {
    let fd = unsafe { libbpf_sys::bpf_map_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    let info = map_info(fd);
    unsafe { libc::close(fd) };
    info
}

fn map_type_name(t: u32) -> &'static str {
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

/// The `-v` report.
pub fn print(plan: &Plan, loaded: &Loaded) {
    for (prog, fd) in plan.programs.iter().zip(&loaded.programs) {
        let insns = prog.code.insns.len();
        let (verified, jited, ids) = prog_info(fd.as_raw_fd()).unwrap_or_default();
        eprintln!(
            "rtrace: program {} ({}): {insns} instructions, {verified} processed by the verifier, {jited} bytes JITed",
            prog.name,
            plan.probes.get(prog.probe).map(String::as_str).unwrap_or("-"),
        );
        for id in ids {
            match map_by_id(id) {
                Some((_, name, ty, key, value, max)) => eprintln!(
                    "rtrace:   map {name}: {}, key {key} B, value {value} B, {max} entries",
                    map_type_name(ty)
                ),
                None => eprintln!("rtrace:   map id {id}"),
            }
        }
        for point in &prog.points {
            eprintln!("rtrace:   attached to {}", point.name);
        }
    }
}
