//! The counting tools' options (argdist, funccount, funclatency, stackcount,
//! syscount), each on events the test makes: syscalls from this process, a
//! thread or a forked child, calls into fixtures built here, with the test
//! thread pinned to one CPU or another. Kernel functions (kprobes) are tested
//! where the kernel has them.

use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;
use crate::tools::{fixture, only_line_with, start_tool};

/// A recursive function: `rtt_rec(4)` runs five calls deep.
const RECURSIVE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int rtt_rec(int n) {
    __asm__ volatile("");
    return n <= 0 ? 0 : 1 + rtt_rec(n - 1);
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1, s = 0;
    for (int i = 0; i < n; i++)
        s += rtt_rec(4);
    printf("%d\n", s);
    return 0;
}
"#;

/// Run a fixture with one argument; it must succeed.
fn run_bin(bin: &PathBuf, arg: usize) {
    let out = Command::new(bin).arg(arg.to_string()).output().unwrap();
    assert!(out.status.success(), "fixture failed: {out:?}");
}

// ---------------------------------------------------------------------------
// CPUs and threads

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(r, 0, "sched_getaffinity failed");
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

fn two_cpus() -> bool {
    allowed_cpus().len() >= 2
}

/// The calling thread pinned to one CPU until dropped (then its CPUs are restored).
struct Pinned(libc::cpu_set_t);

impl Pinned {
    fn to(cpu: usize) -> Pinned {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe {
            assert_eq!(libc::sched_getaffinity(0, size, &mut old), 0, "sched_getaffinity failed");
            libc::CPU_SET(cpu, &mut one);
            assert_eq!(libc::sched_setaffinity(0, size, &one), 0, "sched_setaffinity({cpu}) failed");
        }
        Pinned(old)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
    }
}

/// `getppid()` `on_a` times pinned to CPU `a`, then `on_b` times on CPU `b`.
fn getppid_on_cpus(a: usize, on_a: usize, b: usize, on_b: usize) {
    {
        let _p = Pinned::to(a);
        getppid_n(on_a);
    }
    let _p = Pinned::to(b);
    getppid_n(on_b);
}

/// A thread (named apart from the process) that makes `n` getppid calls
/// once told to: its tid, the go signal, and its handle.
fn getppid_thread(n: usize) -> (i64, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        set_comm(&format!("rtt_t{}", token()));
        tid_tx.send(tid()).unwrap();
        go_rx.recv().unwrap();
        getppid_n(n);
    });
    (tid_rx.recv().unwrap(), go_tx, h)
}

/// `openat()` of a missing file `missing` times (ENOENT), of a regular file
/// as a directory `notdir` times (ENOTDIR), and of `/` `ok` times.
fn openat_calls(missing: usize, notdir: usize, ok: usize) {
    let nowhere = std::ffi::CString::new(format!("/tmp/rtt_missing_{}", token())).unwrap();
    let file = std::ffi::CString::new("/proc/self/status").unwrap();
    let root = std::ffi::CString::new("/").unwrap();
    let open = |p: &std::ffi::CString, flags: i32| unsafe {
        libc::syscall(libc::SYS_openat, libc::AT_FDCWD, p.as_ptr(), flags | libc::O_CLOEXEC) as i32
    };
    for _ in 0..missing {
        assert!(open(&nowhere, libc::O_RDONLY) < 0);
    }
    for _ in 0..notdir {
        assert!(open(&file, libc::O_RDONLY | libc::O_DIRECTORY) < 0);
    }
    for _ in 0..ok {
        let fd = open(&root, libc::O_RDONLY);
        assert!(fd >= 0);
        unsafe { libc::close(fd) };
    }
}

// ---------------------------------------------------------------------------
// Reading the output

/// `NAME COUNT` rows of a funccount or syscount table (the header left out),
/// in printed order.
fn rows(out: &Outcome) -> Vec<(String, u64)> {
    out.stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [name, n] => Some((name.to_string(), n.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// The count of row `name`; the test fails unless there is exactly one.
fn row(out: &Outcome, name: &str) -> u64 {
    let hits: Vec<u64> = rows(out).into_iter().filter(|(n, _)| n == name).map(|(_, c)| c).collect();
    assert_eq!(hits.len(), 1, "one {name} row\n{out}");
    hits[0]
}

/// The counts stackcount prints under each stack (`    N`), added up.
fn stack_total(out: &Outcome) -> u64 {
    out.stdout.lines().filter_map(|l| l.strip_prefix("    ")?.parse::<u64>().ok()).sum()
}

/// The `count: N` of funclatency's `avg = ...` line.
fn latency_count(out: &Outcome) -> u64 {
    let line = only_line_with(out, &["avg = ", ", count: "]);
    line.rsplit("count: ").next().and_then(|n| n.trim().parse().ok()).unwrap_or_else(|| panic!("{out}"))
}

/// A `HH:MM:SS` line.
fn is_time(l: &str) -> bool {
    let b = l.trim_end().as_bytes();
    b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && b.iter().enumerate().all(|(i, c)| i == 2 || i == 5 || c.is_ascii_digit())
}

// ---------------------------------------------------------------------------
// funccount

kernel_test!(funccount_cpu_counts_on_one_cpu, needs: Check("two CPUs", two_cpus));
/// -c CPU: calls made on another CPU are left out; -D shows the filter.
fn funccount_cpu_counts_on_one_cpu() {
    let _g = setup();
    let me = pid().to_string();
    let cpus = allowed_cpus();
    let (a, b) = (cpus[0], cpus[1]);
    let t = start_tool(&["funccount", "-D", "-c", &a.to_string(), "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_on_cpus(a, 5, b, 3);
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains(&format!("e.cpu == {a}")), "-D prints the filter\n{out}");
    assert_eq!(row(&out, "syscalls:sys_enter_getppid"), 5, "{out}");
}

kernel_test!(funccount_regexp_picks_tracepoints);
/// -r: the event part is a regular expression, anchored at the start as
/// BCC's is (`p+` is one or more p: getpid and getppid, not getpgid); rows
/// name tracepoints `category:event`, as BCC does.
fn funccount_regexp_picks_tracepoints() {
    let _g = setup();
    let me = pid().to_string();
    let t = start_tool(&["funccount", "-r", "-p", &me, "t:syscalls:sys_enter_getp+id$"]);
    getppid_n(4);
    getpid_n(6);
    for _ in 0..2 {
        unsafe { libc::syscall(libc::SYS_getpgid, 0) };
    }
    let out = t.interrupt_and_finish();
    assert_eq!(row(&out, "syscalls:sys_enter_getppid"), 4, "{out}");
    assert_eq!(row(&out, "syscalls:sys_enter_getpid"), 6, "{out}");
    assert!(!out.stdout.contains("getpgid"), "getpgid isn't matched\n{out}");
}

kernel_test!(funccount_regexp_picks_functions, needs: Program("gcc"));
/// -r over a program's functions: an alternation, with `$` (rtt_add and
/// rtt_mul, not the fixture's other functions).
fn funccount_regexp_picks_functions() {
    let _g = setup();
    let (_d, bin) = fixture();
    let pattern = format!("{}:rtt_(add|mul)$", bin.display());
    let t = start_tool(&["funccount", "-r", &pattern]);
    run_bin(&bin, 6);
    let out = t.interrupt_and_finish();
    assert_eq!(row(&out, "rtt_add"), 6, "{out}");
    assert_eq!(row(&out, "rtt_mul"), 6, "{out}");
    assert_eq!(rows(&out).len(), 2, "two rows\n{out}");
}

kernel_test!(funccount_prints_and_clears_every_interval);
/// -i: a table every interval, counts starting afresh; -T: a time before
/// each; Ctrl-C prints the interval so far.
fn funccount_prints_and_clears_every_interval() {
    let _g = setup();
    let me = pid().to_string();
    let mut t = start_tool(&["funccount", "-T", "-i", "1", "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_n(3);
    let three = format!("{:<36} {:>8}", "syscalls:sys_enter_getppid", 3);
    t.wait_line("the row of 3", Duration::from_secs(10), |l| l == three);
    getppid_n(2);
    let out = t.interrupt_and_finish();
    let counts: Vec<u64> =
        rows(&out).into_iter().filter(|(n, _)| n == "syscalls:sys_enter_getppid").map(|(_, c)| c).collect();
    assert_eq!(counts, vec![3, 2], "{out}");
    let lines = out.lines();
    let heads: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].starts_with("FUNC ")).collect();
    assert!(heads.len() >= 2, "{out}");
    for i in heads {
        assert!(i >= 2 && is_time(lines[i - 1]) && lines[i - 2].is_empty(), "a blank line and the time\n{out}");
    }
    assert_eq!(lines.last(), Some(&"Detaching..."), "{out}");
}

// ---------------------------------------------------------------------------
// funclatency

kernel_test!(funclatency_level_times_nested_calls, needs: Program("gcc"));
/// -l LEVEL: a recursive function is timed at each of LEVEL nesting
/// levels; without it, one start time per thread (BCC's default) times
/// one call per recursion.
fn funclatency_level_times_nested_calls() {
    let _g = setup();
    let dir = TempDir::new();
    let bin = build_c(&dir, &format!("rtt_{}", token()), RECURSIVE, &["-O0"]);
    let pattern = format!("{}:rtt_rec", bin.display());
    for (level, want) in [(None, 2), (Some("3"), 6), (Some("9"), 10)] {
        let mut args = vec!["funclatency"];
        if let Some(l) = level {
            args.extend(["-l", l]);
        }
        args.push(&pattern);
        let t = start_tool(&args);
        run_bin(&bin, 2);
        let out = t.interrupt_and_finish();
        assert_eq!(latency_count(&out), want, "-l {level:?}\n{out}");
    }
}

kernel_test!(funclatency_regexp_verbose_per_function, needs: Program("gcc"));
/// -r with -F: a histogram per function (and process, for a program's
/// functions, as BCC prints them), one average for all; -v prints the probes.
fn funclatency_regexp_verbose_per_function() {
    let _g = setup();
    let (_d, bin) = fixture();
    let b = bin.display().to_string();
    let pattern = format!("{b}:rtt_(add|mul)$");
    let t = start_tool(&["funclatency", "-F", "-v", "-r", &pattern]);
    let child = Command::new(&bin).arg("6").stdout(std::process::Stdio::null()).spawn().unwrap();
    let cpid = child.id();
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success());
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains(&format!("probe(\"uprobe:{b}:rtt_add,uprobe:{b}:rtt_mul\"")), "-v\n{out}");
    for f in ["rtt_add", "rtt_mul"] {
        only_line_with(&out, &[&format!("Function = {f} [{cpid}]")]);
    }
    assert_eq!(out.stdout.matches("Function = ").count(), 2, "{out}");
    assert_eq!(latency_count(&out), 12, "{out}");
}

// ---------------------------------------------------------------------------
// stackcount

kernel_test!(stackcount_cpu_counts_on_one_cpu, needs: Check("two CPUs", two_cpus));
/// -c CPU: stacks of events on another CPU are left out.
fn stackcount_cpu_counts_on_one_cpu() {
    let _g = setup();
    let me = pid().to_string();
    let cpus = allowed_cpus();
    let (a, b) = (cpus[0], cpus[1]);
    let t = start_tool(&["stackcount", "-K", "-c", &b.to_string(), "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_on_cpus(a, 5, b, 3);
    let out = t.interrupt_and_finish();
    assert_eq!(stack_total(&out), 3, "{out}");
}

kernel_test!(stackcount_offsets_and_addresses);
/// -s adds each frame's offset, -v its address (`%-16x`), both together.
fn stackcount_offsets_and_addresses() {
    let _g = setup();
    let me = pid().to_string();
    let frames = |flags: &[&str]| -> (Vec<String>, Outcome) {
        let mut args = vec!["stackcount", "-K", "-p", &me];
        args.extend(flags);
        args.push("t:sched:sched_process_fork");
        let t = start_tool(&args);
        for _ in 0..3 {
            fork_and_wait(|| {});
        }
        let out = t.interrupt_and_finish();
        assert_eq!(stack_total(&out), 3, "{flags:?}\n{out}");
        let f = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("  ").filter(|r| !r.starts_with(' ')))
            .map(str::to_string)
            .collect();
        (f, out)
    };
    let address =
        |f: &str| f.len() > 17 && f[..16].trim_end().bytes().all(|c| c.is_ascii_hexdigit()) && &f[16..17] == " ";
    let offset =
        |f: &str| f.rsplit_once("+0x").is_some_and(|(_, h)| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()));
    let (f, out) = frames(&["-s"]);
    assert!(!f.is_empty() && f.iter().all(|f| !address(f)), "{out}");
    assert!(f.iter().any(|f| offset(f) && f.starts_with("kernel_clone+0x")), "{out}");
    let (f, out) = frames(&["-v"]);
    assert!(!f.is_empty() && f.iter().all(|f| address(f) && !offset(f)), "{out}");
    assert!(f.iter().any(|f| f.ends_with(" kernel_clone")), "{out}");
    let (f, out) = frames(&["-s", "-v"]);
    assert!(!f.is_empty() && f.iter().all(|f| address(f)), "{out}");
    assert!(f.iter().any(|f| address(f) && offset(f)), "{out}");
}

kernel_test!(stackcount_both_stacks_delimited_and_debug);
/// Without -K or -U both stacks are counted, as in BCC; -d puts `--`
/// between them (a `-` frame when folded); --debug prints the probe.
fn stackcount_both_stacks_delimited_and_debug() {
    let _g = setup();
    let me = pid().to_string();
    let t = start_tool(&["stackcount", "--debug", "-d", "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_n(4);
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("stacks[[e.kstack, e.ustack]] = count();"), "--debug\n{out}");
    assert_eq!(stack_total(&out), 4, "{out}");
    let lines = out.lines();
    let at = lines.iter().position(|l| *l == "    4").unwrap_or_else(|| panic!("{out}"));
    assert!(lines[..at].iter().rev().take_while(|l| !l.is_empty()).any(|l| *l == "    --"), "{out}");

    let comm = unique_comm();
    let t = start_tool(&["stackcount", "-f", "-d", "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_n(4);
    let out = t.interrupt_and_finish();
    let line = only_line_with(&out, &[&format!("{comm};")]);
    assert!(
        line.ends_with(" 4") && (line.contains(";-;") || line.contains(";- ")),
        "user frames, -, kernel frames\n{out}"
    );
}

kernel_test!(stackcount_regexp_picks_tracepoints);
/// -r: both tracepoints the expression matches are counted.
fn stackcount_regexp_picks_tracepoints() {
    let _g = setup();
    let me = pid().to_string();
    let t = start_tool(&["stackcount", "-K", "-r", "-p", &me, "t:syscalls:sys_enter_(getppid|getpid)$"]);
    getppid_n(4);
    getpid_n(6);
    let out = t.interrupt_and_finish();
    assert_eq!(stack_total(&out), 10, "{out}");
}

// ---------------------------------------------------------------------------
// syscount

kernel_test!(syscount_tid_counts_one_thread);
/// -t TID: another thread's calls (the same process's) are left out;
/// --syscall traces that one syscall; each table starts with the time.
fn syscount_tid_counts_one_thread() {
    let _g = setup();
    let (thread, go, h) = getppid_thread(5);
    let t = start_tool(&["syscount", "-t", &thread.to_string(), "--syscall", "getppid"]);
    getppid_n(3);
    go.send(()).unwrap();
    h.join().unwrap();
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("Tracing syscall 'getppid'... Ctrl+C to quit."), "{out}");
    assert_eq!(rows(&out), vec![("getppid".to_string(), 5)], "{out}");
    let lines = out.lines();
    let head = lines.iter().position(|l| l.starts_with("SYSCALL ")).unwrap_or_else(|| panic!("{out}"));
    let stamp = lines[head - 1];
    assert!(stamp.starts_with('[') && is_time(&stamp[1..stamp.len() - 1]), "{out}");

    // -P: a row per process, named as its main thread is (not as the thread that called).
    let (thread, go, h) = getppid_thread(2);
    let t = start_tool(&["syscount", "-P", "-t", &thread.to_string(), "--syscall", "getppid"]);
    go.send(()).unwrap();
    h.join().unwrap();
    let out = t.interrupt_and_finish();
    let process = std::fs::read_to_string("/proc/self/comm").unwrap().trim().to_string();
    assert!(out.stdout.contains(&format!("{:<22} {:>8}\n", "PID    COMM", "COUNT")), "{out}");
    only_line_with(&out, &[&format!("{:<6} {:<15} {:>8}", pid(), process, 2)]);
}

kernel_test!(syscount_ppid_counts_children_only);
/// -c PPID: the calls of that process's children, not its own.
fn syscount_ppid_counts_children_only() {
    let _g = setup();
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // The parent waits for a byte, forks a child that makes 4 calls, makes 2 itself.
    let parent = unsafe { libc::fork() };
    assert!(parent >= 0, "fork failed");
    if parent == 0 {
        unsafe {
            let mut b = 0u8;
            libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
            let child = libc::fork();
            if child == 0 {
                for _ in 0..4 {
                    libc::syscall(libc::SYS_getppid);
                }
                libc::_exit(0);
            }
            let mut st = 0;
            libc::waitpid(child, &mut st, 0);
            for _ in 0..2 {
                libc::syscall(libc::SYS_getppid);
            }
            libc::_exit(0);
        }
    }
    unsafe { libc::close(fds[0]) };
    let t = start_tool(&["syscount", "-c", &parent.to_string(), "--syscall", "getppid"]);
    getppid_n(3);
    unsafe {
        libc::write(fds[1], b"x".as_ptr() as *const libc::c_void, 1);
        libc::close(fds[1]);
        let mut st = 0;
        assert_eq!(libc::waitpid(parent, &mut st, 0), parent);
    }
    let out = t.interrupt_and_finish();
    assert_eq!(rows(&out), vec![("getppid".to_string(), 4)], "{out}");
}

kernel_test!(syscount_errno_counts_one_error);
/// -e ERRNO (a name or a number): only calls that fail with it; -x: every
/// failure; -L -m: the time in milliseconds, six decimals.
fn syscount_errno_counts_one_error() {
    let _g = setup();
    let me = pid().to_string();
    for (flags, want) in [(&["-e", "ENOENT"][..], 3), (&["-e", "20"][..], 2), (&["-x", "-L", "-m"][..], 5)] {
        let mut args = vec!["syscount", "-p", &me, "--syscall", "openat"];
        args.extend(flags);
        let t = start_tool(&args);
        openat_calls(3, 2, 1);
        let out = t.interrupt_and_finish();
        let line = only_line_with(&out, &["openat "]);
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[1], want.to_string(), "{flags:?}\n{out}");
        if flags.contains(&"-m") {
            assert!(out.stdout.contains(&format!("{:<22} {:>8} {:>16}\n", "SYSCALL", "COUNT", "TIME (ms)")), "{out}");
            assert_eq!(f[2].split_once('.').map(|(_, d)| d.len()), Some(6), "{out}");
        }
    }
}

kernel_test!(syscount_list_names_syscalls);
/// -l lists the syscalls by the names --syscall takes (`fstat`, not the
/// tracepoint's `newfstat`), four to a line.
fn syscount_list_names_syscalls() {
    let _g = setup();
    let out = run(&["syscount", "-l"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.has_attach_line(), "{out}");
    let names: Vec<&str> = out.stdout.split_whitespace().collect();
    for want in ["getppid", "openat", "fstat", "read"] {
        assert!(names.contains(&want), "{want}\n{out}");
    }
    assert!(!names.contains(&"newfstat"), "{out}");
    assert!(out.lines().iter().all(|l| l.split_whitespace().count() <= 4), "{out}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "{out}");
}

// ---------------------------------------------------------------------------
// argdist

kernel_test!(argdist_tid_counts_one_thread);
/// -t TID: another thread's calls are left out.
fn argdist_tid_counts_one_thread() {
    let _g = setup();
    let (thread, go, h) = getppid_thread(5);
    let t = start_tool(&["argdist", "-t", &thread.to_string(), "-i", "60", "-C", "t:syscalls:sys_enter_getppid"]);
    getppid_n(3);
    go.send(()).unwrap();
    h.join().unwrap();
    // The run ends within the interval: the table so far is printed.
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains(&format!("\t{:<10} total calls\n", 5)), "{out}");
    assert!(!out.stdout.contains("\t8 "), "{out}");
}

kernel_test!(argdist_clears_each_interval_unless_cumulative);
/// Each interval's table counts that interval's events; with -c the counts
/// add up from the start.
fn argdist_clears_each_interval_unless_cumulative() {
    let _g = setup();
    let me = pid().to_string();
    for (cumulative, second) in [(false, 2), (true, 5)] {
        let mut args = vec!["argdist", "-p", &me, "-i", "1", "-C", "t:syscalls:sys_enter_getppid"];
        if cumulative {
            args.push("-c");
        }
        let mut t = start_tool(&args);
        getppid_n(3);
        let first = format!("\t{:<10} total calls", 3);
        t.wait_line("a table of 3", Duration::from_secs(10), |l| l == first);
        getppid_n(2);
        let want = format!("\t{second:<10} total calls");
        t.wait_line("the next count", Duration::from_secs(10), |l| l == want);
        let out = t.interrupt_and_finish();
        let counts: Vec<&str> = out.lines().into_iter().filter(|l| l.ends_with(" total calls")).collect();
        assert!(counts.iter().all(|l| [3, second].iter().any(|n| l.starts_with(&format!("\t{n} ")))), "{out}");
    }
}

kernel_test!(argdist_duration_ends_the_run);
/// -d SECONDS ends the run by itself.
fn argdist_duration_ends_the_run() {
    let _g = setup();
    let out = run(&["argdist", "-d", "2", "-C", "t:syscalls:sys_enter_getppid"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.has_attach_line(), "{out}");
}

// ---------------------------------------------------------------------------
// Errors

kernel_test!(counting_tools_refuse_what_they_cant_do);
/// Bad regular expressions and ones that match nothing, unknown errnos and
/// syscalls, bad levels, options BCC doesn't have: one line each, before
/// anything is attached.
fn counting_tools_refuse_what_they_cant_do() {
    let _g = setup();
    let cases: &[(&[&str], &[&str])] = &[
        (&["funccount", "-r", "c:(read|write$"], &["funccount: error: 'c:(read|write$': not a regular expression: "]),
        (
            &["stackcount", "-r", "t:syscalls:rtt_nosuch_.*"],
            &["stackcount: error: 't:syscalls:rtt_nosuch_.*': no tracepoint matches 'syscalls:rtt_nosuch_.*'"],
        ),
        (&["funclatency", "-r", "c:rtt_nosuch$"], &["funclatency: error: 'c:rtt_nosuch$': no function in 'c' matches"]),
        (&["funclatency", "-l", "0", "c:read"], &["funclatency: error: argument -l/--level: must be at least 1"]),
        (&["funclatency", "-D", "c:read"], &["funclatency: error: unrecognized option '-D'"]),
        (&["stackcount", "-K", "-U", "c:read"], &["stackcount: error: -K and -U can't be used together"]),
        (&["syscount", "-e", "EBOGUS"], &["syscount: error: argument -e/--errno: couldn't map EBOGUS to an errno"]),
        (&["syscount", "--syscall", "rtt_nosuch"], &["syscount: error: argument --syscall: no syscall 'rtt_nosuch'"]),
        (
            &["argdist", "-I", "x.h", "-C", "t:syscalls:sys_enter_getppid"],
            &["argdist: error: unrecognized option '-I'"],
        ),
    ];
    assert_usage_errors(cases);
}

// ---------------------------------------------------------------------------
// Kernel functions

kernel_test!(counting_tools_options_on_kernel_functions, needs: Kprobes);
/// The options on kernel functions: funccount -r -c, funclatency -r -l,
/// stackcount -r -s, on this process's reads of /dev/zero: the function
/// that serves them (`read_zero`, or `read_iter_zero`), which this
/// process's other reads (its threads reading rtrace's output through
/// pipes, also `vfs_read`) never reach. (With one CPU, as in the test VM,
/// -c is shown counting that CPU's reads; with two, also leaving out the
/// other's.)
fn counting_tools_options_on_kernel_functions() {
    let _g = setup();
    let me = pid().to_string();
    let cpus = allowed_cpus();
    let (a, b) = (cpus[0], cpus.get(1).copied());
    let mut zero = Zero::open();
    let mut reads_on = |cpu: usize, n: usize| {
        let _p = Pinned::to(cpu);
        for _ in 0..n {
            zero.read(16);
        }
    };
    let serves = "^read_(iter_)?zero$";
    let is_zero_fn = |f: &str| f == "read_zero" || f == "read_iter_zero";

    let t = start_tool(&["funccount", "-r", "-c", &a.to_string(), "-p", &me, serves]);
    reads_on(a, 5);
    if let Some(b) = b {
        reads_on(b, 3);
    }
    let out = t.interrupt_and_finish();
    let counted = rows(&out);
    assert!(!counted.is_empty() && counted.iter().all(|(f, _)| is_zero_fn(f)), "{out}");
    assert_eq!(counted.iter().map(|(_, n)| n).sum::<u64>(), 5, "{out}");

    let t = start_tool(&["funclatency", "-r", "-l", "2", "-p", &me, serves]);
    reads_on(a, 4);
    let out = t.interrupt_and_finish();
    assert_eq!(latency_count(&out), 4, "{out}");

    let t = start_tool(&["stackcount", "-s", "-r", "-p", &me, serves]);
    reads_on(a, 6);
    let out = t.interrupt_and_finish();
    assert_eq!(stack_total(&out), 6, "{out}");
    // -s: frames with their offsets; the caller is vfs_read.
    assert!(out.lines().iter().any(|l| l.starts_with("  vfs_read+0x")), "{out}");
}
