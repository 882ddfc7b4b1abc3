//! Syscall wildcards on one `raw_syscalls` program that dispatches on the
//! syscall number (docs/probes-kernel.md): the same `e.probe` and
//! `e.args.NAME` per syscall as one tracepoint each, and one attachment.

use crate::common::*;

fn syscall(nr: libc::c_long, a: libc::c_long, b: libc::c_long) -> libc::c_long {
    unsafe { libc::syscall(nr, a, b) }
}

/// `@NAME[KEY]: V` of the finished run, or None.
fn entry(out: &Outcome, name: &str, key: &str) -> Option<i64> {
    let prefix = format!("@{name}[{key}]: ");
    out.map_lines(name).iter().find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
}

kernel_test!(enter_wildcard_counts_each_syscall_by_its_probe_name);
fn enter_wildcard_counts_each_syscall_by_its_probe_name() {
    let _g = setup();
    let src = fill(
        r#"
let c = map();
probe("tracepoint:syscalls:sys_enter_*", |e| { if e.tid == __ME__ { c[e.probe] = count(); } });
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(3);
    getpid_n(2);
    syscall(libc::SYS_fchdir, 977, 0);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(entry(&out, "c", "tracepoint:syscalls:sys_enter_getppid"), Some(3), "{out}");
    assert_eq!(entry(&out, "c", "tracepoint:syscalls:sys_enter_getpid"), Some(2), "{out}");
    assert_eq!(entry(&out, "c", "tracepoint:syscalls:sys_enter_fchdir"), Some(1), "{out}");
    assert_eq!(entry(&out, "c", "tracepoint:syscalls:sys_enter_getpgid"), None, "{out}");
}

kernel_test!(dispatched_probes_read_each_syscalls_own_args);
fn dispatched_probes_read_each_syscalls_own_args() {
    let _g = setup();
    // `sys_*_f*` match a few dozen syscalls: one program each way, each arm
    // reading its syscall's format fields (`__syscall_nr` on entry, `ret`
    // on exit).
    let src = fill(
        r#"
let nrs = map();
let rets = map();
probe("tracepoint:syscalls:sys_enter_f*", |e| { if e.tid == __ME__ { nrs[e.probe] = sum(e.args.__syscall_nr); } });
probe("tracepoint:syscalls:sys_exit_f*", |e| { if e.tid == __ME__ { rets[e.probe] = sum(e.args.ret); } });
"#,
        &[("ME", &tid())],
    );
    let explain = run(&["--explain", "-e", &src]);
    assert_eq!(explain.code, Some(0), "{explain}");
    for dir in ["enter", "exit"] {
        let want = format!("one program on tracepoint:raw_syscalls:sys_{dir} for ");
        assert!(explain.stdout.contains(&want), "no `{want}`:\n{explain}");
    }
    let mut t = Tracer::start(&["-e", &src]);
    assert!(t.wait_attached() > 16, "every matched syscall counts as a probe");
    // Bad descriptors: each call fails with -EBADF after its tracepoints fired.
    syscall(libc::SYS_fsync, 4321, 0);
    syscall(libc::SYS_fsync, 4321, 0);
    syscall(libc::SYS_fchdir, 977, 0);
    syscall(libc::SYS_flock, 555, libc::LOCK_SH as libc::c_long);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let p = |dir: &str, n: &str| format!("tracepoint:syscalls:sys_{dir}_{n}");
    assert_eq!(entry(&out, "nrs", &p("enter", "fsync")), Some(2 * libc::SYS_fsync), "{out}");
    assert_eq!(entry(&out, "nrs", &p("enter", "fchdir")), Some(libc::SYS_fchdir), "{out}");
    assert_eq!(entry(&out, "nrs", &p("enter", "flock")), Some(libc::SYS_flock), "{out}");
    assert_eq!(entry(&out, "nrs", &p("enter", "fdatasync")), None, "{out}");
    let ebadf = -(libc::EBADF as i64);
    assert_eq!(entry(&out, "rets", &p("exit", "fsync")), Some(2 * ebadf), "{out}");
    assert_eq!(entry(&out, "rets", &p("exit", "fchdir")), Some(ebadf), "{out}");
    assert_eq!(entry(&out, "rets", &p("exit", "flock")), Some(ebadf), "{out}");
}

kernel_test!(a_wildcard_attaches_one_program_and_few_syscalls_keep_their_tracepoints);
fn a_wildcard_attaches_one_program_and_few_syscalls_keep_their_tracepoints() {
    let _g = setup();
    let many = r#"let c = map(); probe("tracepoint:syscalls:sys_exit_*", |e| { c[e.probe] = count(); });"#;
    let out = run(&["--explain", "-e", many]);
    assert_eq!(out.code, Some(0), "{out}");
    let headers: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("probe ")).collect();
    assert_eq!(headers.len(), 1, "{out}");
    assert!(headers[0].starts_with("probe tracepoint:syscalls:sys_exit_* — 1 attach point(s)"), "{out}");
    assert!(out.stdout.contains("one program on tracepoint:raw_syscalls:sys_exit for "), "{out}");
    // Two syscalls: a tracepoint each is cheaper than running on every syscall.
    let few = r#"probe("tracepoint:syscalls:sys_enter_getppid,tracepoint:syscalls:sys_enter_getpid", |e| { print(e.probe); });"#;
    let out = run(&["--explain", "-e", few]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.contains("raw_syscalls"), "{out}");
    assert_eq!(out.lines().into_iter().filter(|l| l.starts_with("probe ")).count(), 2, "{out}");
}

/// Run `src` traced with `env`, making the same syscalls each time; the
/// finished run and its `Attaching N` count.
fn list_run(src: &str, env: &[(&str, &str)]) -> (Outcome, usize) {
    let mut t = Tracer::start_env(&["-e", src], env);
    let attached = t.wait_attached();
    getppid_n(3);
    getpid_n(2);
    syscall(libc::SYS_fchdir, 977, 0);
    syscall(libc::SYS_fsync, 4321, 0);
    syscall(libc::SYS_fsync, 4321, 0);
    syscall(libc::SYS_flock, 555, libc::LOCK_SH as libc::c_long);
    syscall(libc::SYS_getsid, 0, 0);
    syscall(libc::SYS_dup, 9999, 0);
    syscall(libc::SYS_syncfs, 9999, 0);
    (t.interrupt_and_finish(), attached)
}

kernel_test!(comma_lists_and_mixes_dispatch_like_one_tracepoint_each);
fn comma_lists_and_mixes_dispatch_like_one_tracepoint_each() {
    let _g = setup();
    // Ten syscalls listed one by one on entry (fchdir twice: its event counts
    // twice, as with two tracepoints), a wildcard mixed with a list on exit.
    let enter: Vec<String> = ["getppid", "getpid", "fchdir", "fsync", "flock", "getpgid", "getsid", "dup", "syncfs"]
        .iter()
        .chain(&["fdatasync", "fchdir"])
        .map(|n| format!("tracepoint:syscalls:sys_enter_{n}"))
        .collect();
    let src = fill(
        r#"
let nrs = map();
let rets = map();
probe("__ENTER__", |e| { if e.tid == __ME__ { nrs[e.probe] = sum(e.args.__syscall_nr); } });
probe("t:syscalls:sys_exit_f*,tracepoint:syscalls:sys_exit_getppid,tracepoint:syscalls:sys_exit_dup", |e| {
    if e.tid == __ME__ { rets[e.probe] = sum(e.args.ret); }
});
"#,
        &[("ENTER", &enter.join(",")), ("ME", &tid())],
    );
    let explain = run(&["--explain", "-e", &src]);
    assert_eq!(explain.code, Some(0), "{explain}");
    assert!(explain.stdout.contains("one program on tracepoint:raw_syscalls:sys_enter for 10 syscalls"), "{explain}");
    assert!(explain.stdout.contains("one program on tracepoint:raw_syscalls:sys_exit for "), "{explain}");
    assert!(explain.stdout.contains("8 or more syscall tracepoints of one direction in one probe()"), "{explain}");
    // The repeated fchdir keeps its own tracepoint.
    assert!(explain.stdout.contains("probe tracepoint:syscalls:sys_enter_fchdir — 1 attach point(s)"), "{explain}");
    let forced = run_env(&["--explain", "-e", &src], &[("RTRACE_SYSCALL_DISPATCH", "0")]);
    assert_eq!(forced.code, Some(0), "{forced}");
    assert!(!forced.stdout.contains("raw_syscalls"), "RTRACE_SYSCALL_DISPATCH=0 keeps a tracepoint each:\n{forced}");

    let (dispatched, n_dispatched) = list_run(&src, &[]);
    let (apart, n_apart) = list_run(&src, &[("RTRACE_SYSCALL_DISPATCH", "0")]);
    assert_eq!(dispatched.code, Some(0), "{dispatched}");
    assert_eq!(apart.code, Some(0), "{apart}");
    assert_eq!(n_dispatched, n_apart, "the same probe count either way");
    for name in ["nrs", "rets"] {
        assert_eq!(dispatched.map_lines(name), apart.map_lines(name), "dispatched:\n{dispatched}\napart:\n{apart}");
    }
    let p = |dir: &str, n: &str| format!("tracepoint:syscalls:sys_{dir}_{n}");
    assert_eq!(entry(&dispatched, "nrs", &p("enter", "getppid")), Some(3 * libc::SYS_getppid), "{dispatched}");
    assert_eq!(entry(&dispatched, "nrs", &p("enter", "fchdir")), Some(2 * libc::SYS_fchdir), "{dispatched}");
    assert_eq!(entry(&dispatched, "nrs", &p("enter", "syncfs")), Some(libc::SYS_syncfs), "{dispatched}");
    assert_eq!(entry(&dispatched, "nrs", &p("enter", "fdatasync")), None, "{dispatched}");
    let ebadf = -(libc::EBADF as i64);
    assert_eq!(entry(&dispatched, "rets", &p("exit", "fsync")), Some(2 * ebadf), "{dispatched}");
    assert_eq!(entry(&dispatched, "rets", &p("exit", "dup")), Some(ebadf), "{dispatched}");
    assert_eq!(entry(&dispatched, "rets", &p("exit", "getppid")), Some(3 * unsafe { libc::getppid() } as i64));
}
