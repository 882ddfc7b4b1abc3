//! Kernel-side filters on a real kernel that need events made by the test
//! itself: on pid and comm across a fork, and on a map another probe
//! writes. Each test makes events that must pass and events that must
//! not, and checks exact values. (Filters on tracepoint arguments,
//! if / else if / else, if-expressions, locals and loops are script cases:
//! tests/scripts/control_flow.case.)

use crate::common::*;

kernel_test!(filter_on_pid);
fn filter_on_pid() {
    let _g = setup();
    let comm = unique_comm();
    let src = fill(
        r#"
let me = __ME__;
let mine = map();
let others = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.pid == me { mine = count(); }
    if e.pid != me && e.comm == "__COMM__" { others = count(); }
});
"#,
        &[("ME", &pid()), ("COMM", &comm)],
    );
    // The forked child keeps this thread's comm but has its own pid.
    let out = trace(&src, || {
        getppid_n(3);
        fork_and_wait(|| getppid_n(5));
    });
    assert_eq!(out.map_lines("mine"), vec!["@mine: 3"], "{out}");
    assert_eq!(out.map_lines("others"), vec!["@others: 5"], "{out}");
}

kernel_test!(filter_on_comm_with_captured_string_and_else_if);
fn filter_on_comm_with_captured_string_and_else_if() {
    let _g = setup();
    let comm = unique_comm();
    let child_comm = format!("rtc_{}", token());
    let child_c = std::ffi::CString::new(child_comm.clone()).unwrap();
    let src = fill(
        r#"
let parent = "__COMM__";
let a = map();
let b = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.comm == parent {
        a = count();
    } else if e.comm == "__CHILD__" {
        b = count();
    }
});
"#,
        &[("COMM", &comm), ("CHILD", &child_comm)],
    );
    let out = trace(&src, || {
        getppid_n(2);
        fork_and_wait(|| {
            set_comm_raw(&child_c);
            getppid_n(4);
        });
        getppid_n(1);
    });
    assert_eq!(out.map_lines("a"), vec!["@a: 3"], "{out}");
    assert_eq!(out.map_lines("b"), vec!["@b: 4"], "{out}");
}

kernel_test!(filter_reads_a_map_written_by_another_probe);
fn filter_reads_a_map_written_by_another_probe() {
    let _g = setup();
    let mut z = Zero::open();
    // getppid from this thread arms the filter; only reads after it count.
    let src = fill(
        r#"
let me = __ME__;
let armed = map();
let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me { armed[e.tid] = 1; }
});
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.args.fd == __FD__ && e.tid in armed && armed[e.tid] == 1 {
        c = sum(e.args.count);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || {
        z.reads(&[1, 2]);
        getppid_n(1);
        z.reads(&[40, 2]);
    });
    assert_eq!(out.map_lines("c"), vec!["@c: 42"], "{out}");
}
