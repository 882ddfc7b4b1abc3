//! Loss accounting on a real kernel: every control message a probe sends
//! (`print(m)`, `m.clear()`, `m.zero()`) is either handled or counted, in
//! the kernel when the control ring is full, in userspace when the event
//! loop falls behind; the exit report and the metrics say how many.

use std::time::Duration;

use crate::common::*;

kernel_test!(every_control_message_is_handled_or_counted);
fn every_control_message_is_handled_or_counted() {
    let _g = setup();
    const CALLS: u64 = 20_000;
    let probe = "tracepoint:syscalls:sys_enter_getppid";
    let src = fill(
        r#"
let p = map();
let gate = map();
probe("__PROBE__", |e| {
    if e.pid == __ME__ { p = count(); print(p); }
});
// Holds the event loop in a userspace statement until the burst is over, so
// the control ring overflows however fast the loop would drain it.
probe("tracepoint:syscalls:sys_enter_getuid", |e| {
    if e.pid == __ME__ {
        print("holding");
        let waits = 0;
        while gate[0] == 0 && waits < 3000 { sleep(0.01); waits += 1; }
    }
});
probe("tracepoint:syscalls:sys_enter_getpid", |e| { if e.pid == __ME__ { gate[0] = 1; exit(); } });
"#,
        &[("PROBE", &probe), ("ME", &pid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    unsafe { libc::syscall(libc::SYS_getuid) };
    t.wait_line("the holding statement", Duration::from_secs(10), |l| l == "holding");
    // In one burst: far more than the control ring holds (64 KiB, 24 bytes a message).
    getppid_n(CALLS as usize);
    // Opens the gate; exit() is never lost, and the messages queued before it
    // are still handled.
    getpid_n(1);
    let out = t.finish_within(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    // The print(p) lines, before the exit dump (which starts with an empty line).
    let printed = out.lines().iter().take_while(|l| !l.is_empty()).filter(|l| l.starts_with("@p: ")).count() as u64;
    let lost = kernel_control_losses(&out.stderr);
    let in_kernel: u64 = lost.iter().map(|(n, _)| n).sum();
    assert!(lost.iter().all(|(_, p)| p == probe), "{out}");
    let dropped = dropped_controls(&out.stderr);
    assert!(in_kernel + dropped > 0, "a burst of {CALLS} print(m) overflowed nothing?\n{out}");
    assert_eq!(printed + in_kernel + dropped, CALLS, "printed {printed}, lost {in_kernel} + {dropped}\n{out}");
}
