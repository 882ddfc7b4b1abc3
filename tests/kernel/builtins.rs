//! The bpftrace-like built-ins: integer casts, `ncpus()`, `e.jiffies`,
//! `e.usermode`, `e.ns_pid` / `e.ns_tid`, and the names (`syscall_name`,
//! `signal_name`, `errno_name`, `strerror`). Each is checked where the
//! split puts it in the kernel and where it runs in userspace (the same
//! closure under `--no-split`, the reference meaning): both must print the
//! same.

use std::ffi::CString;

use crate::common::*;

/// `lseek(-1, offset, SEEK_SET)`: fails (bad fd, EBADF) but its tracepoint sees `offset`.
fn lseek_bad_fd(offset: i64) {
    unsafe { libc::syscall(libc::SYS_lseek, -1i64, offset, 0i64) };
}

/// Boundary values of every width, and a few in between.
fn cast_inputs() -> Vec<i64> {
    let mut v: Vec<i64> = vec![0, 1, -1, 2, -2];
    for bits in [8u32, 16, 32] {
        let half = 1i64 << (bits - 1);
        let full = 1i64 << bits;
        v.extend([half - 1, half, half + 1, full - 1, full, full + 1, -half, -half - 1, -full, -full + 1]);
    }
    v.extend([i64::MAX, i64::MIN, i64::MIN + 1, 0x1234_5678_9abc_def0, -0x1234_5678_9abc_def0]);
    // A generator of values with every byte pattern in the low bytes.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..24 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as i64);
    }
    v
}

/// What Rust's casts give: i8 i16 i32 i64 u8 u16 u32 u64, as i64.
fn casts_of(v: i64) -> String {
    let all =
        [v as i8 as i64, v as i16 as i64, v as i32 as i64, v, v as u8 as i64, v as u16 as i64, v as u32 as i64, v];
    all.map(|x| x.to_string()).join(" ")
}

const CASTS: &str = r#"
let me = __ME__;
probe("tracepoint:syscalls:sys_enter_lseek", |e| {
    if e.tid == me {
        let v = e.args.offset;
        let k = `${i8(v)} ${i16(v)} ${i32(v)} ${i64(v)} ${u8(v)} ${u16(v)} ${u32(v)} ${u64(v)}`;
        let a = i8(v); let b = i16(v); let c = i32(v); let d = i64(v);
        let f = u8(v); let g = u16(v); let h = u32(v); let j = u64(v);
        printf("CAST %d K %d %d %d %d %d %d %d %d U %s\n", v, a, b, c, d, f, g, h, j, k);
    }
});
"#;

kernel_test!(integer_casts_agree_in_the_kernel_and_in_userspace);
/// `i8(x)` ... `u64(x)` of boundary values: the kernel's lets (BPF shifts
/// and masks) and userspace's string (Rhai functions) give what Rust's
/// `as` casts give; under `--no-split` (all userspace) the same lines.
fn integer_casts_agree_in_the_kernel_and_in_userspace() {
    let _g = setup();
    let src = fill(CASTS, &[("ME", &tid())]);
    let inputs = cast_inputs();
    for no_split in [false, true] {
        let mut args = vec!["-e", src.as_str()];
        if no_split {
            args.push("--no-split");
        }
        let mut t = Tracer::start(&args);
        t.wait_attached();
        for v in &inputs {
            lseek_bad_fd(*v);
        }
        t.wait_count("every cast line", EXIT_TIMEOUT, inputs.len(), |l| l.starts_with("CAST "));
        let out = t.interrupt_and_finish();
        let lines: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("CAST ")).collect();
        assert_eq!(lines.len(), inputs.len(), "no_split {no_split}\n{out}");
        for (line, v) in lines.iter().zip(&inputs) {
            let want = casts_of(*v);
            assert_eq!(*line, format!("CAST {v} K {want} U {want}"), "no_split {no_split}\n{out}");
        }
    }
}

kernel_test!(an_int_return_value_reads_signed_with_i32);
/// A syscall's `long` return read through `i32()`: a kernel filter on the
/// cast value and a map keyed by it (the bad-fd lseek returns -9).
fn an_int_return_value_reads_signed_with_i32() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let m = map("ret");
probe("tracepoint:raw_syscalls:sys_exit", |e| {
    if e.tid == me && e.args.id == __LSEEK__ && i32(u32(e.args.ret)) < 0 { m[i32(u32(e.args.ret))] = count(); }
});
"#,
        &[("ME", &tid()), ("LSEEK", &libc::SYS_lseek)],
    );
    let out = trace(&src, || {
        lseek_bad_fd(1);
        lseek_bad_fd(2);
    });
    assert_eq!(out.map_lines("ret"), vec!["@ret[-9]: 2".to_string()], "{out}");
}

const NAMES: &str = r#"
let me = __ME__;
let sc = map("sc"); let er = map("er"); let sg = map("sg");
probe("tracepoint:raw_syscalls:sys_exit", |e| {
    if e.tid == me && e.args.id == __LSEEK__ {
        sc[syscall_name(e.args.id)] = count();
        er[[errno_name(e.args.ret), strerror(e.args.ret)]] = count();
        let n = errno_name(e.args.ret);
        let s = strerror(e.args.ret);
        printf("NAME K %s %s U %s %s %s\n", n, s, errno_name(e.args.ret), strerror(e.args.ret), syscall_name(e.args.id));
    }
});
probe("tracepoint:syscalls:sys_enter_tgkill", |e| {
    if e.tid == me {
        sg[signal_name(e.args.sig)] = count();
        let k = signal_name(e.args.sig);
        printf("SIG K %s U %s\n", k, signal_name(e.args.sig));
    }
});
"#;

kernel_test!(names_print_in_maps_and_in_userspace);
/// `syscall_name`, `errno_name`, `strerror`, `signal_name`: kernel map keys
/// print as names, kernel lets reach userspace as names, and userspace
/// calls give the same text; `--no-split` prints the same.
fn names_print_in_maps_and_in_userspace() {
    let _g = setup();
    let src = fill(NAMES, &[("ME", &tid()), ("LSEEK", &libc::SYS_lseek)]);
    for no_split in [false, true] {
        let mut args = vec!["-e", src.as_str()];
        if no_split {
            args.push("--no-split");
        }
        let mut t = Tracer::start(&args);
        t.wait_attached();
        lseek_bad_fd(5);
        lseek_bad_fd(6);
        // tgkill of a thread that doesn't exist: ESRCH, nothing is signalled.
        unsafe { libc::syscall(libc::SYS_tgkill, pid() as i32, i32::MAX, libc::SIGUSR1) };
        t.wait_line("the signal line", EXIT_TIMEOUT, |l| l.starts_with("SIG "));
        t.wait_count("the lseek lines", EXIT_TIMEOUT, 2, |l| l.starts_with("NAME "));
        let out = t.interrupt_and_finish();
        let ctx = format!("no_split {no_split}\n{out}");
        assert!(out.lines().contains(&"NAME K EBADF Bad file descriptor U EBADF Bad file descriptor lseek"), "{ctx}");
        assert!(out.lines().contains(&"SIG K SIGUSR1 U SIGUSR1"), "{ctx}");
        assert_eq!(out.map_lines("sc"), vec!["@sc[lseek]: 2".to_string()], "{ctx}");
        assert_eq!(out.map_lines("er"), vec!["@er[EBADF, Bad file descriptor]: 2".to_string()], "{ctx}");
        assert_eq!(out.map_lines("sg"), vec!["@sg[SIGUSR1]: 1".to_string()], "{ctx}");
    }
}

/// The possible CPUs, as /sys/devices/system/cpu/possible lists them (`0-3,8`).
fn possible_cpus() -> i64 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").expect("possible CPUs");
    text.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<i64>().unwrap() - a.parse::<i64>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

kernel_test!(ncpus_jiffies_and_usermode_at_a_tracepoint);
/// `ncpus()` is the number of possible CPUs on both sides; `e.jiffies`
/// counts up; a tracepoint runs in the kernel, so `e.usermode` is 0.
fn ncpus_jiffies_and_usermode_at_a_tracepoint() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
probe("tracepoint:syscalls:sys_enter_lseek", |e| {
    if e.tid == me {
        let n = ncpus(); let j = e.jiffies; let u = e.usermode;
        printf("T %d %d %d %d %d\n", n, ncpus(), j, u, e.usermode);
    }
});
"#,
        &[("ME", &tid())],
    );
    let out = trace(&src, || {
        lseek_bad_fd(1);
        lseek_bad_fd(2);
    });
    let rows: Vec<Vec<i64>> = out
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("T "))
        .map(|l| l.split(' ').map(|w| w.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    let cpus = possible_cpus();
    for r in &rows {
        assert_eq!((r[0], r[1]), (cpus, cpus), "ncpus()\n{out}");
        assert!(r[2] > 0, "e.jiffies\n{out}");
        assert_eq!((r[3], r[4]), (0, 0), "e.usermode at a tracepoint\n{out}");
    }
    assert!(rows[1][2] >= rows[0][2], "jiffies go forward\n{out}");
}

kernel_test!(usermode_at_a_profile_sample_of_a_busy_loop);
/// A thread of this process spinning in user code is sampled in user mode:
/// `e.usermode` 1 (at a tracepoint it is 0, as checked above).
fn usermode_at_a_profile_sample_of_a_busy_loop() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let _g = setup();
    let src = fill(
        r#"
probe("profile:hz:499", |e| { if e.pid == __PID__ && e.usermode == 1 { print("USER"); } });
"#,
        &[("PID", &pid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    /// Ends the spinning when dropped, also when waiting panics.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    let line = std::thread::scope(|s| {
        let _stop = Stop(&stop);
        s.spawn(|| {
            let mut x: u64 = 1;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        t.wait_line("a user-mode sample", EXIT_TIMEOUT, |l| l == "USER")
    });
    let out = t.interrupt_and_finish();
    assert_eq!(line, "USER", "{out}");
}

kernel_test!(ns_pid_is_the_pid_inside_a_new_pid_namespace, needs: Program("unshare"));
/// `unshare --pid --fork cat FILE`: cat is pid 1 of its new namespace, and
/// a large pid outside it; outside any new namespace `e.ns_tid` is `e.tid`.
fn ns_pid_is_the_pid_inside_a_new_pid_namespace() {
    let _g = setup();
    let src = r#"probe("tracepoint:syscalls:sys_enter_openat", |e| {
        if str(e.args.filename) == "/etc/hostname" {
            let p = e.ns_pid; let t = e.ns_tid;
            printf("NS %d %d %d %d %d\n", p, t, e.pid, e.ns_pid, e.tid);
        }
    });"#;
    let out = run(&["-e", src, "-c", "unshare --pid --fork cat /etc/hostname"]);
    assert_eq!(out.code, Some(0), "{out}");
    let rows: Vec<Vec<i64>> = out
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("NS "))
        .map(|l| l.split(' ').map(|w| w.parse().unwrap()).collect())
        .collect();
    assert!(!rows.is_empty(), "{out}");
    for r in &rows {
        assert_eq!((r[0], r[1], r[3]), (1, 1, 1), "cat is pid 1 of its namespace\n{out}");
        assert!(r[2] > 1, "outside, cat has its own pid\n{out}");
    }
    // Here, in the machine's namespace (or the test's own), ns_tid of this thread.
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_lseek", |e| { if e.tid == __ME__ { printf("SAME %d\n", e.ns_tid); } });"#,
        &[("ME", &tid())],
    );
    let out = trace(&src, || lseek_bad_fd(3));
    let mine = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    // NSpid: the ids from the outermost to the innermost namespace.
    let inner = mine
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .map(str::to_string);
    let inner = inner.unwrap_or_else(|| tid().to_string());
    assert!(out.lines().contains(&format!("SAME {inner}").as_str()), "{out}");
}

kernel_test!(int_arguments_and_return_values_of_kernel_functions_read_signed, needs: Kprobes);
/// `do_mkdirat(int dfd, struct filename *, umode_t)` returns `int`: at
/// kprobe/kretprobe (or the fentry/fexit they become) `e.arg0` is
/// AT_FDCWD (-100) and a mkdir of an existing directory returns -EEXIST as
/// -17, so `e.retval < 0` holds.
fn int_arguments_and_return_values_of_kernel_functions_read_signed() {
    let _g = setup();
    let src = fill(
        r#"
probe("kprobe:do_mkdirat", |e| { if e.tid == __ME__ && e.arg0 < 0 { printf("ARG %d\n", e.arg0); } });
probe("kretprobe:do_mkdirat", |e| { if e.tid == __ME__ && e.retval < 0 { printf("RET %d %s\n", e.retval, errno_name(e.retval)); } });
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let path = CString::new("/tmp").unwrap();
    let rc = unsafe { libc::mkdirat(libc::AT_FDCWD, path.as_ptr(), 0o755) };
    assert_eq!(rc, -1);
    let ret = t.wait_line("the return", EXIT_TIMEOUT, |l| l.starts_with("RET "));
    let arg = t.wait_line("the argument", EXIT_TIMEOUT, |l| l.starts_with("ARG "));
    let out = t.interrupt_and_finish();
    assert_eq!(arg, "ARG -100", "{out}");
    assert_eq!(ret, "RET -17 EEXIST", "{out}");
}
