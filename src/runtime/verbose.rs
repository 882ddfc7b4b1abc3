//! `-v`: what was loaded and attached, per program: its instructions, what
//! the verifier processed and the JIT made, the maps with their sizes, and
//! its attach points. On stderr, once everything is attached (each probe's
//! overhead follows at exit, from `probe_stats.rs`).

use std::os::fd::AsFd;

use crate::kernel::introspect::{map_info_by_id, map_type_name, prog_info};
use crate::plan::Plan;

use super::Loaded;

/// The `-v` report.
pub fn print(plan: &Plan, loaded: &Loaded) {
    for (prog, fd) in plan.programs.iter().zip(&loaded.programs) {
        let insns = prog.code.insns.len();
        let info = prog_info(fd.as_fd()).unwrap_or_default();
        crate::util::errln!(
            "rtrace: program {} ({}): {insns} instructions, {} processed by the verifier, {} bytes JITed",
            prog.name,
            plan.probes.get(prog.probe).map(String::as_str).unwrap_or("-"),
            info.verified_insns,
            info.jited_len,
        );
        for id in info.map_ids {
            match map_info_by_id(id) {
                Some(m) => crate::util::errln!(
                    "rtrace:   map {}: {}, key {} B, value {} B, {} entries",
                    m.name,
                    map_type_name(m.type_),
                    m.key_size,
                    m.value_size,
                    m.max_entries
                ),
                None => crate::util::errln!("rtrace:   map id {id}"),
            }
        }
        for point in &prog.points {
            crate::util::errln!("rtrace:   attached to {}", point.name);
        }
    }
}
