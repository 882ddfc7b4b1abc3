//! The kernel/userspace split on a real kernel (design §2.3): userspace
//! statements in a probe run once per event that reaches them, and see event
//! fields and kernel `let` values as they were at that event.

use std::time::Duration;

use crate::common::*;

kernel_test!(print_with_interpolation_runs_once_per_event);
fn print_with_interpolation_runs_once_per_event() {
    let _g = setup();
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

kernel_test!(userspace_sees_kernel_lets_as_at_the_event);
fn userspace_sees_kernel_lets_as_at_the_event() {
    let _g = setup();
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

// ---------------------------------------------------------------------------
// print / printf / interpolation with captured values

kernel_test!(print_and_printf_of_captured_strings_and_ints);
fn print_and_printf_of_captured_strings_and_ints() {
    let _g = setup();
    // A comm shorter than 8 so that `%-8s` has to pad it.
    let comm = format!("r{}", &token()[..4]);
    set_comm(&comm);
    let dir = TempDir::new();
    let path = dir.join(&format!("f_{}", token()));
    let path_s = path.to_str().unwrap().to_string();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    let f = str(e.args.filename);
    if f == "__PATH__" {
        print(`${e.pid} ${e.comm} ${f}`);
        printf("%-8s|%5d|%x\n", e.comm, e.args.mode, e.pid);
        printf("[%s] %d\n", f, e.args.mode - 400);
    }
});
"#,
        &[("PATH", &path_s)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let c = std::ffi::CString::new(path_s.clone()).unwrap();
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644 as libc::c_uint) };
    assert!(fd >= 0, "cannot create {path_s}");
    unsafe { libc::close(fd) };
    let last = format!("[{path_s}] 20");
    t.wait_line("the last printf line", Duration::from_secs(10), |l| l == last);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let want = vec![format!("{} {comm} {path_s}", pid()), format!("{comm:<8}|{:>5}|{:x}", 0o644, pid()), last.clone()];
    let got: Vec<&str> = out.lines().into_iter().filter(|l| !l.starts_with("Attaching ") && !l.is_empty()).collect();
    assert_eq!(got, want, "{out}");
}

// ---------------------------------------------------------------------------
// Kernel `if` guards userspace statements

kernel_test!(kernel_if_sends_records_only_when_taken);
fn kernel_if_sends_records_only_when_taken() {
    let _g = setup();
    let mut z = Zero::open();
    let src = fill(
        r#"
let all = map();
let n = 0;
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == __ME__ && e.args.fd == __FD__ {
        all = count();
        if e.args.count == 7 {
            n += 1;
            print(`hit ${e.args.count} ${n}`);
        }
    }
});
probe("END", || { print(`n=${n}`); });
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    // A data ring that holds a few hundred records at most: if every event
    // sent one, 200k events in a burst would overflow it.
    let mut t = Tracer::start(&["--ring-size", "4K", "-e", &src]);
    assert_eq!(t.wait_attached(), 2);
    const MATCHING: usize = 5;
    const OTHERS: usize = 200_000;
    for _ in 0..MATCHING {
        for _ in 0..OTHERS / MATCHING {
            z.read(1);
        }
        z.read(7);
    }
    t.wait_line("the last hit", Duration::from_secs(10), |l| l == format!("hit 7 {MATCHING}"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let hits: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("hit ")).collect();
    let want: Vec<String> = (1..=MATCHING).map(|i| format!("hit 7 {i}")).collect();
    assert_eq!(hits, want, "{out}");
    assert!(out.line_index(&format!("n={MATCHING}")).is_some(), "END must see n={MATCHING}\n{out}");
    assert_eq!(out.map_lines("all"), vec![format!("@all: {}", MATCHING + OTHERS)], "{out}");
    assert_eq!(lost_reports(&out.stderr), vec![], "events whose branch was not taken must send no record\n{out}");
    assert!(!out.stderr.contains("queued event"), "{out}");
}

// ---------------------------------------------------------------------------
// Kernel lets are captured at the event; maps are read when userspace runs

kernel_test!(map_reads_in_userspace_are_as_at_the_event_and_loops_poll_the_map);
fn map_reads_in_userspace_are_as_at_the_event_and_loops_poll_the_map() {
    let _g = setup();
    let src = fill(
        r#"
let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        let v = m[0];
        m[0] = v + 1;
        print(`v=${v} now=${m[0]}`);
        if v == 0 {
            // Hold the first event's userspace part until the kernel has
            // counted the next two (bounded: 20 s at most).
            let waits = 0;
            while m[0] < 3 && waits < 2000 {
                sleep(0.01);
                waits += 1;
            }
        }
    }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    // The first event's userspace part now waits for the map to reach 3; the
    // next two events update it before their records are handled.
    t.wait_line("v=0 now=1", Duration::from_secs(10), |l| l == "v=0 now=1");
    getppid_n(2);
    t.wait_line("v=2 now=3", Duration::from_secs(10), |l| l == "v=2 now=3");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let vs: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("v=")).collect();
    // `v` and the print's `m[0]` are read where the closure reads them, at
    // the event (as a whole-userspace run would see them), although the
    // print of the second event runs after the third event's update; the
    // `while` loop reads the map as it is at each pass.
    assert_eq!(vs, vec!["v=0 now=1", "v=1 now=2", "v=2 now=3"], "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m[0]: 3"], "{out}");
}

kernel_test!(userspace_let_using_event_fields);
fn userspace_let_using_event_fields() {
    let _g = setup();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        let y = parse_int("5") + e.tid;
        print(`y=${y} tid=${e.tid}`);
    }
});
"#,
        &[("ME", &tid())],
    );
    let me = tid();
    let want = format!("y={} tid={me}", me + 5);
    let mut t = Tracer::start(&["-d", "30s", "-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the y line", Duration::from_secs(10), |l| l == want);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stderr, "", "{out}");
}

kernel_test!(string_method_on_an_event_field_runs_in_userspace);
fn string_method_on_an_event_field_runs_in_userspace() {
    let _g = setup();
    let comm = unique_comm();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        print(`len=${e.comm.len()} up=${e.comm.to_upper()}`);
    }
});
"#,
        &[("ME", &tid())],
    );
    let want = format!("len={} up={}", comm.len(), comm.to_uppercase());
    let mut t = Tracer::start(&["-d", "30s", "-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the len line", Duration::from_secs(10), |l| l == want);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

kernel_test!(if_on_a_string_method_of_an_event_field_runs_in_userspace);
fn if_on_a_string_method_of_an_event_field_runs_in_userspace() {
    let _g = setup();
    let comm = unique_comm();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        if e.comm.len() == __LEN__ {
            print(`long ${e.comm}`);
        } else {
            print("other");
        }
    }
});
"#,
        &[("ME", &tid()), ("LEN", &comm.len())],
    );
    let want = format!("long {comm}");
    let mut t = Tracer::start(&["-d", "30s", "-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the long line", Duration::from_secs(10), |l| l == want);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("other").is_none(), "{out}");
}

// ---------------------------------------------------------------------------
// system()

kernel_test!(system_is_refused_without_unsafe);
fn system_is_refused_without_unsafe() {
    let _g = setup();
    let src = fill(
        r#"
probe("BEGIN", || { print("begin ran"); });
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { system("echo hi"); }
});
"#,
        &[("ME", &tid())],
    );
    let out = run(&["-d", "5s", "-e", &src]);
    let line = assert_clean_error(&out);
    let (l, c) = position_of(&src, "system(");
    assert!(line.starts_with(&format!("-e:{l}:{c}: ")), "the error must name {l}:{c}: {line}\n{out}");
    assert!(line.contains("--unsafe"), "{line}");
    assert!(!out.stdout.contains("begin ran"), "nothing may run\n{out}");
}

kernel_test!(system_runs_with_unsafe_in_call_order);
fn system_runs_with_unsafe_in_call_order() {
    let _g = setup();
    let x = token();
    let src = fill(
        r#"
let k = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        let i = k[0];
        k[0] = i + 1;
        print(`p-${i}`);
        system(`echo hi-$X-${i}`);
    }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start_env(&["--unsafe", "-e", &src], &[("X", &x)]);
    t.wait_attached();
    getppid_n(5);
    let last = format!("hi-{x}-4");
    t.wait_line("the last system() output", Duration::from_secs(10), |l| l == last);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    // system() runs on a worker thread: its outputs keep the call order, and
    // the prints keep theirs; the two streams may interleave.
    let sys: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("hi-")).collect();
    let want_sys: Vec<String> = (0..5).map(|i| format!("hi-{x}-{i}")).collect();
    assert_eq!(sys, want_sys, "{out}");
    let prints: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("p-")).collect();
    let want_prints: Vec<String> = (0..5).map(|i| format!("p-{i}")).collect();
    assert_eq!(prints, want_prints, "{out}");
    // Each command is asked for after its event's print.
    for i in 0..5 {
        let p = out.line_index(&format!("p-{i}")).unwrap();
        let s = out.line_index(&format!("hi-{x}-{i}")).unwrap();
        assert!(p < s, "hi-{x}-{i} came before p-{i}\n{out}");
    }
}

kernel_test!(system_output_requested_before_exit_is_not_lost);
fn system_output_requested_before_exit_is_not_lost() {
    let _g = setup();
    let x = token();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        system("sleep 0.3; echo late-$X");
        exit(parse_int("0"));
    }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start_env(&["--unsafe", "-d", "30s", "-e", &src], &[("X", &x)]);
    t.wait_attached();
    getppid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.line_index(&format!("late-{x}")).is_some(),
        "the command ran before exit() was asked for; its output must appear\n{out}"
    );
}

// ---------------------------------------------------------------------------
// exit(), fail(), assert() from userspace statements in a probe

fn userspace_ending(body: &str) -> Outcome {
    let src = getppid_script("", body) + r#"probe("END", || { print("end ran"); });"#;
    run_to_end(&["-d", "30s", "-e", &src], &[], || getppid_n(1), EXIT_TIMEOUT)
}

kernel_test!(exit_fail_and_assert_from_userspace);
fn exit_fail_and_assert_from_userspace() {
    let _g = setup();
    let fail_msg = format!("budget-{}", token());
    let assert_msg = format!("x-{}", token());
    let soon = Some(Duration::from_secs(20));
    let not_reached = strings(&["not reached"]);
    let cases: Vec<(&str, String, Expect)> = vec![
        // `code` comes from userspace, so exit(code) runs there too; END
        // runs after exit(), and exit() ends the run, not -d.
        (
            "exit with a code from userspace",
            r#"let code = parse_int("4"); exit(code); print("not reached");"#.into(),
            Expect {
                code: 4,
                lines: strings(&["end ran"]),
                no_lines: not_reached.clone(),
                within: soon,
                ..Default::default()
            },
        ),
        // fail()'s message is on stderr, and fail() ends the run.
        (
            "fail",
            format!(r#"fail("{fail_msg}"); print("not reached");"#),
            Expect {
                code: 1,
                no_lines: not_reached.clone(),
                stdout_lacks: vec![fail_msg.clone()],
                stderr_has: vec![fail_msg.clone()],
                within: soon,
                ..Default::default()
            },
        ),
        (
            "assert false",
            format!(r#"assert(e.tid < 0, "{assert_msg}"); print("not reached");"#),
            Expect {
                code: 1,
                no_lines: not_reached.clone(),
                stderr_has: vec![assert_msg.clone()],
                within: soon,
                ..Default::default()
            },
        ),
        (
            "assert true continues",
            r#"assert(e.tid > 0, "never"); print("went on"); exit(parse_int("3"));"#.into(),
            Expect { code: 3, lines: strings(&["went on"]), stderr_lacks: strings(&["never"]), ..Default::default() },
        ),
        // `exit(3)` is a kernel statement (a control message); the print
        // before it is a userspace record of the same event, which must
        // still run.
        (
            "print before a kernel exit is not dropped",
            r#"print(`bye ${e.tid}`); exit(3);"#.into(),
            Expect { code: 3, lines: vec![format!("bye {}", tid()), "end ran".into()], ..Default::default() },
        ),
    ];
    each_case(&cases, |c| c.0, |(_, body, expect)| expect.check(&userspace_ending(body)));
}

// ---------------------------------------------------------------------------
// every() and after()

kernel_test!(every_and_after_run_the_right_number_of_times);
fn every_and_after_run_the_right_number_of_times() {
    let _g = setup();
    let src = r#"
let ticks = 0;
let afters = 0;
every("100ms", || { ticks += 1; print(`tick ${ticks}`); });
after("250ms", || { afters += 1; print(`after ${afters}`); });
probe("END", || { print(`ticks=${ticks} afters=${afters}`); });
"#;
    let mut t = Tracer::start(&["-d", "1050ms", "-e", src]);
    t.wait_attached();
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    // Due at 100, 200, ... 1000 ms; the one-shot at 250 ms, between the
    // second and the third tick.
    let ticks: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("tick ")).collect();
    let want: Vec<String> = (1..=10).map(|i| format!("tick {i}")).collect();
    assert_eq!(ticks, want, "{out}");
    assert!(out.line_index("ticks=10 afters=1").is_some(), "{out}");
    let a = out.line_index("after 1").expect("after() never ran");
    assert!(out.line_index("tick 2").unwrap() < a && a < out.line_index("tick 3").unwrap(), "{out}");
}

kernel_test!(after_does_not_run_past_the_end);
fn after_does_not_run_past_the_end() {
    let _g = setup();
    let src = r#"
let afters = 0;
after("250ms", || { afters += 1; print("after ran"); });
probe("END", || { print(`afters=${afters}`); });
"#;
    let mut t = Tracer::start(&["-d", "120ms", "-e", src]);
    t.wait_attached();
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("after ran").is_none(), "{out}");
    assert!(out.line_index("afters=0").is_some(), "{out}");
}

// ---------------------------------------------------------------------------
// Userspace runtime errors in probe statements

fn runtime_error_script() -> String {
    fill(
        r#"
let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        print(`before ${e.tid}`);
        c = count();
        print(parse_int("12") / (e.tid - e.tid));
        print("after");
    }
});
probe("tracepoint:syscalls:sys_enter_getpid", |e| {
    if e.tid == __ME__ { print("still tracing"); }
});
"#,
        &[("ME", &tid())],
    )
}

kernel_test!(userspace_runtime_error_stops_the_run);
fn userspace_runtime_error_stops_the_run() {
    let _g = setup();
    let src = runtime_error_script();
    let mut t = Tracer::start(&["-d", "30s", "-e", &src]);
    t.wait_attached();
    getppid_n(3);
    let out = t.finish();
    assert!(matches!(out.code, Some(c) if c != 0), "a runtime error must end the run with a non-zero exit\n{out}");
    assert!(out.elapsed < Duration::from_secs(20), "the error must stop the run, not -d\n{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
    let (l, c) = position_of(&src, "/ (e.tid");
    let at = format!("-e:{l}:{c}: ");
    let errs: Vec<&str> = out.stderr_lines().into_iter().filter(|s| s.starts_with(&at)).collect();
    assert_eq!(errs.len(), 1, "the error is reported once, at {l}:{c}\n{out}");
    assert!(errs[0].contains("Division by zero"), "{out}");
    assert!(errs[0].contains("tracepoint:syscalls:sys_enter_getppid"), "the error names the probe\n{out}");
    assert!(out.line_index("after").is_none(), "{out}");
    assert!(out.stdout.contains("before "), "{out}");
}

kernel_test!(userspace_runtime_errors_are_counted_with_keep_going);
fn userspace_runtime_errors_are_counted_with_keep_going() {
    let _g = setup();
    let src = runtime_error_script();
    let mut t = Tracer::start(&["--keep-going", "-e", &src]);
    t.wait_attached();
    getppid_n(3);
    getpid_n(1);
    t.wait_line("the run to go on after the errors", Duration::from_secs(10), |l| l == "still tracing");
    let out = t.interrupt_and_finish();
    eprintln!("exit status with --keep-going after errors: {:?}", out.code);
    let me = tid();
    let before: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("before ")).collect();
    assert_eq!(before, vec![format!("before {me}"); 3], "{out}");
    assert!(out.line_index("after").is_none(), "{out}");
    let (l, c) = position_of(&src, "/ (e.tid");
    let at = format!("-e:{l}:{c}: ");
    let errs = out.stderr_lines().into_iter().filter(|s| s.starts_with(&at) && s.contains("Division by zero")).count();
    assert_eq!(errs, 1, "the first error is shown once\n{out}");
    assert!(
        out.stderr_lines().iter().any(|s| s.contains(" 3 runtime error")),
        "the number of errors (3) is reported\n{out}"
    );
    assert_eq!(out.map_lines("c"), vec!["@c: 3"], "{out}");
}

// ---------------------------------------------------------------------------
// Kernel statements can't use userspace values

kernel_test!(kernel_statement_using_a_userspace_value_names_both_places);
fn kernel_statement_using_a_userspace_value_names_both_places() {
    let _g = setup();
    let src = fill(
        r#"
let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        let s = `pid ${e.pid}`;
        c[s] = count();
    }
});
"#,
        &[("ME", &tid())],
    );
    let out = run(&["-e", &src]);
    let line = assert_clean_error(&out);
    let (dl, dc) = position_of(&src, "let s");
    let (ul, uc) = position_of(&src, "s] = count");
    assert!(line.starts_with(&format!("-e:{ul}:{uc}: ")), "the error points at the use {ul}:{uc}: {line}");
    assert!(line.contains(&format!("{dl}:{dc}")), "the error names where `s` is computed ({dl}:{dc}): {line}");
}

// ---------------------------------------------------------------------------
// Latency of a lone event

kernel_test!(a_lone_event_is_delivered_without_waiting_for_more);
fn a_lone_event_is_delivered_without_waiting_for_more() {
    let _g = setup();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { print(`lone ${e.tid}`); }
});
"#,
        &[("ME", &tid())],
    );
    let want = format!("lone {}", tid());
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    // Let the run settle (BEGIN done, reader idle) before the one event.
    std::thread::sleep(Duration::from_millis(200));
    let mut worst = Duration::ZERO;
    for i in 0..5 {
        let before = std::time::Instant::now();
        getppid_n(1);
        t.wait_count("the lone event's line", Duration::from_secs(5), i + 1, |l| l == want);
        let latency = t.ready_at.unwrap() - before;
        println!("lone event latency #{i}: {:.3} ms", latency.as_secs_f64() * 1e3);
        worst = worst.max(latency);
        std::thread::sleep(Duration::from_millis(150));
    }
    println!("lone event latency, worst of 5: {:.3} ms", worst.as_secs_f64() * 1e3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}
