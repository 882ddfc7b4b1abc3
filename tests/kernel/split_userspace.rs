//! Userspace statements of a probe as plain Rhai (design §2.3): loops,
//! object maps and arrays, closures, `switch`, `try`, script functions given
//! `e`, modules imported at the top level, `str()` of a kernel pointer in a
//! userspace position, and `exit()` from userspace ending the callbacks.

use std::time::Duration;

use crate::common::*;

/// Run `body` in a getppid probe of this thread, `n` events, with `top`
/// before it and `end` as the END closure's body; -d bounds the run.
fn run_probe(top: &str, body: &str, end: &str, n: usize) -> Outcome {
    let src = fill(
        r#"
__TOP__
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        __BODY__
    }
});
probe("END", || { __END__ });
"#,
        &[("TOP", &top), ("ME", &tid()), ("BODY", &body), ("END", &end)],
    );
    let mut t = Tracer::start(&["-d", "20s", "-e", &src]);
    t.wait_attached();
    getppid_n(n);
    t.wait_line("the END marker's event", Duration::from_secs(10), |l| l.starts_with("ev"));
    t.interrupt_and_finish()
}

kernel_test!(loops_arrays_strings_closures_switch_and_try_run_in_userspace);
fn loops_arrays_strings_closures_switch_and_try_run_in_userspace() {
    let _g = setup();
    let out = run_probe(
        "let xs = [100, 300, 500];",
        r#"
        let parts = "a/b/c".split("/");
        let s = "";
        for p in parts { s += p; s += "*"; }
        let i = 0;
        while i < 5 { i += 1; if i == 2 { continue; } if i == 4 { break; } }
        let j = 0;
        loop { j += 1; if j >= 3 { break; } }
        for k in 0..e.tid % 3 + 1 { j += 1; }
        let big = xs.filter(|x| x == 300);
        let kind = switch i { 4 => "four", _ => "other" };
        let caught = "";
        try { throw "boom"; } catch (err) { caught = err; }
        print(`ev ${s} ${big} ${kind} ${caught} ${j > 3}`);
        "#,
        "",
        1,
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("ev a*b*c* [300] four boom true").is_some(), "{out}");
}

kernel_test!(object_maps_at_the_top_level_are_state_shared_with_end);
fn object_maps_at_the_top_level_are_state_shared_with_end() {
    let _g = setup();
    let out = run_probe(
        "let per = #{}; let n = 0;",
        r#"
        per[e.comm] = (per[e.comm] ?? 0) + 1;
        n += 1;
        if e.comm in per { print(`ev ${per[e.comm]}`); }
        "#,
        r#"print(`end n=${n} keys=${per.keys().len()} total=${per.values().reduce(|sum, v| sum + v, 0)}`);"#,
        3,
    );
    assert_eq!(out.code, Some(0), "{out}");
    for k in 1..=3 {
        assert!(out.line_index(&format!("ev {k}")).is_some(), "{out}");
    }
    assert!(out.line_index("end n=3 keys=1 total=3").is_some(), "{out}");
}

kernel_test!(the_event_is_a_whole_value_for_script_functions);
fn the_event_is_a_whole_value_for_script_functions() {
    let _g = setup();
    let me = tid();
    let out = run_probe(
        "fn describe(ev) { `${ev.tid}:${ev.nsecs > 0}` }",
        r#"
        let copy = e;
        print(`ev ${describe(e)} ${copy.tid == e.tid} ${type_of(e)}`);
        "#,
        "",
        1,
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index(&format!("ev {me}:true true map")).is_some(), "{out}");
}

kernel_test!(modules_imported_at_the_top_level_work_in_probes_end_and_timers);
fn modules_imported_at_the_top_level_work_in_probes_end_and_timers() {
    let _g = setup();
    let out = run_probe(
        r#"import "fmt" as f; every("50ms", || { print(`timer ${f::bytes(2048)}`); });"#,
        r#"print(`ev ${f::bytes(1024)}`);"#,
        r#"print(`end ${f::bytes(4096)}`);"#,
        1,
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("ev 1.0 KiB").is_some(), "{out}");
    assert!(out.line_index("end 4.0 KiB").is_some(), "{out}");
}

kernel_test!(exit_from_userspace_runs_no_further_event_callbacks);
fn exit_from_userspace_runs_no_further_event_callbacks() {
    let _g = setup();
    // The condition needs userspace (`n`), so exit() runs there; the other
    // 39 events are already queued when it does.
    let out = run_probe("let n = 0;", r#"n += 1; print(`ev ${n}`); if n >= 1 { exit(); }"#, r#"print("end ran");"#, 40);
    assert_eq!(out.code, Some(0), "{out}");
    let evs: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("ev ")).collect();
    assert_eq!(evs, vec!["ev 1"], "one callback, then exit()\n{out}");
    assert!(out.line_index("end ran").is_some(), "END runs after exit()\n{out}");
}

kernel_test!(str_of_a_kernel_pointer_in_a_userspace_position_is_read_by_the_kernel);
fn str_of_a_kernel_pointer_in_a_userspace_position_is_read_by_the_kernel() {
    let _g = setup();
    let dir = TempDir::new();
    let path = dir.join(&format!("split-{}", token()));
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    let p = e.args.filename;
    if e.tid == __ME__ {
        printf("opened %s\n", str(p));
        print(`len ${str(p).len()}`);
    }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-d", "20s", "-e", &src]);
    t.wait_attached();
    let _ = std::fs::File::open(&path);
    let want = format!("opened {}", path.display());
    t.wait_line("the opened path", Duration::from_secs(10), |l| l == want);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let len = format!("len {}", path.display().to_string().len());
    assert!(out.line_index(&len).is_some(), "{out}");
}

kernel_test!(explain_says_where_each_statement_runs_and_why);
fn explain_says_where_each_statement_runs_and_why() {
    let _g = setup();
    let out = run(&[
        "--explain",
        "-e",
        r#"let m = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    m[e.comm] = count();
    let parts = e.comm.split("-");
    print(parts);
});"#,
    ]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("kernel    2:5    m[e.comm] = count();"), "{out}");
    assert!(out.stdout.contains("userspace 3:5    let parts = e.comm.split(\"-\");  — calls .split()"), "{out}");
    assert!(out.stdout.contains("userspace 4:5    print(parts);  — calls print()"), "{out}");
}
