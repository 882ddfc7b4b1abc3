//! Ctrl-C / SIGTERM end tracing the way bpftrace does: the loop notices, then
//! detaches, runs END and prints maps. Userspace code notices too (the Rhai
//! progress hook is [`progress_hook`]), so a loop in BEGIN, a timer
//! or a probe's userspace statement can't keep the run alive. Once the run
//! is shutting down, a signal stops END's code, and a second signal in all
//! ends the process at once (the kernel detaches whatever is still attached
//! when its file descriptors close). SIGUSR1 asks for every map to be
//! printed now while tracing goes on (as bpftrace; exporters send it on each
//! scrape).
//!
//! The run's other ends stop userspace code the same way: `-d` running out
//! (the hook reads the clock) and the `-c` command exiting (its waiter
//! thread calls [`request_end`]). Code stopped for one of these ends with a
//! located warning saying why ([`crate::script::Session::note_stopped`]).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Instant;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Signals received so far.
static COUNT: AtomicU32 = AtomicU32::new(0);
/// Signals already accounted for when shutdown began.
static GRACE: AtomicU32 = AtomicU32::new(0);
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
static PRINT_MAPS: AtomicBool = AtomicBool::new(false);
/// Why the run is ending other than by a signal (set once), and when `-d` ends it.
static END: Mutex<Option<String>> = Mutex::new(None);
static END_REQUESTED: AtomicBool = AtomicBool::new(false);
static DEADLINE: Mutex<Option<(Instant, String)>> = Mutex::new(None);

/// The run is ending (`why`: "the -c command exited"): userspace code still
/// running stops as after a signal.
pub fn request_end(why: &str) {
    END.lock().unwrap().get_or_insert_with(|| why.to_string());
    END_REQUESTED.store(true, Ordering::SeqCst);
}

/// `-d`: the run ends at `at`, so code still running then stops.
pub fn set_deadline(at: Instant, why: String) {
    *DEADLINE.lock().unwrap() = Some((at, why));
}

/// Has the run's end come while code runs (checked every 1024 operations).
fn end_due() -> Option<String> {
    if END_REQUESTED.load(Ordering::SeqCst) {
        return END.lock().unwrap().clone();
    }
    let deadline = DEADLINE.lock().unwrap();
    match &*deadline {
        Some((at, why)) if Instant::now() >= *at => Some(why.clone()),
        _ => None,
    }
}

/// The last SIGINT/SIGTERM received, for what stopped code says.
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    INTERRUPTED.store(true, Ordering::SeqCst);
    if n >= 2 && SHUTDOWN.load(Ordering::SeqCst) {
        // Async-signal-safe: a write and _exit.
        let msg = b"rtrace: interrupted again: exiting now\n";
        unsafe {
            libc::write(2, msg.as_ptr() as *const _, msg.len());
            libc::_exit(128 + sig);
        }
    }
}

extern "C" fn on_usr1(_: libc::c_int) {
    PRINT_MAPS.store(true, Ordering::SeqCst);
}

/// SIGUSR1 from the very start of the process: one that arrives while the
/// script's top level runs, or while probes load and attach, is kept and the
/// maps print once the event loop runs (its default action would kill
/// rtrace, and exporters send it on every scrape, whenever they like).
pub fn defer_print_requests() {
    unsafe {
        let mut usr1: libc::sigaction = std::mem::zeroed();
        usr1.sa_sigaction = on_usr1 as *const () as usize;
        usr1.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut usr1.sa_mask);
        libc::sigaction(libc::SIGUSR1, &usr1, std::ptr::null_mut());
    }
}

pub fn install() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    defer_print_requests();
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Rhai operations a piece of userspace code may still run after the first
/// signal: enough for any callback to finish its event (its output is not
/// lost), far too few for a loop to keep the run alive.
const OPERATIONS_AFTER_SIGNAL: u64 = 100_000;

/// The engine's progress hook: userspace code stops when a signal came that
/// the current phase has not already acted on. A loop in BEGIN, a timer or a callback ends
/// once a signal came and it ran on past [`OPERATIONS_AFTER_SIGNAL`]
/// (at once after a second signal).
pub fn progress_hook(operations: u64) -> Option<rhai::Dynamic> {
    if operations % 1024 == 0 {
        // Long-running userspace code: output printed before it still goes out.
        crate::output::sink::flush_waiting();
    }
    let (count, grace) = (COUNT.load(Ordering::SeqCst), GRACE.load(Ordering::SeqCst));
    if count > grace && (operations >= OPERATIONS_AFTER_SIGNAL || count > grace + 1) {
        let sig = LAST_SIGNAL.load(Ordering::SeqCst);
        let name = crate::util::signals::name(sig).unwrap_or_else(|| "a signal".into());
        return Some(rhai::Dynamic::from(format!("{name} arrived")));
    }
    if operations >= OPERATIONS_AFTER_SIGNAL && operations % 1024 == 0 && !SHUTDOWN.load(Ordering::SeqCst) {
        return end_due().map(rhai::Dynamic::from);
    }
    None
}

/// The event loop has ended: END runs and maps print unless another signal
/// comes (the first signal only ends tracing; one more stops END's code,
/// and a second signal in all exits at once, also if it came already).
pub fn shutting_down() {
    let n = COUNT.load(Ordering::SeqCst);
    GRACE.store(n.min(1), Ordering::SeqCst);
    SHUTDOWN.store(true, Ordering::SeqCst);
    END_REQUESTED.store(false, Ordering::SeqCst);
    if n >= 2 {
        crate::util::errln!("rtrace: interrupted again: exiting now");
        std::process::exit(130);
    }
}

/// A SIGUSR1 arrived since the last call.
pub fn take_print_request() -> bool {
    PRINT_MAPS.swap(false, Ordering::SeqCst)
}
