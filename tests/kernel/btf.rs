//! BTF on a real kernel: `tp_btf` probes with typed arguments, the same
//! names on raw tracepoints, struct members through pointers
//! (`e.args.prev.pid`, `e.curtask.real_parent.tgid`) in the kernel and in
//! userspace statements, listing the arguments, fexit code reading its
//! arguments and return value, and one-line errors for wrong members.

use std::ffi::CString;
use std::time::Duration;

use crate::common::*;

/// Trace `script(comm)` while a forked child named `comm` (fresh, from
/// `prefix`) makes `calls` getppid() calls; `settle` waits for the output.
/// Returns the comm, the child's pid and the run (which ended with 0).
fn with_forked_child(
    prefix: &str,
    script: impl Fn(&str) -> String,
    calls: usize,
    settle: impl FnOnce(&mut Tracer),
) -> (String, i64, Outcome) {
    let name = format!("{prefix}_{}", token());
    let cname = CString::new(name.clone()).unwrap();
    let mut t = Tracer::start(&["-e", &script(&name)]);
    assert_eq!(t.wait_attached(), 1);
    let child = fork_and_wait(|| {
        set_comm_raw(&cname);
        getppid_n(calls);
    });
    settle(&mut t);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    (name, child, out)
}

/// Sleep `n` times for 1 ms each: every sleep switches the thread out and back in.
fn sleeps(n: usize) {
    for _ in 0..n {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `sched_switch` through `spec`: the thread with our comm is seen leaving
/// (prev) and coming back (next), with its tid and a sleeping prev_state,
/// counted in the kernel by the comm read through `next`.
fn switch_args_are_typed(spec: &str) {
    // Threads the tracer helper starts inherit the comm: set it after.
    let me = format!("rtt_{}", token());
    let tid = tid();
    let src = format!(
        r#"let back = map();
probe("{spec}", |e| {{
    if e.args.prev.comm == "{me}" {{
        print(`OUT ${{e.args.prev.pid}} ${{e.args.prev.tgid}} ${{e.args.prev_state}}`);
    }}
    if e.args.next.comm == "{me}" {{
        back[e.args.next.comm] = count();
    }}
}});"#
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    set_comm(&me);
    sleeps(20);
    t.wait_count("20 switches out", Duration::from_secs(10), 20, |l| l.starts_with("OUT "));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let outs: Vec<Vec<i64>> = out
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("OUT "))
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(outs.len() >= 20, "{out}");
    for o in &outs {
        assert_eq!((o[0], o[1]), (tid, pid()), "prev.pid is our tid, prev.tgid our pid\n{out}");
    }
    // A 1 ms sleep leaves in TASK_INTERRUPTIBLE (bit 0; newer kernels add TASK_FREEZABLE).
    assert!(outs.iter().filter(|o| o[2] & 1 == 1).count() >= 10, "prev_state of sleeps\n{out}");
    let back = out.map_lines("back");
    assert_eq!(back.len(), 1, "{out}");
    let n: i64 = back[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert!(back[0].starts_with(&format!("@back[{me}]: ")) && n >= 20, "{out}");
}

kernel_test!(tp_btf_arguments_are_typed_structs, needs: Btf);
fn tp_btf_arguments_are_typed_structs() {
    let _g = setup();
    switch_args_are_typed("tp_btf:sched_switch");
}

kernel_test!(raw_tracepoint_arguments_have_btf_names, needs: Btf);
fn raw_tracepoint_arguments_have_btf_names() {
    let _g = setup();
    switch_args_are_typed("rawtracepoint:sched_switch");
}

kernel_test!(curtask_members_through_pointers, needs: Btf);
/// `e.curtask.real_parent.tgid` in a kernel map key and in a userspace
/// print: a forked child's parent is this test process.
fn curtask_members_through_pointers() {
    let _g = setup();
    let script = |name: &str| {
        format!(
            r#"let parents = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{
    if e.comm == "{name}" {{
        parents[e.curtask.real_parent.tgid] = count();
        print(`CHILD ${{e.pid}} ${{e.curtask.tgid}} ${{e.curtask.real_parent.tgid}} ${{e.curtask.group_leader.comm}}`);
    }}
}});"#
        )
    };
    let (name, child, out) = with_forked_child("rtc", script, 3, |t| {
        t.wait_count("3 getppid calls", Duration::from_secs(10), 3, |l| l.starts_with("CHILD "))
    });
    let me = pid();
    let want = format!("CHILD {child} {child} {me} {name}");
    let got: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("CHILD ")).collect();
    assert_eq!(got, vec![want.as_str(); 3], "{out}");
    assert_eq!(out.map_lines("parents"), vec![format!("@parents[{me}]: 3")], "{out}");
}

kernel_test!(listing_shows_btf_arguments, needs: Btf);
fn listing_shows_btf_arguments() {
    let _g = setup();
    let out = run(&["-lv", "tp_btf:sched_switch"]);
    assert_eq!(out.code, Some(0), "{out}");
    let lines = out.lines();
    assert_eq!(lines[0], "tp_btf:sched_switch", "{out}");
    for want in ["bool preempt", "struct task_struct * prev", "struct task_struct * next", "unsigned int prev_state"] {
        assert!(lines.iter().any(|l| l.trim() == want), "missing `{want}`\n{out}");
    }
    let all = run(&["-l", "tp_btf:sched_*"]);
    assert!(all.lines().contains(&"tp_btf:sched_process_exec"), "{all}");
}

kernel_test!(fexit_reads_arguments_and_return_value_by_position, needs: Btf);
/// fexit code reads arguments by name and the return value after them
/// (`vfs_read(file, buf, count, pos)`: count at ctx+16, retval at ctx+32),
/// whether or not this kernel then lets the program load.
fn fexit_reads_arguments_and_return_value_by_position() {
    let _g = setup();
    let src = r#"let m = map(); probe("fexit:vfs_read", |e| { m[e.args.count] = sum(e.retval); });"#;
    let out = run(&["--explain", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let text = out.stdout.clone();
    let loads: Vec<&str> = text.lines().filter(|l| l.contains("= *(u64 *)(r1 +")).collect();
    assert!(loads.iter().any(|l| l.ends_with("(r1 +16)")), "count from ctx+16\n{text}");
    assert!(loads.iter().any(|l| l.ends_with("(r1 +32)")), "retval from ctx+32\n{text}");
}

kernel_test!(wrong_members_are_one_line_errors, needs: Btf);
fn wrong_members_are_one_line_errors() {
    let _g = setup();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            r#"let m = map(); probe("tp_btf:sched_switch", |e| { m[e.args.prev.tgdi] = count(); });"#,
            "1:65",
            &["struct task_struct has no member `tgdi`; did you mean", "tgid"],
        ),
        (
            r#"probe("tp_btf:sched_switch", |e| { print(e.args.bogus); });"#,
            "1:43",
            &["no argument `bogus`", "prev_state"],
        ),
        (
            r#"let m = map(); probe("tp_btf:sched_switch", |e| { m[e.args.prev.se] = count(); });"#,
            "1:65",
            &["struct sched_entity", "name one of its members"],
        ),
        (
            r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { print(e.curtask.pid.x); });"#,
            "1:61",
            &["`e.curtask.pid` is `pid_t`, which has no members"],
        ),
    ];
    for (src, at, wants) in cases {
        let out = run(&["-e", src]);
        let line = assert_clean_error(&out);
        assert!(line.starts_with(&format!("-e:{at}: ")), "position: {line}");
        for w in *wants {
            assert!(line.contains(w), "`{w}` missing: {line}");
        }
    }
}

kernel_test!(tracepoint_struct_pointer_fields_have_members, needs: Btf, Path("/sys/kernel/tracing/events/mmap_lock"));
/// A tracepoint field declared `struct mm_struct *` leads into the struct:
/// it is the task's own mm, and its size in pages matches /proc/self/statm.
fn tracepoint_struct_pointer_fields_have_members() {
    let _g = setup();
    let me = format!("rtt_{}", token());
    let src = format!(
        r#"probe("tracepoint:mmap_lock:mmap_lock_start_locking", |e| {{
    if e.comm == "{me}" {{
        let own = e.args.mm == e.curtask.mm;
        print(`MM ${{own}} ${{e.args.mm.total_vm}}`);
    }}
}});"#
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    set_comm(&me);
    // A fresh anonymous mapping takes the mmap lock.
    let len = 1 << 20;
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    let statm: i64 = std::fs::read_to_string("/proc/self/statm").unwrap().split(' ').next().unwrap().parse().unwrap();
    unsafe { libc::munmap(p, len) };
    set_comm("kernel_btf");
    let line = t.wait_line("an mmap_lock event", Duration::from_secs(10), |l| l.starts_with("MM "));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts[1], "true", "e.args.mm is the task's own mm\n{out}");
    let pages: i64 = parts[2].parse().unwrap();
    assert!((pages - statm).abs() * 10 <= statm, "total_vm {pages} vs statm {statm}\n{out}");
}

kernel_test!(verifier_rejection_names_the_statement, needs: Btf);
/// A program the verifier refuses (a bitwise operation on a BTF pointer
/// argument of a tp_btf program) is reported at the script statement, with
/// the verifier's reason, and nothing is attached.
fn verifier_rejection_names_the_statement() {
    let _g = setup();
    let src = "let m = map();\nprobe(\"tp_btf:sched_switch\", |e| {\n    let pid = e.pid;\n    m[e.args.prev & 4095] = count();\n});";
    let out = run(&["-e", src]);
    let line = assert_clean_error(&out);
    assert!(line.starts_with("-e:4:"), "the statement on line 4: {line}");
    assert!(line.contains("verifier rejected") && line.contains("bitwise operator"), "{line}");
    assert!(line.contains("RTRACE_VERIFIER_LOG"), "{line}");
    let out = run_env(&["-e", src], &[("RTRACE_VERIFIER_LOG", "1")]);
    assert!(out.stderr.contains("processed ") && out.stderr.contains("r6 &= 4095"), "the full log\n{out}");
}

kernel_test!(class_tracepoints_have_argument_names, needs: Btf);
/// Tracepoints defined from a shared event class (`sched_wakeup` uses
/// `sched_wakeup_template`) have their argument names too.
fn class_tracepoints_have_argument_names() {
    let _g = setup();
    let out = run(&["-lv", "tp_btf:sched_wakeup,tp_btf:sched_process_fork"]);
    assert_eq!(out.code, Some(0), "{out}");
    for want in ["struct task_struct * p", "struct task_struct * parent", "struct task_struct * child"] {
        assert!(out.lines().iter().any(|l| l.trim() == want), "missing `{want}`\n{out}");
    }
}

kernel_test!(a_pointer_and_its_member_in_userspace_is_an_error, needs: Btf);
/// A struct pointer and one of its members in the same userspace
/// statements can't both arrive (the first would be an object map): a
/// compile error says what to do.
fn a_pointer_and_its_member_in_userspace_is_an_error() {
    let _g = setup();
    let src = r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { print(`${e.curtask} ${e.curtask.pid}`); });"#;
    let line = assert_clean_error(&run(&["-e", src]));
    assert!(
        line.starts_with("-e:1:") && line.contains("`e.curtask` and `e.curtask.pid`") && line.contains("let"),
        "{line}"
    );
}

kernel_test!(narrow_trampoline_values_are_cut_to_their_type, needs: Btf);
/// fexit of a function returning `int`: the return value is cut to 32 bits
/// and sign-extended (the register's upper half is undefined), and so is an
/// `int` argument. Checked in the generated code, whether or not this
/// kernel loads fexit programs.
fn narrow_trampoline_values_are_cut_to_their_type() {
    let _g = setup();
    // int vfs_fsync(struct file *file, int datasync)
    let src = r#"let m = map(); probe("fexit:vfs_fsync", |e| { m[e.args.datasync] = sum(e.retval); });"#;
    let out = run(&["--explain", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let shifts = out.stdout.lines().filter(|l| l.contains("<<= 32") || l.contains("s>>= 32")).count();
    assert!(shifts >= 4, "two sign extensions (<<= 32, s>>= 32) expected\n{}", out.stdout);
}

kernel_test!(bitfields_are_extracted, needs: Btf);
/// A one-bit bitfield (`unsigned sched_reset_on_fork:1` of task_struct) is
/// read from its 4-byte storage unit and masked to one bit.
fn bitfields_are_extracted() {
    let _g = setup();
    let src = r#"let m = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| { m[e.curtask.sched_reset_on_fork] = count(); });"#;
    let out = run(&["--explain", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let code: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let read = code
        .iter()
        .position(|l| l.ends_with("call probe_read_kernel#113"))
        .unwrap_or_else(|| panic!("no read\n{}", out.stdout));
    assert!(code[..read].iter().rev().take(3).any(|l| l.ends_with("r2 = 4")), "a 4-byte unit\n{}", out.stdout);
    assert!(code[read..].iter().take(5).any(|l| l.ends_with("&= 1")), "masked to one bit\n{}", out.stdout);
    // And it runs: the current task never has it set here.
    let run_out = run(&["-d", "200ms", "-e", src]);
    assert_eq!(run_out.code, Some(0), "{run_out}");
    assert!(run_out.map_lines("m").iter().all(|l| l.starts_with("@m[0]: ")), "{run_out}");
}

kernel_test!(locals_holding_struct_pointers_have_members, needs: Btf);
/// `let t = e.curtask;` keeps the pointer's type: `t.real_parent.tgid` and
/// `let p = t.real_parent; p.comm` read through BTF in the kernel. A member
/// of such a local in a userspace statement is an error saying what to do.
fn locals_holding_struct_pointers_have_members() {
    let _g = setup();
    let script = |name: &str| {
        format!(
            r#"let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{
    let t = e.curtask;
    let p = t.real_parent;
    if t.comm == "{name}" {{
        m[[p.tgid, t.group_leader.pid]] = count();
    }}
}});"#
        )
    };
    let (_, child, out) = with_forked_child("rtl", script, 2, |_| std::thread::sleep(Duration::from_millis(100)));
    assert_eq!(out.map_lines("m"), vec![format!("@m[{}, {child}]: 2", pid())], "{out}");

    let src = r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { let t = e.curtask; print(t.pid); });"#;
    let line = assert_clean_error(&run(&["-e", src]));
    assert!(line.contains("`t` is a kernel pointer") && line.contains("let x = t.pid;"), "{line}");
}
