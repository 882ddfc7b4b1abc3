//! Signals as bpftrace handles them: Ctrl-C / SIGTERM end tracing (the loop
//! notices, then detaches, runs END and prints maps); SIGUSR1 asks for every
//! map to be printed now while tracing goes on.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static PRINT_MAPS: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr1(_: libc::c_int) {
    PRINT_MAPS.store(true, Ordering::SeqCst);
}

pub fn install() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        let mut usr1: libc::sigaction = std::mem::zeroed();
        usr1.sa_sigaction = on_usr1 as *const () as usize;
        usr1.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut usr1.sa_mask);
        libc::sigaction(libc::SIGUSR1, &usr1, std::ptr::null_mut());
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A SIGUSR1 arrived since the last call.
pub fn take_print_request() -> bool {
    PRINT_MAPS.swap(false, Ordering::SeqCst)
}
