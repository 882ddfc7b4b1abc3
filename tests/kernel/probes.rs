//! Probe specs on a real kernel: `*` wildcards, comma lists with `e.probe`,
//! short aliases, and raw tracepoints with `e.argN`.

use std::ffi::CString;

use crate::common::*;

/// Tracepoints of the `syscalls` category whose names start with `prefix`,
/// as tracefs lists them.
fn syscall_tracepoints(prefix: &str) -> Vec<String> {
    for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let dir = format!("{root}/events/syscalls");
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut v: Vec<String> = rd
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect();
            v.sort();
            return v;
        }
    }
    panic!("tracefs is not mounted (after rtrace attached)");
}

kernel_test!(wildcard_attaches_every_match_and_names_each_probe);
fn wildcard_attaches_every_match_and_names_each_probe() {
    let _g = setup();
    let dir = TempDir::new();
    let path = CString::new(dir.write("f", "x").to_str().unwrap()).unwrap();
    let src = fill(
        r#"
let me = __ME__;
let m = map();
probe("tracepoint:syscalls:sys_enter_open*", |e| {
    if e.tid == me { m[e.probe] = count(); }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    let attached = t.wait_attached();
    let close = |fd: i64| {
        assert!(fd >= 0, "open failed");
        unsafe { libc::close(fd as i32) };
    };
    unsafe {
        close(libc::syscall(libc::SYS_open, path.as_ptr(), libc::O_RDONLY));
        for _ in 0..2 {
            close(libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY));
        }
        let mut how: libc::open_how = std::mem::zeroed();
        how.flags = libc::O_RDONLY as u64;
        for _ in 0..3 {
            close(libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            ));
        }
    }
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let matches = syscall_tracepoints("sys_enter_open");
    assert!(matches.len() >= 3, "{matches:?}");
    assert_eq!(attached, matches.len(), "one attach point per matching tracepoint {matches:?}\n{out}");
    assert_eq!(
        out.map_lines("m"),
        vec![
            "@m[tracepoint:syscalls:sys_enter_open]: 1",
            "@m[tracepoint:syscalls:sys_enter_openat]: 2",
            "@m[tracepoint:syscalls:sys_enter_openat2]: 3",
        ],
        "{out}"
    );
}

kernel_test!(wildcard_sharing_one_program_counts_all_matches);
fn wildcard_sharing_one_program_counts_all_matches() {
    let _g = setup();
    // No e.probe or e.args: the matches can share code; all still count.
    let src = fill(
        r#"
let me = __ME__;
let n = map();
probe("tracepoint:syscalls:sys_enter_getp*id", |e| {
    if e.tid == me { n = count(); }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    let attached = t.wait_attached();
    getppid_n(2);
    getpid_n(3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    // getpid, getppid, getpgid
    assert_eq!(attached, syscall_tracepoints("sys_enter_getp").iter().filter(|n| n.ends_with("id")).count(), "{out}");
    assert_eq!(out.map_lines("n"), vec!["@n: 5"], "{out}");
}

kernel_test!(comma_list_of_two_tracepoints);
fn comma_list_of_two_tracepoints() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let m = map();
probe("tracepoint:syscalls:sys_enter_getppid,tracepoint:syscalls:sys_enter_getpid", |e| {
    if e.tid == me { m[e.probe] = count(); }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 2);
    getppid_n(2);
    getpid_n(3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        out.map_lines("m"),
        vec!["@m[tracepoint:syscalls:sys_enter_getppid]: 2", "@m[tracepoint:syscalls:sys_enter_getpid]: 3"],
        "{out}"
    );
}

kernel_test!(short_alias_probe_name_is_the_full_name);
fn short_alias_probe_name_is_the_full_name() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let m = map();
probe("t:syscalls:sys_enter_getppid", |e| {
    if e.tid == me { m[e.probe] = count(); }
});
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    getppid_n(2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m[tracepoint:syscalls:sys_enter_getppid]: 2"], "{out}");
}

kernel_test!(rawtracepoint_sys_enter_syscall_id);
fn rawtracepoint_sys_enter_syscall_id() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let ids = map();
probe("rawtracepoint:sys_enter", |e| {
    if e.tid == me && (e.arg1 == __GETPPID__ || e.arg1 == __GETPID__) {
        ids[e.arg1] = count();
    }
});
"#,
        &[("ME", &tid()), ("GETPPID", &libc::SYS_getppid), ("GETPID", &libc::SYS_getpid)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    getppid_n(4);
    getpid_n(2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        out.map_lines("ids"),
        vec![format!("@ids[{}]: 2", libc::SYS_getpid), format!("@ids[{}]: 4", libc::SYS_getppid)],
        "{out}"
    );
}

kernel_test!(rawtracepoint_short_alias);
fn rawtracepoint_short_alias() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let c = map();
probe("rt:sys_enter", |e| {
    if e.tid == me && e.arg1 == __GETPPID__ { c = count(); }
});
"#,
        &[("ME", &tid()), ("GETPPID", &libc::SYS_getppid)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    getppid_n(6);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 6"], "{out}");
}
