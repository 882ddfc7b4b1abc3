//! Stack trace maps: reading a stack id's frames, symbolizing them, and
//! reporting the stacks the kernel could not record (hash collisions in the
//! stack map, a full map: counted per event in the kernel) or that could
//! not be shown. The maps belong to one run ([`StackMaps`], shared by
//! `Arc` with the kernel maps and the userspace sites that print stacks).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use libbpf_rs::{MapCore, MapFlags};

use crate::symbols::stacks::{format_stack, format_stack_key, kernel_frames, user_frames, Frame, StackMode};

/// The stack maps of one run, by IR map id, with the kernel's counts of
/// failed captures and the count of stacks that could not be shown.
/// Filled while the maps are created, read while records and maps print.
#[derive(Default)]
pub struct StackMaps {
    maps: Mutex<HashMap<u32, libbpf_rs::MapHandle>>,
    lost: OnceLock<libbpf_rs::MapHandle>,
    failed: AtomicU64,
}

impl StackMaps {
    /// Make the stack map with IR id `id` readable.
    pub fn insert(&self, id: u32, map: libbpf_rs::MapHandle) {
        self.maps.lock().unwrap().insert(id, map);
    }

    /// The kernel's per-CPU counts of failed captures (slot 0 collisions, 1 map full).
    pub fn set_lost_counters(&self, map: libbpf_rs::MapHandle) {
        let _ = self.lost.set(map);
    }

    /// Events whose stack the kernel could not store: (collisions, map full).
    pub fn lost_in_kernel(&self) -> (u64, u64) {
        let Some(m) = self.lost.get() else { return (0, 0) };
        let slot = |k: u32| -> u64 {
            m.lookup_percpu(&k.to_le_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .map(|v| {
                    v.iter()
                        .map(|s| u64::from_le_bytes(s.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8])))
                        .sum()
                })
                .unwrap_or(0)
        };
        (slot(probes_ebpf::record::STACK_LOST_COLLISION), slot(probes_ebpf::record::STACK_LOST_FULL))
    }

    /// The frames of a stack value (`id`, or `pid << 32 | id` for user stacks).
    /// `Err` names why the kernel has no stack for it.
    pub fn frames(&self, map: u32, value: i64, user: bool) -> Result<(u32, Vec<Frame>), String> {
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
            let guard = self.maps.lock().unwrap();
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
    pub fn render(&self, map: u32, value: i64, user: bool, mode: StackMode) -> String {
        match self.frames(map, value, user) {
            Ok((_, f)) => format_stack(&f, mode),
            Err(why) => {
                let id = value as i32;
                if !(id == -libc::EEXIST || id == -libc::ENOMEM) {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                }
                format!("\n        [{why}]\n")
            }
        }
    }

    /// A stack value as a map key prints it (4 spaces in, bpftrace 0.17).
    pub fn render_key(&self, map: u32, value: i64, user: bool, mode: StackMode) -> String {
        match self.frames(map, value, user) {
            Ok((_, f)) => format_stack_key(&f, mode),
            Err(_) => self.render(map, value, user, mode).replacen("        ", "    ", 1),
        }
    }

    /// Report lost stacks (once, at exit): events whose stack the kernel could
    /// not store, and stacks that could not be shown for other reasons.
    pub fn report(&self) {
        let (collisions, full) = self.lost_in_kernel();
        if collisions > 0 {
            crate::output::sink::warn(format!(
                "{collisions} stack(s) lost to stack-id hash collisions (raise RTRACE_STACK_ENTRIES)"
            ));
        }
        if full > 0 {
            crate::output::sink::warn(format!(
                "{full} stack(s) lost because the stack map was full (raise RTRACE_STACK_ENTRIES)"
            ));
        }
        let tracking = crate::symbols::procmaps::TRACKING_LOST.load(Ordering::Relaxed);
        if tracking > 0 {
            crate::output::sink::warn(format!(
                "{tracking} process mapping change(s) were lost; some user stacks may print as addresses"
            ));
        }
        let f = self.failed.load(Ordering::Relaxed);
        if f > 0 {
            crate::output::sink::warn(format!(
                "{f} stack(s) shown as unavailable (see the bracketed reasons in the output)"
            ));
        }
    }
}
