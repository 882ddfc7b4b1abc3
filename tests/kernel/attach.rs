//! Attaching many points: a wildcard's points the kernel refuses
//! (`--missing-probes`), `--dry-run` failing as the run would, Ctrl-C while
//! attaching (progress on a terminal), and scripts of only BEGIN/END, which
//! end by themselves.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;

/// x86's `irq_work_exit` tracepoint: the kernel refuses perf events (and so
/// BPF programs) on it, since sampling it would raise it again.
const REFUSED: &str = "tracepoint:irq_vectors:irq_work_exit";

/// A probe of two points: one the kernel refuses, and this thread's getppid.
fn mixed_probe() -> String {
    let me = tid();
    format!(
        r#"let c = map(); probe("{REFUSED},tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {me} {{ c = count(); }} }});"#
    )
}

kernel_test!(a_wildcard_point_that_cannot_attach_is_skipped_with_a_warning,
    needs: Path("/sys/kernel/tracing/events/irq_vectors/irq_work_exit"));
/// bpftrace's default (`missing_probes = warn`): one warning per refused
/// point, with the reason in words, and the run goes on with the rest;
/// `ignore` (option or variable) says nothing.
fn a_wildcard_point_that_cannot_attach_is_skipped_with_a_warning() {
    let _g = setup();
    let src = mixed_probe();
    let (line, col) = position_of(&src, "probe(");
    let warning = format!(
        "-e:{line}:{col}: warning: {REFUSED} can't be attached, skipped: the kernel does not allow BPF programs here (EPERM)"
    );
    // (options, environment, whether a warning shows)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], bool);
    let cases: [Case; 4] = [
        (&[], &[], true),
        (&["--missing-probes", "warn"], &[("RTRACE_MISSING_PROBES", "ignore")], true),
        (&["--missing-probes", "ignore"], &[], false),
        (&[], &[("RTRACE_MISSING_PROBES", "ignore")], false),
    ];
    for (opts, env, warns) in cases {
        let mut args = opts.to_vec();
        args.extend(["-e", &src]);
        let mut t = Tracer::start_env(&args, env);
        t.wait_attached();
        getppid_n(3);
        let out = t.interrupt_and_finish();
        assert_eq!(out.code, Some(0), "{opts:?} {env:?}\n{out}");
        assert_eq!(out.map_lines("c"), vec!["@c: 3"], "the other point is attached\n{out}");
        let expected: Vec<&str> = if warns { vec![warning.as_str()] } else { vec![] };
        assert_eq!(out.stderr_lines(), expected, "{opts:?} {env:?}\n{out}");
    }
}

kernel_test!(a_refused_point_is_an_error_with_missing_probes_error_or_alone,
    needs: Path("/sys/kernel/tracing/events/irq_vectors/irq_work_exit"));
/// `--missing-probes error` (or the variable) ends the run at the refused
/// point of a wildcard, with a hint; a probe of that one point is an error
/// whatever the setting. A bad setting is refused before anything runs.
fn a_refused_point_is_an_error_with_missing_probes_error_or_alone() {
    let _g = setup();
    let src = mixed_probe();
    let (line, col) = position_of(&src, "probe(");
    let refused =
        format!("-e:{line}:{col}: error: cannot attach {REFUSED}: the kernel does not allow BPF programs here (EPERM)");
    let with_hint = format!("{refused}; --missing-probes warn skips the points that can't be attached");
    let out = run(&["--missing-probes", "error", "-e", &src]);
    assert_eq!(assert_clean_error(&out), with_hint);
    let out = run_env(&["-e", &src], &[("RTRACE_MISSING_PROBES", "error")]);
    assert_eq!(assert_clean_error(&out), with_hint);

    let single = format!(r#"let c = map(); probe("{REFUSED}", |e| {{ c = count(); }});"#);
    for mode in ["warn", "ignore"] {
        let out = run(&["--missing-probes", mode, "-e", &single]);
        assert_eq!(assert_clean_error(&out), refused, "{mode}");
    }

    let out = run_env(&["-e", &src], &[("RTRACE_MISSING_PROBES", "skip")]);
    let line = assert_clean_error(&out);
    assert_eq!(line, "rtrace: error: RTRACE_MISSING_PROBES=skip: must be error, warn or ignore");
    let out = run(&["--missing-probes", "skip", "-e", &src]);
    assert_clean_error(&out);
    assert_eq!(out.code, Some(2), "a bad option value is a usage error\n{out}");
}

kernel_test!(a_wildcard_none_of_whose_points_attach_is_an_error_also_in_a_dry_run, needs: NoKprobes);
/// No kprobes here: a kprobe wildcard attaches nothing, which is an error
/// naming the probe and the first point's reason, whatever --missing-probes
/// says; `--dry-run` fails with the same line, as does a single kprobe.
fn a_wildcard_none_of_whose_points_attach_is_an_error_also_in_a_dry_run() {
    let _g = setup();
    let wildcard = r#"probe("kprobe:vfs_*", |e| { print("x"); });"#;
    let run_line = assert_clean_error(&run(&["-e", wildcard]));
    assert!(run_line.starts_with("-e:1:1: error: none of the "), "{run_line}");
    assert!(run_line.contains(" points of kprobe:vfs_* could be attached (the first, kprobe:vfs_"), "{run_line}");
    assert!(run_line.contains("no kprobes"), "{run_line}");
    for mode in ["warn", "ignore"] {
        assert_eq!(assert_clean_error(&run(&["--missing-probes", mode, "-e", wildcard])), run_line, "{mode}");
    }
    assert_eq!(assert_clean_error(&run(&["--dry-run", "-e", wildcard])), run_line, "--dry-run");

    let single = r#"probe("kprobe:do_nanosleep", |e| { print("x"); });"#;
    let run_line = assert_clean_error(&run(&["-e", single]));
    assert!(run_line.starts_with("-e:1:1: error: cannot attach kprobe:do_nanosleep: "), "{run_line}");
    let dry = run(&["--dry-run", "-e", single]);
    assert_eq!(assert_clean_error(&dry), run_line, "--dry-run fails as the run does");
    assert!(!dry.stderr.contains("passed the verifier"), "{dry}");
}

/// A pseudo-terminal: (the master, the slave's path).
fn pty() -> (OwnedFd, String) {
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(master)).to_string_lossy().into_owned();
        (OwnedFd::from_raw_fd(master), name)
    }
}

/// The ids of the BPF programs process `pid` holds open.
fn program_ids(pid: u32) -> Vec<u32> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return vec![] };
    fds.flatten()
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .filter_map(|text| text.lines().find_map(|l| l.strip_prefix("prog_id:")).and_then(|v| v.trim().parse().ok()))
        .collect()
}

/// Whether a BPF program with this id is still loaded.
fn program_exists(id: u32) -> bool {
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    let mut attr = [0u32; 4];
    attr[0] = id;
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_GET_FD_BY_ID, attr.as_mut_ptr(), 16) };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT)
}

kernel_test!(ctrl_c_while_attaching_stops_at_once_and_detaches);
/// Thousands of tracepoints take a while to attach: on a terminal the
/// progress shows at once on stderr, and Ctrl-C then stops attaching: no
/// BEGIN, no `Attaching` line, END runs and maps print as after Ctrl-C, the
/// status is 0, and once rtrace has exited none of its programs is left.
fn ctrl_c_while_attaching_stops_at_once_and_detaches() {
    let _g = setup();
    let src = r#"let c = map();
probe("BEGIN", || { print("begin ran"); });
probe("tracepoint:*:*", |e| { c = count(); });
probe("END", || { print("end ran"); });"#;
    let (master, slave) = pty();
    let stderr = std::fs::OpenOptions::new().read(true).write(true).open(&slave).expect("the pty's slave");
    let mut child = Command::new(rtrace_bin())
        .args(["-e", src])
        .env("RTRACE_MAX_PROBES", "100000")
        .env("RTRACE_SYSCALL_DISPATCH", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("rtrace");
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut master = std::fs::File::from(master);
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        // EIO once rtrace (the slave's last holder) has exited.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(text.clone());
        }
        text
    });
    let deadline = deadline_in(ATTACH_TIMEOUT);
    let seen = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(text) if text.contains("Attaching ") => break text,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                panic!("no progress line on the terminal");
            }
        }
    };
    let programs = program_ids(pid);
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let asked = Instant::now();
    let until = deadline_in(Duration::from_secs(120));
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("rtrace did not end within 120 s of SIGINT while attaching; its terminal showed {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    drop(rx);
    let terminal = reader.join().unwrap();
    let what = format!(
        "status {status:?} {:?} after SIGINT\n--- stdout ---\n{stdout}\n--- terminal ---\n{terminal:?}",
        asked.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{what}");
    assert!(terminal.contains(" probes... 0%"), "{what}");
    assert!(!stdout.contains("begin ran"), "BEGIN runs only once everything is attached\n{what}");
    assert!(!stdout.lines().any(|l| l.starts_with("Attaching ")), "not everything was attached\n{what}");
    assert!(stdout.contains("end ran\n"), "END runs as after Ctrl-C\n{what}");
    assert!(!terminal.contains("100%"), "attaching stopped before the end\n{what}");
    assert!(!programs.is_empty(), "rtrace held no programs while attaching\n{what}");
    let gone_by = deadline_in(Duration::from_secs(10));
    while programs.iter().any(|&id| program_exists(id)) {
        assert!(Instant::now() < gone_by, "programs {programs:?} still loaded after rtrace exited\n{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

kernel_test!(a_script_of_only_begin_and_end_ends_after_begin);
/// As bpftrace 0.24: with nothing but BEGIN/END there is nothing to wait
/// for, so the run ends once BEGIN has run (END runs, maps print), also
/// under a long -d; a timer, or a -c command, keeps it running as before.
fn a_script_of_only_begin_and_end_ends_after_begin() {
    let _g = setup();
    let src = r#"let m = map();
probe("BEGIN", || { m["a"] = 1; print("begin"); });
probe("END", || { print("end"); });"#;
    for args in [vec!["-e", src], vec!["-d", "1h", "-e", src], vec!["-q", "-e", src]] {
        let out = Tracer::start(&args).finish();
        assert_eq!(out.code, Some(0), "{args:?}\n{out}");
        let lines: Vec<&str> =
            out.lines().into_iter().filter(|l| !l.is_empty() && !l.starts_with("Attaching")).collect();
        assert_eq!(lines, vec!["begin", "end", "@m[a]: 1"], "{args:?}\n{out}");
    }
    let out = Tracer::start(&["-e", r#"probe("END", || { print("end"); });"#]).finish();
    assert_eq!((out.code, out.lines().last().copied()), (Some(0), Some("end")), "END alone\n{out}");

    // A timer keeps the run going until it exits.
    let timer = r#"let n = 0;
probe("BEGIN", || { print("begin"); });
every("20ms", || { n += 1; print(`tick ${n}`); if n == 3 { exit(); } });
probe("END", || { print("end"); });"#;
    let out = Tracer::start(&["-e", timer]).finish();
    let lines: Vec<&str> = out.lines().into_iter().filter(|l| !l.starts_with("Attaching")).collect();
    assert_eq!(lines, vec!["begin", "tick 1", "tick 2", "tick 3", "end"], "{out}");

    // -c: the run ends when the command does, after its output.
    let out = Tracer::start(&["-c", "sh -c 'sleep 0.2; echo command-done'", "-e", src]).finish();
    assert_eq!(out.code, Some(0), "{out}");
    let at = |l: &str| out.line_index(l).unwrap_or_else(|| panic!("no {l:?}\n{out}"));
    assert!(at("begin") < at("command-done") && at("command-done") < at("end"), "{out}");
}
