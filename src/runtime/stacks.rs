//! Stack trace maps: reading a stack id's frames, symbolizing them, and
//! reporting the stacks the kernel could not record (hash collisions in the
//! stack map, a full map: counted per event in the kernel) or that could
//! not be shown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use libbpf_rs::{MapCore, MapFlags};

use crate::symbols::stacks::{format_stack, format_stack_key, kernel_frames, user_frames, Frame, StackMode};

static MAPS: OnceLock<Mutex<HashMap<u32, libbpf_rs::MapHandle>>> = OnceLock::new();
static LOST: OnceLock<libbpf_rs::MapHandle> = OnceLock::new();
static FAILED: AtomicU64 = AtomicU64::new(0);

fn maps() -> &'static Mutex<HashMap<u32, libbpf_rs::MapHandle>> {
    MAPS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Make the stack map with IR id `id` readable.
pub fn register(id: u32, map: libbpf_rs::MapHandle) {
    maps().lock().unwrap().insert(id, map);
}

/// The kernel's per-CPU counts of failed captures (slot 0 collisions, 1 map full).
pub fn register_lost_counters(map: libbpf_rs::MapHandle) {
    let _ = LOST.set(map);
}

/// Events whose stack the kernel could not store: (collisions, map full).
pub fn lost_in_kernel() -> (u64, u64) {
    let Some(m) = LOST.get() else { return (0, 0) };
    let slot = |k: u32| -> u64 {
        m.lookup_percpu(&k.to_le_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .map(|v| {
                v.iter().map(|s| u64::from_le_bytes(s.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))).sum()
            })
            .unwrap_or(0)
    };
    (slot(probes_ebpf::ir::STACK_LOST_COLLISION), slot(probes_ebpf::ir::STACK_LOST_FULL))
}

/// The frames of a stack value (`id`, or `pid << 32 | id` for user stacks).
/// `Err` names why the kernel has no stack for it.
pub fn frames(map: u32, value: i64, user: bool) -> Result<(u32, Vec<Frame>), String> {
    let id = value as i32;
    let pid = if user { (value as u64 >> 32) as u32 } else { 0 };
    if id < 0 && matches!(-id, libc::EFAULT | libc::EPERM) {
        // No stack of that kind here: a kernel stack sampled in user mode, a
        // user stack of a kernel thread (bpftrace prints these empty).
        return Ok((pid, Vec::new()));
    }
    if id < 0 {
        return Err(match -id {
            libc::EEXIST => "stack id collision".into(),
            libc::EFAULT => "unreadable stack".into(),
            libc::ENOMEM => "stack map full".into(),
            e => format!("error {e}"),
        });
    }
    let ips: Vec<u64> = {
        let guard = maps().lock().unwrap();
        let Some(m) = guard.get(&map) else { return Err("unknown stack map".into()) };
        match m.lookup(&(id as u32).to_le_bytes(), MapFlags::ANY) {
            Ok(Some(bytes)) => bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .take_while(|&ip| ip != 0)
                .collect(),
            _ => return Err("stack evicted".into()),
        }
    };
    let frames = if user { user_frames(pid, &ips) } else { kernel_frames(&ips) };
    Ok((pid, frames))
}

/// A stack value as text (bpftrace's layout). Stacks lost in the kernel
/// are counted there; other failures (an evicted id) are counted here.
pub fn render(map: u32, value: i64, user: bool, mode: StackMode) -> String {
    match frames(map, value, user) {
        Ok((_, f)) => format_stack(&f, mode),
        Err(why) => {
            let id = value as i32;
            if !(id == -libc::EEXIST || id == -libc::ENOMEM) {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
            format!("\n        [{why}]\n")
        }
    }
}

/// A stack value as a map key prints it (4 spaces in, bpftrace 0.17).
pub fn render_key(map: u32, value: i64, user: bool, mode: StackMode) -> String {
    match frames(map, value, user) {
        Ok((_, f)) => format_stack_key(&f, mode),
        Err(_) => render(map, value, user, mode).replacen("        ", "    ", 1),
    }
}

/// Report lost stacks (once, at exit): events whose stack the kernel could
/// not store, and stacks that could not be shown for other reasons.
pub fn report() {
    let (collisions, full) = lost_in_kernel();
    if collisions > 0 {
        crate::output::sink::warn(&format!(
            "rtrace: {collisions} stack(s) lost to stack-id hash collisions (raise RTRACE_STACK_ENTRIES)"
        ));
    }
    if full > 0 {
        crate::output::sink::warn(&format!(
            "rtrace: {full} stack(s) lost because the stack map was full (raise RTRACE_STACK_ENTRIES)"
        ));
    }
    let tracking = crate::symbols::procmaps::TRACKING_LOST.load(Ordering::Relaxed);
    if tracking > 0 {
        crate::output::sink::warn(&format!(
            "rtrace: {tracking} process mapping change(s) were lost; some user stacks may print as addresses"
        ));
    }
    let f = FAILED.load(Ordering::Relaxed);
    if f > 0 {
        crate::output::sink::warn(&format!(
            "rtrace: {f} stack(s) shown as unavailable (see the bracketed reasons in the output)"
        ));
    }
}
