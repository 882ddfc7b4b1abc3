//! Hooks that are safe to leave running: `--command-rate` under a flood of
//! events (every call that did not run counted), `throttle()`, `exec()`
//! with hostile file names from the kernel (no shell reads them), the
//! `--command-timeout` kill, and the action counters on `/metrics`.

use std::time::Instant;

use crate::common::*;
use crate::serve::{free_port, metrics};

/// `N system() call(s) over --command-rate ...` warnings: the counts.
fn counted(stderr: &str, what: &str) -> u64 {
    stderr
        .lines()
        .filter(|l| l.starts_with("rtrace: warning: ") && l.contains(what))
        .filter_map(|l| l.split(": ").nth(3)?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The value of `rtrace_actions_total{action="A",outcome="O"}` in a scrape.
fn actions(body: &str, action: &str, outcome: &str) -> Option<u64> {
    let series = format!("rtrace_actions_total{{action=\"{action}\",outcome=\"{outcome}\"}} ");
    body.lines().find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
}

kernel_test!(a_rate_limited_hook_under_a_flood_runs_at_its_rate);
/// 100,000 events in a tight loop reach a `system()` call limited to 5
/// commands a second: at most 5 + 5 per second of the run start, every
/// other call is counted (over the rate, or dropped), none vanishes, and
/// `/metrics` shows the same counts.
fn a_rate_limited_hook_under_a_flood_runs_at_its_rate() {
    let _g = setup();
    const EVENTS: u64 = 100_000;
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { system("echo x >> %s", "__MARK__"); }
});"#,
        &[("ME", &tid()), ("MARK", &mark.display())],
    );
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let mut t = Tracer::start(&["--unsafe", "--command-rate", "5", "--serve", &addr, "-e", &src]);
    t.wait_attached();
    getppid_n(EVENTS as usize);
    // The counters on /metrics, once a command has run.
    let deadline = deadline_in(EXIT_TIMEOUT);
    let body = loop {
        let body = metrics(port);
        if actions(&body, "system", "done").is_some() || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(actions(&body, "system", "done").is_some_and(|n| n >= 1), "{body}");
    assert!(actions(&body, "system", "rate_limited").is_some_and(|n| n > 0), "{body}");
    t.interrupt();
    let out = t.finish();
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(out.code, Some(0), "{out}");

    let ran = std::fs::read_to_string(&mark).map(|t| t.lines().count() as u64).unwrap_or(0);
    let audits: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("rtrace: action: -e:2:")).collect();
    let audited_ran = audits.iter().filter(|l| l.ends_with(": ran")).count() as u64;
    assert_eq!(ran, audited_ran, "each command that ran is audited\n{out}");
    assert!(ran >= 5, "a burst of 5 runs at once: {ran}\n{out}");
    assert!(ran as f64 <= 5.0 + 5.0 * secs, "{ran} commands in {secs:.1} s at 5 a second\n{out}");
    let limited = counted(&out.stderr, "system() call(s) over --command-rate 5/s, not run");
    let dropped = counted(&out.stderr, "system() call(s) dropped");
    // Under emulation the run is slow enough that commands are still queued
    // at the end: they are counted, and the one running is killed (audited).
    let unfinished = counted(&out.stderr, "system() call(s) did not finish");
    let lost: u64 = lost_reports(&out.stderr).iter().map(|(n, _)| n).sum();
    let accounted = audits.len() as u64 + limited + dropped + unfinished + lost;
    assert_eq!(accounted, EVENTS, "every event is an audited command or a count\n{out}");
    assert!(limited > EVENTS / 2, "{out}");
}

kernel_test!(throttle_passes_a_key_once_per_interval);
fn throttle_passes_a_key_once_per_interval() {
    let _g = setup();
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ && throttle(e.tid, "1h") { exec(["sh", "-c", "echo x >> __MARK__"]); }
});"#,
        &[("ME", &tid()), ("MARK", &mark.display())],
    );
    let mut t = Tracer::start(&["--unsafe", "-e", &src]);
    t.wait_attached();
    getppid_n(1000);
    wait_file_line(&mark, "the command's line", EXIT_TIMEOUT, |l| l == "x");
    t.interrupt();
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(std::fs::read_to_string(&mark).unwrap_or_default(), "x\n", "one command for 1000 events\n{out}");
    let audits: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("rtrace: action: ")).collect();
    assert_eq!(audits.len(), 1, "{out}");
    assert!(audits[0].contains(r#": exec(["sh", "-c", "echo x >> "#), "{out}");
}

kernel_test!(hostile_file_names_from_the_kernel_never_run_as_commands);
/// File names holding `;`, `$(...)`, backticks and a newline, read by a probe
/// from `openat` and handed to `exec()` and to `system()` with a format:
/// each is printed as one word; the command inside never runs.
fn hostile_file_names_from_the_kernel_never_run_as_commands() {
    let _g = setup();
    let dir = TempDir::new();
    let x = dir.join("X");
    let x = x.display();
    let d = dir.join("").display().to_string();
    let names = [
        format!("{d}a;touch {x}"),
        format!("{d}$(touch {x})"),
        format!("{d}`touch {x}`"),
        format!("{d}b\ntouch {x}"),
        format!("{d}'; touch {x}; '"),
    ];
    let src = fill(
        r#"probe("tracepoint:syscalls:sys_enter_openat", |e| {
    if e.tid == __ME__ {
        let f = str(e.args.filename);
        exec(["printf", "exec<%s>\n", f]);
        system("printf 'sh<%%s>\n' %s", f);
        system("echo \"dq<%s>\"", f);
    }
});"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["--unsafe", "-e", &src]);
    t.wait_attached();
    for n in &names {
        let _ = std::fs::File::open(n);
    }
    // Each printed name ends one line with `>` (the one with a newline too).
    t.wait_count("the commands' output", EXIT_TIMEOUT, names.len() * 3, |l| l.ends_with('>'));
    t.interrupt();
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!dir.join("X").exists(), "a file name ran as a command\n{out}");
    for n in &names {
        for form in ["exec", "sh", "dq"] {
            assert!(out.stdout.contains(&format!("{form}<{n}>")), "{form} did not print {n:?} as one word\n{out}");
        }
    }
}

kernel_test!(a_command_past_its_timeout_is_killed_and_audited);
fn a_command_past_its_timeout_is_killed_and_audited() {
    let _g = setup();
    let src = r#"probe("BEGIN", || { system("sleep 30"); exec(["sleep", "0"]); exit(); });"#;
    let out = run(&["--unsafe", "-q", "--command-timeout", "300ms", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains(r#"system("sleep 30"): killed after 300ms (--command-timeout)"#), "{out}");
    assert!(out.stderr.contains(r#"exec(["sleep", "0"]): ran"#), "the next command still runs\n{out}");
    for bad in [&["--command-timeout", "soon"][..], &["--command-rate", "0"][..], &["--command-rate", "-3"][..]] {
        let mut args = bad.to_vec();
        args.extend(["--unsafe", "-e", src]);
        assert_clean_error(&run(&args));
    }
    // Without --unsafe, exec() is refused by name before attaching, and on
    // the routes a scan of the text can't see when it is called.
    let line = assert_clean_error(&run(&["-e", r#"probe("BEGIN", || exec(["true"]));"#]));
    assert!(line.contains("exec() runs programs and needs --unsafe"), "{line}");
    let dir = TempDir::new();
    let mark = dir.join("ran");
    let m = mark.display();
    for route in [
        format!(r#"probe("BEGIN", || {{ Fn("ex" + "ec").call(["touch", "{m}"]); exit(); }});"#),
        format!(r#"probe("BEGIN", || {{ eval("exec([\"touch\", \"{m}\"])"); exit(); }});"#),
    ] {
        crate::safety::assert_refused(&["-d", "10s", "-e", &route], &mark);
    }
}
