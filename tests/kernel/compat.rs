//! Behaving as bpftrace users and their tools expect (issue 14): SIGUSR1,
//! timers and sampling under -p/-c, the exit dump, JSON record types, stack
//! layouts, kernel symbol aliases, and the command line (`#!`, `-`, -V, -v,
//! --info, -B, --no-warnings, usage errors, man page and completions, typo
//! suggestions).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// A getppid counter for this thread: keyless map `c`.
fn counter() -> String {
    fill(
        r#"let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { c = count(); } });
"#,
        &[("ME", &tid())],
    )
}

fn send(t: &Tracer, sig: i32) {
    assert_eq!(unsafe { libc::kill(t.pid(), sig) }, 0, "kill({sig})");
}

kernel_test!(sigusr1_prints_every_map_and_tracing_goes_on);
fn sigusr1_prints_every_map_and_tracing_goes_on() {
    let _g = setup();
    let src = counter()
        + r#"let s = map();
probe("BEGIN", || { print("begun"); });
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { s[e.comm] = count(); } });"#
            .replace("__ME__", &tid().to_string())
            .as_str();
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    t.wait_line("BEGIN", Duration::from_secs(10), |l| l == "begun");
    getppid_n(3);
    send(&t, libc::SIGUSR1);
    t.wait_line("@c: 3 after SIGUSR1", Duration::from_secs(10), |l| l == "@c: 3");
    t.wait_line("@s after SIGUSR1", Duration::from_secs(10), |l| l.starts_with("@s[") && l.ends_with("]: 3"));
    assert!(t.is_running(), "SIGUSR1 must not end the run");
    getppid_n(2);
    send(&t, libc::SIGUSR1);
    t.wait_line("@c: 5 after the second SIGUSR1", Duration::from_secs(10), |l| l == "@c: 5");
    getppid_n(1);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 3", "@c: 5", "@c: 6"], "{out}");
}

/// Whether process `pid` has a handler for `sig` (its `SigCgt` mask).
fn catches(pid: i32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(str::trim);
    mask.and_then(|m| u64::from_str_radix(m, 16).ok()).is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// BPF maps and programs process `pid` holds.
fn bpf_objects(pid: i32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|l| l.to_string_lossy().contains("bpf-"))
        .count()
}

kernel_test!(sigusr1_before_the_probes_are_loaded_is_kept_not_fatal);
fn sigusr1_before_the_probes_are_loaded_is_kept_not_fatal() {
    let _g = setup();
    // A slow top level: the SIGUSR1s below arrive while it runs, then while
    // the probes load and attach.
    let src = fill(
        r#"let m = map();
let spin = 0;
for i in 0..2_000_000 { spin += i; }
probe("BEGIN", || { m[1] = 5; });
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { m[2] = 7; } });
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    let pid = t.pid();
    let deadline = deadline_in(Duration::from_secs(20));
    while !catches(pid, libc::SIGUSR1) {
        assert!(t.is_running() && std::time::Instant::now() < deadline, "rtrace never handled SIGUSR1");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(bpf_objects(pid), 0, "SIGUSR1 is handled from the start, before any map or program exists");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
                    break;
                }
                sent += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            sent
        })
    };
    t.wait_line("the maps printed for a SIGUSR1", Duration::from_secs(30), |l| l == "@m[1]: 5");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(flood.join().unwrap() > 0);
    assert!(t.is_running(), "SIGUSR1 must not end the run");
    getppid_n(1);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("@m[2]: 7"), "tracing went on\n{out}");
}

kernel_test!(exit_prints_maps_printed_before_and_cleared_ones_only_when_written_again);
fn exit_prints_maps_printed_before_and_cleared_ones_only_when_written_again() {
    let _g = setup();
    let me = tid();
    let src = fill(
        r#"let c = map();
let gone = map();
let again = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { c = count(); gone[e.tid] = count(); again[e.tid] = count(); }
});
probe("END", || { print(c); gone.clear(); });
every("50ms", || { print("tick"); });
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(10);
    t.wait_line("a tick", Duration::from_secs(10), |l| l == "tick");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    // Printed by END, and again in the exit dump: a consumer keeping the
    // last record per map reads the true count.
    assert_eq!(out.map_lines("c"), vec!["@c: 10", "@c: 10"], "{out}");
    assert!(out.map_lines("gone").is_empty(), "a cleared map is not dumped\n{out}");
    assert_eq!(out.map_lines("again"), vec![format!("@again[{me}]: 10")], "never printed: dumped\n{out}");

    let src = fill(
        r#"let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { m = count(); } });
probe("tracepoint:syscalls:sys_enter_getpid", |e| { if e.tid == __ME__ { print(m); m.clear(); } });
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(4);
    getpid_n(1);
    t.wait_line("@m: 4 printed by the probe", Duration::from_secs(10), |l| l == "@m: 4");
    // The clear is a control message of its own: let it land before writing again.
    std::thread::sleep(Duration::from_millis(200));
    getppid_n(2);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("m"), vec!["@m: 4", "@m: 2"], "written again after its clear: dumped\n{out}");
}

kernel_test!(interval_and_timers_fire_under_c_and_p);
fn interval_and_timers_fire_under_c_and_p() {
    let _g = setup();
    let src = r#"let n = map();
probe("interval:ms:100", |e| { n = count(); print(`interval`); });
every("100ms", || { print("timer"); });
probe("BEGIN", || { print("begin"); });
probe("END", || { print("end"); });"#;
    let out = run(&["-c", "sleep 1", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    for l in ["begin", "end"] {
        assert!(out.line_index(l).is_some(), "{l} under -c\n{out}");
    }
    let ticks = out.lines().iter().filter(|l| **l == "interval").count();
    assert!(ticks >= 3, "interval:ms:100 fired {ticks} times during `sleep 1` under -c\n{out}");
    assert!(out.lines().iter().filter(|l| **l == "timer").count() >= 3, "{out}");

    // -p: a sleeping process never runs, yet interval fires.
    let mut child = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let pid = child.id().to_string();
    let out = run(&["-p", &pid, "-d", "1s", "-e", src]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.code, Some(0), "{out}");
    let ticks = out.lines().iter().filter(|l| **l == "interval").count();
    assert!(ticks >= 3, "interval:ms:100 fired {ticks} times in 1s under -p\n{out}");
}

kernel_test!(profile_under_p_samples_only_the_traced_process);
fn profile_under_p_samples_only_the_traced_process() {
    let _g = setup();
    let mut child = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("spawn busy loop");
    let pid = child.id();
    let src = r#"let m = map();
probe("profile:hz:199", |e| { m[e.pid] = count(); });"#;
    let out = run(&["-p", &pid.to_string(), "-d", "1s", "-e", src]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.code, Some(0), "{out}");
    let lines = out.map_lines("m");
    assert_eq!(lines.len(), 1, "only the traced process is sampled\n{out}");
    let prefix = format!("@m[{pid}]: ");
    let n: u64 = lines[0].strip_prefix(&prefix).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(n > 0, "a busy process sampled at 199 Hz for 1s\n{out}");
}

kernel_test!(json_value_time_join_and_folded_records);
fn json_value_time_join_and_folded_records() {
    let _g = setup();
    let src = fill(
        r#"let f = map();
// raw_syscalls, not syscalls:sys_enter_getppid: before Linux 6.4ish a
// syscall tracepoint gives BPF the user registers, so no kernel stack.
probe("tracepoint:raw_syscalls:sys_enter", |e| { if e.tid == __ME__ && e.args.id == 110 { f[e.kstack] = count(); } });
probe("tracepoint:syscalls:sys_enter_getpid", |e| {
    if e.tid == __ME__ {
        print(42);
        print(1.5);
        print(true);
        time("%Y\n");
        join(["a", "b", "c"]);
        let t = time("%Y");
        print(`t=${t}`);
        print_folded(f);
        exit();
    }
});"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-f", "json", "-e", &src]);
    t.wait_line("attached", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    getppid_n(3);
    std::thread::sleep(Duration::from_millis(100));
    getpid_n(1);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let records = json_records(&out.stdout);
    let values: Vec<&serde_json::Value> = json_of_type(&records, "value").into_iter().map(|r| &r["data"]).collect();
    assert_eq!(values, vec![&serde_json::json!(42), &serde_json::json!(1.5), &serde_json::json!(true)], "{out}");
    let year = json_of_type(&records, "time");
    assert_eq!(year.len(), 1, "{out}");
    let y = year[0]["data"].as_str().unwrap();
    assert!(y.len() == 5 && y.ends_with('\n') && y[..4].parse::<u32>().is_ok(), "{out}");
    let joins = json_of_type(&records, "join");
    assert_eq!(joins.len(), 1, "{out}");
    assert_eq!(joins[0]["data"], "a b c", "{out}");
    let printed = json_of_type(&records, "printf");
    assert!(printed.iter().any(|r| r["data"] == format!("t={}\n", &y[..4])), "time() as a value\n{out}");
    let folded = json_of_type(&records, "folded");
    assert_eq!(folded.len(), 1, "print_folded under -f json is a record\n{out}");
    let stacks = folded[0]["data"]["@f"].as_object().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(stacks.len(), 1, "{out}");
    let (stack, count) = stacks.iter().next().unwrap();
    assert_eq!(count, 3, "{out}");
    assert!(stack.contains("do_syscall_64;"), "folded root first: {stack}\n{out}");

    // The same statements as text.
    let src = src.replace("print_folded(f);", "");
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getpid_n(1);
    let out = t.finish();
    let lines = out.lines();
    let at = out.line_index("42").unwrap_or_else(|| panic!("{out}"));
    assert_eq!(lines[at + 1..at + 3], ["1.5", "true"], "{out}");
    assert_eq!(lines[at + 3], &y[..4], "time(\"%Y\\n\") prints\n{out}");
    assert_eq!(lines[at + 4], "a b c", "join() prints with a newline\n{out}");
}

kernel_test!(lost_events_are_reported_while_the_run_goes_on);
fn lost_events_are_reported_while_the_run_goes_on() {
    let _g = setup();
    let src = fill(
        r#"let n = 0;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { n += 1; if n == 1 { sleep(0.3); } }
});"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["--ring-size", "4K", "-f", "json", "-e", &src]);
    t.wait_line("attached", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    getppid_n(20_000);
    // Reported within the run (checked once a second), not only at exit.
    let line = t.wait_line("a lost_events record", Duration::from_secs(10), |l| l.contains("\"lost_events\""));
    assert!(t.is_running());
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert!(v["data"]["events"].as_u64().unwrap_or(0) > 0, "{line}");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

/// Address of the kernel function `name` (a global text symbol) and the
/// other names kallsyms lists at the same address.
fn kallsyms_aliases(name: &str) -> Option<(u64, Vec<String>)> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let addr = text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 3 && w[2] == name && w[1] == "T").then(|| u64::from_str_radix(w[0], 16).ok()).flatten()
    })?;
    let names = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 3 && u64::from_str_radix(w[0], 16).ok() == Some(addr)).then(|| w[2].to_string())
        })
        .collect();
    Some((addr, names))
}

/// Whether kallsyms lists `__do_sys_getppid` at `__x64_sys_getppid`'s address.
fn getppid_has_its_alias() -> bool {
    kallsyms_aliases("__x64_sys_getppid").is_some_and(|(_, names)| names.iter().any(|n| n == "__do_sys_getppid"))
}

kernel_test!(
    aliased_kernel_functions_get_the_name_perf_shows,
    needs: Check("__x64_sys_getppid with its alias __do_sys_getppid in /proc/kallsyms", getppid_has_its_alias)
);
fn aliased_kernel_functions_get_the_name_perf_shows() {
    let _g = setup();
    let (addr, names) = kallsyms_aliases("__x64_sys_getppid").expect("__x64_sys_getppid in /proc/kallsyms");
    let src = format!(r#"probe("BEGIN", || {{ print(ksym(0x{addr:x})); print(ksym(0x{:x})); exit(); }});"#, addr + 5);
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines()[1..], ["__x64_sys_getppid", "__x64_sys_getppid"], "aliases {names:?}\n{out}");
}

kernel_test!(stack_keys_indent_four_spaces_printed_stacks_eight_and_perf_frames_collapse);
fn stack_keys_indent_four_spaces_printed_stacks_eight_and_perf_frames_collapse() {
    let _g = setup();
    let src = fill(
        r#"let k = map();
// raw_syscalls (getppid is 110): syscall tracepoints have no kernel stack before Linux 6.4ish.
probe("tracepoint:raw_syscalls:sys_enter", |e| {
    if e.tid == __ME__ && e.args.id == 110 {
        k[e.kstack] = count();
        print(`PRINTED${e.kstack}`);
        print(`rtrace-test 1 0.0: cpu-clock:${e.kstack("perf")}${e.kstack("perf", 2)}
`);
    }
});"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    t.wait_line("the perf sample", Duration::from_secs(10), |l| l.starts_with("rtrace-test 1"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let lines = out.lines();
    let open = lines.iter().position(|l| *l == "@k[").unwrap_or_else(|| panic!("{out}"));
    let key_frames: Vec<&str> = lines[open + 1..].iter().take_while(|l| !l.starts_with("]: ")).copied().collect();
    assert!(!key_frames.is_empty(), "{out}");
    for f in &key_frames {
        assert!(f.starts_with("    ") && !f.starts_with("     "), "map key frame {f:?} is not 4 spaces in\n{out}");
    }
    let printed = lines.iter().position(|l| *l == "PRINTED").unwrap();
    assert!(lines[printed + 1].starts_with("        ") && !lines[printed + 1].starts_with("         "), "{out}");
    // perf script's sample layout: header, frames, one empty line.
    let head = lines.iter().position(|l| l.starts_with("rtrace-test 1 0.0: cpu-clock:")).unwrap();
    let frames: Vec<&str> = lines[head + 1..].iter().take_while(|l| !l.is_empty()).copied().collect();
    assert_eq!(frames.len(), key_frames.len() + 2, "no blank line inside the sample\n{out}");
    assert_eq!(lines.get(head + 1 + frames.len()), Some(&""), "{out}");
    for f in frames {
        let w: Vec<&str> = f.split_whitespace().collect();
        assert!(f.starts_with('\t') && w.len() == 3, "{f:?}\n{out}");
        assert!(u64::from_str_radix(w[0], 16).is_ok(), "{f:?}");
        let (_, off) = w[1].rsplit_once('+').unwrap_or_else(|| panic!("{f:?}"));
        assert!(off.starts_with("0x") && u64::from_str_radix(&off[2..], 16).is_ok(), "hex offset: {f:?}");
        assert_eq!(w[2], "([kernel.kallsyms])", "{f:?}");
    }
}

kernel_test!(shebang_scripts_and_scripts_from_stdin_run);
fn shebang_scripts_and_scripts_from_stdin_run() {
    let _g = setup();
    let dir = TempDir::new();
    let script = "#!/usr/bin/env rtrace\nprobe(\"BEGIN\", || { print(`args ${ARGS}`); exit(); });\nlet x = ;\n";
    let path = dir.write("s.rhai", script);
    let out = run(&[path.to_str().unwrap(), "a"]);
    // Line numbers stay those of the file: the error is on line 3.
    let err = assert_clean_error(&out);
    assert!(err.contains("s.rhai:3:"), "{err}");
    let good = script.replace("let x = ;\n", "");
    let path = dir.write("good.rhai", &good);
    let out = run(&[path.to_str().unwrap(), "a"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("args [\"a\"]").is_some(), "{out}");

    let mut child = Command::new(rtrace_bin())
        .args(["-", "x", "y"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(good.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().any(|l| l == "args [\"x\", \"y\"]"), "{stdout}");
}

kernel_test!(usage_errors_exit_2_with_one_line);
fn usage_errors_exit_2_with_one_line() {
    let _g = setup();
    for args in [
        &["-f", "yaml", "-e", "1"][..],
        &["-d", "soon", "-e", "1"],
        &[],
        &["-p", "1", "-c", "true", "-e", "1"],
        &["-B", "sometimes", "-e", "1"],
        &["--no-such-option"],
        &["--ring-size", "1", "-e", "1"],
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(2), "rtrace {args:?}\n{out}");
        assert!(!out.stderr.contains("panicked") && !out.has_attach_line(), "{out}");
    }
    let out = run(&["-e", "probe(\"tracepoint:syscalls:sys_enter_nosuch\", |e| {});"]);
    assert_eq!(out.code, Some(1), "a script error is not a usage error\n{out}");
}

kernel_test!(version_info_and_verbose);
fn version_info_and_verbose() {
    let _g = setup();
    for flag in ["-V", "--version"] {
        let out = run(&[flag]);
        assert_eq!(out.code, Some(0), "{out}");
        assert_eq!(out.stdout.trim(), format!("rtrace {}", env!("CARGO_PKG_VERSION")), "{out}");
    }
    let out = run(&["--info"]);
    assert_eq!(out.code, Some(0), "{out}");
    for l in ["  tracepoint: yes", "  kernel BTF: yes", "  ring buffer: yes", "  uprobe/uretprobe: yes"] {
        assert!(out.line_index(l).is_some(), "--info lacks {l:?}\n{out}");
    }
    let kprobes = std::path::Path::new("/sys/bus/event_source/devices/kprobe/type").exists();
    let kp = out.lines().into_iter().find(|l| l.starts_with("  kprobe/kretprobe: ")).unwrap_or_default();
    assert_eq!(kp.ends_with(": yes"), kprobes, "{kp}");
    if !kprobes {
        assert!(kp.contains("CONFIG_KPROBES"), "why kprobes are missing: {kp}");
    }

    let src = r#"let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| { m[e.pid] = count(); });
probe("BEGIN", || { exit(); });"#;
    let out = run(&["-v", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let err = out.stderr_lines();
    let prog = err.iter().find(|l| l.contains("instructions")).unwrap_or_else(|| panic!("{out}"));
    assert!(prog.contains("processed by the verifier"), "{prog}");
    assert!(err.iter().any(|l| l.contains("map m: percpu_hash, key 8 B")), "{out}");
    assert!(err.iter().any(|l| l.ends_with("attached to tracepoint:syscalls:sys_enter_getppid")), "{out}");
}

kernel_test!(buffering_modes_keep_every_line);
fn buffering_modes_keep_every_line() {
    let _g = setup();
    let src = r#"probe("BEGIN", || { for i in 0..1000 { print(`line ${i}`); } exit(); });"#;
    for mode in ["none", "line", "full"] {
        let out = run(&["-B", mode, "-e", src]);
        assert_eq!(out.code, Some(0), "{out}");
        assert_eq!(out.lines().iter().filter(|l| l.starts_with("line ")).count(), 1000, "-B {mode}\n{out}");
    }
    // -B line: a line is out before the run ends.
    let src = r#"probe("BEGIN", || { print("first"); }); every("100ms", || {});"#;
    let mut t = Tracer::start(&["-B", "line", "-e", src]);
    t.wait_line("the first line while running", Duration::from_secs(10), |l| l == "first");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

kernel_test!(no_warnings_silences_warnings_only);
fn no_warnings_silences_warnings_only() {
    let _g = setup();
    // exit() from a slow callback while events are queued behind it: the
    // ones left are counted in a warning.
    let src = fill(
        r#"let n = 0;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ { n += 1; if n == 1 { print("slow"); sleep(0.5); exit(); } }
});"#,
        &[("ME", &tid())],
    );
    let run_flood = |extra: &[&str]| {
        // -B line: "slow" is out before the callback sleeps.
        let mut args = vec!["-B", "line"];
        args.extend(extra);
        args.extend(["-e", &src]);
        let mut t = Tracer::start(&args);
        t.wait_attached();
        getppid_n(1);
        t.wait_line("the slow callback", Duration::from_secs(10), |l| l == "slow");
        // Queued behind it, in a later batch.
        getppid_n(200);
        t.finish()
    };
    let loud = run_flood(&[]);
    assert!(loud.stderr.contains("not processed"), "{loud}");
    let quiet = run_flood(&["--no-warnings"]);
    assert_eq!(quiet.code, Some(0), "{quiet}");
    assert!(quiet.stderr.is_empty(), "{quiet}");
    let err = run(&["--no-warnings", "-e", "let x = ;"]);
    assert!(err.stderr.contains("error"), "errors still print\n{err}");
}

kernel_test!(typo_suggestions_name_only_close_probes);
fn typo_suggestions_name_only_close_probes() {
    let _g = setup();
    let out = run(&["-e", "probe(\"tracepoint:syscalls:sys_enter_nosuch\", |e| {});"]);
    let err = assert_clean_error(&out);
    assert!(!err.contains("did you mean"), "nothing is close to sys_enter_nosuch: {err}");
    let out = run(&["-e", "probe(\"tracepoint:syscalls:sys_enter_opnat\", |e| {});"]);
    let err = assert_clean_error(&out);
    assert!(err.contains("did you mean syscalls:sys_enter_openat"), "{err}");
}

kernel_test!(man_page_and_completions_are_built);
fn man_page_and_completions_are_built() {
    let _g = setup();
    let share = std::path::Path::new(rtrace_bin()).parent().unwrap().join("share");
    let man = std::fs::read_to_string(share.join("man/man1/rtrace.1")).expect("man page built");
    assert!(man.starts_with(".ie") || man.contains(".TH rtrace"), "{}", &man[..200.min(man.len())]);
    for opt in ["\\-\\-info", "\\-\\-dry\\-run", "\\-B", "RTRACE_STRLEN", "Exit status", "Examples"] {
        assert!(man.contains(opt), "the man page lacks {opt}");
    }
    for (file, needle) in [
        ("bash-completion/completions/rtrace", "--info"),
        ("zsh/site-functions/_rtrace", "--info"),
        ("fish/vendor_completions.d/rtrace.fish", "-l info"),
    ] {
        let text = std::fs::read_to_string(share.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains(needle), "{file} lacks {needle}");
    }
}

kernel_test!(bash_completes_option_values_tools_and_tool_options, needs: Program("bash"));
/// The bash completion, run as bash runs it (COMP_WORDS/COMP_CWORD, then
/// the registered function): option values, tool names where a script or
/// tool goes, and each tool's own options (from its -h) after its name.
fn bash_completes_option_values_tools_and_tool_options() {
    let _g = setup();
    let bin = std::path::Path::new(rtrace_bin()).parent().unwrap();
    let file = bin.join("share/bash-completion/completions/rtrace");
    let complete = |line: &[&str]| -> Vec<String> {
        let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
        let script = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; \
             f=$(complete -p rtrace | sed -E 's/.*-F ([^ ]+).*/\\1/'); $f rtrace \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            words.join(" ")
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
            .current_dir(bin)
            .output()
            .unwrap();
        assert!(out.status.success(), "{line:?}: {}", String::from_utf8_lossy(&out.stderr));
        let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        got.sort();
        got
    };
    assert_eq!(complete(&["rtrace", "-f", ""]), ["json", "text"]);
    assert_eq!(complete(&["rtrace", "-B", ""]), ["full", "line", "none"]);
    assert!(complete(&["rtrace", "opens"]).contains(&"opensnoop".to_string()));
    assert!(complete(&["rtrace", "-q", "exec"]).contains(&"execsnoop".to_string()));
    // A tool's options: every name its -h lists, short and long.
    let help = run(&["opensnoop", "-h"]).stdout;
    let got = complete(&["rtrace", "-d", "5s", "opensnoop", "-"]);
    for name in ["-x", "--failed", "-p", "--pid", "--help"] {
        assert!(help.contains(name) && got.contains(&name.to_string()), "{name} in {got:?}");
    }
    assert_eq!(complete(&["rtrace", "opensnoop", "--fai"]), ["--failed"]);
    // rtrace's own options before a tool is named.
    assert_eq!(complete(&["rtrace", "--ring-s"]), ["--ring-size"]);
}

/// `0x` and lower-case hex digits.
fn is_hex_pointer(text: &str) -> bool {
    text.strip_prefix("0x")
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
}

kernel_test!(pointer_keys_and_values_print_in_hex);
fn pointer_keys_and_values_print_in_hex() {
    let _g = setup();
    let src = fill(
        r#"let by_name = map();
let last = map();
let task = map();
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    if e.tid == __ME__ {
        by_name[e.args.filename] = count();
        last[7] = e.args.filename;
        task[e.curtask] = e.args.dfd;
    }
});
"#,
        &[("ME", &tid())],
    );
    for json in [false, true] {
        let mut args = vec!["-e", src.as_str()];
        if json {
            args.extend(["-f", "json"]);
        }
        let mut t = Tracer::start(&args);
        t.wait_line("attached", Duration::from_secs(30), |l| {
            l.starts_with("Attaching ") || l.contains("attached_probes")
        });
        let _ = std::fs::File::open("/nonexistent/rtrace-pointers");
        let out = t.interrupt_and_finish();
        assert_eq!(out.code, Some(0), "{out}");
        if !json {
            let keys = out.map_lines("by_name");
            assert_eq!(keys.len(), 1, "{out}");
            let key = keys[0].strip_prefix("@by_name[").and_then(|k| k.strip_suffix("]: 1")).unwrap_or("");
            assert!(is_hex_pointer(key), "a pointer key prints in hex\n{out}");
            let value = out.map_lines("last").first().and_then(|l| l.strip_prefix("@last[7]: ")).map(str::to_string);
            assert_eq!(value.as_deref(), Some(key), "the same pointer as a value\n{out}");
            let task = out.map_lines("task");
            // A kernel address: 16 hex digits from 0xff.. (where the kernel's
            // half starts depends on the kernel's paging and randomisation).
            let task = task.first().and_then(|l| l.strip_prefix("@task[0x")).unwrap_or("");
            assert!(
                task.starts_with("ff") && task.len() == 16 + "]: -100".len() && task.ends_with("]: -100"),
                "e.curtask is a kernel pointer; dfd stays a number\n{out}"
            );
        } else {
            let records = json_records(&out.stdout);
            let maps = json_of_type(&records, "map");
            let data = |name: &str| maps.iter().find_map(|r| r["data"].get(name).cloned()).unwrap_or_default();
            let by_name = data("@by_name");
            let key = by_name.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
            assert!(is_hex_pointer(&key), "{out}");
            assert_eq!(data("@last")["7"], serde_json::Value::String(key), "a pointer value is a hex string\n{out}");
        }
    }
}
