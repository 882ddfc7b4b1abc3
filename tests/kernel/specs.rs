//! Probe specs and kernel forms bpftrace scripts use: wildcards in the
//! binary of uprobe/usdt specs and `-l`, `usdt:BIN::NAME`, `*` as the type in
//! `-l`, `BEGIN,END` in one spec, two probes on one uprobe in registration
//! order, raw stacks unindented, a zeroed histogram printed at exit,
//! `strncmp`/`strcontains` on runtime strings, `buf()` and `kptr()`. Each
//! test makes its events and checks exact values.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/uprobe_target.c");

/// The uprobe fixture compiled into a fresh directory as `rtt_<token>`,
/// with a text file beside it that a `rtt_*` wildcard also matches.
fn fixture() -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    let path = dir.join(&format!("rtt_{}", token()));
    let out = gcc().args(["-O2", "-o"]).arg(&path).arg(FIXTURE).output().expect("cannot run gcc");
    assert!(out.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    dir.write("rtt_notes.txt", "not an ELF file\n");
    (dir, path)
}

fn run_fixture(path: &std::path::Path, n: usize) {
    let out = Command::new(path).arg(n.to_string()).output().unwrap();
    assert!(out.status.success(), "{} failed: {out:?}", path.display());
}

fn list(args: &[&str]) -> Vec<String> {
    let out = run(args);
    assert_eq!(out.code, Some(0), "{out}");
    out.lines().iter().map(|l| l.to_string()).collect()
}

kernel_test!(binary_wildcards_in_uprobe_specs_and_listing, needs: Program("gcc"));
fn binary_wildcards_in_uprobe_specs_and_listing() {
    let _g = setup();
    let (dir, path) = fixture();
    let p = path.to_str().unwrap();
    let pattern = format!("{}/rtt_*", dir.join("").to_str().unwrap().trim_end_matches('/'));
    // -l: the wildcard matches the binary (the text file is passed over).
    assert_eq!(list(&["-l", &format!("uprobe:{pattern}:rtt_a*")]), vec![format!("uprobe:{p}:rtt_add")]);
    // `*` as the type: that binary's uprobes (not uretprobes, not every raw tracepoint).
    let all = list(&["-l", &format!("*:{p}:rtt_*")]);
    assert_eq!(
        all,
        ["rtt_add", "rtt_fire", "rtt_mul"].iter().map(|f| format!("uprobe:{p}:{f}")).collect::<Vec<_>>(),
        "-l '*:{p}:rtt_*'"
    );
    // A spec with a wildcard binary attaches to the matching binary.
    let src = format!(r#"let n = map(); probe("uprobe:{pattern}:rtt_add", |e| {{ n[e.probe] = count(); }});"#);
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    run_fixture(&path, 3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("n"), vec![format!("@n[uprobe:{p}:rtt_add]: 3")], "{out}");
    // No file matches: a one-line error.
    let out = run(&["-e", &format!(r#"probe("uprobe:{}/nothing_*:f", |e| {{ }});"#, dir.join("").display())]);
    assert_ne!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("no file matches"), "{out}");
}

kernel_test!(two_probes_on_one_uprobe_run_in_registration_order, needs: Program("gcc"));
fn two_probes_on_one_uprobe_run_in_registration_order() {
    let _g = setup();
    let (_dir, path) = fixture();
    let p = path.to_str().unwrap();
    let src = format!(
        r#"probe("uprobe:{p}:rtt_mul", |e| {{ print(`first ${{e.arg0}}`); }});
probe("uprobe:{p}:rtt_mul", |e| {{ print(`second ${{e.arg0}}`); }});
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {tid} {{ print("tp one"); }} }});
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {tid} {{ print("tp two"); }} }});"#,
        tid = tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    run_fixture(&path, 2);
    getppid_n(1);
    t.wait_line("the tracepoint's second probe", ATTACH_TIMEOUT, |l| l == "tp two");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().into_iter().filter(|l| !l.is_empty() && parse_attaching(l).is_none()).collect();
    assert_eq!(lines, ["first 0", "second 0", "first 1", "second 1", "tp one", "tp two"], "{out}");
}

kernel_test!(begin_and_end_in_one_spec);
fn begin_and_end_in_one_spec() {
    let _g = setup();
    let out =
        run(&["-e", r#"let n = 0; probe("BEGIN,END", || { n += 1; print(`run ${n}`); if n == 1 { exit(); } });"#]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        out.lines().into_iter().filter(|l| l.starts_with("run")).collect::<Vec<_>>(),
        ["run 1", "run 2"],
        "{out}"
    );
    assert_eq!(out.lines().first().and_then(|l| parse_attaching(l)), Some(2), "{out}");
    // With a kernel probe it stays an error, saying what is allowed.
    let out = run(&["-e", r#"probe("BEGIN,tracepoint:syscalls:sys_enter_getppid", || { });"#]);
    assert_ne!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("`BEGIN,END` is fine"), "{out}");
}

kernel_test!(usdt_empty_provider_and_binary_wildcards, needs: Program("gcc"), Sdt);
fn usdt_empty_provider_and_binary_wildcards() {
    let _g = setup();
    let (dir, path) = fixture();
    assert!(std::fs::read(&path).unwrap().windows(7).any(|w| w == b"stapsdt"), "the fixture has USDT probes");
    let p = path.to_str().unwrap();
    let pattern = format!("{}/rtt_*", dir.join("").to_str().unwrap().trim_end_matches('/'));
    assert_eq!(list(&["-l", &format!("usdt:{pattern}:rtt:tick")]), vec![format!("usdt:{p}:rtt:tick")]);
    let src = format!(r#"let n = map(); probe("usdt:{pattern}::tick", |e| {{ n[e.arg0] = count(); }});"#);
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    run_fixture(&path, 2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("n"), ["@n[0]: 1", "@n[1]: 1"], "{out}");
}

kernel_test!(raw_stacks_print_unindented);
fn raw_stacks_print_unindented() {
    let _g = setup();
    let src = format!(
        r#"probe("tracepoint:raw_syscalls:sys_enter", |e| {{ if e.tid == {} && e.args.id == 110 {{ print(e.kstack("raw", 3)); print("end"); }} }});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the stack", ATTACH_TIMEOUT, |l| l == "end");
    let out = t.interrupt_and_finish();
    let lines: Vec<&str> = out
        .lines()
        .into_iter()
        .take_while(|l| *l != "end")
        .filter(|l| !l.is_empty() && parse_attaching(l).is_none())
        .collect();
    assert!(!lines.is_empty() && lines.len() <= 3, "{out}");
    for l in lines {
        assert!(l.chars().all(|c| c.is_ascii_hexdigit()) && l.len() >= 8, "raw frame {l:?} is not bare hex\n{out}");
    }
}

kernel_test!(zeroed_histogram_prints_at_exit);
fn zeroed_histogram_prints_at_exit() {
    let _g = setup();
    let src = format!(
        r#"let h = map(); let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {} {{ h = hist(3); c[1] = count(); }} }});
probe("END", || {{ h.zero(); }});"#,
        tid()
    );
    for json in [false, true] {
        let mut args = vec!["-e", &src];
        if json {
            args.extend(["-f", "json"]);
        }
        let mut t = Tracer::start(&args);
        if json {
            t.wait_line("attached_probes", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
        } else {
            t.wait_attached();
        }
        getppid_n(2);
        // No wait: records queued when Ctrl-C stops tracing still run.
        let out = t.interrupt_and_finish();
        assert_eq!(out.code, Some(0), "{out}");
        if json {
            assert!(out.lines().contains(&r#"{"type": "hist", "data": {"@h": []}}"#), "{out}");
        } else {
            assert!(out.stdout.contains("\n@h: \n\n"), "{out}");
            assert!(!out.stdout.contains("[2, 4)"), "{out}");
            assert_eq!(out.map_lines("c"), ["@c[1]: 2"], "{out}");
        }
    }
}

kernel_test!(strncmp_and_strcontains_on_runtime_strings);
fn strncmp_and_strcontains_on_runtime_strings() {
    let _g = setup();
    let dir = TempDir::new();
    let tok = token();
    let src = format!(
        r#"let hits = map(); let by = map(); let me = {tid}; let needle = "{tok}";
probe("tracepoint:syscalls:sys_enter_openat", |e| {{
    if e.tid == me {{
        let f = str(e.args.filename);
        if strcontains(f, needle) {{
            hits["contains"] = count();
            by[strncmp(f, "{prefix}/a_", {plen})] = count();
            if strncmp(f, "{prefix}/b_{tok}", 200) == 0 {{ hits["exact b"] = count(); }}
            if strcontains(f, e.comm) {{ hits["comm"] = count(); }}
            let inside = strcontains(f, "/b_");
            print(`${{inside}}`);
        }}
        if strcontains(f, "{tok}-nowhere") {{ hits["never"] = count(); }}
    }}
}});"#,
        tid = tid(),
        prefix = dir.join("").to_str().unwrap().trim_end_matches('/'),
        plen = dir.join("").to_str().unwrap().trim_end_matches('/').len() + 3,
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    for name in ["a_", "a_", "b_"] {
        let _ = std::fs::File::open(dir.join(&format!("{name}{tok}")));
    }
    let _ = std::fs::File::open(dir.join("other"));
    t.wait_count("three prints", ATTACH_TIMEOUT, 3, |l| l == "true" || l == "false");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(out.map_lines("hits")), ["@hits[contains]: 3", "@hits[exact b]: 1"], "{out}");
    assert_eq!(sorted(out.map_lines("by")), ["@by[0]: 2", "@by[1]: 1"], "{out}");
    let prints: Vec<&str> = out.lines().into_iter().filter(|l| *l == "true" || *l == "false").collect();
    assert_eq!(prints, ["false", "false", "true"], "{out}");
}

kernel_test!(buf_reads_bytes_and_prints_them_escaped);
fn buf_reads_bytes_and_prints_them_escaped() {
    let _g = setup();
    let src = format!(
        r#"probe("tracepoint:syscalls:sys_enter_write", |e| {{
    if e.tid == {} {{
        let all = buf(e.args.buf, e.args.count);
        let two = buf(e.args.buf, 2);
        print(all);
        printf("%r|%r\n", two, all);
    }}
}});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let data = [1u8, 2, b'a', 0, 0xff, b' '];
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY) };
    assert!(fd >= 0);
    unsafe {
        libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
    }
    t.wait_line("the printf", ATTACH_TIMEOUT, |l| l.contains('|'));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().into_iter().filter(|l| !l.is_empty() && parse_attaching(l).is_none()).collect();
    assert_eq!(lines, [r"\x01\x02a\x00\xff ", r"\x01\x02|\x01\x02a\x00\xff "], "{out}");
}

kernel_test!(kptr_casts_an_integer_to_a_kernel_union_pointer, needs: Arch("x86_64"));
/// `kptr(v, "union NAME")`: unions as structs. `union sigval` (`int
/// sival_int; void *sival_ptr;`) laid over the `si` slot of the call's
/// `struct pt_regs` (offset 104 on x86_64) reads lseek's offset.
fn kptr_casts_an_integer_to_a_kernel_union_pointer() {
    let _g = setup();
    let src = fill(
        r#"let seen = map();
probe("rawtracepoint:sys_enter", |e| {
    if e.tid == __ME__ && e.arg1 == 8 {
        let u = kptr(e.arg0 + 104, "union sigval");
        seen["int"] = u.sival_int;
        if kptr(e.arg0 + 104, "union sigval *").sival_ptr == 424242 { seen["ptr"] = 1; }
        print(`int ${kptr(e.arg0 + 104, "union sigval").sival_int}`);
    }
});"#,
        &[("ME", &tid())],
    );
    let lseek = || unsafe {
        libc::syscall(libc::SYS_lseek, -7i64, 424242i64, 1i64);
    };
    let out = trace_until(&src, lseek, "int 424242");
    let mut seen = out.map_lines("seen");
    seen.sort();
    assert_eq!(seen, ["@seen[int]: 424242", "@seen[ptr]: 1"], "{out}");
    for (ty, want) in [
        ("union rtt_no_such_union", "the kernel's BTF has no union rtt_no_such_union"),
        ("enum pid_type", "'enum pid_type' is no struct or union type"),
    ] {
        let bad =
            run(&["-e", &format!(r#"probe("rawtracepoint:sys_enter", |e| {{ let x = kptr(e.arg0, "{ty}").a; }});"#)]);
        let line = assert_clean_error(&bad);
        assert!(line.contains(want) && line.contains("1:"), "{ty}: {line:?} lacks {want:?}\n{bad}");
    }
}

kernel_test!(kptr_casts_an_integer_to_a_kernel_struct_pointer);
fn kptr_casts_an_integer_to_a_kernel_struct_pointer() {
    let _g = setup();
    // rawtracepoint:sys_enter: arg0 is the `struct pt_regs *` of the call,
    // arg1 its number; lseek(fd, offset, whence) has them in di, si, dx.
    let src = format!(
        r#"let seen = map();
probe("rawtracepoint:sys_enter", |e| {{
    if e.tid == {} && e.arg1 == 8 {{
        let regs = kptr(e.arg0, "struct pt_regs");
        let fd = regs.di;
        seen[fd] = sum(kptr(e.arg0, "struct pt_regs").si);
        print(`whence ${{regs.dx}}`);
        print(`si ${{kptr(e.arg0, "struct pt_regs").si}} ${{kptr(e.arg0, "struct pt_regs *").di}}`);
    }}
}});"#,
        tid()
    );
    let mut t =
        Tracer::start(&["-e", &src.replace("print(`whence ${regs.dx}`);", "let w = regs.dx; print(`whence ${w}`);")]);
    t.wait_attached();
    unsafe { libc::syscall(libc::SYS_lseek, -7i64, 424242i64, 1i64) };
    t.wait_line("the print", ATTACH_TIMEOUT, |l| l.starts_with("whence"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.lines().contains(&"whence 1"), "{out}");
    // In a userspace statement: read in the kernel, shipped with the record.
    assert!(out.lines().contains(&"si 424242 -7"), "{out}");
    assert_eq!(out.map_lines("seen"), ["@seen[-7]: 424242"], "{out}");
    // A kernel pointer's members read in userspace: a one-line error with the fix.
    let bad = run(&["-e", &src]);
    assert_ne!(bad.code, Some(0), "{bad}");
    assert!(bad.stderr.contains("kernel pointer"), "{bad}");
    let bad = run(&["-e", r#"probe("rawtracepoint:sys_enter", |e| { print(kptr(e.arg0, "struct pt_regs")); });"#]);
    assert_ne!(bad.code, Some(0), "{bad}");
    assert!(bad.stderr.contains("kptr() reads kernel memory") && bad.stderr.lines().count() == 1, "{bad}");
    let bad = run(&["-e", r#"probe("rawtracepoint:sys_enter", |e| { let x = kptr(e.arg0, "struct no_such_rtt"); });"#]);
    assert!(bad.stderr.contains("no struct no_such_rtt"), "{bad}");
}

kernel_test!(kptr_on_kernel_function_arguments, needs: Kprobes);
fn kptr_on_kernel_function_arguments() {
    let _g = setup();
    // do_sys_openat2(int dfd, const char *filename, struct open_how *how).
    let src = format!(
        r#"probe("kprobe:do_sys_openat2", |e| {{ if e.tid == {} {{ let how = kptr(e.arg2, "struct open_how"); let f = how.flags; print(`flags ${{f}}`); }} }});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let _ = std::fs::File::open("/dev/null");
    t.wait_line("flags", ATTACH_TIMEOUT, |l| l.starts_with("flags"));
    let out = t.interrupt_and_finish();
    assert!(out.lines().iter().any(|l| l.starts_with("flags ")), "{out}");
}

kernel_test!(a_kernel_let_after_userspace_statements_keeps_their_scope);
fn a_kernel_let_after_userspace_statements_keeps_their_scope() {
    let _g = setup();
    let src = format!(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| {{
    if e.tid == {} {{
        print(`pid ${{e.pid}}`);
        let t = e.tid;
        print(`tid ${{t}}`);
    }}
}});"#,
        tid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the tid", ATTACH_TIMEOUT, |l| l.starts_with("tid"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.lines().contains(&format!("pid {}", pid()).as_str()), "{out}");
    assert!(out.lines().contains(&format!("tid {}", tid()).as_str()), "{out}");
}
