//! Creating every map of a plan from its table of roles
//! ([`crate::plan::maps::MapTable`]): the script's maps (as `KernelMap`s,
//! handed to their script handles), the rings, loss counters, wake and stop
//! flags, stack maps and the `-c` pid set, with the fd of each by map id
//! for the programs' map references.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use anyhow::Result;
use libbpf_rs::MapHandle;

use crate::config::Config;
use crate::plan::maps::MapRole;
use crate::plan::Plan;
use crate::runtime::kmaps::{self, KernelMap};
use crate::runtime::stacks::StackMaps;
use crate::script::Session;

/// The maps of one run.
pub struct MapSet {
    /// The script's maps, by script map number.
    pub script: Vec<Arc<KernelMap>>,
    pub control: MapHandle,
    pub data: MapHandle,
    pub lost: MapHandle,
    pub wake: MapHandle,
    pub stop: MapHandle,
    pub follow: Option<MapHandle>,
    /// `-k`: the failed-helper counters.
    pub helper_errors: Option<MapHandle>,
    pub stacks: Arc<StackMaps>,
    /// The fd of every map by id; -1 for a map not created (the stack
    /// loss counters when no probe captures stacks).
    pub fds: Vec<i32>,
}

/// Create the maps of `plan`.
pub fn create(session: &Session, plan: &Plan, opts: &Config) -> Result<MapSet> {
    let handles = session.registry.lock().unwrap().maps.clone();
    let stacks = Arc::new(StackMaps::default());
    let mut fds = vec![-1; plan.maps.count()];
    let mut script = Vec::new();
    let mut own: Vec<Option<MapHandle>> = (0..plan.maps.count()).map(|_| None).collect();
    for (id, role) in plan.maps.roles() {
        let id = id as usize;
        let map = match role {
            MapRole::Script(i) => {
                let (Some(handle), Some(shape)) = (handles.get(i), plan.shapes.get(i)) else { continue };
                let km = kmaps::create(handle, shape, &stacks)?;
                handle.attach_backend(km.clone());
                fds[id] = km.map.as_fd().as_raw_fd();
                script.push(km);
                continue;
            }
            MapRole::ControlRing => kmaps::create_ring("rtrace_control", 64 * 1024)?,
            // Only userspace statements' records travel on the data ring:
            // without any, one page (the reader still polls it) instead of
            // `--ring-size` of locked memory.
            MapRole::DataRing if plan.sites.is_empty() => kmaps::create_ring("rtrace_data", page_size())?,
            MapRole::DataRing => kmaps::create_ring("rtrace_data", opts.ring_size)?,
            MapRole::Lost => kmaps::create_lost_counters(plan.probes.len().max(1) as u32)?,
            MapRole::Wake => kmaps::create_wake_flag()?,
            MapRole::StackLost if !plan.maps.has_stacks() => continue,
            MapRole::StackLost => {
                let m = kmaps::create_stack_lost_counters()?;
                fds[id] = m.as_fd().as_raw_fd();
                stacks.set_lost_counters(m);
                continue;
            }
            MapRole::Stack { depth, .. } => {
                let entries = opts.stack_entries.unwrap_or_else(|| kmaps::default_stack_entries(depth));
                let m = kmaps::create_stack_map(depth, entries)?;
                fds[id] = m.as_fd().as_raw_fd();
                stacks.insert(id as u32, m);
                continue;
            }
            MapRole::Follow => kmaps::create_follow_map(opts.trace.pid.unwrap_or(0))?,
            MapRole::Stop => kmaps::create_stop_flag()?,
            MapRole::HelperErrors => super::helper_errors::create(plan)?,
        };
        fds[id] = map.as_fd().as_raw_fd();
        own[id] = Some(map);
    }
    let mut take = |id: Option<u32>, what: &str| {
        id.and_then(|id| own.get_mut(id as usize)?.take()).ok_or_else(|| anyhow::anyhow!("the plan has no {what} map"))
    };
    Ok(MapSet {
        script,
        control: take(Some(plan.maps.control_ring()), "control ring")?,
        data: take(Some(plan.maps.data_ring()), "data ring")?,
        lost: take(Some(plan.maps.lost()), "lost counter")?,
        wake: take(Some(plan.maps.wake()), "wake flag")?,
        stop: take(plan.maps.stop(), "stop flag")?,
        follow: take(plan.maps.follow(), "follow").ok(),
        helper_errors: take(plan.maps.helper_errors(), "helper error").ok(),
        stacks,
        fds,
    })
}

/// The smallest ring the kernel takes: one page.
fn page_size() -> u32 {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u32
    } else {
        4096
    }
}
