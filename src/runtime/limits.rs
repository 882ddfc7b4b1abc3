//! Bounds on the event loop, so no input can livelock it or lose its end
//! silently: at most [`CONTROL_PER_TURN`] control messages per turn (then the
//! loop goes back to its deadline, signal and exit checks), the kernel's
//! `exit()` taken from the reader's side slot, output write errors ending the
//! run, and lost control messages reported.

use anyhow::{anyhow, Result};

use super::reader::Reader;
use crate::output::sink;
use crate::script::Session;

/// Control messages handled per event-loop turn.
pub const CONTROL_PER_TURN: usize = 256;

/// Record an `exit()` a probe sent (the first exit wins).
pub fn note_kernel_exit(session: &Session, reader: &Reader) {
    if let Some((_probe, code)) = reader.exit_code() {
        let mut reg = session.registry.lock().unwrap_or_else(|e| e.into_inner());
        if reg.exit_code.is_none() {
            reg.exit_code = Some(crate::script::api::exit_status(code));
            reg.exit_from_kernel = true;
        }
    }
}

/// A failed write to the output (a full disk, `/dev/full`, a closed pipe) ends the run.
pub fn check_output() -> Result<()> {
    match sink::write_error() {
        Some(e) => Err(anyhow!("rtrace: error: {e}")),
        None => Ok(()),
    }
}

/// Say how many control messages (`print(m)`, `clear`, `zero` from probes) were lost.
pub fn report_lost_controls(reader: &Reader) {
    let n = reader.lost_controls();
    if n > 0 {
        eprintln!(
            "rtrace: lost {n} control message(s) (print/clear/zero from probes): userspace fell behind; exit() is never lost"
        );
    }
}
