//! Stack trace maps: reading a stack id's frames, symbolizing them, and
//! counting the stacks the kernel could not record (hash collisions in the
//! stack map, a full map, unreadable user stacks).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use libbpf_rs::{MapCore, MapFlags};

use crate::symbols::stacks::{format_stack, kernel_frames, user_frames, Frame, StackMode};

static MAPS: OnceLock<Mutex<HashMap<u32, libbpf_rs::MapHandle>>> = OnceLock::new();
static COLLISIONS: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

fn maps() -> &'static Mutex<HashMap<u32, libbpf_rs::MapHandle>> {
    MAPS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Make the stack map with IR id `id` readable.
pub fn register(id: u32, map: libbpf_rs::MapHandle) {
    maps().lock().unwrap().insert(id, map);
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

/// A stack value as text (bpftrace's layout), counting failures.
pub fn render(map: u32, value: i64, user: bool, mode: StackMode) -> String {
    match frames(map, value, user) {
        Ok((_, f)) => format_stack(&f, mode),
        Err(why) => {
            if why.contains("collision") {
                COLLISIONS.fetch_add(1, Ordering::Relaxed);
            } else {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
            format!("\n        [{why}]\n")
        }
    }
}

/// Report stacks that could not be shown (once, at exit).
pub fn report() {
    let c = COLLISIONS.load(Ordering::Relaxed);
    let f = FAILED.load(Ordering::Relaxed);
    if c > 0 {
        eprintln!("rtrace: {c} stack(s) shown as unavailable: stack-id hash collisions in the stack map (raise RTRACE_STACK_ENTRIES)");
    }
    if f > 0 {
        eprintln!("rtrace: {f} stack(s) shown as unavailable (see the bracketed reasons in the output)");
    }
}
