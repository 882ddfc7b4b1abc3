//! Bad input on a real kernel: each is rejected with a non-zero exit, one
//! line on stderr that says what and where, no panic, nothing attached; and a
//! run right after it still attaches and counts.

use crate::common::*;

/// Run the script in file `name` (so positions name the file), expecting a clean error.
fn reject_file(name: &str, src: &str, env: &[(&str, &str)]) -> (String, String) {
    let dir = TempDir::new();
    let path = dir.write(name, src);
    let path = path.to_str().unwrap().to_string();
    let out = run_env(&[&path], env);
    let line = assert_clean_error(&out);
    (line, path)
}

kernel_test!(syntax_error_names_line_and_column);
fn syntax_error_names_line_and_column() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    c = count();\n    let x = ;\n});\n";
    let (line, path) = reject_file("syntax.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:13")), "{line}");
    assert!(line.contains("syntax error"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(unknown_probe_type);
fn unknown_probe_type() {
    let _g = setup();
    let src = "let c = map();\n\nprobe(\"tracepont:syscalls:sys_enter_read\", |e| { c = count(); });\n";
    let (line, path) = reject_file("ptype.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("unknown probe type 'tracepont'"), "{line}");
    assert!(line.contains("tracepoint"), "the known types are listed: {line}");
    assert_tracing_still_works();
}

kernel_test!(unknown_tracepoint_suggests_close_names);
fn unknown_tracepoint_suggests_close_names() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_opennat\", |e| { c = count(); });\n";
    let (line, path) = reject_file("tp.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:2:")), "{line}");
    assert!(line.contains("sys_enter_opennat"), "{line}");
    assert!(line.contains("did you mean") && line.contains("syscalls:sys_enter_openat"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(unknown_args_field_lists_the_real_fields);
fn unknown_args_field_lists_the_real_fields() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = sum(e.args.cnt);\n});\n";
    let (line, path) = reject_file("field.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:20")), "{line}");
    assert!(line.contains("`cnt`"), "{line}");
    for f in ["fd", "buf", "count"] {
        assert!(line.contains(f), "field {f} not listed: {line}");
    }
    assert_tracing_still_works();
}

kernel_test!(kernel_statement_using_a_userspace_value);
fn kernel_statement_using_a_userspace_value() {
    let _g = setup();
    // Line 3 computes a string in userspace; line 4 wants it as a kernel map
    // key. The error names both places.
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    let s = `pid ${e.pid}`;\n    c[s] = count();\n});\n";
    let (line, path) = reject_file("split.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")), "{line}");
    assert!(line.contains("userspace"), "{line}");
    assert!(line.contains("3:5") || line.contains("3:13"), "the userspace computation on line 3 must be named: {line}");
    assert_tracing_still_works();
}

kernel_test!(system_without_unsafe_is_rejected_before_attaching);
fn system_without_unsafe_is_rejected_before_attaching() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| { c = count(); });\nprobe(\"BEGIN\", || { system(\"true\"); });\n";
    let (line, path) = reject_file("unsafe.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("--unsafe"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(division_by_constant_zero);
fn division_by_constant_zero() {
    let _g = setup();
    let src =
        "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = sum(e.args.count / 0);\n});\n";
    let (line, path) = reject_file("div.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:26")), "{line}");
    assert!(line.contains("division by zero"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(modulo_by_constant_zero_in_a_local);
fn modulo_by_constant_zero_in_a_local() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    let x = e.args.count;\n    x %= 0;\n    c = sum(x);\n});\n";
    let (line, path) = reject_file("mod.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")), "{line}");
    assert!(line.contains("division by zero"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(too_many_probes);
fn too_many_probes() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_*\", |e| { c = count(); });\n";
    let (line, path) = reject_file("many.rhai", src, &[("RTRACE_MAX_PROBES", "5")]);
    assert!(line.contains(&format!("{path}:2:")), "{line}");
    assert!(line.contains("limit of 5") && line.contains("RTRACE_MAX_PROBES"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(probe_limit_is_not_hit_below_it);
fn probe_limit_is_not_hit_below_it() {
    let _g = setup();
    // Two attach points under a limit of 2 are fine.
    let me = tid();
    let src = fill(
        r#"
let me = __ME__;
let c = map();
probe("tracepoint:syscalls:sys_enter_getppid,tracepoint:syscalls:sys_enter_getpid", |e| {
    if e.tid == me { c = count(); }
});
"#,
        &[("ME", &me)],
    );
    let mut t = Tracer::start_env(&["-e", &src], &[("RTRACE_MAX_PROBES", "2")]);
    assert_eq!(t.wait_attached(), 2);
    getppid_n(1);
    getpid_n(1);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 2"], "{out}");
}

kernel_test!(conflicting_aggregations_on_one_map);
fn conflicting_aggregations_on_one_map() {
    let _g = setup();
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = count();\n    c = hist(e.args.count);\n});\n";
    let (line, path) = reject_file("agg.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")) || line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("one aggregation per map"), "{line}");
    assert_tracing_still_works();
}

kernel_test!(unreadable_script_file);
fn unreadable_script_file() {
    let _g = setup();
    let out = run(&["/nonexistent/rtt_no_such_script.rhai"]);
    let line = assert_clean_error(&out);
    assert!(line.contains("/nonexistent/rtt_no_such_script.rhai"), "{line}");
}

kernel_test!(runaway_recursion_names_the_closure_in_begin_timers_and_probes);
fn runaway_recursion_names_the_closure_in_begin_timers_and_probes() {
    let _g = setup();
    let me = pid();
    for (closure, at) in [
        ("probe(\"BEGIN\", || { f(1); });", "2:1"),
        ("every(\"10ms\", || { f(1); });", "2:1"),
        (&*format!("probe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {{ if e.pid == {me} {{ f(1); }} }});"), "2:"),
    ] {
        let src = format!("fn f(x) {{ f(x + 1) }}\n{closure}\n");
        let mut t = Tracer::start(&["-e", &src]);
        t.wait_attached();
        getppid_n(1);
        let out = t.finish();
        assert_eq!(out.code, Some(1), "{out}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "{out}");
        assert!(lines[0].starts_with(&format!("-e:{at}")) && lines[0].contains("Stack overflow"), "{out}");
        assert!(!lines[0].contains(":?:"), "{out}");
    }
}

kernel_test!(a_runtime_error_starts_a_line_of_its_own);
fn a_runtime_error_starts_a_line_of_its_own() {
    let _g = setup();
    // stdout and stderr on one pipe, as on a terminal.
    let src = r#"probe("BEGIN", || { printf("partial"); let x = [1]; print(x[5]); });"#;
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("'{}' -q -e '{src}' 2>&1", rtrace_bin())])
        .output()
        .expect("sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0], "partial", "{text}");
    assert!(lines[1].starts_with("-e:1:") && lines[1].contains("out of bounds"), "{text}");
    // Apart, stdout keeps exactly what the script printed.
    let apart = std::process::Command::new(rtrace_bin()).args(["-q", "-e", src]).output().expect("rtrace");
    assert_eq!(String::from_utf8_lossy(&apart.stdout), "partial", "{apart:?}");
}

kernel_test!(two_maps_of_one_name_and_different_shapes_are_an_error_at_the_second);
fn two_maps_of_one_name_and_different_shapes_are_an_error_at_the_second() {
    let _g = setup();
    let src = "let a = map(\"x\");\nlet b = map(\"x\");\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    a[e.pid] = count();\n    b = sum(1);\n});\n";
    let (line, path) = reject_file("names.rhai", src, &[]);
    assert!(line.starts_with(&format!("{path}:2:9: error:")), "{line}");
    assert!(line.contains("'x'") && line.contains("another name"), "{line}");
    // Same shape: one name is fine (a module imported twice declares its map twice).
    let same = src.replace("b = sum(1)", "b[e.pid] = count()");
    let out = run(&["-q", "--dry-run", "-e", &same]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_tracing_still_works();
}

kernel_test!(shifts_by_a_variable_agree_between_kernel_and_userspace);
fn shifts_by_a_variable_agree_between_kernel_and_userspace() {
    let _g = setup();
    // (value, amount): in range, 64 and beyond, negative (the other way).
    let cases: [(i64, i64); 8] = [(1, 3), (1, 64), (1, 100), (-8, 70), (5, -1), (16, -2), (1, -64), (-1, 63)];
    let mut body = String::new();
    for (i, (x, y)) in cases.iter().enumerate() {
        // `z` is 0, unknown to the compiler: the amount is a run-time value.
        body += &format!("l[{i}] = {x} << ({y} + z); r[{i}] = {x} >> ({y} + z);\n");
    }
    let src = format!(
        "let l = map();\nlet r = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {{\n    if e.pid == {} {{ let z = e.pid - e.pid;\n{body} }}\n}});\nprobe(\"END\", || {{\n    for i in 0..{} {{ printf(\"%d %d %d %d\\n\", l[i], r[i], K[i][0] << K[i][1], K[i][0] >> K[i][1]); }}\n}});\n",
        pid(),
        cases.len()
    );
    let consts: Vec<String> = cases.iter().map(|(x, y)| format!("[{x}, {y}]")).collect();
    let src = format!("const K = [{}];\n{src}", consts.join(", "));
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(1);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let rows: Vec<&str> = out.lines().into_iter().filter(|l| l.split(' ').count() == 4).collect();
    assert_eq!(rows.len(), cases.len(), "{out}");
    for ((x, y), row) in cases.iter().zip(rows) {
        let v: Vec<i64> = row.split(' ').map(|n| n.parse().unwrap()).collect();
        assert_eq!(v[0], v[2], "{x} << {y}: kernel {} vs userspace {}\n{out}", v[0], v[2]);
        assert_eq!(v[1], v[3], "{x} >> {y}: kernel {} vs userspace {}\n{out}", v[1], v[3]);
    }
    // Rhai's rule, spelled out: 64 or more shifts everything out.
    assert!(out.lines().iter().filter(|l| l.starts_with("0 ")).count() >= 3, "{out}");
}

/// A habit from bpftrace or another language, and what the one-line error
/// must say: (what, arguments, the place, words the line must contain).
const HINTS: &[(&str, &[&str], &str, &[&str])] = &[
    (
        "a whole bpftrace program",
        &["-e", "BEGIN { printf(\"hi\\n\"); }"],
        "-e:1:",
        &["bpftrace program", "probe(", "docs/from-bpftrace.md"],
    ),
    (
        "a bpftrace probe with a filter",
        &["-e", "tracepoint:syscalls:sys_enter_openat /pid == 1/ { @[comm] = count(); }"],
        "-e:1:",
        &["bpftrace program", "let m = map();"],
    ),
    (
        "bare comm",
        &["-e", "probe(\"tracepoint:syscalls:sys_enter_openat\", |e| { print(comm); });"],
        "-e:1:",
        &["`e.comm`"],
    ),
    (
        "bare pid",
        &["-e", "probe(\"tracepoint:syscalls:sys_enter_openat\", |e| { print(pid); });"],
        "-e:1:",
        &["`e.pid`"],
    ),
    ("?:", &["-e", "probe(\"BEGIN\", || { let x = 1 > 0 ? 1 : 2; });"], "-e:1:", &["if c { a } else { b }"]),
    ("++", &["-e", "probe(\"BEGIN\", || { let x = 1; x++; });"], "-e:1:", &["x += 1"]),
    ("~", &["-e", "probe(\"BEGIN\", || { let x = ~1; });"], "-e:1:", &["x ^ -1"]),
    (
        "a typo at the top level",
        &["-e", "prnt(\"x\");\nprobe(\"BEGIN\", || {});"],
        "-e:1:1:",
        &["unknown function `prnt`", "`print`"],
    ),
    (
        "a map made in a probe",
        &["-e", "probe(\"tracepoint:syscalls:sys_enter_openat\", |e| { let m = map(); });"],
        "-e:1:",
        &["declare maps at the top level"],
    ),
    (
        "a map written at the top level",
        &["-e", "let hits = map();\nhits[1] = 2;\nprobe(\"BEGIN\", || {});"],
        "-e:2:",
        &["map 'hits'", "read and write maps in"],
    ),
    (
        "usym without a pid",
        &["-e", "probe(\"tracepoint:syscalls:sys_enter_openat\", |e| { print(usym(e.args.filename)); });"],
        "-e:1:",
        &["usym(addr, e.pid)"],
    ),
    ("an option typo", &["--hepl"], "rtrace:", &["similar argument", "'--help'"]),
    ("another option typo", &["--dryrun", "-e", "x"], "rtrace:", &["'--dry-run'"]),
    (
        "a script file and -e",
        &["examples/count_events.rhai", "-e", "probe(\"BEGIN\", || {});"],
        "rtrace:",
        &["both a script file", "-e"],
    ),
];

kernel_test!(errors_name_the_form_to_write);
/// Each habit in [`HINTS`] is refused before anything attaches with one
/// line at its place that names the rtrace form to write.
fn errors_name_the_form_to_write() {
    let _g = setup();
    each_case(
        HINTS,
        |c| c.0,
        |(what, args, place, words)| {
            let line = assert_clean_error(&run(args));
            assert!(line.starts_with(place), "{what}: not at {place}: {line}");
            for w in words.iter() {
                assert!(line.contains(w), "{what}: no `{w}` in: {line}");
            }
        },
    );
}

kernel_test!(a_directory_named_like_a_tool_does_not_hide_it);
/// `rtrace opensnoop` in a directory that has a subdirectory `opensnoop`:
/// a directory can't be a script, so the tool runs.
fn a_directory_named_like_a_tool_does_not_hide_it() {
    let _g = setup();
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("opensnoop")).unwrap();
    let out = std::process::Command::new(rtrace_bin())
        .args(["-d", "200ms", "opensnoop", "-h"])
        .current_dir(dir.join(""))
        .output()
        .expect("rtrace");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("is a directory"), "{text}");
    assert!(text.to_lowercase().contains("usage"), "the tool's help: {text}");
}
