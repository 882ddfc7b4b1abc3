//! Bounds on the event loop, so no input can livelock it or lose its end
//! silently: at most [`CONTROL_PER_TURN`] control messages per turn (then the
//! loop goes back to its deadline, signal and exit checks), the kernel's
//! `exit()` taken from the reader's side slot, output write errors ending the
//! run, and lost control messages reported.

use anyhow::Result;

use super::reader::Reader;
use crate::output::sink;
use crate::script::Session;

/// Control messages handled per event-loop turn.
pub const CONTROL_PER_TURN: usize = 256;

/// Record an `exit()` a probe sent (the first exit wins): from its control
/// message, or, when the control ring had no room for that, from the stop
/// flag the program raised with the status in it.
pub fn note_kernel_exit(session: &Session, reader: &Reader, stop: &libbpf_rs::MapHandle) {
    let status = match reader.exit_code() {
        Some((_probe, code)) => Some(crate::script::api::exit_status(code)),
        None => stop_flag(stop).and_then(crate::plan::maps::exit_status_in_stop_flag),
    };
    if let Some(status) = status {
        let mut reg = session.registry.lock().unwrap_or_else(|e| e.into_inner());
        if reg.exit_code.is_none() {
            reg.exit_code = Some(status);
            reg.exit_from_kernel = true;
        }
    }
}

fn stop_flag(stop: &libbpf_rs::MapHandle) -> Option<u64> {
    use libbpf_rs::MapCore;
    let v = stop.lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY).ok().flatten()?;
    Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?))
}

/// A failed write to the output (a full disk, `/dev/full`, a closed pipe) ends the run.
pub fn check_output() -> Result<()> {
    match sink::write_error() {
        Some(e) => Err(crate::diag::Diagnostic::tool(e).into()),
        None => Ok(()),
    }
}

/// Per probe, what the kernel could not deliver, summed over the CPUs:
/// (records the data ring had no room for, control messages the control
/// ring had no room for). Slot `i` of the per-CPU lost array holds both
/// counters of probe `i`, one `u64` each.
pub fn kernel_losses(lost: &libbpf_rs::MapHandle, probes: usize) -> Vec<(u64, u64)> {
    use libbpf_rs::MapCore;
    let word =
        |s: &[u8], at: usize| u64::from_le_bytes(s.get(at..at + 8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
    (0..probes)
        .map(|i| {
            let slots = lost.lookup_percpu(&(i as u32).to_le_bytes(), libbpf_rs::MapFlags::ANY).ok().flatten();
            slots.unwrap_or_default().iter().fold((0, 0), |(r, c), s| (r + word(s, 0), c + word(s, 8)))
        })
        .collect()
}

/// Say how many control messages (`print(m)`, `clear`, `zero`, the audits
/// of `signal()` and `deny()` from probes)
/// were lost: per probe, those the kernel found no room for on the control
/// ring; then those userspace dropped because it fell behind.
pub fn report_lost_controls(probes: &[String], lost: &libbpf_rs::MapHandle, reader: &Reader) {
    for (probe, (_, n)) in probes.iter().zip(kernel_losses(lost, probes.len())) {
        if n > 0 {
            crate::util::errln!(
                "Lost {n} control messages (print/clear/zero, action audits) on probe {probe}: the control ring was full"
            );
        }
    }
    let n = reader.lost_controls();
    if n > 0 {
        sink::warn(format!(
            "lost {n} control message(s) (print/clear/zero and action audits from probes): userspace fell behind; \
             exit() is never lost"
        ));
    }
}
