//! The summarizing tools' BCC options on a real kernel: profile's sample
//! filters and period (-p/-L lists, -C, -c, -a, -I), runqlat's per-thread
//! and per-PID-namespace histograms, biolatency's -d/-e/-j, and the
//! interval loop they share (`report::summaries`): a count ends the run,
//! and a run ended otherwise shows the interval so far. Each test makes its
//! own load (busy children pinned to a CPU, threads of this process, O_DIRECT
//! writes) and looks only at its own processes where the tool can filter.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::tools::{lines_with, start_tool};

/// Sum of the counts of BCC-layout histogram rows (`  lo -> hi : count |...|`).
fn hist_total(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains(" -> ") && l.contains('|'))
        .filter_map(|l| l.split(':').nth(1)?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU time (user + system, in clock ticks) of the task whose `stat` file is `stat`.
fn cpu_ticks(stat: &str) -> u64 {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    // Fields after the `(comm)`: state is the 3rd field, utime the 14th, stime the 15th.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

/// Wait until every task in `stats` (paths of `stat` files) has used `ticks`
/// more clock ticks of CPU than now (so a 199 Hz sampler has seen it).
fn wait_cpu(stats: &[String], ticks: u64) {
    let start: Vec<u64> = stats.iter().map(|s| cpu_ticks(s)).collect();
    let deadline = deadline_in(Duration::from_secs(20));
    while stats.iter().zip(&start).any(|(s, t0)| cpu_ticks(s) < t0 + ticks) {
        assert!(Instant::now() < deadline, "the busy tasks got no CPU time: {stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child spinning through read(2)s of /dev/zero (kernel and user time),
/// running a copy of dd under a unique name; killed on drop.
struct Busy {
    child: Child,
    name: String,
    _dir: TempDir,
}

impl Busy {
    /// Started on `cpu` only, when given.
    fn start(cpu: Option<usize>) -> Busy {
        let dir = TempDir::new();
        let name = format!("rtt_{}", token());
        let dd = dir.join(&name);
        std::fs::copy("/bin/dd", &dd).unwrap();
        let mut cmd = Command::new(&dd);
        cmd.args(["if=/dev/zero", "of=/dev/null", "bs=4k"]).stdout(Stdio::null()).stderr(Stdio::null());
        if let Some(cpu) = cpu {
            unsafe {
                cmd.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().unwrap();
        Busy { child, name, _dir: dir }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stat(&self) -> String {
        format!("/proc/{}/stat", self.pid())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this process may run on CPUs 0 and 1.
fn cpus_0_and_1() -> bool {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && libc::CPU_ISSET(0, &set)
            && libc::CPU_ISSET(1, &set)
    }
}

/// `rtrace profile ARGS...` while the tasks of `stats` run `ticks` clock ticks of CPU.
fn profile_while(args: &[&str], stats: &[String], ticks: u64) -> Outcome {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let t = start_tool(&all);
    wait_cpu(stats, ticks);
    t.interrupt_and_finish()
}

/// The folded lines of a `profile -f` run (stdout less the `Attaching` line).
fn folded_lines(out: &Outcome) -> Vec<&str> {
    out.stdout.lines().filter(|l| !l.starts_with("Attaching ") && !l.is_empty()).collect()
}

/// Folded lines (`comm;frames count`) of the process named `comm`.
fn folded_of<'a>(out: &'a Outcome, comm: &str) -> Vec<&'a str> {
    out.stdout.lines().filter(|l| l.starts_with(&format!("{comm};")) || l.starts_with(&format!("{comm} "))).collect()
}

kernel_test!(profile_samples_listed_pids_and_only_the_given_cpu);
/// `-p A,B` samples both processes; `-C 0` only what runs on CPU 0 (A is
/// pinned there, B to CPU 1); the header says which, as BCC's does.
fn profile_samples_listed_pids_and_only_the_given_cpu() {
    let _g = setup();
    if !cpus_0_and_1() {
        inconclusive("needs CPUs 0 and 1");
        return;
    }
    let a = Busy::start(Some(0));
    let b = Busy::start(Some(1));
    let list = format!("{},{}", a.pid(), b.pid());
    let stats = [a.stat(), b.stat()];
    let out = profile_while(&["-f", "-F", "199", "-p", &list], &stats, 20);
    assert!(!folded_of(&out, &a.name).is_empty() && !folded_of(&out, &b.name).is_empty(), "{out}");
    assert!(
        folded_lines(&out).iter().all(|l| l.starts_with(&a.name) || l.starts_with(&b.name)),
        "other processes\n{out}"
    );

    let out = profile_while(&["-F", "199", "-C", "0", "-p", &list], &stats, 20);
    let header = format!("Sampling at 199 Hertz of PID [{}, {}] by user + kernel stack on CPU#0", a.pid(), b.pid());
    assert!(out.stdout.contains(&format!("{header}... Hit Ctrl-C to end.\n")), "{out}");
    let a_line = format!("    -                {} ({})", a.name, a.pid());
    let b_line = format!("    -                {} ({})", b.name, b.pid());
    assert!(out.lines().contains(&a_line.as_str()), "{out}");
    assert!(!out.lines().contains(&b_line.as_str()), "a sample from CPU 1\n{out}");
}

kernel_test!(profile_tid_samples_only_that_thread);
/// `-L TID` samples one thread of this process; `-p` samples both of its
/// spinning threads (each named after itself).
fn profile_tid_samples_only_that_thread() {
    let _g = setup();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let (stop, tx) = (stop.clone(), tx.clone());
            std::thread::spawn(move || {
                tx.send((tid(), unique_comm())).unwrap();
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                }
            })
        })
        .collect();
    let threads: Vec<(i64, String)> = (0..2).map(|_| rx.recv().unwrap()).collect();
    let stats: Vec<String> = threads.iter().map(|(t, _)| format!("/proc/self/task/{t}/stat")).collect();
    let (one, other) = (&threads[0], &threads[1]);
    let by_tid = profile_while(&["-f", "-F", "199", "-L", &one.0.to_string()], &stats, 20);
    let by_pid = profile_while(&["-f", "-F", "199", "-p", &pid().to_string()], &stats, 20);
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    assert!(!folded_of(&by_tid, &one.1).is_empty(), "{by_tid}");
    assert!(folded_lines(&by_tid).iter().all(|l| l.starts_with(&one.1)), "other threads\n{by_tid}");
    assert!(!folded_of(&by_pid, &one.1).is_empty() && !folded_of(&by_pid, &other.1).is_empty(), "{by_pid}");
}

kernel_test!(profile_annotations_mark_kernel_frames_only);
/// `-a`: kernel frames end in `_[k]`, user frames don't (with `-d` the
/// kernel part is the one after the `-` frame); without `-a` no frame does.
fn profile_annotations_mark_kernel_frames_only() {
    let _g = setup();
    let dd = Busy::start(None);
    let me = dd.pid().to_string();
    let out = profile_while(&["-f", "-a", "-d", "-F", "199", "-p", &me], &[dd.stat()], 30);
    let lines = folded_of(&out, &dd.name);
    assert!(!lines.is_empty(), "{out}");
    let mut kernel = 0;
    for l in &lines {
        let stack = l.rsplit_once(' ').unwrap().0;
        let frames: Vec<&str> = stack.split(';').skip(1).collect();
        match frames.iter().position(|f| *f == "-") {
            Some(at) => {
                kernel += 1;
                assert!(frames[..at].iter().all(|f| !f.ends_with("_[k]")), "a user frame annotated: {l}");
                assert!(frames[at + 1..].iter().all(|f| f.ends_with("_[k]")), "a kernel frame without _[k]: {l}");
            }
            // One stack only: all kernel frames (a kernel thread) or all user frames.
            None => assert!(
                frames.iter().all(|f| f.ends_with("_[k]")) || frames.iter().all(|f| !f.ends_with("_[k]")),
                "{l}"
            ),
        }
    }
    if kernel == 0 {
        inconclusive("no sample of dd had both a user and a kernel stack");
        return;
    }
    let out = profile_while(&["-f", "-K", "-F", "199", "-p", &me], &[dd.stat()], 20);
    assert!(!folded_of(&out, &dd.name).is_empty(), "{out}");
    assert!(!out.stdout.contains("_[k]"), "annotated without -a\n{out}");
}

kernel_test!(profile_count_samples_every_count_nanoseconds);
/// `-c 2000000`: a sample every 2,000,000 events of the CPU clock (the
/// probe `-v` shows), and the busy process's samples are counted. (How many
/// samples a span of CPU time gives is left unchecked: under an emulated
/// CPU the clock's events come at another rate than on real hardware.)
fn profile_count_samples_every_count_nanoseconds() {
    let _g = setup();
    let dd = Busy::start(Some(0));
    let me = dd.pid().to_string();
    let mut t = start_tool(&["profile", "-c", "2000000", "-p", &me]);
    t.wait_line("the header", Duration::from_secs(10), |l| l.starts_with("Sampling at"));
    let before = cpu_ticks(&dd.stat());
    wait_cpu(&[dd.stat()], 50);
    let out = t.interrupt_and_finish();
    let ticks = cpu_ticks(&dd.stat()) - before;
    assert!(
        out.stdout.contains(&format!("Sampling at every 2000000 events of PID [{me}] by user + kernel stack")),
        "{out}"
    );
    // Each stack: frames, `-  comm (pid)`, then the count.
    let lines = out.lines();
    let proc_line = format!("    -                {} ({me})", dd.name);
    let samples: u64 = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| **l == proc_line)
        .filter_map(|(i, _)| lines.get(i + 1)?.trim().parse::<u64>().ok())
        .sum();
    assert!(ticks > 0 && samples > 0, "{samples} samples for {ticks} ticks of CPU\n{out}");
    let shown = run(&["-d", "100ms", "profile", "-v", "-c", "2000000", "-p", &me]);
    assert!(shown.stdout.contains(r#"probe("software:cpu-clock:2000000", "#), "{shown}");
}

/// Idle time of all CPUs so far (idle and iowait, in clock ticks), from /proc/stat.
fn idle_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().find(|l| l.starts_with("cpu ")).unwrap_or("");
    let f: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
    f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)
}

/// `rtrace profile ARGS...` until the CPUs have been idle for `ticks` clock
/// ticks in all; None when they weren't within 10 s (a busy machine).
fn profile_while_idle(args: &[&str], ticks: u64) -> Option<Outcome> {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let t = start_tool(&all);
    let start = idle_ticks();
    let deadline = deadline_in(Duration::from_secs(10));
    while idle_ticks() < start + ticks {
        if Instant::now() > deadline {
            t.interrupt_and_finish();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(t.interrupt_and_finish())
}

kernel_test!(profile_leaves_out_idle_unless_asked);
/// Without `-I` no sample is of the idle task (`swapper/N`, thread 0); with
/// it, the samples of idle CPUs show up.
fn profile_leaves_out_idle_unless_asked() {
    let _g = setup();
    let Some(out) = profile_while_idle(&["-f", "-K", "-F", "199"], 10) else {
        inconclusive("no CPU was idle for long");
        return;
    };
    assert!(!out.stdout.lines().any(|l| l.starts_with("swapper/")), "{out}");
    let Some(out) = profile_while_idle(&["-f", "-K", "-I", "-F", "199"], 10) else {
        inconclusive("no CPU was idle for long");
        return;
    };
    assert!(out.stdout.lines().any(|l| l.starts_with("swapper/")), "{out}");
}

/// A thread of this process that sleeps 1 ms at a time until dropped (each
/// wakeup puts it on a run queue).
struct Napper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    tid: i64,
}

impl Napper {
    fn start() -> Napper {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            tx.send(tid()).unwrap();
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let tid = rx.recv().unwrap();
        Napper { stop, thread: Some(thread), tid }
    }
}

impl Drop for Napper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The numbers after `WHAT = ` on the section lines of `out`.
fn sections(out: &Outcome, what: &str) -> Vec<u64> {
    let prefix = format!("{what} = ");
    out.stdout.lines().filter_map(|l| l.strip_prefix(&prefix)?.parse().ok()).collect()
}

kernel_test!(runqlat_histograms_per_thread_and_per_process);
/// `-L`: a histogram per thread, keyed by thread ID (the napping thread's
/// is there); `-P`: per process, keyed by the process ID only; `-p` keeps
/// to this process (a shell waking every 10 ms beside it is left out).
fn runqlat_histograms_per_thread_and_per_process() {
    let _g = setup();
    let nap = Napper::start();
    let me = pid();
    assert_ne!(nap.tid, me);
    let mut other = Command::new("sh").args(["-c", "while :; do sleep 0.01; done"]).spawn().unwrap();
    let other_pid = other.id() as u64;
    let mut t = start_tool(&["runqlat", "-L", "-p", &me.to_string(), "1"]);
    let want = format!("tid = {}", nap.tid);
    t.wait_line(&want, Duration::from_secs(10), |l| l == want);
    let by_tid = t.interrupt_and_finish();

    let mut t = start_tool(&["runqlat", "-P", "-p", &me.to_string(), "1"]);
    let want = format!("pid = {me}");
    t.wait_line(&want, Duration::from_secs(10), |l| l == want);
    let by_pid = t.interrupt_and_finish();
    let _ = other.kill();
    let _ = other.wait();

    assert!(!sections(&by_tid, "tid").contains(&other_pid), "another process\n{by_tid}");
    assert!(sections(&by_tid, "pid").is_empty(), "{by_tid}");
    assert!(hist_total(&by_tid.stdout) > 0, "{by_tid}");
    let pids = sections(&by_pid, "pid");
    assert!(pids.iter().all(|p| *p == me as u64), "{by_pid}");
    assert!(sections(&by_pid, "tid").is_empty(), "{by_pid}");
}

/// The inode number of a `/proc/PID/ns/...` link (`pid:[4026531836]`).
fn ns_inode(link: &str) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let s = target.to_string_lossy();
    s.split_once('[')?.1.strip_suffix(']')?.parse().ok()
}

kernel_test!(runqlat_histograms_per_pid_namespace, needs: Program("unshare"));
/// `--pidnss`: a histogram per PID namespace, keyed by its inode number: a
/// child in a new PID namespace waking every 10 ms shows up under that
/// namespace's, beside this process's own.
fn runqlat_histograms_per_pid_namespace() {
    let _g = setup();
    let mine = ns_inode("/proc/self/ns/pid").expect("our PID namespace");
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "sh", "-c", "while :; do sleep 0.01; done"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let link = format!("/proc/{}/ns/pid_for_children", child.id());
    let deadline = deadline_in(Duration::from_secs(10));
    let theirs = loop {
        match ns_inode(&link) {
            Some(n) if n != mine => break n,
            _ if Instant::now() > deadline => panic!("unshare made no PID namespace"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let mut t = start_tool(&["runqlat", "--pidnss", "1"]);
    let (a, b) = (format!("pidns = {mine}"), format!("pidns = {theirs}"));
    let met = t.wait_for(Duration::from_secs(10), |lines| lines.contains(&a) && lines.contains(&b));
    let out = t.interrupt_and_finish();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(met, Waited::Met, "{out}");
    assert!(out.stdout.lines().filter(|l| l.starts_with("pidns = ")).all(|l| l[8..].parse::<u64>().is_ok()), "{out}");
}

/// The histogram headers in `out`, one per summary of these tools.
fn summaries(out: &Outcome, header: &str) -> usize {
    out.stdout.lines().filter(|l| l.starts_with(header)).count()
}

kernel_test!(summaries_end_after_count_or_show_the_interval_so_far);
/// `runqlat 1 2` ends by itself after exactly two summaries, printing none
/// of its maps; `-d 1500ms TOOL 1` shows a second, partial one at the end,
/// for each tool on the shared loop.
fn summaries_end_after_count_or_show_the_interval_so_far() {
    let _g = setup();
    let usecs = "     usecs               : count     distribution";
    let out = run(&["runqlat", "1", "2"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(summaries(&out, usecs), 2, "{out}");
    assert!(!out.stdout.contains('@'), "a map printed at exit\n{out}");
    for (tool, header) in [("runqlat", usecs), ("cpudist", usecs), ("runqlen", "    runqlen : count")] {
        let out = run(&["-d", "1500ms", tool, "1"]);
        assert_eq!(out.code, Some(0), "{tool}\n{out}");
        assert_eq!(summaries(&out, header), 2, "{tool}\n{out}");
        assert!(!out.stdout.contains('@'), "{tool}: a map printed at exit\n{out}");
    }
}

/// The whole disk `path`'s file system is on (`sda` for /dev/sda1), from
/// /sys/dev/block; None for file systems without one (tmpfs, overlay).
fn disk_of(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let sys = PathBuf::from(format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev)));
    let real = std::fs::canonicalize(&sys).ok()?;
    let disk = if sys.join("partition").exists() { real.parent()?.to_path_buf() } else { real };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// Eight O_DIRECT 64 KiB writes into `dir`, by dd, and an fsync (so that
/// they reach the disk before dd ends even where the file system buffers them).
fn direct_writes(dir: &TempDir) {
    let st = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", dir.join("data").display()))
        .args(["bs=64k", "count=8", "oflag=direct", "conv=fsync"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

/// `rtrace biolatency ARGS...` around eight direct writes.
fn biolatency_around(dir: &TempDir, args: &[&str]) -> Outcome {
    let mut all = vec!["biolatency"];
    all.extend_from_slice(args);
    let t = start_tool(&all);
    direct_writes(dir);
    t.interrupt_and_finish()
}

kernel_test!(biolatency_disk_filter_extension_and_json);
/// `-d DISK` keeps to that disk (with -D, the only section is DISK; another
/// name sees nothing); `-e` adds `avg = A usecs, total: T usecs, count: N`
/// for the histogram shown; `-j` prints BCC's dictionary per disk.
fn biolatency_disk_filter_extension_and_json() {
    let _g = setup();
    let dir = TempDir::new();
    let Some(disk) = disk_of(&dir.path) else {
        inconclusive("the temporary directory is on no block device");
        return;
    };
    let out = biolatency_around(&dir, &["-D", "-e", "-d", &disk]);
    let total = hist_total(&out.stdout);
    if total == 0 {
        inconclusive(format!("no block I/O was seen on {disk}"));
        return;
    }
    assert!(total >= 8, "{out}");
    let disks = lines_with(&out, &["disk = "]);
    assert!(!disks.is_empty() && disks.iter().all(|l| *l == format!("disk = {disk}")), "{out}");
    let ext = lines_with(&out, &["avg = "]);
    assert_eq!(ext.len(), 1, "{out}");
    let nums: Vec<u64> =
        ext[0].split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect();
    assert_eq!(ext[0], format!("avg = {} usecs, total: {} usecs, count: {}", nums[0], nums[1], nums[2]), "{out}");
    assert_eq!(nums[2], total, "the count is the histogram's\n{out}");
    assert_eq!(nums[0], nums[1] / nums[2], "{out}");

    let out = biolatency_around(&dir, &["-d", "rtt_nosuchdisk"]);
    assert_eq!(hist_total(&out.stdout), 0, "{out}");

    let out = biolatency_around(&dir, &["-j", "-D", "-d", &disk]);
    assert!(!out.stdout.contains("Tracing block device I/O"), "{out}");
    let dicts: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(dicts.len(), 1, "{out}");
    // Python's notation: the strings here have no quotes of their own.
    let v: serde_json::Value =
        serde_json::from_str(&dicts[0].replace('\'', "\"")).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(v["val_type"], "usecs", "{out}");
    assert_eq!(v["disk"], disk.as_str(), "{out}");
    assert!(v["ts"].as_str().is_some_and(|t| t.len() == 19), "{out}");
    let data = v["data"].as_array().unwrap();
    let mut low = 0;
    let mut sum = 0;
    for (i, row) in data.iter().enumerate() {
        assert_eq!(row["interval-start"], low, "{out}");
        assert_eq!(row["interval-end"], (1u64 << (i + 1)) - 1, "{out}");
        low = 1u64 << (i + 1);
        sum += row["count"].as_u64().unwrap();
    }
    assert!(sum >= 8 && data.last().is_some_and(|r| r["count"] != 0), "{out}");
}

kernel_test!(profile_stack_storage_size_sizes_the_stack_map);
/// `--stack-storage-size N` is the stack map's size (`-v` lists each map
/// with its entries); without it the default, and RTRACE_STACK_ENTRIES wins.
fn profile_stack_storage_size_sizes_the_stack_map() {
    let _g = setup();
    let stack_map = |out: &Outcome| -> Vec<String> {
        out.stderr
            .lines()
            .filter(|l| l.contains(": stack_trace,"))
            .map(|l| l.rsplit(", ").next().unwrap().to_string())
            .collect()
    };
    let out = run(&["-v", "-d", "200ms", "profile", "--stack-storage-size", "1024"]);
    assert_eq!(out.code, Some(0), "{out}");
    let sizes = stack_map(&out);
    assert!(!sizes.is_empty() && sizes.iter().all(|s| s == "1024 entries"), "{sizes:?}\n{out}");
    let out = run(&["-v", "-d", "200ms", "profile"]);
    assert!(stack_map(&out).iter().all(|s| s != "1024 entries"), "{out}");
    let out =
        run_env(&["-v", "-d", "200ms", "profile", "--stack-storage-size", "1024"], &[("RTRACE_STACK_ENTRIES", "2048")]);
    assert!(!stack_map(&out).is_empty() && stack_map(&out).iter().all(|s| s == "2048 entries"), "{out}");
    let out = run(&["profile", "--stack-storage-size", "3"]);
    assert!(out.code != Some(0) && out.stderr.contains("stack_entries(3): give from 16 to 1048576"), "{out}");
}
