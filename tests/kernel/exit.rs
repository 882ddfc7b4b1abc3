//! How a run starts and ends on a real kernel: `exit()` from a probe, `-d`,
//! SIGINT, `every()`, BEGIN and END, `print(m)` from userspace closures, `-q`,
//! `--dry-run`, `--explain`, script arguments and exit statuses.

use std::time::{Duration, Instant};

use crate::common::*;

/// A getppid counter for this thread, keyless map `c`.
fn counter() -> String {
    getppid_script("let c = map();", "c = count();")
}

kernel_test!(exit_from_a_probe_ends_the_run_promptly);
fn exit_from_a_probe_ends_the_run_promptly() {
    let _g = setup();
    let src = getppid_script("let c = map();", "c = count();\n        exit();");
    let mut t = Tracer::start(&["-d", "60s", "-e", &src]);
    t.wait_attached();
    let fired = Instant::now();
    getppid_n(1);
    let out = t.finish_within(Duration::from_secs(20));
    let took = out.ended_at - fired;
    assert!(took < Duration::from_secs(3), "exit() took {took:?} to end the run\n{out}");
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 1"], "maps still print after exit()\n{out}");
}

kernel_test!(exit_code_from_a_probe);
fn exit_code_from_a_probe() {
    let _g = setup();
    let src = getppid_script("let c = map();", "c = count();\n        exit(4);");
    let out = run_to_end(&["-d", "60s", "-e", &src], &[], || getppid_n(1), Duration::from_secs(20));
    assert_eq!(out.code, Some(4), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 1"], "{out}");
}

kernel_test!(duration_ends_the_run);
fn duration_ends_the_run() {
    let _g = setup();
    let src = counter();
    let mut t = Tracer::start(&["-d", "300ms", "-e", &src]);
    t.wait_attached();
    let ready = t.ready_at.unwrap();
    getppid_n(2);
    let out = t.finish_within(Duration::from_secs(10));
    let ran = out.ended_at - ready;
    assert!(ran >= Duration::from_millis(200), "-d 300ms ended after only {ran:?}\n{out}");
    assert!(ran < Duration::from_secs(5), "-d 300ms took {ran:?}\n{out}");
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 2"], "{out}");
}

kernel_test!(sigint_ends_the_run_and_maps_print);
fn sigint_ends_the_run_and_maps_print() {
    let _g = setup();
    let src = counter();
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(2);
    // Without -d it runs until told to stop.
    std::thread::sleep(Duration::from_millis(300));
    assert!(t.is_running(), "rtrace ended before being stopped: {:?}", t.lines);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 2"], "{out}");
}

kernel_test!(every_prints_and_clears_repeatedly);
fn every_prints_and_clears_repeatedly() {
    let _g = setup();
    let src = counter() + r#"every("200ms", || { print(c); c.clear(); });"#;
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(3);
    t.wait_line("a periodic `@c: 3`", Duration::from_secs(10), |l| l == "@c: 3");
    getppid_n(2);
    // Cleared after the first print: the second batch shows alone.
    t.wait_line("a periodic `@c: 2`", Duration::from_secs(10), |l| l == "@c: 2");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.is_empty(), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 3", "@c: 2"], "{out}");
}

kernel_test!(begin_runs_after_attach_and_end_before_the_map_dump);
fn begin_runs_after_attach_and_end_before_the_map_dump() {
    let _g = setup();
    let tok = token();
    let src = counter()
        + &fill(
            r#"
probe("BEGIN", || { print("hello __TOK__"); });
probe("END", || { print("bye __TOK__"); });
"#,
            &[("TOK", &tok)],
        );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 3);
    t.wait_line("BEGIN's line", Duration::from_secs(10), |l| l.starts_with("hello"));
    getppid_n(2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let lines = out.lines();
    assert_eq!(lines[0], "Attaching 3 probes...", "{out}");
    assert_eq!(lines[1], format!("hello {tok}"), "{out}");
    let bye = out.line_index(&format!("bye {tok}")).unwrap_or_else(|| panic!("END didn't print\n{out}"));
    let map = out.line_index("@c: 2").unwrap_or_else(|| panic!("map not printed\n{out}"));
    assert!(bye < map, "END must run before the maps are printed\n{out}");
}

kernel_test!(end_runs_after_detach);
fn end_runs_after_detach() {
    let _g = setup();
    // BEGIN and END each write one line of the same unusual length; a probe
    // counts rtrace's writes of that length (with or without the newline). Only BEGIN's may be seen: by the
    // time END runs, the probes are detached.
    let tok = token();
    let begin = format!("begin-{tok}-{}", "b".repeat(60));
    let end = format!("end---{tok}-{}", "e".repeat(60));
    assert_eq!(begin.len(), end.len());
    let src = fill(
        r#"
let w = map();
probe("BEGIN", || { print("__BEGIN__"); });
probe("tracepoint:syscalls:sys_enter_write", |e| {
    if e.comm == "rtrace" && (e.args.count == __LEN__ || e.args.count == __LEN__ - 1) { w = count(); }
});
probe("END", || { print("__END__"); });
"#,
        &[("BEGIN", &begin), ("END", &end), ("LEN", &(begin.len() + 1))],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    t.wait_line("BEGIN's line", Duration::from_secs(10), |l| l == begin);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index(&end).is_some(), "END didn't run\n{out}");
    assert_eq!(out.map_lines("w"), vec!["@w: 1"], "{out}");
}

kernel_test!(print_map_from_begin_and_end);
fn print_map_from_begin_and_end() {
    let _g = setup();
    let src = counter()
        + r#"
probe("BEGIN", || { print(c); print("begin-done"); });
probe("END", || { print(c); print("end-done"); });
"#;
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    t.wait_line("BEGIN's line", Duration::from_secs(10), |l| l == "begin-done");
    getppid_n(3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.is_empty(), "{out}");
    // Printed by END, then dumped at exit as every non-empty map is.
    assert_eq!(out.map_lines("c"), vec!["@c: 3", "@c: 3"], "{out}");
    let printed = out.line_index("@c: 3").unwrap();
    assert!(printed < out.line_index("end-done").unwrap(), "{out}");
    assert!(out.line_index("begin-done").unwrap() < printed, "{out}");
}

kernel_test!(quiet_has_no_attaching_line);
fn quiet_has_no_attaching_line() {
    let _g = setup();
    let src = counter() + r#"probe("BEGIN", || { print("ready"); });"#;
    let mut t = Tracer::start(&["-q", "-e", &src]);
    t.wait_line("BEGIN's line", ATTACH_TIMEOUT, |l| l == "ready");
    getppid_n(2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.has_attach_line(), "-q must not print the Attaching line\n{out}");
    assert_eq!(out.lines()[0], "ready", "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 2"], "{out}");
}

kernel_test!(dry_run_loads_but_attaches_and_runs_nothing);
fn dry_run_loads_but_attaches_and_runs_nothing() {
    let _g = setup();
    let tok = token();
    let src = counter() + &fill(r#"probe("BEGIN", || { print("begin __TOK__"); });"#, &[("TOK", &tok)]);
    // No -d: a dry run ends by itself.
    let out = run(&["--dry-run", "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.has_attach_line(), "{out}");
    assert!(!out.stdout.contains(&tok), "BEGIN must not run in a dry run\n{out}");
    assert!(out.map_lines("c").is_empty(), "{out}");
    assert!(!out.stderr.contains("error"), "{out}");
}

kernel_test!(dry_run_still_reports_compile_errors);
fn dry_run_still_reports_compile_errors() {
    let _g = setup();
    let src = r#"
let c = map();
probe("tracepoint:syscalls:sys_enter_read", |e| { c = sum(e.args.nope); });
"#;
    let out = run(&["--dry-run", "-e", src]);
    let line = assert_clean_error(&out);
    assert!(line.contains("3:66") && line.contains("nope"), "{out}");
}

kernel_test!(explain_prints_disassembly_with_script_lines);
fn explain_prints_disassembly_with_script_lines() {
    let _g = setup();
    let dir = TempDir::new();
    let script = dir.write(
        "explain.rhai",
        r#"let c = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.args.count > 10 {
        c[e.comm] = sum(e.args.count);
    }
});
"#,
    );
    let out = run(&["--explain", script.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.has_attach_line(), "--explain attaches nothing\n{out}");
    let lines = out.lines();
    let annotated = |n: u32, text: &str| {
        lines.iter().position(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("; {n}:")) && l.ends_with(text)
        })
    };
    let l3 = annotated(3, "if e.args.count > 10 {").unwrap_or_else(|| panic!("no annotation for line 3\n{out}"));
    let l4 =
        annotated(4, "c[e.comm] = sum(e.args.count);").unwrap_or_else(|| panic!("no annotation for line 4\n{out}"));
    assert!(l3 < l4, "{out}");
    // Numbered instructions under the annotations, ending in `exit`.
    let insn = |l: &str| {
        let l = l.trim_start();
        l.split_once(": ").is_some_and(|(n, _)| n.parse::<u32>().is_ok())
    };
    assert!(insn(lines[l3 + 1]) && insn(lines[l4 + 1]), "{out}");
    assert!(lines.iter().any(|l| insn(l) && l.trim_end().ends_with("exit")), "{out}");
    assert!(out.stdout.contains("tracepoint:syscalls:sys_enter_read"), "{out}");
}

kernel_test!(exit_code_from_top_level);
fn exit_code_from_top_level() {
    let _g = setup();
    let src = counter() + "exit(3);";
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(3), "{out}");
    assert!(!out.has_attach_line(), "exit() at the top level attaches nothing\n{out}");
    assert!(out.stderr.is_empty(), "{out}");
}

kernel_test!(exit_code_from_begin);
fn exit_code_from_begin() {
    let _g = setup();
    let src = counter() + r#"probe("BEGIN", || { print("begin"); exit(3); });"#;
    // No -d: exit() in BEGIN ends the run.
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(3), "{out}");
    assert_eq!(out.lines()[..2], ["Attaching 2 probes...", "begin"], "{out}");
    assert!(out.stderr.is_empty(), "{out}");
}

kernel_test!(script_file_arguments_reach_args);
fn script_file_arguments_reach_args() {
    let _g = setup();
    let dir = TempDir::new();
    let script =
        dir.write("args.rhai", "probe(\"BEGIN\", || { print(`${ARGS.len()} ${ARGS[0]} ${ARGS[1]}`); exit(); });\n");
    let out = run(&["-q", script.to_str().unwrap(), "foo", "42"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines(), vec!["2 foo 42"], "{out}");
}

kernel_test!(duration_option_after_the_script_file);
fn duration_option_after_the_script_file() {
    let _g = setup();
    // The README's own usage: `rtrace examples/syscalls_by_comm.rhai -d 2s`.
    let dir = TempDir::new();
    let script = dir.write("after.rhai", &counter());
    let out = run_to_end(&[script.to_str().unwrap(), "-d", "300ms"], &[], || getppid_n(2), Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 2"], "{out}");
}

kernel_test!(maps_print_before_many_probes_are_closed);
/// With hundreds of tracepoints, closing them takes the kernel seconds
/// (an RCU wait each). Ctrl-C stops every probe at once (a flag they check
/// first) and prints the maps before that closing, which then finishes
/// before rtrace exits.
fn maps_print_before_many_probes_are_closed() {
    let _g = setup();
    let src = r#"let c = map(); probe("tracepoint:syscalls:sys_enter_*", |e| { c = count(); });"#;
    let mut t = Tracer::start(&["-e", src]);
    assert!(t.wait_attached() > 300, "expected every sys_enter_* tracepoint");
    getppid_n(10);
    let asked = Instant::now();
    t.interrupt();
    t.wait_line("the map", Duration::from_secs(3), |l| l.starts_with("@c: "));
    let printed = asked.elapsed();
    let out = t.finish_within(Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}");
    eprintln!("map printed {printed:?} after SIGINT; rtrace exited {:?} after it", out.ended_at - asked);
}

/// A way the run ends while userspace code never returns.
struct EndCase {
    what: &'static str,
    args: &'static [&'static str],
    /// Send SIGTERM once attached.
    sigterm: bool,
    /// The located warning's reason.
    says: &'static str,
}

const LOOP_FOREVER: &str = "let i = 0; loop { i += 1; }";

kernel_test!(every_end_of_the_run_stops_code_that_never_returns);
/// `-d`, the `-c` command's exit and SIGTERM stop a BEGIN probe, a timer or
/// a probe's userspace statement that loops forever (as SIGINT does), with
/// one located warning saying why; END still runs and the status is 0.
fn every_end_of_the_run_stops_code_that_never_returns() {
    let _g = setup();
    let cases = [
        EndCase { what: "-d in BEGIN", args: &["-d", "1s"], sigterm: false, says: "-d 1s is over" },
        EndCase { what: "-c ends, timer", args: &["-c", "sleep 0.3"], sigterm: false, says: "the -c command exited" },
        EndCase { what: "SIGTERM", args: &[], sigterm: true, says: "SIGTERM arrived" },
    ];
    for (i, case) in cases.iter().enumerate() {
        let body = match i {
            1 => format!("every(\"50ms\", || {{ {LOOP_FOREVER} }});"),
            _ => format!("probe(\"BEGIN\", || {{ {LOOP_FOREVER} }});"),
        };
        let src = format!("{body}\nprobe(\"END\", || {{ print(\"end ran\"); }});\n");
        let mut args: Vec<&str> = case.args.to_vec();
        args.extend(["-e", &src]);
        let mut t = Tracer::start(&args);
        t.wait_attached();
        if case.sigterm {
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(unsafe { libc::kill(t.pid(), libc::SIGTERM) }, 0);
        }
        let out = t.finish_within(Duration::from_secs(30));
        let what = case.what;
        assert_eq!(out.code, Some(0), "{what}\n{out}");
        assert!(out.stdout.contains("end ran\n"), "{what}: END runs\n{out}");
        let warning = format!("-e:1:1: warning: {}: stopped this probe's userspace code, still running", case.says);
        assert!(out.stderr.contains(&warning), "{what}: no `{warning}`\n{out}");
    }
}

kernel_test!(a_closed_pipe_on_both_outputs_never_ends_with_a_panic);
/// `rtrace ... 2>&1 | head -1`: stdout and stderr both closed while rtrace
/// writes (script output, eprint(), debug(), -v lines); the status is 1 (the
/// output could not be written) or 0, never 101 (a Rust panic).
fn a_closed_pipe_on_both_outputs_never_ends_with_a_panic() {
    let _g = setup();
    let rt = rtrace_bin();
    for script in [
        r#"probe("BEGIN", || { for i in 0..100000 { print(`line ${i}`); } });"#,
        r#"probe("BEGIN", || { for i in 0..100000 { eprint(`line ${i}`); } });"#,
        r#"probe("BEGIN", || { for i in 0..100000 { debug(i); } });"#,
    ] {
        for verbose in [false, true] {
            let v = if verbose { "-v" } else { "" };
            let cmd = format!("{rt} {v} -d 2s -e '{script}' 2>&1 | head -1 >/dev/null; exit ${{PIPESTATUS[0]}}");
            let out = std::process::Command::new("bash").arg("-c").arg(&cmd).output().expect("bash");
            let code = out.status.code();
            assert!(matches!(code, Some(0 | 1)), "{cmd}: status {code:?}");
        }
    }
}

kernel_test!(the_error_comes_before_the_summary_of_what_it_left);
/// A runtime error in a probe: the error is the first line on stderr, the
/// "queued events were not processed" summary after it, and it is written once.
fn the_error_comes_before_the_summary_of_what_it_left() {
    let _g = setup();
    let src =
        r#"probe("tracepoint:syscalls:sys_enter_openat", |e| { let s = str(e.args.filename); print(s.len() / 0); });"#;
    let out = run(&["-c", "sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do cat /dev/null; done'", "-e", src]);
    assert_eq!(out.code, Some(1), "{out}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(lines.first().is_some_and(|l| l.contains("error: Division by zero")), "{out}");
    assert_eq!(out.stderr.matches("Division by zero").count(), 1, "{out}");
}

kernel_test!(a_script_too_long_to_locate_errors_in_is_refused_at_once, without_root);
/// Past 65,535 lines no error could name its line: such a script is refused
/// before it is parsed (a 200,000-line one with an error on its last line).
fn a_script_too_long_to_locate_errors_in_is_refused_at_once() {
    let dir = TempDir::new();
    let mut text: String = (0..200_000).map(|i| format!("let x{i} = {i};\n")).collect();
    text.push_str("let = ;\n");
    let file = dir.write("long.rhai", &text);
    let out = Tracer::start(&[file.to_str().unwrap()]).finish_within(Duration::from_secs(20));
    let line = assert_clean_error(&out);
    assert!(line.contains("the script has 200001 lines; rtrace reads scripts of at most 65535 lines"), "{line}");
}
