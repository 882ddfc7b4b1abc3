//! Kernel-side control flow on a real kernel: filters on pid, comm and
//! tracepoint arguments with `&& || !`, if / else if / else, if-expressions,
//! `let` locals with compound assignment, and constant `for` loops. Each test
//! makes events that must pass and events that must not, and checks exact
//! values.

use crate::common::*;

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

/// Kernel statements run for each of this thread's reads of /dev/zero.
#[test]
fn conditions_expressions_locals_and_loops_on_reads() {
    let Some(_g) = setup() else { return };
    run_read_cases(&[
        ReadCase {
            name: "filter on args with && || !",
            prelude: "let c = map();\nlet s = map();",
            body: "if (e.args.count == 7 || e.args.count > 1000) && !(e.args.count == 2000) {
            c = count();
            s = sum(e.args.count);
        }",
            sizes: &[7, 8, 1000, 1500, 2000, 3000],
            want: vec![Want::map("c", &["@c: 3"]), Want::map("s", &["@s: 4507"])],
        },
        ReadCase {
            name: "if expressions as number values",
            prelude: "let bysize = map();",
            body: "let k = if e.args.count > 100 { 1 } else { 0 };
        bysize[k] = sum(e.args.count);
        bysize[if e.args.count == 20 { 2 } else { 3 }] = sum(1);",
            sizes: &[10, 200, 20, 300, 400],
            want: vec![Want::map("bysize", &["@bysize[2]: 1", "@bysize[3]: 4", "@bysize[0]: 30", "@bysize[1]: 900"])],
        },
        ReadCase {
            name: "if expressions as string values",
            prelude: "let named = map();",
            body: r#"let name = if e.args.count > 100 { "big" } else { "small" };
        named[name] = count();"#,
            sizes: &[10, 200, 20, 300, 400],
            want: vec![Want::map("named", &["@named[small]: 2", "@named[big]: 3"])],
        },
        // 10: 30, 31, 29, 14, 14; y = 14 << 4 | 1 = 225
        // 100: 300, 301, 299, 149, 49; y = 49 << 4 | 1 = 785
        ReadCase {
            name: "let locals and compound assignment",
            prelude: "let vals = map();\nlet s = map();",
            body: "let x = e.args.count;
        x *= 3;
        x += 1;
        x -= 2;
        x /= 2;
        x %= 100;
        let y = x;
        y <<= 4;
        y |= 1;
        vals[e.args.count] = y;
        s = sum(x);",
            sizes: &[10, 100],
            want: vec![Want::map("vals", &["@vals[10]: 225", "@vals[100]: 785"]), Want::map("s", &["@s: 63"])],
        },
        ReadCase {
            name: "constant for loops",
            prelude: "let n = 4;\nlet times10 = map();\nlet upto = map();\nlet hits = map();",
            body: "let acc = 0;
        for i in 0..5 { acc += i * e.args.count; }
        times10[e.args.count] = acc;
        let t = 0;
        for i in 1..=3 { t += i; }
        for i in 0..n { t += 100; }
        upto[e.args.count] = t;
        for i in 0..3 { hits[i] += 1; }",
            sizes: &[3, 7],
            want: vec![
                Want::map("times10", &["@times10[3]: 30", "@times10[7]: 70"]),
                Want::map("upto", &["@upto[3]: 406", "@upto[7]: 406"]),
                Want::map("hits", &["@hits[0]: 2", "@hits[1]: 2", "@hits[2]: 2"]),
            ],
        },
    ]);
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
