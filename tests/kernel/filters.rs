//! Kernel-side control flow on a real kernel: filters on pid, comm and
//! tracepoint arguments with `&& || !`, if / else if / else, if-expressions,
//! `let` locals with compound assignment, and constant `for` loops. Each test
//! makes events that must pass and events that must not, and checks exact
//! values.

use crate::common::*;

fn trace(src: &str, events: impl FnOnce()) -> Outcome {
    let mut t = Tracer::start(&["-e", src]);
    t.wait_attached();
    events();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    out
}

#[test]
fn filter_on_pid() {
    let Some(_g) = setup() else { return };
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

#[test]
fn filter_on_comm_with_captured_string_and_else_if() {
    let Some(_g) = setup() else { return };
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

#[test]
fn filter_on_args_with_and_or_not() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let c = map();
let s = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ && (e.args.count == 7 || e.args.count > 1000) && !(e.args.count == 2000) {
        c = count();
        s = sum(e.args.count);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[7, 8, 1000, 1500, 2000, 3000]));
    assert_eq!(out.map_lines("c"), vec!["@c: 3"], "{out}");
    assert_eq!(out.map_lines("s"), vec!["@s: 4507"], "{out}");
}

#[test]
fn if_else_if_else_chain() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let cls = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid != me || e.args.fd != __FD__ {
        return;
    }
    if e.args.count < 10 {
        cls["small"] = count();
    } else if e.args.count < 1000 {
        cls["mid"] = count();
    } else {
        cls["large"] = count();
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[1, 50, 9, 60, 10, 5000]));
    // Sorted by value.
    assert_eq!(out.map_lines("cls"), vec!["@cls[large]: 1", "@cls[small]: 2", "@cls[mid]: 3"], "{out}");
}

#[test]
fn if_expressions_as_number_values() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let bysize = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        let k = if e.args.count > 100 { 1 } else { 0 };
        bysize[k] = sum(e.args.count);
        bysize[if e.args.count == 20 { 2 } else { 3 }] = sum(1);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[10, 200, 20, 300, 400]));
    assert_eq!(
        out.map_lines("bysize"),
        vec!["@bysize[2]: 1", "@bysize[3]: 4", "@bysize[0]: 30", "@bysize[1]: 900"],
        "{out}"
    );
}

#[test]
fn if_expressions_as_string_values() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let named = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        let name = if e.args.count > 100 { "big" } else { "small" };
        named[name] = count();
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[10, 200, 20, 300, 400]));
    assert_eq!(out.map_lines("named"), vec!["@named[small]: 2", "@named[big]: 3"], "{out}");
}

#[test]
fn let_locals_and_compound_assignment() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let vals = map();
let s = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        let x = e.args.count;
        x *= 3;
        x += 1;
        x -= 2;
        x /= 2;
        x %= 100;
        let y = x;
        y <<= 4;
        y |= 1;
        vals[e.args.count] = y;
        s = sum(x);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    // 10: 30, 31, 29, 14, 14; y = 14 << 4 | 1 = 225
    // 100: 300, 301, 299, 149, 49; y = 49 << 4 | 1 = 785
    let out = trace(&src, || z.reads(&[10, 100]));
    assert_eq!(out.map_lines("vals"), vec!["@vals[10]: 225", "@vals[100]: 785"], "{out}");
    assert_eq!(out.map_lines("s"), vec!["@s: 63"], "{out}");
}

#[test]
fn constant_for_loops() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let n = 4;
let times10 = map();
let upto = map();
let hits = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        let acc = 0;
        for i in 0..5 { acc += i * e.args.count; }
        times10[e.args.count] = acc;
        let t = 0;
        for i in 1..=3 { t += i; }
        for i in 0..n { t += 100; }
        upto[e.args.count] = t;
        for i in 0..3 { hits[i] += 1; }
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[3, 7]));
    assert_eq!(out.map_lines("times10"), vec!["@times10[3]: 30", "@times10[7]: 70"], "{out}");
    assert_eq!(out.map_lines("upto"), vec!["@upto[3]: 406", "@upto[7]: 406"], "{out}");
    assert_eq!(out.map_lines("hits"), vec!["@hits[0]: 2", "@hits[1]: 2", "@hits[2]: 2"], "{out}");
}

#[test]
fn filter_reads_a_map_written_by_another_probe() {
    let Some(_g) = setup() else { return };
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
