//! Calls on a real kernel: every call is checked before anything attaches
//! (a typo in a probe that never fires still fails the run), printf and
//! friends take any number of values in probes and userspace, and printf
//! formats as bpftrace (length modifiers, C float forms, `*` widths).

use crate::common::*;

kernel_test!(a_typo_in_a_probe_that_never_fires_fails_before_attaching);
fn a_typo_in_a_probe_that_never_fires_fails_before_attaching() {
    let _g = setup();
    // The filter never matches: before the check the run exited 0.
    let src = r#"
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.pid == -5 {
        prnt(e.pid);
    }
});
"#;
    let out = run(&["-d", "1s", "-e", src]);
    assert_eq!(out.code, Some(1), "{out}");
    let (line, col) = position_of(src, "prnt(");
    assert_eq!(
        out.stderr_lines(),
        vec![format!("-e:{line}:{col}: error: unknown function `prnt`: did you mean `print`?")],
        "{out}"
    );
    assert!(!out.stdout.contains("Attaching"), "nothing may attach\n{out}");
    // Same for a bpftrace habit, in END, under --dry-run.
    let out = run(&["--dry-run", "-e", r#"let m = map(); probe("END", || { delete(m[1]); });"#]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr.contains("-e:1:34: error: unknown function `delete`: bpftrace's delete(@m[key]) is `m.remove(key)`"),
        "{out}"
    );
}

kernel_test!(a_literal_format_must_fit_its_values);
fn a_literal_format_must_fit_its_values() {
    let _g = setup();
    let src = r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { printf("%d %s %d\n", e.pid, e.comm); });"#;
    let out = run(&["--explain", "-e", src]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("-e:1:54: error: printf: the format \"%d %s %d\\n\" takes 3 values, 2 given"), "{out}");
    let src = r#"let m = map(); probe("END", || { printf("%d\n", m); });"#;
    let out = run(&["--dry-run", "-e", src]);
    assert!(out.stderr.contains("`m` is a map, and printf prints values: write `m[key]`"), "{out}");
}

kernel_test!(printf_in_a_probe_takes_many_kernel_values);
fn printf_in_a_probe_takes_many_kernel_values() {
    let _g = setup();
    let me = tid();
    let comm = unique_comm();
    set_comm(&comm);
    // 24 values: kernel lets, event fields and constants, past any fixed ladder.
    let src = fill(
        r#"
let me = __ME__;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me {
        let a = e.tid * 2;
        let b = e.tid + 1;
        printf("%d %d %d %s %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %s %x\n",
            e.tid, a, b, e.comm, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, e.comm, e.tid);
        exit();
    }
});
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().into_iter().filter(|l| !l.starts_with("Attaching")).collect();
    let want = format!("{me} {} {} {comm} 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 {comm} {me:x}", me * 2, me + 1);
    assert_eq!(lines, vec![want.as_str()], "{out}");
}

kernel_test!(printf_formats_as_bpftrace_in_probes_and_userspace);
fn printf_formats_as_bpftrace_in_probes_and_userspace() {
    let _g = setup();
    let me = tid();
    let src = fill(
        r#"
let me = __ME__;
probe("BEGIN", || {
    let x = 0x12345678abcdef;
    printf("%hhx %hx %x %jx\n", x, x, x, x);
    printf("%hhd %hu %lld %llu\n", 255, -1, -1, -1);
    printf("%e %E %.2e %g %G %g %.3g %#g\n", 1234.5, 0.000123, -1e100, 100000.0, 1e-10, 0.0001, 1234.5, 1.5);
    printf("[%*d] [%-*s] [%.*f] [%%]\n", 5, 42, 4, "ab", 2, 2.46813);
    print(sprintf("%d%d%d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8, 9, 0));
});
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me {
        printf("%hhx %hx %5.1f|%-6d|%06d\n", e.tid, e.tid, e.tid, e.tid, e.tid);
        exit();
    }
});
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start(&["-q", "-e", &src]);
    t.wait_line("the BEGIN output", std::time::Duration::from_secs(20), |l| l.contains("12345"));
    getppid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let probe_line = format!("{:x} {:x} {:5.1}|{:<6}|{:06}", me & 0xff, me & 0xffff, me as f64, me, me);
    assert_eq!(
        out.lines(),
        vec![
            "ef cdef 78abcdef 12345678abcdef",
            "-1 65535 -1 18446744073709551615",
            "1.234500e+03 1.230000E-04 -1.00e+100 100000 1E-10 0.0001 1.23e+03 1.50000",
            "[   42] [ab  ] [2.47] [%]",
            "1234567890",
            probe_line.as_str(),
        ],
        "{out}"
    );
}

kernel_test!(system_takes_bpftraces_seven_values);
fn system_takes_bpftraces_seven_values() {
    let _g = setup();
    // bpftrace's runtime test system_more_args.
    let src = r#"probe("BEGIN", || { system("echo %d %d %d %d %d %d %d", 1, 2, 3, 4, 5, 6, 7); exit(); });"#;
    let out = run(&["-q", "--unsafe", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines(), vec!["1 2 3 4 5 6 7"], "{out}");
}

kernel_test!(a_record_past_the_bpf_stack_is_a_clear_error);
fn a_record_past_the_bpf_stack_is_a_clear_error() {
    let _g = setup();
    let lets: String = (1..=40).map(|i| format!("let a{i} = e.pid * {i}; ")).collect();
    let values: Vec<String> = (1..=40).map(|i| format!("a{i}")).collect();
    let src = format!(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ {lets}printf("{}\n", {}); }});"#,
        "%d ".repeat(40),
        values.join(", ")
    );
    let out = run(&["--dry-run", "-e", &src]);
    assert_eq!(out.code, Some(1), "{out}");
    let (line, col) = position_of(&src, "printf(");
    let want = format!(
        "-e:{line}:{col}: error: these statements send 40 kernel values (328 bytes) to userspace in one record, more than fits the 512-byte BPF stack"
    );
    assert!(out.stderr.starts_with(&want), "{out}");
}

kernel_test!(usdt_arguments_past_arg9_in_one_printf, needs: Program("gcc"));
fn usdt_arguments_past_arg9_in_one_printf() {
    let _g = setup();
    // The fixture writes its .note.stapsdt by hand: no <sys/sdt.h> needed.
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/usdt_many.c");
    let dir = TempDir::new();
    let bin = dir.join(&format!("u12_{}", token()));
    let built = gcc().args(["-O2", "-o"]).arg(&bin).arg(fixture).output().expect("cannot run gcc");
    assert!(built.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let values: Vec<String> = (0..12).map(|k| format!("e.arg{k}")).collect();
    let src = format!(
        r#"probe("usdt:{}:t12:many", |e| {{ printf("{}\n", {}); }});"#,
        bin.display(),
        ["%d"; 12].join(" "),
        values.join(", ")
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let ran = std::process::Command::new(&bin).arg("3").status().unwrap();
    assert!(ran.success());
    t.wait_count("three records", std::time::Duration::from_secs(20), 3, |l| !l.starts_with("Attaching"));
    let out = t.interrupt_and_finish();
    let want: Vec<String> =
        (1..=3).map(|i| (0..12).map(|k| (100 * i + k).to_string()).collect::<Vec<_>>().join(" ")).collect();
    let got: Vec<&str> = out.lines().into_iter().filter(|l| !l.starts_with("Attaching")).collect();
    assert_eq!(got, want, "{out}");
}
