//! `--exporter`'s reload signal: SIGHUP asks the running event loop to end
//! its run so that cli/exporter.rs can read, compile and attach the script
//! again.

use std::sync::atomic::{AtomicBool, Ordering};

static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

pub fn install() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_hup as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
}

/// A SIGHUP asked for a reload (the event loop ends its run for it).
pub fn reload_requested() -> bool {
    RELOAD.load(Ordering::SeqCst)
}

/// Take the reload request (true once per SIGHUP).
pub fn take_reload() -> bool {
    RELOAD.swap(false, Ordering::SeqCst)
}
