//! Helpers for the real-kernel tests: run the rtrace binary as a child, wait
//! until it has attached, make known events happen from the test itself, end
//! the run, and pick apart the bpftrace-style output.
//!
//! Each test is registered beside its function with `kernel_test!`
//! (registry.rs), which declares what it needs besides root ([`Needs`]);
//! where that is missing the test is reported ignored with the reason. Every
//! test body takes [`setup`] first: it serialises the tests of one binary so
//! that the events one test makes (getppid calls from this process, reads,
//! opens) never land in another test's counts.

use std::ffi::CString;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Path of the binary under test: the one cargo built, or `$RTRACE_BIN`
/// (the suite run from a copy, as scripts/test-vm.sh does).
pub fn rtrace_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| std::env::var("RTRACE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rtrace").to_string()))
}

/// How long rtrace may take to compile, load and attach.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);
/// How long rtrace may take to end once it has been told to (or was due to).
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

/// When a wait for something that should come gives up: `timeout` from
/// now, stretched `$RTRACE_TEST_PATIENCE` times (scripts/vm-tests.sh sets it
/// under emulation, where everything runs several times slower). These are
/// hang detectors, never measurements: a test that passes waits no longer.
pub fn deadline_in(timeout: Duration) -> Instant {
    static PATIENCE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let k = *PATIENCE.get_or_init(|| {
        std::env::var("RTRACE_TEST_PATIENCE").ok().and_then(|v| v.parse().ok()).filter(|&k| k >= 1).unwrap_or(1)
    });
    Instant::now() + timeout * k
}

mod cases;
pub use cases::*;
#[macro_use]
mod registry;
pub use registry::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// Start of every test body: `let _g = setup();`, held to the end, runs
/// one test at a time. (Whether the test can run here was settled before
/// it started, from its registration.)
pub fn setup() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string()
}

/// Why a real-kernel test can't run as this user; None as root.
pub fn lacks_root() -> Option<&'static str> {
    (unsafe { libc::geteuid() } != 0).then_some("needs root")
}

/// What a test needs besides root, declared where it is registered
/// (`kernel_test!(f, needs: Kprobes, Program("gcc"))`): kernel features,
/// files, programs. A test whose need this machine lacks is ignored, saying why.
#[derive(Clone, Copy, Debug)]
pub enum Needs {
    /// Kprobes and kretprobes: the kprobe PMU.
    Kprobes,
    /// fentry/fexit: BPF trampolines load and attach (as `rtrace --info` says).
    Fentry,
    /// A kernel without kprobes: a test of the error rtrace gives there.
    NoKprobes,
    /// A kernel that refuses fentry/fexit: a test of the error rtrace gives there.
    NoFentry,
    /// Kernel BTF (/sys/kernel/btf/vmlinux).
    Btf,
    /// `<sys/sdt.h>` (systemtap-sdt-dev), so that C fixtures get USDT probes.
    Sdt,
    /// A file or directory: a tracepoint group, a tracing file.
    Path(&'static str),
    /// A program found on `$PATH` (or at that path when it has a `/`).
    Program(&'static str),
    /// The machine's architecture, as `std::env::consts::ARCH` names it.
    Arch(&'static str),
    /// What no path says: (what is needed, whether this machine has it).
    Check(&'static str, fn() -> bool),
}

/// Why this machine can't run a test that needs `needs`; None when it can.
pub fn kernel_lacks(needs: Needs) -> Option<String> {
    let kprobes = || Path::new("/sys/bus/event_source/devices/kprobe").exists();
    let why = match needs {
        Needs::Kprobes if !kprobes() => "needs kprobes: this kernel has no kprobe PMU".to_string(),
        Needs::Fentry if !fentry_loads() => "needs fentry/fexit: this kernel refuses BPF trampolines".to_string(),
        Needs::NoKprobes if kprobes() => "needs a kernel without kprobes: it tests the error there".to_string(),
        Needs::NoFentry if fentry_loads() => {
            "needs a kernel that refuses fentry/fexit: it tests the error there".to_string()
        }
        Needs::Btf if !Path::new("/sys/kernel/btf/vmlinux").exists() => {
            "needs kernel BTF: this kernel has no /sys/kernel/btf/vmlinux".to_string()
        }
        Needs::Sdt if !sdt_header() => "needs <sys/sdt.h>: install systemtap-sdt-dev".to_string(),
        Needs::Path(p) if !Path::new(p).exists() => format!("needs {p}: not on this machine"),
        Needs::Program(p) if !on_path(p) => format!("needs {p}: not found on PATH"),
        Needs::Arch(a) if std::env::consts::ARCH != a => {
            format!("needs {a}: this machine is {}", std::env::consts::ARCH)
        }
        Needs::Check(what, holds) if !holds() => format!("needs {what}"),
        _ => return None,
    };
    Some(why)
}

/// Whether `program` runs from `$PATH` (a name) or is there (a path).
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return runnable(Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|dirs| std::env::split_paths(&dirs).any(|d| runnable(&d.join(program))))
}

/// Whether gcc finds `<sys/sdt.h>`.
fn sdt_header() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        use std::io::Write;
        let child = Command::new("gcc")
            .args(["-E", "-x", "c", "-o", "/dev/null", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return false };
        let wrote = child.stdin.take().is_some_and(|mut i| i.write_all(b"#include <sys/sdt.h>\n").is_ok());
        child.wait().is_ok_and(|s| s.success()) && wrote
    })
}

/// Whether rtrace can attach fentry here: asked of rtrace itself (`--info`).
fn fentry_loads() -> bool {
    info_says_yes("fentry/fexit")
}

/// Whether `rtrace --info` (run once) says `FEATURE: yes`.
pub fn info_says_yes(feature: &str) -> bool {
    static INFO: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let info = INFO.get_or_init(|| {
        let out = Command::new(rtrace_bin()).arg("--info").output().expect("rtrace --info");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    info.lines().any(|l| l.trim() == format!("{feature}: yes"))
}

// ---------------------------------------------------------------------------
// Identity of the calling thread / process

/// The calling thread's id (what the script sees as `e.tid`).
pub fn tid() -> i64 {
    unsafe { libc::syscall(libc::SYS_gettid) as i64 }
}

/// This process's id (what the script sees as `e.pid`).
pub fn pid() -> i64 {
    unsafe { libc::syscall(libc::SYS_getpid) as i64 }
}

/// A short token unique to this call: 8 hex digits.
pub fn token() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut x = nanos ^ (std::process::id() as u64).rotate_left(32) ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(48);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    format!("{:08x}", x as u32)
}

/// Set the calling thread's comm (at most 15 bytes are kept by the kernel).
pub fn set_comm(name: &str) {
    assert!(name.len() <= 15, "comm {name:?} is longer than 15 bytes");
    let c = CString::new(name).unwrap();
    assert_eq!(set_comm_raw(&c), 0, "prctl(PR_SET_NAME) failed");
}

/// `prctl(PR_SET_NAME)` without allocating (usable in a forked child).
pub fn set_comm_raw(name: &std::ffi::CStr) -> i32 {
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) }
}

/// The calling thread's comm.
pub fn comm() -> String {
    let mut buf = [0u8; 17];
    unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr() as libc::c_ulong, 0, 0, 0) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(16);
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A fresh comm for this test thread, `rtt_XXXXXXXX`; set and returned.
pub fn unique_comm() -> String {
    let name = format!("rtt_{}", token());
    set_comm(&name);
    name
}

// ---------------------------------------------------------------------------
// Events the tests make

/// `getppid()` n times, as raw syscalls (no libc caching).
pub fn getppid_n(n: usize) {
    for _ in 0..n {
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

/// `getpid()` n times, as raw syscalls.
pub fn getpid_n(n: usize) {
    for _ in 0..n {
        unsafe { libc::syscall(libc::SYS_getpid) };
    }
}

/// A file descriptor on /dev/zero, closed on drop; `read(n)` is one read(2)
/// asking for exactly n bytes.
pub struct Zero {
    pub fd: i32,
    buf: Vec<u8>,
}

impl Zero {
    pub fn open() -> Zero {
        let path = CString::new("/dev/zero").unwrap();
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "cannot open /dev/zero");
        Zero { fd, buf: vec![0; 1 << 16] }
    }

    /// One read(2) of `n` bytes (n up to 64 KiB); asserts it returned n.
    pub fn read(&mut self, n: usize) {
        assert!(n <= self.buf.len());
        let got = unsafe { libc::read(self.fd, self.buf.as_mut_ptr() as *mut libc::c_void, n) };
        assert_eq!(got, n as isize, "read({}, {n}) returned {got}", self.fd);
    }

    pub fn reads(&mut self, sizes: &[usize]) {
        for &n in sizes {
            self.read(n);
        }
    }
}

impl Drop for Zero {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// Fork a child that runs `f` (raw syscalls only: no allocation, no locks)
/// and `_exit(0)`s; waits for it and returns its pid.
pub fn fork_and_wait(f: impl FnOnce()) -> i64 {
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        f();
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    let r = unsafe { libc::waitpid(child, &mut status, 0) };
    assert_eq!(r, child, "waitpid failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "forked child failed: {status:#x}");
    child as i64
}

/// A directory under /tmp, removed on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new() -> TempDir {
        let path = PathBuf::from(format!("/tmp/rtt_{}", token()));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Write `text` to `name` in this directory; returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
        p
    }

    /// A copy of `/bin/true` named `name` (so a process running it has that comm).
    pub fn true_named(&self, name: &str) -> PathBuf {
        let p = self.join(name);
        std::fs::copy("/bin/true", &p).unwrap_or_else(|e| panic!("cannot copy /bin/true: {e}"));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Run `path` to completion, expecting success.
pub fn run_ok(path: &Path) {
    let st = Command::new(path).status().unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(st.success(), "{} failed: {st}", path.display());
}

// ---------------------------------------------------------------------------
// Running rtrace

/// A running rtrace.
pub struct Tracer {
    child: Child,
    lines_rx: Receiver<String>,
    /// Stdout lines received so far.
    pub lines: Vec<String>,
    stderr: Option<JoinHandle<String>>,
    pub started: Instant,
    /// When the `Attaching` line (or the line [`Tracer::wait_line`] waited for) arrived.
    pub ready_at: Option<Instant>,
    exited: bool,
}

/// How [`Tracer::wait_for`] ended.
#[allow(dead_code)] // used by the script-case runner (tests/scripts.rs)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    Met,
    /// rtrace closed its stdout (it ended) first.
    Ended,
    TimedOut,
}

/// A finished rtrace run.
pub struct Outcome {
    /// Exit status (`None` when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From start to exit.
    pub elapsed: Duration,
    /// When the process exit was noticed.
    pub ended_at: Instant,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit code {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--------------",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

impl Tracer {
    /// Start `rtrace ARGS...` with extra environment variables.
    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Tracer {
        let mut cmd = Command::new(rtrace_bin());
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", rtrace_bin()));
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if line.ends_with('\n') {
                            line.pop();
                        }
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Tracer { child, lines_rx, lines: Vec::new(), stderr: Some(stderr), started, ready_at: None, exited: false }
    }

    pub fn start(args: &[&str]) -> Tracer {
        Tracer::start_env(args, &[])
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Wait until a stdout line satisfies `pred`; returns it. Panics (with
    /// everything rtrace printed) on timeout or when rtrace ends first.
    pub fn wait_line(&mut self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        if let Some(l) = self.lines.iter().find(|l| pred(l)) {
            return l.clone();
        }
        let deadline = deadline_in(timeout);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines_rx.recv_timeout(left) {
                Ok(line) => {
                    let hit = pred(&line);
                    self.lines.push(line.clone());
                    if hit {
                        self.ready_at = Some(Instant::now());
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let out = self.abort();
                    panic!("timed out after {timeout:?} waiting for {what}\n{out}");
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let out = self.abort();
                    panic!("rtrace ended before printing {what}\n{out}");
                }
            }
        }
    }

    /// Wait until `n` stdout lines in all satisfy `pred`.
    pub fn wait_count(&mut self, what: &str, timeout: Duration, n: usize, pred: impl Fn(&str) -> bool) {
        let deadline = deadline_in(timeout);
        while self.lines.iter().filter(|l| pred(l)).count() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines_rx.recv_timeout(left) {
                Ok(line) => self.lines.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    let out = self.abort();
                    panic!("timed out after {timeout:?} waiting for {what}\n{out}");
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let out = self.abort();
                    panic!("rtrace ended before printing {what}\n{out}");
                }
            }
        }
        self.ready_at = Some(Instant::now());
    }

    /// Wait until the stdout lines so far satisfy `pred`, rtrace ends, or
    /// `timeout` passes (then rtrace is still running: it has hung).
    #[allow(dead_code)] // used by the script-case runner (tests/scripts.rs)
    pub fn wait_for(&mut self, timeout: Duration, pred: impl Fn(&[String]) -> bool) -> Waited {
        let deadline = deadline_in(timeout);
        loop {
            if pred(&self.lines) {
                return Waited::Met;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines_rx.recv_timeout(left) {
                Ok(line) => self.lines.push(line),
                Err(RecvTimeoutError::Timeout) => return Waited::TimedOut,
                Err(RecvTimeoutError::Disconnected) => return Waited::Ended,
            }
        }
    }

    /// Wait for `Attaching N probes...`; returns N.
    pub fn wait_attached(&mut self) -> usize {
        let line = self.wait_line("the `Attaching N probes...` line", ATTACH_TIMEOUT, |l| l.starts_with("Attaching "));
        parse_attaching(&line).unwrap_or_else(|| panic!("malformed attach line {line:?}"))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Send SIGINT (Ctrl-C).
    pub fn interrupt(&self) {
        let r = unsafe { libc::kill(self.pid(), libc::SIGINT) };
        assert_eq!(r, 0, "kill(SIGINT) failed");
    }

    /// Wait (up to `timeout`) for rtrace to end by itself; collect its output.
    /// Panics, after killing it, if it doesn't end in time.
    pub fn finish_within(mut self, timeout: Duration) -> Outcome {
        let deadline = deadline_in(timeout);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let out = self.abort();
                    panic!("rtrace did not end within {timeout:?}\n{out}");
                }
                Err(e) => panic!("waiting for rtrace: {e}"),
            }
        };
        let ended_at = Instant::now();
        self.exited = true;
        self.collect(status.code(), ended_at)
    }

    pub fn finish(self) -> Outcome {
        self.finish_within(EXIT_TIMEOUT)
    }

    /// For scripts that `exit()` on this thread's getpgid call: make one
    /// every 10 ms (one may find the ring full) until rtrace has ended;
    /// collect its output.
    pub fn finish_by_getpgid(mut self, timeout: Duration) -> Outcome {
        let until = deadline_in(timeout);
        while self.is_running() && Instant::now() < until {
            unsafe { libc::getpgid(0) };
            std::thread::sleep(Duration::from_millis(10));
        }
        self.finish_within(Duration::from_secs(5))
    }

    /// SIGINT, then [`Tracer::finish`].
    pub fn interrupt_and_finish(self) -> Outcome {
        self.interrupt();
        self.finish()
    }

    fn collect(&mut self, code: Option<i32>, ended_at: Instant) -> Outcome {
        // The reader threads end at EOF; the child is gone, so that is soon.
        let deadline = deadline_in(Duration::from_secs(5));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines_rx.recv_timeout(left) {
                Ok(l) => self.lines.push(l),
                Err(_) => break,
            }
        }
        let stderr = self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        let mut stdout = self.lines.join("\n");
        if !self.lines.is_empty() {
            stdout.push('\n');
        }
        Outcome { code, stdout, stderr, elapsed: ended_at - self.started, ended_at }
    }

    /// Kill the child and return what it printed (for failure messages).
    pub fn abort(&mut self) -> Outcome {
        let _ = self.child.kill();
        let st = self.child.wait().ok();
        self.exited = true;
        self.collect(st.and_then(|s| s.code()), Instant::now())
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if !self.exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `Attaching 3 probes...` → 3.
pub fn parse_attaching(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("Attaching ")?;
    let (n, tail) = rest.split_once(' ')?;
    if tail != "probes..." && tail != "probe..." {
        return None;
    }
    n.parse().ok()
}

/// Run rtrace to its end without interacting (errors, --explain, --dry-run,
/// runs that end themselves).
pub fn run(args: &[&str]) -> Outcome {
    Tracer::start(args).finish()
}

pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    Tracer::start_env(args, env).finish()
}

// ---------------------------------------------------------------------------
// Reading the output

impl Outcome {
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// Lines of map `name` in the one-line-per-entry layout: `@name[...]: v`
    /// or `@name: v`, in printed order.
    pub fn map_lines(&self, name: &str) -> Vec<String> {
        let keyed = format!("@{name}[");
        let keyless = format!("@{name}:");
        self.stdout.lines().filter(|l| l.starts_with(&keyed) || l.starts_with(&keyless)).map(str::to_string).collect()
    }

    /// The rows of the histogram printed under the header line `header`
    /// (e.g. `@h:` or `@h[3]:`), up to the blank line that ends it.
    pub fn hist_rows(&self, header: &str) -> Vec<String> {
        let lines: Vec<&str> = self.stdout.lines().collect();
        let Some(at) = lines.iter().position(|l| l.trim_end() == header) else {
            panic!("no histogram with header {header:?}\n{self}");
        };
        lines[at + 1..].iter().take_while(|l| !l.is_empty()).map(|l| l.to_string()).collect()
    }

    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// Index of the first stdout line equal to `line`.
    pub fn line_index(&self, line: &str) -> Option<usize> {
        self.stdout.lines().position(|l| l == line)
    }

    pub fn has_attach_line(&self) -> bool {
        self.stdout.lines().any(|l| l.starts_with("Attaching "))
    }
}

/// A histogram row as bpftrace prints it: label left in 16 columns, count
/// right in 8, then a 52-column bar of `bar` `@`s.
pub fn hist_row(label: &str, count: u64, bar: usize) -> String {
    format!("{label:<16}{count:>8} |{:<52}|", "@".repeat(bar))
}

// ---------------------------------------------------------------------------
// Checks shared by the error tests

/// rtrace rejected its input the way every error must be reported: a
/// non-zero exit, exactly one line on stderr, no panic, nothing attached.
/// Returns the stderr line.
pub fn assert_clean_error(out: &Outcome) -> String {
    assert!(matches!(out.code, Some(c) if c != 0), "expected a non-zero exit\n{out}");
    assert!(!out.stderr.contains("panicked"), "rtrace panicked\n{out}");
    assert!(!out.stdout.contains("panicked"), "rtrace panicked\n{out}");
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "expected exactly one line on stderr\n{out}");
    assert!(!out.has_attach_line(), "an error run must not attach anything\n{out}");
    assert!(!lines[0].contains("(os error"), "a raw errno in the error line\n{out}");
    lines[0].to_string()
}

/// A fresh run still attaches and counts exactly: nothing a previous failed
/// run did is in the way.
pub fn assert_tracing_still_works() {
    let me = tid();
    let src = format!(
        r#"let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {me} {{ c = count(); }} }});"#
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    getppid_n(4);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 4"], "{out}");
}

// ---------------------------------------------------------------------------
// Scripts

/// Replace each `__NAME__` in `src` with its value.
pub fn fill(src: &str, vars: &[(&str, &dyn fmt::Display)]) -> String {
    let mut s = src.to_string();
    for (name, value) in vars {
        s = s.replace(&format!("__{name}__"), &value.to_string());
    }
    assert!(!s.contains("__ME__") && !s.contains("__FD__"), "unfilled placeholder in:\n{s}");
    s
}

// ---------------------------------------------------------------------------
// Positions, NDJSON, loss reports, files written with -o

/// 1-based line and column of the first occurrence of `needle` in `src`
/// (how rtrace names script positions: `LINE:COL`).
pub fn position_of(src: &str, needle: &str) -> (usize, usize) {
    for (i, line) in src.lines().enumerate() {
        if let Some(c) = line.find(needle) {
            return (i + 1, line[..c].chars().count() + 1);
        }
    }
    panic!("{needle:?} is not in the script:\n{src}");
}

/// Every non-empty line of `text` parsed as one JSON value; panics naming
/// the first line that isn't JSON.
pub fn json_records(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}\n--- all ---\n{text}"))
        })
        .collect()
}

/// The records of one `"type"`.
pub fn json_of_type<'a>(records: &'a [serde_json::Value], ty: &str) -> Vec<&'a serde_json::Value> {
    records.iter().filter(|r| r["type"] == ty).collect()
}

/// `Lost N events on probe P` lines on stderr, as (N, P).
pub fn lost_reports(stderr: &str) -> Vec<(u64, String)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Lost ")?;
            let (n, probe) = rest.split_once(" events on probe ")?;
            Some((n.parse().ok()?, probe.to_string()))
        })
        .collect()
}

/// Poll the file at `path` until one of its lines satisfies `pred`; returns
/// the whole text. Panics after `timeout` with what the file held.
pub fn wait_file_line(path: &Path, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
    let deadline = deadline_in(timeout);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().any(&pred) {
            return text;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what} in {}\n--- file ---\n{text}", path.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// Stacks and symbols (kernel_stacks.rs)

/// The stacks printed right after each stdout line equal to `marker`
/// (`print(`MARK${e.ustack}`)` prints `MARK`, then one indented line per
/// frame: 8 spaces in the bpftrace mode, a tab in perf mode, none in raw mode).
/// Each frame is returned trimmed, leaf first.
pub fn printed_stacks(stdout: &str, marker: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut stacks = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if *l == marker {
            let frames = lines[i + 1..]
                .iter()
                // Frames are indented (bpftrace, perf modes) or bare hex (raw mode).
                .take_while(|f| {
                    f.starts_with("        ")
                        || f.starts_with('\t')
                        || (!f.is_empty() && f.chars().all(|c| c.is_ascii_hexdigit()))
                })
                .map(|f| f.trim().to_string())
                .collect();
            stacks.push(frames);
        }
    }
    stacks
}

/// Entries of map `name` whose key is one stack, as printed at exit or by
/// `print(m)`: `@name[`, one frame per line, `]: VALUE`. Frames trimmed.
pub fn stack_map_entries(stdout: &str, name: &str) -> Vec<(Vec<String>, i64)> {
    let open = format!("@{name}[");
    let lines: Vec<&str> = stdout.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == open {
            let mut frames = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].starts_with("]: ") {
                if !lines[i].trim().is_empty() {
                    frames.push(lines[i].trim().to_string());
                }
                i += 1;
            }
            let value = lines.get(i).and_then(|l| l.strip_prefix("]: ")).and_then(|v| v.trim().parse().ok());
            let value = value.unwrap_or_else(|| panic!("map @{name}: stack key without a `]: N` line\n{stdout}"));
            out.push((frames, value));
        }
        i += 1;
    }
    out
}

/// `func` of a `func+off` frame (the frame itself when it has no offset).
pub fn frame_func(frame: &str) -> &str {
    match frame.rsplit_once('+') {
        Some((name, off)) if !off.is_empty() && off.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => frame,
    }
}

/// The kernel's symbols from /proc/kallsyms (needs root for real addresses).
pub struct Kallsyms {
    /// (address, name) of text symbols, sorted by address; modules included.
    pub syms: Vec<(u64, String)>,
}

impl Kallsyms {
    pub fn load() -> Kallsyms {
        let text = std::fs::read_to_string("/proc/kallsyms").expect("read /proc/kallsyms");
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let addr = u64::from_str_radix(w.next()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W")).then(|| (addr, name.to_string()))
            })
            .collect();
        syms.sort();
        assert!(!syms.is_empty(), "/proc/kallsyms shows no addresses (not root, or kptr_restrict)");
        Kallsyms { syms }
    }

    /// Names of the text symbols at exactly `addr`.
    pub fn names_at(&self, addr: u64) -> Vec<&str> {
        let i = self.syms.partition_point(|(a, _)| *a < addr);
        self.syms[i..].iter().take_while(|(a, _)| *a == addr).map(|(_, n)| n.as_str()).collect()
    }

    /// The text symbols at the greatest symbol address <= `addr`, and the offset.
    pub fn containing(&self, addr: u64) -> Option<(Vec<&str>, u64)> {
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        let (start, _) = self.syms.get(i.checked_sub(1)?)?;
        Some((self.names_at(*start), addr - start))
    }

    /// Address of `name` when exactly one text symbol has that name and no
    /// other symbol shares its address.
    pub fn unique_addr(&self, name: &str) -> Option<u64> {
        let hits: Vec<u64> = self.syms.iter().filter(|(_, n)| n == name).map(|(a, _)| *a).collect();
        match hits.as_slice() {
            [a] if self.names_at(*a).len() == 1 => Some(*a),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// C fixtures built at test time (kernel_list.rs, kernel_target.rs)

/// Compile the C `source` with gcc (plus `flags`) into `dir/name`; returns
/// its path. The test declares `needs: Program("gcc")`.
pub fn build_c(dir: &TempDir, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.write(&format!("{name}.c"), source);
    let bin = dir.join(name);
    let out = gcc().args(flags).arg("-o").arg(&bin).arg(&src).output().expect("cannot run gcc");
    assert!(out.status.success(), "gcc failed on {}:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    bin
}
