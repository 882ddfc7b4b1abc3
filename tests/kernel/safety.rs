//! Safety and reliability on a real kernel: `system()` only with `--unsafe`
//! whatever the route, never under `--explain`/`--dry-run`; a `-c` command
//! never runs untraced; exit statuses never wrap to success; inputs that
//! used to hang or panic end with one clean line; output write errors end
//! the run; userspace loops and control floods can't keep it alive.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A run that must refuse `system()`: non-zero, a line naming `--unsafe`,
/// no panic, and the command's marker file never created.
pub(crate) fn assert_refused(args: &[&str], mark: &Path) {
    let out = run(args);
    assert!(matches!(out.code, Some(c) if c != 0), "expected a refusal\n{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert!(out.stderr.contains("needs --unsafe"), "the error names --unsafe\n{out}");
    finish_system_commands_then_check(mark, &out);
}

fn finish_system_commands_then_check(mark: &Path, out: &Outcome) {
    // rtrace waits for queued commands before it exits, so the file would exist by now.
    assert!(!mark.exists(), "the command ran: {} exists\n{out}", mark.display());
}

kernel_test!(system_refuses_on_every_route_without_unsafe);
fn system_refuses_on_every_route_without_unsafe() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let m = mark.to_str().unwrap();
    let module = dir.write("m.rhai", &format!("fn run_it() {{ system(\"touch {m}\"); }}\nrun_it();\n"));
    let module = module.to_str().unwrap().trim_end_matches(".rhai").to_string();
    let probe = r#"probe("BEGIN", || { __X__; exit(); });"#;
    let in_begin = |x: &str| probe.replace("__X__", x);
    let routes = [
        format!(r#"eval("system(\"touch {m}\")"); probe("BEGIN", || {{}});"#),
        in_begin(&format!(r#"eval("system(\"touch {m}\")")"#)),
        in_begin(&format!(r#""touch {m}".system()"#)),
        in_begin(&format!(r#"Fn("system").call("touch {m}")"#)),
        in_begin(&format!(r#"Fn("sys" + "tem").call("touch {m}")"#)),
        in_begin(&format!(r#"let f = Fn("sys" + "tem").curry("touch {m}"); f.call()"#)),
        format!(r#"probe("BEGIN", "|| {{ Fn(\"sys\" + \"tem\").call(\"touch {m}\"); exit(); }}");"#),
        format!(r#"import "{module}" as m; probe("BEGIN", || {{}});"#),
        format!(r#"after("1ms", || {{ Fn("sys" + "tem").call("touch {m}"); exit(); }}); probe("BEGIN", || {{}});"#),
    ];
    for src in &routes {
        assert_refused(&["-d", "10s", "-e", src], &mark);
    }
    // A script given its code as an argument.
    let code = format!(r#"system("touch {m}")"#);
    assert_refused(&["-d", "10s", "-e", r#"probe("BEGIN", || { eval(ARGS[0]); exit(); });"#, &code], &mark);
}

kernel_test!(the_static_check_runs_before_the_top_level);
fn the_static_check_runs_before_the_top_level() {
    let _g = setup();
    let dir = TempDir::new();
    let src = "print(\"top level ran\");\nlet x = 1;\nprobe(\"BEGIN\", || { system(\"true\"); });\n";
    let path = dir.write("s.rhai", src);
    let out = run(&[path.to_str().unwrap()]);
    let line = assert_clean_error(&out);
    assert!(line.contains("s.rhai:3:") && line.contains("--unsafe"), "{line}");
    assert!(!out.stdout.contains("top level ran"), "the top level ran before the check\n{out}");
}

kernel_test!(explain_and_dry_run_never_run_commands);
fn explain_and_dry_run_never_run_commands() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let m = mark.to_str().unwrap();
    let src = format!(
        r#"system("touch {m}"); let c = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ c = count(); }});"#
    );
    for mode in ["--explain", "--dry-run"] {
        let out = run(&["--unsafe", mode, "-e", &src]);
        assert_eq!(out.code, Some(0), "{mode}\n{out}");
        assert!(!mark.exists(), "{mode} ran the script's command\n{out}");
        assert!(out.stderr.contains("do not run commands"), "{mode} says so\n{out}");
    }
}

kernel_test!(system_with_unsafe_formats_its_command_and_reports_failures);
fn system_with_unsafe_formats_its_command_and_reports_failures() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let m = mark.to_str().unwrap();
    let src = format!(
        r#"probe("BEGIN", || {{ system("touch %s", "{m}"); system("echo %d-%s", 42, "x"); system("exit 3"); exit(); }});"#
    );
    let out = run(&["--unsafe", "-q", "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(mark.exists(), "the formatted command ran\n{out}");
    assert!(out.lines().contains(&"42-x"), "the command's output is the script's output\n{out}");
    assert!(out.stderr.contains(r#"system("exit 3"): the command failed with exit status 3"#), "{out}");
}

kernel_test!(dash_c_never_runs_the_command_after_a_compile_error);
fn dash_c_never_runs_the_command_after_a_compile_error() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let cmd = format!("touch {}", mark.display());
    for src in [
        r#"probe("tracepoint:nosuch:nothing", |e| { });"#,
        "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    let s = `pid ${e.pid}`;\n    c[s] = count();\n});\n",
    ] {
        let out = run(&["-c", &cmd, "-e", src]);
        assert_clean_error(&out);
        // rtrace reaps the held child before it exits: it is gone, never ran.
        assert!(!mark.exists(), "the -c command ran after a compile error\n{out}");
    }
}

kernel_test!(dash_c_never_runs_the_command_after_a_load_error, needs: NoFentry);
fn dash_c_never_runs_the_command_after_a_load_error() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let cmd = format!("touch {}", mark.display());
    // fentry programs are refused by this kernel (EPERM at load).
    let out = run(&["-c", &cmd, "-e", r#"probe("fentry:vfs_read", |e| { });"#]);
    assert_ne!(out.code, Some(0), "this kernel refuses fentry, so the run fails to load\n{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert!(!mark.exists(), "the -c command ran after a load error\n{out}");
}

/// The children of `pid`, from /proc.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    out
}

fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next().map(str::to_string));
    matches!(state.as_deref(), Some(s) if s != "Z" && s != "X")
}

kernel_test!(dash_c_command_dies_with_rtrace);
fn dash_c_command_dies_with_rtrace() {
    let _g = setup();
    let mut t =
        Tracer::start(&["-c", "sleep 1000", "-e", r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { });"#]);
    t.wait_attached();
    let kids = children(t.pid());
    assert_eq!(kids.len(), 1, "one -c child: {kids:?}");
    unsafe { libc::kill(t.pid(), libc::SIGKILL) };
    let _ = t.finish();
    let deadline = deadline_in(EXIT_TIMEOUT);
    while alive(kids[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(kids[0]), "the -c command outlived rtrace");
}

kernel_test!(dash_c_duration_is_not_the_commands_status);
fn dash_c_duration_is_not_the_commands_status() {
    let _g = setup();
    let out = run(&[
        "-q",
        "-d",
        "200ms",
        "-c",
        "sleep 1000",
        "-e",
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { });"#,
    ]);
    assert_eq!(out.code, Some(0), "rtrace ended the command itself: not a failure\n{out}");
    let out = run(&["-q", "-c", "sh -c 'exit 7'", "-e", r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { });"#]);
    assert_eq!(out.code, Some(7), "the command's own failure is the status\n{out}");
}

kernel_test!(exit_codes_never_wrap_to_success);
fn exit_codes_never_wrap_to_success() {
    let _g = setup();
    for (code, want) in [("256", 255), ("-256", 1), ("4294967296", 255), ("3", 3), ("0", 0)] {
        let src = format!(r#"probe("BEGIN", || {{ exit({code}); }});"#);
        let out = run(&["-q", "-e", &src]);
        assert_eq!(out.code, Some(want), "exit({code}) in userspace\n{out}");
    }
    // From a probe's kernel side.
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { exit(256); } });"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-d", "60s", "-e", &src]);
    t.wait_attached();
    getppid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(255), "exit(256) from the kernel side\n{out}");
    // A computed code: clamped in the kernel's stop flag the same way.
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { exit(e.tid - e.tid - 300); } });"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-d", "60s", "-e", &src]);
    t.wait_attached();
    getppid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(1), "exit(-300) from the kernel side\n{out}");
    // Not an integer: an error with its position.
    let out = run(&["-e", r#"probe("BEGIN", || { exit("x"); });"#]);
    assert!(out.code == Some(1) && out.stderr.contains("-e:1:") && out.stderr.contains("integer"), "{out}");
}

kernel_test!(huge_durations_are_errors_not_panics);
fn huge_durations_are_errors_not_panics() {
    let _g = setup();
    let out = run(&["-d", "99999999999999999999999h", "-e", r#"probe("BEGIN", || {});"#]);
    assert!(assert_clean_error(&out).contains("-d"), "{out}");
    for f in ["every", "after"] {
        let src = format!(r#"{f}("99999999999999999999999h", || {{}}); {f}(9223372036854775807, || {{}});"#);
        let line = assert_clean_error(&run(&["-e", &src]));
        assert!(line.contains("-e:1:"), "{line}");
    }
}

kernel_test!(scripts_without_probes_are_errors);
fn scripts_without_probes_are_errors() {
    let _g = setup();
    for src in ["", "// nothing but a comment\n", "let m = map(); let n = map(\"n\");"] {
        let line = assert_clean_error(&run(&["-e", src]));
        assert!(line.contains("No probes to attach"), "{src:?}: {line}");
    }
}

kernel_test!(devices_fifos_and_nul_bytes_end_at_once);
fn devices_fifos_and_nul_bytes_end_at_once() {
    let _g = setup();
    let line = assert_clean_error(&run(&["/dev/zero"]));
    assert!(line.contains("/dev/zero"), "{line}");
    let dir = TempDir::new();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let line = assert_clean_error(&run(&[fifo.to_str().unwrap()]));
    assert!(line.contains("No probes"), "a FIFO nobody writes is an empty script: {line}");
    let path = dir.write("nul.rhai", "let a = 1;\nlet b\0 = 2;\n");
    let line = assert_clean_error(&run(&[path.to_str().unwrap()]));
    assert!(line.contains("nul.rhai:2:6") && line.contains("NUL") && !line.contains('\0'), "{line:?}");
}

kernel_test!(a_full_output_device_is_an_error);
fn a_full_output_device_is_an_error() {
    let _g = setup();
    let src = r#"probe("BEGIN", || { print("hello"); exit(); });"#;
    let out = run(&["-q", "-o", "/dev/full", "-e", src]);
    assert_eq!(out.code, Some(1), "{out}");
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains("/dev/full") && lines[0].contains("No space left"), "{out}");
}

kernel_test!(a_closed_stdout_pipe_ends_the_run);
fn a_closed_stdout_pipe_ends_the_run() {
    let _g = setup();
    let src = r#"every("5ms", || { print("line"); });"#;
    let mut child = Command::new(rtrace_bin())
        .args(["-e", src])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
    }
    drop(r); // like `| head -3`
    let deadline = deadline_in(EXIT_TIMEOUT);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("rtrace kept running after its stdout closed\n{err}"));
    assert!(!status.success(), "{status} {err}");
    assert!(err.contains("Broken pipe") && !err.contains("panicked"), "{err}");
}

kernel_test!(userspace_loops_end_on_sigint);
fn userspace_loops_end_on_sigint() {
    let _g = setup();
    for src in [
        r#"probe("BEGIN", || { loop { } }); probe("END", || { print("end ran"); });"#,
        r#"every("1ms", || { let i = 0; while true { i += 1; } }); probe("END", || { print("end ran"); });"#,
    ] {
        let mut t = Tracer::start(&["-e", src]);
        t.wait_attached();
        std::thread::sleep(Duration::from_millis(50));
        let out = t.interrupt_and_finish();
        assert_eq!(out.code, Some(0), "{src}\n{out}");
        assert!(out.lines().contains(&"end ran"), "END still runs\n{out}");
    }
}

kernel_test!(a_probe_looping_in_userspace_ends_on_sigint);
/// An unbounded loop in a probe is userspace code (the kernel part still
/// counts); a probe stuck in it ends on SIGINT like any userspace loop.
fn a_probe_looping_in_userspace_ends_on_sigint() {
    let _g = setup();
    let src = format!(
        "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {{\n    if e.pid == {} {{ c = count(); print(\"looping\"); while true {{ }} }}\n}});\nprobe(\"END\", || {{ print(\"end ran\"); }});\n",
        pid()
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    // SIGINT once the probe is in its loop.
    t.wait_line("the probe's loop", ATTACH_TIMEOUT, |l| l == "looping");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.lines().contains(&"looping"), "the loop's probe ran\n{out}");
    assert!(out.lines().contains(&"end ran"), "END still runs\n{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 1".to_string()], "{out}");
}

kernel_test!(a_second_sigint_during_shutdown_ends_at_once);
fn a_second_sigint_during_shutdown_ends_at_once() {
    let _g = setup();
    // The timer keeps the run going after BEGIN (a BEGIN/END-only script ends by itself).
    let src = r#"every("1h", || { }); probe("BEGIN", || { print("begun"); }); probe("END", || { print("in end"); loop { } });"#;
    let mut t = Tracer::start(&["-e", src]);
    t.wait_line("begun", ATTACH_TIMEOUT, |l| l == "begun");
    t.interrupt();
    // The second signal may come while tracing stops or while END loops.
    std::thread::sleep(Duration::from_millis(200));
    let out = t.interrupt_and_finish();
    assert!(matches!(out.code, Some(c) if c != 0) || out.code.is_none(), "{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
}

kernel_test!(a_control_message_flood_still_obeys_sigint);
fn a_control_message_flood_still_obeys_sigint() {
    let _g = setup();
    let src = fill(
        r#"
let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.pid == __ME__ { m[e.tid] = count(); print(m); print(m); print(m); print(m); m.clear(); }
});
"#,
        &[("ME", &pid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                getppid_n(1000);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    t.interrupt();
    let out = t.finish_within(Duration::from_secs(30));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().unwrap();
    assert_eq!(out.code, Some(0), "SIGINT ended the flooded run\n{}", out.stderr);
}

kernel_test!(return_anywhere_passes_the_verifier);
fn return_anywhere_passes_the_verifier() {
    let _g = setup();
    for body in [
        "c = count(); return;",
        "return; c = count();",
        "if e.tid > 1 { return; } else { c = count(); return; } c = count();",
        "for i in 0..3 { c = count(); return; }",
    ] {
        let src = format!(r#"let c = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ {body} }});"#);
        let out = run(&["-q", "--dry-run", "-e", &src]);
        assert_eq!(out.code, Some(0), "{body}\n{out}");
    }
}

kernel_test!(errors_name_a_position);
fn errors_name_a_position() {
    let _g = setup();
    let line = assert_clean_error(&run(&["-e", "let x = 1;\nprobe(\"BEGIN\", |e| { print(\"x\"); });"]));
    assert!(line.starts_with("-e:2:1: error:") && line.contains("no parameter") && !line.contains("anon$"), "{line}");
    for args in
        [&["-d", "-5s", "-e", r#"probe("BEGIN", || {});"#][..], &["-p", "-1", "-e", r#"probe("BEGIN", || {});"#]]
    {
        let line = assert_clean_error(&run(args));
        assert!(line.contains(args[1]), "{line}");
    }
    let line = assert_clean_error(&run(&["--ring-size", "18014398509481988K", "-e", r#"probe("BEGIN", || {});"#]));
    assert!(line.contains("ring size"), "{line}");
}

kernel_test!(usage_errors_and_deep_recursion_are_one_line);
fn usage_errors_and_deep_recursion_are_one_line() {
    let _g = setup();
    for args in [&["-x"][..], &["-d"], &["--ring-size"]] {
        let out = run(args);
        assert_eq!(out.code, Some(2), "{out}");
        assert_eq!(out.stderr_lines().len(), 1, "{out}");
        assert!(out.stderr.starts_with("rtrace: error: ") && out.stderr.contains("--help"), "{out}");
    }
    let out = run(&["-q", "-e", "fn f(x) { f(x + 1) }\nprobe(\"BEGIN\", || { f(1); });"]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr_lines().len() == 1 && out.stderr.contains("Stack overflow"), "{out}");
}

kernel_test!(signal_kills_the_process_at_its_first_forbidden_open);
/// A program that opens a forbidden file 10,000 times, writing a
/// marker after each open that worked. `signal("KILL")` on the open kills it
/// at the first attempt (the signal lands before the syscall returns to it),
/// so no marker is written; an allowed file is opened every time; without
/// `--unsafe` the script is refused before attaching and the command never runs.
fn signal_kills_the_process_at_its_first_forbidden_open() {
    let _g = setup();
    let dir = TempDir::new();
    let forbidden = dir.join("forbidden");
    let allowed = dir.join("allowed");
    std::fs::write(&forbidden, "x").unwrap();
    std::fs::write(&allowed, "x").unwrap();
    let marker = dir.join("marker");
    let src = format!(
        r#"probe("tracepoint:syscalls:sys_enter_openat", |e| {{
    if str(e.args.filename) == "{}" {{ signal("KILL"); }}
}});"#,
        forbidden.display()
    );
    // The shell opens the file itself (`exec 3<`): the process the probe fires in.
    // The forbidden file 10,000 times (the first open kills), the allowed one
    // 1,000 times (each open runs the probe: slow under emulation).
    let loop_on = |file: &Path| {
        let times = if file == forbidden { 10_000 } else { 1_000 };
        format!(
            "sh -c 'i=0; while [ $i -lt {times} ]; do exec 3<{} && echo x >>{}; i=$((i+1)); done'",
            file.display(),
            marker.display()
        )
    };
    let markers = || std::fs::read_to_string(&marker).map(|t| t.lines().count()).unwrap_or(0);

    let out = run(&["-q", "--unsafe", "-c", &loop_on(&forbidden), "-e", &src]);
    assert_eq!(out.code, Some(128 + libc::SIGKILL), "the command dies by SIGKILL\n{out}");
    assert_eq!(markers(), 0, "no open of the forbidden file returned to the program\n{out}");
    let audited: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("rtrace: action: -e:2:")).collect();
    assert_eq!(audited.len(), 1, "the signal is audited once\n{out}");
    assert!(audited[0].contains(": tracepoint:syscalls:sys_enter_openat: signal(SIGKILL) on pid "), "{out}");
    assert!(audited[0].ends_with(": sent"), "{out}");

    let out = run(&["-q", "--unsafe", "-c", &loop_on(&allowed), "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(markers(), 1000, "every allowed open worked\n{out}");

    std::fs::remove_file(&marker).unwrap();
    let out = run(&["-c", &loop_on(&forbidden), "-e", &src]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("signal() sends a signal to the traced process and needs --unsafe"), "{out}");
    assert!(!out.stdout.contains("Attaching"), "{out}");
    assert_eq!(markers(), 0, "the command never ran\n{out}");
    // A probe source string hides the call from the check of the script's
    // text: lowering refuses it, still before anything attaches.
    let closure = format!(r#"|e| {{ if str(e.args.filename) == "{}" {{ signal("KILL"); }} }}"#, forbidden.display());
    let hidden = format!("let body = {closure:?}; probe(\"tracepoint:syscalls:sys_enter_openat\", body);");
    let out = run(&["-c", &loop_on(&forbidden), "-e", &hidden]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("needs --unsafe"), "{out}");
    assert!(!out.stdout.contains("Attaching"), "{out}");
    assert_eq!(markers(), 0, "the command never ran\n{out}");
}
