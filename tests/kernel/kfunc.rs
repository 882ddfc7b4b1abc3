//! Kernel-function probes for real: kprobe, kretprobe, fentry, fexit,
//! `FN+OFFSET`, `MODULE:FN`, wildcards, listing, arguments (raw and BTF),
//! user and kernel strings, return values, kernel stacks, -p/-c, the
//! kprobe→fentry choice per function, and the tools built on them. They
//! need kprobes or fentry, so on a kernel without them (this machine's own,
//! possibly) they are reported ignored; scripts/test-vm.sh runs them on
//! Debian's stock 6.1 kernel.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::time::Duration;

use crate::common::*;
use crate::tools::{lines_with, start_tool, tool_until};

/// Open `path` (which need not exist) once from this thread, as openat(2).
fn open_once(path: &str) -> i64 {
    let c = CString::new(path).unwrap();
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
    }
    fd as i64
}

/// The probe kinds a test runs for (it needs both kprobes and fentry).
const ENTRY_KINDS: [&str; 2] = ["kprobe", "fentry"];
const RETURN_KINDS: [&str; 2] = ["kretprobe", "fexit"];

/// Whether the 9p module is loaded (this VM's root file system is 9p).
fn ninep_loaded() -> bool {
    std::fs::read_to_string("/proc/modules").is_ok_and(|m| m.lines().any(|l| l.starts_with("9p ")))
}

kernel_test!(user_string_arguments_read_without_being_told, needs: Kprobes, Fentry);
/// `str()` of a user pointer argument: kprobe's raw `e.arg1` and fentry's
/// BTF `e.args.filename` both read the path the caller passed (user memory),
/// without `uptr()`; `uptr()` says the same thing explicitly.
fn user_string_arguments_read_without_being_told() {
    let _g = setup();
    for kind in ENTRY_KINDS {
        for arg in ["ARG", "uptr(ARG)"] {
            let arg = arg.replace("ARG", if kind == "kprobe" { "e.arg1" } else { "e.args.filename" });
            let path = format!("/tmp/rtt_kfunc_{}", token());
            let src = format!(
                r#"probe("{kind}:do_sys_openat2", |e| {{ if e.tid == {} {{ print(`OPEN ${{str({arg})}}`); }} }});"#,
                tid()
            );
            let mut t = Tracer::start(&["-e", &src]);
            t.wait_attached();
            open_once(&path);
            let line = t.wait_line("the open", Duration::from_secs(20), |l| l.starts_with("OPEN "));
            let out = t.interrupt_and_finish();
            assert_eq!(line, format!("OPEN {path}"), "{kind} str({arg})\n{out}");
            assert_eq!(out.code, Some(0), "{out}");
        }
    }
}

kernel_test!(kernel_string_members_and_integer_arguments, needs: Fentry);
/// A kernel string through BTF members (kernel memory) next to a user one.
fn kernel_string_members_and_integer_arguments() {
    let _g = setup();
    let mut f = Zero::open();
    let src = format!(
        r#"probe("fentry:vfs_read", |e| {{ if e.tid == {} && e.args.count == 4097 {{ print(`READ ${{str(e.args.file.f_path.dentry.d_name.name)}} ${{e.args.count}}`); }} }});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    f.read(4097);
    let line = t.wait_line("the read", Duration::from_secs(20), |l| l.starts_with("READ "));
    let out = t.interrupt_and_finish();
    assert_eq!(line, "READ zero 4097", "{out}");
}

kernel_test!(return_values, needs: Kprobes, Fentry);
/// `e.retval` at kretprobe and fexit: the fd open(2) returned.
fn return_values() {
    let _g = setup();
    for kind in RETURN_KINDS {
        let src = format!(
            r#"probe("{kind}:do_sys_openat2", |e| {{ if e.tid == {} {{ print(`RET ${{e.retval}}`); }} }});"#,
            tid()
        );
        let mut t = Tracer::start(&["-e", &src]);
        t.wait_attached();
        let path = CString::new("/dev/null").unwrap();
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
        assert!(fd >= 0);
        let line = t.wait_line("the return", Duration::from_secs(20), |l| l.starts_with("RET "));
        unsafe { libc::close(fd) };
        assert_eq!(open_once("/nonexistent/rtt"), -1);
        let second = t.wait_line("the failed open", Duration::from_secs(20), |l| l.starts_with("RET -"));
        let out = t.interrupt_and_finish();
        assert_eq!(line, format!("RET {fd}"), "{kind}\n{out}");
        assert_eq!(second, "RET -2", "the kernel returns -ENOENT at {kind}\n{out}");
    }
}

kernel_test!(kernel_stacks_start_at_the_probed_function, needs: Kprobes, Fentry);
/// Kernel stacks start at the probed function, for trampolines as for
/// kprobes: no `bpf_prog_...` or `bpf_trampoline_...` frame first.
fn kernel_stacks_start_at_the_probed_function() {
    let _g = setup();
    for kind in ENTRY_KINDS {
        let mut f = Zero::open();
        let src = format!(
            r#"probe("{kind}:vfs_read", |e| {{ if e.tid == {} {{ print(`STACK${{e.kstack(3)}}`); print("END"); exit(); }} }});"#,
            tid()
        );
        let mut t = Tracer::start(&["-e", &src]);
        t.wait_attached();
        f.read(1);
        t.wait_line("the stack", Duration::from_secs(20), |l| l == "END");
        let out = t.finish();
        let lines = out.lines();
        let at = lines.iter().position(|l| *l == "STACK").unwrap_or_else(|| panic!("{out}"));
        let frames: Vec<&str> =
            lines[at + 1..].iter().map(|l| l.trim()).filter(|l| !l.is_empty() && *l != "END").collect();
        assert!(!frames.is_empty() && frames.len() <= 3, "{kind}: {frames:?}\n{out}");
        assert!(frames[0].starts_with("vfs_read+"), "{kind}: the first frame is {:?}\n{out}", frames[0]);
        assert!(frames.iter().all(|f| !f.starts_with("bpf_")), "{kind}: {frames:?}\n{out}");
    }
}

kernel_test!(listing_matches_the_kernels_traceable_functions, needs: Kprobes, Fentry);
/// The names `-l 'kprobe:vfs_*'` lists are the kernel's traceable
/// functions (available_filter_functions), each once; fentry lists those
/// with BTF; `-lv` shows a BTF signature.
fn listing_matches_the_kernels_traceable_functions() {
    let _g = setup();
    let traceable: BTreeSet<String> = std::fs::read_to_string("/sys/kernel/tracing/available_filter_functions")
        .expect("available_filter_functions")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("vfs_"))
        .map(|n| format!("kprobe:{n}"))
        .collect();
    let out = run(&["-l", "kprobe:vfs_*"]);
    assert_eq!(out.code, Some(0), "{out}");
    let listed: Vec<String> = out.lines().iter().map(|l| l.to_string()).collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "a name listed twice\n{out}");
    assert_eq!(unique, traceable, "{out}");

    let out = run(&["-lv", "fentry:vfs_read"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines()[0], "fentry:vfs_read", "{out}");
    assert!(out.stdout.contains("struct file * file") && out.stdout.contains("size_t count"), "{out}");
}

kernel_test!(wildcards_and_functions_fentry_cannot_take, needs: Kprobes);
/// A wildcard attaches each function the best way it can (fentry where a
/// trampoline loads, a kprobe otherwise) and counts per function; a
/// function with more arguments than a trampoline takes (do_mmap has 7) is
/// a kprobe and works.
fn wildcards_and_functions_fentry_cannot_take() {
    let _g = setup();
    let mut f = Zero::open();
    let src =
        format!(r#"let m = map(); probe("kprobe:vfs_*", |e| {{ if e.tid == {} {{ m[e.func] = count(); }} }});"#, tid());
    let mut t = Tracer::start(&["-e", &src]);
    let attached = t.wait_attached();
    assert!(attached > 10, "kprobe:vfs_* attached {attached}");
    f.reads(&[1, 1, 1]);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let read = out.map_lines("m").into_iter().find(|l| l.starts_with("@m[vfs_read]: ")).unwrap_or_default();
    assert_eq!(read, "@m[vfs_read]: 3", "{out}");

    let src = format!(r#"let m = map(); probe("kprobe:do_mmap", |e| {{ if e.tid == {} {{ m = count(); }} }});"#, tid());
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    for _ in 0..2 {
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        unsafe { libc::munmap(p, 4096) };
    }
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("m"), ["@m: 2"], "{out}");
}

kernel_test!(kprobe_at_an_offset, needs: Kprobes);
/// `kprobe:FN+OFFSET` (on the kprobe PMU, never a trampoline), at an
/// offset the kernel's own kprobe_events accepts, and the error for an
/// offset that isn't an instruction boundary or a kretprobe's offset.
fn kprobe_at_an_offset() {
    let _g = setup();
    let events = "/sys/kernel/tracing/kprobe_events";
    // The kernel says which offsets start an instruction.
    let accepted = |off: u32| {
        let ok = std::fs::OpenOptions::new()
            .append(true)
            .open(events)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("p:rtt_off vfs_read+{off}\n").as_bytes()))
            .is_ok();
        if ok {
            let mut f = std::fs::OpenOptions::new().append(true).open(events).unwrap();
            std::io::Write::write_all(&mut f, b"-:rtt_off\n").unwrap();
        }
        ok
    };
    let good = (1..16).find(|&o| accepted(o)).expect("some offset in vfs_read's first 16 bytes starts an instruction");
    let bad =
        (1..16).find(|&o| !accepted(o)).expect("some offset in vfs_read's first 16 bytes is inside an instruction");
    let mut f = Zero::open();
    let src = format!(
        r#"let m = map(); probe("kprobe:vfs_read+{good}", |e| {{ if e.tid == {} {{ m = count(); }} }});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    f.reads(&[1, 1]);
    let out = t.interrupt_and_finish();
    assert_eq!(out.map_lines("m"), ["@m: 2"], "kprobe:vfs_read+{good}\n{out}");

    let src = format!(r#"probe("kprobe:vfs_read+{bad}", |e| {{}});"#);
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains(&format!("offset {bad} is not the start of an instruction")), "{out}");
    let out = run(&["-e", r#"probe("kretprobe:vfs_read+4", |e| {});"#]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("only a kprobe can take an offset"), "{out}");
}

kernel_test!(module_functions, needs: Kprobes, Check("the 9p module loaded", ninep_loaded));
/// `kprobe:MODULE:FN`: functions of a loaded module (this VM's root file
/// system is 9p) are listed and attached.
fn module_functions() {
    let _g = setup();
    let out = run(&["-l", "kprobe:9p:v9fs_*"]);
    assert!(!out.stdout.trim().is_empty(), "the 9p module is loaded: its functions are listed\n{out}");
    assert!(out.lines().iter().all(|l| l.starts_with("kprobe:v9fs_")), "{out}");
    let src = format!(
        r#"let m = map(); probe("kprobe:9p:v9fs_*", |e| {{ if e.pid == {} {{ m[e.func] = count(); }} }});"#,
        pid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let dir = std::env::current_dir().unwrap();
    for _ in 0..3 {
        let _ = std::fs::metadata(dir.join(format!("rtt_missing_{}", token())));
        let _ = std::fs::read_dir(&dir).map(|d| d.count());
    }
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let on_9p = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default().lines().any(|l| l.contains(" 9p "));
    if on_9p {
        assert!(!out.map_lines("m").is_empty(), "file operations on 9p ran v9fs functions\n{out}");
    }
}

kernel_test!(dash_c_and_dash_p_with_kernel_functions, needs: Kprobes);
/// `-c` ends when the command ends (on kernels without
/// sched_process_exit's group_dead too) and traces only the command;
/// `-p` filters a kprobe to the process.
fn dash_c_and_dash_p_with_kernel_functions() {
    let _g = setup();
    let dir = TempDir::new();
    let file = dir.write("hello", "hi\n");
    let src = r#"probe("kprobe:do_sys_openat2", |e| { let p = str(e.arg1); if p.contains("rtt_") { print(`OPEN ${p}`); } });"#;
    let out =
        Tracer::start(&["-e", src, "-c", &format!("cat {}", file.display())]).finish_within(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(lines_with(&out, &["OPEN "]), [format!("OPEN {}", file.display())], "{out}");

    let me = pid().to_string();
    let src = r#"let m = map(); probe("kprobe:vfs_read", |e| { m[e.pid] = count(); });"#;
    let mut t = Tracer::start(&["-p", &me, "-e", src]);
    t.wait_attached();
    Zero::open().reads(&[1, 1, 1, 1]);
    let out = t.interrupt_and_finish();
    let lines = out.map_lines("m");
    assert_eq!(lines.len(), 1, "only pid {me}\n{out}");
    let n: u64 = lines[0].rsplit(": ").next().unwrap().parse().unwrap();
    assert!(lines[0].starts_with(&format!("@m[{me}]: ")) && n >= 4, "{out}");
}

kernel_test!(tools_on_kernel_functions, needs: Kprobes);
/// The seed's argdist on kernel functions, and trace, funccount,
/// funclatency and stackcount on them.
fn tools_on_kernel_functions() {
    let _g = setup();
    let marker = format!("/tmp/rtt_argdist_{}", token());
    let spec = format!("p::do_sys_openat2(int dfd, const char *filename):char*:filename:$PID == {}", pid());
    let t = start_tool(&["argdist", "-i", "1", "-C", &spec]);
    for _ in 0..3 {
        open_once(&marker);
    }
    let out = crate::tools::argdist_rows(t, &marker);
    let row = lines_with(&out, &[&marker]);
    assert_eq!(row.len(), 1, "{out}");
    assert!(row[0].trim_start().starts_with("3 "), "argdist counts the filename 3 times: {row:?}\n{out}");

    let me = pid();
    let out = tool_until(
        &["trace", "-p", &me.to_string(), "do_sys_openat2 \"%s\", arg2"],
        || {
            open_once(&marker);
        },
        &marker,
    );
    assert_eq!(lines_with(&out, &[&marker]).len(), 1, "{out}");

    let t = start_tool(&["funccount", "-p", &me.to_string(), "vfs_read"]);
    Zero::open().reads(&[1, 1, 1, 1, 1]);
    // No wait: the counts are the kernel's, read when rtrace ends.
    let out = t.interrupt_and_finish();
    let row: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("vfs_read ")).collect();
    assert_eq!(row.len(), 1, "{out}");
    let n: u64 = row[0].split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(n >= 5, "{out}");

    let t = start_tool(&["funclatency", "-p", &me.to_string(), "vfs_read"]);
    Zero::open().reads(&[1, 1, 1]);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("nsecs") && out.stdout.contains('|'), "a histogram\n{out}");

    let t = start_tool(&["stackcount", "-p", &me.to_string(), "vfs_read"]);
    Zero::open().reads(&[1, 1]);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("vfs_read") && out.stdout.contains("ksys_read"), "{out}");
}
