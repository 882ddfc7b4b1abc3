//! The kernel/userspace split on a real kernel (design §2.3): userspace
//! statements in a probe run once per event that reaches them, and see event
//! fields and kernel `let` values as they were at that event.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn print_with_interpolation_runs_once_per_event() {
    let Some(_g) = setup() else { return };
    let comm = unique_comm();
    let me = tid();
    let src = fill(
        r#"
let me = __ME__;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me {
        print(`ev ${e.tid} ${e.comm}`);
    }
});
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(3);
    let want = format!("ev {me} {comm}");
    // Three events, three lines; wait for the last before stopping.
    t.wait_count("three event lines", Duration::from_secs(10), 3, |l| l == want);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let evs: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("ev ")).collect();
    assert_eq!(evs, vec![want.as_str(); 3], "{out}");
}

#[test]
fn userspace_sees_kernel_lets_as_at_the_event() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        let n = e.args.count * 2;
        if n >= 10 {
            print(`n=${n}`);
        }
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    // 2*4 = 8 is filtered out in the kernel; the others print in order.
    z.reads(&[5, 4, 7, 100]);
    t.wait_line("`n=200`", Duration::from_secs(10), |l| l == "n=200");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let ns: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("n=")).collect();
    assert_eq!(ns, vec!["n=10", "n=14", "n=200"], "{out}");
}
