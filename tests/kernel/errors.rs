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

#[test]
fn syntax_error_names_line_and_column() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    c = count();\n    let x = ;\n});\n";
    let (line, path) = reject_file("syntax.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:13")), "{line}");
    assert!(line.contains("syntax error"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn unknown_probe_type() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\n\nprobe(\"tracepont:syscalls:sys_enter_read\", |e| { c = count(); });\n";
    let (line, path) = reject_file("ptype.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("unknown probe type 'tracepont'"), "{line}");
    assert!(line.contains("tracepoint"), "the known types are listed: {line}");
    assert_tracing_still_works();
}

#[test]
fn unknown_tracepoint_suggests_close_names() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_opennat\", |e| { c = count(); });\n";
    let (line, path) = reject_file("tp.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:2:")), "{line}");
    assert!(line.contains("sys_enter_opennat"), "{line}");
    assert!(line.contains("did you mean") && line.contains("syscalls:sys_enter_openat"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn unknown_args_field_lists_the_real_fields() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = sum(e.args.cnt);\n});\n";
    let (line, path) = reject_file("field.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:20")), "{line}");
    assert!(line.contains("`cnt`"), "{line}");
    for f in ["fd", "buf", "count"] {
        assert!(line.contains(f), "field {f} not listed: {line}");
    }
    assert_tracing_still_works();
}

#[test]
fn kernel_statement_using_a_userspace_value() {
    let Some(_g) = setup() else { return };
    // Line 3 computes a string in userspace; line 4 wants it as a kernel map
    // key. The error names both places.
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    let s = `pid ${e.pid}`;\n    c[s] = count();\n});\n";
    let (line, path) = reject_file("split.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")), "{line}");
    assert!(line.contains("userspace"), "{line}");
    assert!(line.contains("3:5") || line.contains("3:13"), "the userspace computation on line 3 must be named: {line}");
    assert_tracing_still_works();
}

#[test]
fn system_without_unsafe_is_rejected_before_attaching() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| { c = count(); });\nprobe(\"BEGIN\", || { system(\"true\"); });\n";
    let (line, path) = reject_file("unsafe.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("--unsafe"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn unbounded_loop_in_a_probe() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {\n    c = count();\n    while true { }\n});\n";
    let (line, path) = reject_file("loop.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:5")), "{line}");
    assert!(line.contains("for i in 0..N"), "the error points at the bounded form: {line}");
    assert_tracing_still_works();
}

#[test]
fn division_by_constant_zero() {
    let Some(_g) = setup() else { return };
    let src =
        "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = sum(e.args.count / 0);\n});\n";
    let (line, path) = reject_file("div.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:3:26")), "{line}");
    assert!(line.contains("division by zero"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn modulo_by_constant_zero_in_a_local() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    let x = e.args.count;\n    x %= 0;\n    c = sum(x);\n});\n";
    let (line, path) = reject_file("mod.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")), "{line}");
    assert!(line.contains("division by zero"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn too_many_probes() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_*\", |e| { c = count(); });\n";
    let (line, path) = reject_file("many.rhai", src, &[("RTRACE_MAX_PROBES", "5")]);
    assert!(line.contains(&format!("{path}:2:")), "{line}");
    assert!(line.contains("limit of 5") && line.contains("RTRACE_MAX_PROBES"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn probe_limit_is_not_hit_below_it() {
    let Some(_g) = setup() else { return };
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

#[test]
fn conflicting_aggregations_on_one_map() {
    let Some(_g) = setup() else { return };
    let src = "let c = map();\nprobe(\"tracepoint:syscalls:sys_enter_read\", |e| {\n    c = count();\n    c = hist(e.args.count);\n});\n";
    let (line, path) = reject_file("agg.rhai", src, &[]);
    assert!(line.contains(&format!("{path}:4:")) || line.contains(&format!("{path}:3:")), "{line}");
    assert!(line.contains("one aggregation per map"), "{line}");
    assert_tracing_still_works();
}

#[test]
fn unreadable_script_file() {
    let Some(_g) = setup() else { return };
    let out = run(&["/nonexistent/rtt_no_such_script.rhai"]);
    let line = assert_clean_error(&out);
    assert!(line.contains("/nonexistent/rtt_no_such_script.rhai"), "{line}");
}
