//! Every script in examples/ runs for real on this kernel and prints what it
//! says it prints. The run is bounded by `-d` or by a `-c` command, with ARGS
//! where the example takes them. A last test fails when an example is added
//! without being exercised here.
//!
//! Needs root (skips with a printed reason otherwise).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{deadline_in, rtrace_bin};

/// The examples the tests below run; `every_example_is_exercised` compares
/// this list with the directory.
const TESTED: &[&str] = &[
    "count_events.rhai",
    "execsnoop.rhai",
    "opensnoop.rhai",
    "profile.rhai",
    "profile_kstacks.rhai",
    "read_latency.rhai",
    "read_sizes.rhai",
    "sched_switch.rhai",
    "syscall_rate.rhai",
    "syscalls_by_comm.rhai",
];

/// Root and one test at a time (the examples count system-wide events).
use crate::common::{gcc, setup};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn example(name: &str) -> String {
    examples_dir().join(name).to_string_lossy().into_owned()
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}", self.code, self.stdout, self.stderr)
    }
}

impl Run {
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    fn has_line(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.stdout.lines().any(pred)
    }

    /// The rows under a histogram header line such as `@bytes[dd]:`.
    fn hist_rows(&self, header: &str) -> Vec<&str> {
        let lines = self.lines();
        let Some(at) = lines.iter().position(|l| l.trim_end() == header) else {
            panic!("no histogram {header:?}\n{self}");
        };
        lines[at + 1..].iter().take_while(|l| !l.is_empty()).copied().collect()
    }

    /// The count of the histogram row whose label is `label` (e.g. `[512, 1K)`).
    fn hist_count(&self, header: &str, label: &str) -> u64 {
        let rows = self.hist_rows(header);
        let row = rows
            .iter()
            .find(|r| r.starts_with(label))
            .unwrap_or_else(|| panic!("histogram {header} has no row {label}\n{self}"));
        row[label.len()..].split('|').next().unwrap_or("").trim().parse().unwrap_or(0)
    }
}

/// Run rtrace with `args` to its end (at most 60 s).
fn rtrace(args: &[&str]) -> Run {
    let mut child = Command::new(rtrace_bin())
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", rtrace_bin()));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = deadline_in(Duration::from_secs(60));
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for rtrace") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let run = Run {
        code: status.and_then(|s| s.code()),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    };
    assert!(status.is_some(), "rtrace {args:?} did not end within 60 s\n{run}");
    run
}

fn assert_ok(run: &Run, what: &str) {
    assert_eq!(run.code, Some(0), "{what}: expected exit 0\n{run}");
    assert!(!run.stderr.contains("panicked"), "{what}: rtrace panicked\n{run}");
}

/// Keep a CPU busy in the kernel (reads of /dev/zero) while `f` runs.
fn with_busy_cpu<T>(f: impl FnOnce() -> T) -> T {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let busy = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut f = std::fs::File::open("/dev/zero").expect("open /dev/zero");
        while !s.load(Ordering::Relaxed) {
            let _ = f.read(&mut buf);
        }
    });
    let r = f();
    stop.store(true, Ordering::Relaxed);
    let _ = busy.join();
    r
}

kernel_test!(profile_of_a_command, needs: Program("gcc"));
/// A command spinning in main -> outer -> middle -> inner (the stack fixture,
/// built with frame pointers): its folded samples name that chain, and
/// `-c` keeps every other process out.
fn profile_of_a_command() {
    let _g = setup();
    let dir = std::env::temp_dir().join(format!("rtrace-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("rtt_prof");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stacks.c");
    let built = gcc().args(["-O0", "-fno-omit-frame-pointer", "-g", "-o"]).arg(&bin).arg(&src).status();
    assert!(built.is_ok_and(|s| s.success()), "cannot build tests/fixtures/stacks.c with gcc");
    let cmd = format!("{} spin 700", bin.display());
    let run = rtrace(&["-q", "-c", &cmd, &example("profile.rhai")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_ok(&run, "profile");
    let lines = run.lines();
    assert!(!lines.is_empty(), "no folded stacks\n{run}");
    let mut spinning = 0;
    let mut seen = BTreeSet::new();
    for l in &lines {
        let (stack, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l:?}\n{run}"));
        let n: u64 = count.parse().unwrap_or_else(|_| panic!("bad count in {l:?}\n{run}"));
        assert!(stack.starts_with("rtt_prof;") || stack.starts_with("rtrace;"), "another process: {l:?}\n{run}");
        assert!(seen.insert(stack.to_string()), "stack folded to two lines (they should be summed): {stack}\n{run}");
        if stack.contains(";outer;middle;inner") {
            spinning += n;
        }
    }
    // 700 ms of CPU (the fixture spins until it has had them) at 49 Hz:
    // about 34 samples.
    assert!(spinning >= 10, "only {spinning} samples in outer;middle;inner\n{run}");
}

kernel_test!(every_example_is_exercised, without_root);
fn every_example_is_exercised() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rhai"))
        .collect();
    let tested: BTreeSet<String> = TESTED.iter().map(|s| s.to_string()).collect();
    let untested: Vec<_> = on_disk.difference(&tested).collect();
    let missing: Vec<_> = tested.difference(&on_disk).collect();
    assert!(untested.is_empty(), "examples without a test in tests/examples.rs: {untested:?}");
    assert!(missing.is_empty(), "tests/examples.rs lists examples that don't exist: {missing:?}");
}

kernel_test!(syscalls_by_comm);
fn syscalls_by_comm() {
    let _g = setup();
    let run = rtrace(&["-c", "cat /etc/hostname", &example("syscalls_by_comm.rhai")]);
    assert_ok(&run, "syscalls_by_comm");
    assert!(run.lines().first() == Some(&"Attaching 1 probe..."), "{run}");
    assert!(run.has_line(|l| l.starts_with("@calls[cat]: ")), "no @calls[cat] entry\n{run}");

    let run = rtrace(&["-d", "300ms", &example("syscalls_by_comm.rhai")]);
    assert_ok(&run, "syscalls_by_comm -d 300ms");
    assert!(run.has_line(|l| l.starts_with("@calls[")), "no @calls entry\n{run}");
}

kernel_test!(opensnoop);
fn opensnoop() {
    let _g = setup();
    let run = rtrace(&["-c", "cat /etc/hostname", &example("opensnoop.rhai"), "cat"]);
    assert_ok(&run, "opensnoop");
    let header = run.lines().iter().position(|l| l.split_whitespace().collect::<Vec<_>>() == ["PID", "COMM", "PATH"]);
    assert!(header.is_some(), "no header line\n{run}");
    let open = run.lines().iter().position(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3 && f[0].parse::<u32>().is_ok() && f[1] == "cat" && f[2] == "/etc/hostname"
    });
    assert!(open.is_some(), "no line for cat opening /etc/hostname\n{run}");
    // The kernel-side filter keeps other processes out.
    assert!(
        run.lines()
            .iter()
            .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u32>().is_ok()))
            .all(|l| l.contains(" cat ")),
        "a process other than cat was printed\n{run}"
    );

    let run = rtrace(&["-d", "300ms", &example("opensnoop.rhai")]);
    assert_ok(&run, "opensnoop -d 300ms");
}

kernel_test!(execsnoop, needs: Btf);
/// The command's shell starts `ls`: its line names the shell as parent,
/// by pid (read through `e.curtask.real_parent`) and comm.
fn execsnoop() {
    let _g = setup();
    let run = rtrace(&["-c", "sh -c 'ls /dev/null > /dev/null; true'", &example("execsnoop.rhai")]);
    assert_ok(&run, "execsnoop");
    let rows: Vec<Vec<String>> = run
        .lines()
        .iter()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|f| f.len() == 4 && f[0].parse::<u32>().is_ok())
        .collect();
    let ls = rows.iter().find(|f| f[3].ends_with("/ls")).unwrap_or_else(|| panic!("no line for ls\n{run}"));
    let shell = rows.iter().find(|f| f[3].ends_with("/sh") && f[0] == ls[1]);
    assert!(shell.is_some(), "ls's PPID {} is not the shell's PID\n{run}", ls[1]);
    assert_eq!(ls[2], "sh", "parent comm\n{run}");
}

kernel_test!(read_sizes);
fn read_sizes() {
    let _g = setup();
    let run = rtrace(&["-c", "dd if=/dev/zero of=/dev/null bs=1000 count=20", &example("read_sizes.rhai")]);
    assert_ok(&run, "read_sizes");
    assert!(run.hist_count("@bytes[dd]:", "[512, 1K)") >= 20, "{run}");
    assert!(run.hist_count("@small:", "[512, 1K)") >= 20, "{run}");
}

kernel_test!(read_latency_within_and_over_budget);
fn read_latency_within_and_over_budget() {
    let _g = setup();
    let dd = "dd if=/dev/zero of=/dev/null bs=1000 count=20";
    let run = rtrace(&["-c", dd, &example("read_latency.rhai"), "10000000"]);
    assert_ok(&run, "read_latency within budget");
    assert!(run.hist_rows("@lat_us[dd]:").iter().map(|r| r.len()).sum::<usize>() > 0, "{run}");
    assert!(run.has_line(|l| l.starts_with("@worst_us[dd]: ")), "no @worst_us[dd]\n{run}");
    assert!(!run.has_line(|l| l.starts_with("@start")), "@start should have been cleared in END\n{run}");

    // A budget below any latency: END calls fail(), rtrace exits 1.
    let run = rtrace(&["-c", dd, &example("read_latency.rhai"), "--", "-1"]);
    assert_eq!(run.code, Some(1), "expected exit 1 over budget\n{run}");
    assert!(
        run.stderr.contains("rtrace: fail: ")
            && run.stderr.contains(": a read took ")
            && run.stderr.contains(" us, over the -1 us budget"),
        "{run}"
    );
}

kernel_test!(syscall_rate);
fn syscall_rate() {
    let _g = setup();
    let run = rtrace(&["-d", "1500ms", &example("syscall_rate.rhai")]);
    assert_ok(&run, "syscall_rate");
    let ticks: Vec<&str> = run.lines().into_iter().filter(|l| l.contains(" syscalls/s")).collect();
    assert!(!ticks.is_empty(), "no per-second line\n{run}");
    let n: u64 = ticks[0].split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(0);
    assert!(n > 0, "zero syscalls in a second?\n{run}");
    // The script clears its maps in END, so nothing is dumped at exit.
    assert!(!run.has_line(|l| l.starts_with('@')), "{run}");
}

kernel_test!(profile_kstacks_prints_folded_stacks);
fn profile_kstacks_prints_folded_stacks() {
    let _g = setup();
    let run = with_busy_cpu(|| rtrace(&["-q", "-d", "700ms", &example("profile_kstacks.rhai")]));
    assert_ok(&run, "profile_kstacks");
    let lines = run.lines();
    assert!(!lines.is_empty(), "no folded stacks\n{run}");
    for l in &lines {
        let (stack, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("not a folded line: {l:?}\n{run}"));
        assert!(count.parse::<u64>().is_ok_and(|n| n > 0), "bad count in {l:?}\n{run}");
        assert!(!stack.is_empty(), "empty stack in {l:?}");
    }
    // The busy thread reads /dev/zero: its kernel stacks pass through read().
    assert!(
        lines.iter().any(|l| l.contains(";vfs_read") || l.contains(";ksys_read")),
        "no read() stack sampled\n{run}"
    );
}

kernel_test!(sched_switch);
fn sched_switch() {
    let _g = setup();
    let run = rtrace(&["-d", "300ms", &example("sched_switch.rhai")]);
    assert_ok(&run, "sched_switch");
    assert!(
        run.has_line(|l| l.starts_with("@switches[") && (l.contains(", preempted]: ") || l.contains(", blocked]: "))),
        "no @switches entry\n{run}"
    );
    assert!(run.has_line(|l| l.starts_with("@ran_us[") && l.trim_end().ends_with("]:")), "no @ran_us histogram\n{run}");
    assert!(!run.has_line(|l| l.starts_with("@oncpu")), "@oncpu should have been cleared in END\n{run}");
}

kernel_test!(count_events_takes_probes_from_args);
fn count_events_takes_probes_from_args() {
    let _g = setup();
    let run = rtrace(&[
        "-c",
        "/bin/true",
        &example("count_events.rhai"),
        "tracepoint:sched:sched_process_exec",
        "rawtracepoint:sched_process_exit",
    ]);
    assert_ok(&run, "count_events");
    assert!(run.lines().first() == Some(&"Attaching 2 probes..."), "{run}");
    assert!(run.has_line(|l| l == "@events[tracepoint:sched:sched_process_exec, true]: 1"), "{run}");
    assert!(run.has_line(|l| l == "@events[rawtracepoint:sched_process_exit, true]: 1"), "{run}");

    let run = rtrace(&[&example("count_events.rhai")]);
    assert_eq!(run.code, Some(2), "without ARGS it prints usage and exits 2\n{run}");
    assert!(run.stdout.starts_with("usage: "), "{run}");
}
