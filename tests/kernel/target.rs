//! Process targeting on a real kernel: `-c CMD` (the command is held until
//! every probe is attached, so none of its first events are missed; rtrace
//! ends with it and takes its exit status unless the script decides), `-p
//! PID` (only that process is traced; rtrace ends when it exits), and the
//! kernel-function probe types as this kernel supports them (kprobe/fentry:
//! a one-line reason with a tracepoint to use instead where they can't
//! attach, the verifier accepting the program, close names for typos).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;

/// `target N [CODE [MS]]`: N getppid() calls first thing, then sleep MS
/// milliseconds, then exit with CODE. `target serve`: print `ready`; for
/// each line N on stdin make N getppid() calls and print `done`; exit 0 at EOF.
const TARGET: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <time.h>

static void calls(long n) {
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "serve") == 0) {
        char line[64];
        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("ready\n");
        while (fgets(line, sizeof line, stdin)) {
            calls(atol(line));
            printf("done\n");
        }
        return 0;
    }
    calls(argc > 1 ? atol(argv[1]) : 0);
    long ms = argc > 3 ? atol(argv[3]) : 0;
    if (ms > 0) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    return argc > 2 ? atoi(argv[2]) : 0;
}
"#;

/// Counts getppid calls with no filter of its own: under -c/-p rtrace
/// itself keeps only the target's events.
const COUNT: &str = r#"let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| { m = count(); });"#;

fn target() -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    let bin = build_c(&dir, &format!("rtt_{}", token()), TARGET, &["-O2"]);
    (dir, bin)
}

/// getppid() calls from another thread of this process until dropped: events
/// that a pid filter must keep out.
struct Noise {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Noise {
    fn start() -> Noise {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                getppid_n(50);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Noise { stop, thread: Some(thread) }
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

kernel_test!(c_misses_none_of_the_commands_first_events, needs: Program("gcc"));
fn c_misses_none_of_the_commands_first_events() {
    let _g = setup();
    let (_dir, bin) = target();
    let _noise = Noise::start();
    for n in [25, 1, 300] {
        let cmd = format!("{} {n}", bin.display());
        let out = run(&["-c", &cmd, "-e", COUNT]);
        assert_eq!(out.code, Some(0), "{out}");
        assert_eq!(out.map_lines("m"), vec![format!("@m: {n}")], "-c {cmd}\n{out}");
    }
}

kernel_test!(c_traces_the_processes_the_command_starts, needs: Program("gcc"));
/// `-c` follows the command's children at any depth (a shell running the
/// target twice, one of them from a nested shell), and nothing else: a
/// process rtrace doesn't start, making the same calls meanwhile, is not counted.
fn c_traces_the_processes_the_command_starts() {
    let _g = setup();
    let (_dir, bin) = target();
    let b = bin.display();
    let name = bin.file_name().unwrap().to_string_lossy().into_owned();
    let src = r#"let m = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| { m[e.comm] = count(); });"#;
    let noise = std::thread::spawn({
        let bin = bin.clone();
        move || {
            for _ in 0..20 {
                let _ = Command::new(&bin).arg("5").status();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    });
    let cmd = format!("/bin/sh -c '{b} 3; /bin/sh -c \"{b} 4\"; sleep 0.3'");
    let out = run(&["-c", &cmd, "-e", src]);
    noise.join().unwrap();
    assert_eq!(out.code, Some(0), "{out}");
    let line = out.map_lines("m").into_iter().find(|l| l.starts_with(&format!("@m[{name}]:")));
    assert_eq!(line, Some(format!("@m[{name}]: 7")), "3 + 4 calls from the command's children only\n{out}");
}

kernel_test!(c_exit_status_is_the_commands_unless_the_script_decides, needs: Program("gcc"));
fn c_exit_status_is_the_commands_unless_the_script_decides() {
    let _g = setup();
    let (_dir, bin) = target();
    let b = bin.display();
    // The command's status, with every event counted.
    let out = run(&["-c", &format!("{b} 3 7"), "-e", COUNT]);
    assert_eq!(out.code, Some(7), "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m: 3"], "{out}");
    // exit(3) in a probe wins, and ends the run without waiting for the command.
    let src = r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { exit(3); });"#;
    let out = run(&["-c", &format!("{b} 5 7 5000"), "-e", src]);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(out.elapsed < Duration::from_secs(4), "rtrace waited for the command: {:?}\n{out}", out.elapsed);
    // exit(3) at END wins over the command's 7 too.
    let out = run(&["-c", &format!("{b} 5 7"), "-e", r#"probe("END", || { exit(3); });"#]);
    assert_eq!(out.code, Some(3), "{out}");
    // fail() in the script: 1.
    let out = run(&["-c", &format!("{b} 5 7"), "-e", r#"probe("END", || { fail("over budget"); });"#]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("over budget"), "{out}");
}

kernel_test!(c_ends_when_the_command_ends, needs: Program("gcc"));
fn c_ends_when_the_command_ends() {
    let _g = setup();
    let (_dir, bin) = target();
    let started = Instant::now();
    let out = Tracer::start(&["-c", &format!("{} 2 0 400", bin.display()), "-e", COUNT])
        .finish_within(Duration::from_secs(10));
    let took = started.elapsed();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m: 2"], "{out}");
    assert!(took >= Duration::from_millis(400), "ended before the command did: {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?} to notice the command ended");
}

/// A `target serve` child.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(bin: &Path) -> Server {
        let mut child = Command::new(bin).arg("serve").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Server { child, stdin, stdout }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// n getppid() calls in the child; returns once they are done.
    fn calls(&mut self, n: usize) {
        writeln!(self.stdin.as_mut().unwrap(), "{n}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "done");
    }

    /// Close its stdin and reap it.
    fn end(&mut self) {
        self.stdin.take();
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{st}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

kernel_test!(p_traces_only_that_process_and_ends_with_it, needs: Program("gcc"));
fn p_traces_only_that_process_and_ends_with_it() {
    let _g = setup();
    let (_dir, bin) = target();
    let mut a = Server::start(&bin);
    let mut b = Server::start(&bin);
    let _noise = Noise::start();
    let mut t = Tracer::start(&["-p", &a.pid().to_string(), "-e", COUNT]);
    assert_eq!(t.wait_attached(), 1);
    a.calls(10);
    b.calls(20);
    a.calls(5);
    b.calls(7);
    assert!(t.is_running(), "rtrace ended while the process still runs");
    a.end();
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m: 15"], "{out}");
    b.end();
}

kernel_test!(p_of_a_missing_process_is_an_error);
fn p_of_a_missing_process_is_an_error() {
    let _g = setup();
    // A pid that was just reaped is free (pid reuse this fast is unlikely).
    let mut c = Command::new("/bin/true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    let line = assert_clean_error(&run(&["-p", &pid.to_string(), "-e", COUNT]));
    assert!(line.contains(&pid.to_string()) && line.contains("no such process"), "{line}");
    let line = assert_clean_error(&run(&["-p", "1", "-c", "/bin/true", "-e", COUNT]));
    assert!(line.contains("-p") && line.contains("-c"), "{line}");
}

fn kprobes_here() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

/// Counts vfs_read calls by this thread through `spec`; asserts they arrive.
fn assert_kernel_function_events(spec: &str) {
    let me = tid();
    let src = format!(r#"let c = map(); probe("{spec}", |e| {{ if e.tid == {me} {{ c = count(); }} }});"#);
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    let mut z = Zero::open();
    z.reads(&[8, 8, 8]);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 3"], "{out}");
}

kernel_test!(kprobe_says_why_it_cant_attach_and_what_to_use);
fn kprobe_says_why_it_cant_attach_and_what_to_use() {
    let _g = setup();
    if kprobes_here() {
        assert_kernel_function_events("kprobe:vfs_read");
        return;
    }
    eprintln!("no kprobes on this kernel: checking the error");
    let out = run(&["-e", r#"probe("kprobe:vfs_read", |e| { print("x"); });"#]);
    let line = assert_clean_error(&out);
    assert!(line.contains("kprobe:vfs_read"), "{line}");
    assert!(line.contains("no kprobes"), "the reason is missing: {line}");
    assert!(line.contains("tracepoint:syscalls:sys_enter_read"), "no suggestion: {line}");
    let out = run(&["-e", r#"probe("kretprobe:vfs_read", |e| { print("x"); });"#]);
    let line = assert_clean_error(&out);
    assert!(line.contains("kretprobe:vfs_read") && line.contains("no kprobes"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(kprobe_program_passes_the_verifier);
fn kprobe_program_passes_the_verifier() {
    let _g = setup();
    let src = r#"let c = map();
probe("kprobe:vfs_read", |e| { if e.pid == 1 { c[e.comm] = count(); } });"#;
    let out = run(&["--dry-run", "-e", src]);
    if !Path::new("/sys/bus/event_source/devices/kprobe/type").exists() {
        // No kprobes here: the dry run fails as the run would.
        assert_eq!(out.code, Some(1), "{out}");
        assert!(out.stderr.contains("no kprobes"), "{out}");
        return;
    }
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("passed the verifier"), "{out}");
    assert!(!out.has_attach_line(), "{out}");
}

kernel_test!(unknown_kernel_function_suggests_close_names);
fn unknown_kernel_function_suggests_close_names() {
    let _g = setup();
    let out = run(&["-e", r#"probe("kprobe:vfs_raed", |e| { print("x"); });"#]);
    let line = assert_clean_error(&out);
    assert!(line.contains("vfs_raed") && line.contains("did you mean") && line.contains("vfs_read"), "{line}");
}

kernel_test!(fentry_attaches_or_says_why);
fn fentry_attaches_or_says_why() {
    let _g = setup();
    let src = r#"probe("fentry:vfs_read", |e| { print("x"); });"#;
    let out = run(&["-d", "1ms", "-e", src]);
    if out.code == Some(0) && out.has_attach_line() {
        assert_kernel_function_events("fentry:vfs_read");
        return;
    }
    eprintln!("fentry does not attach on this kernel: checking the error");
    let line = assert_clean_error(&out);
    assert!(line.contains("fentry:vfs_read") && line.contains("fentry"), "{line}");
    assert!(line.contains("tracepoint:syscalls:sys_enter_read"), "no suggestion: {line}");
}
