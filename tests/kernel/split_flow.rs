//! The split follows data flow, written from docs/split.md ("The rules, as
//! data flow"): each case runs split and with `--no-split` (the reference)
//! on the same lseek calls, and checks the output against what the closure
//! means as plain Rhai.

use std::time::Duration;

use crate::common::*;

/// lseek(-1, offset, whence) for each pair: the events the scripts see.
const CALLS: &[(i64, i32)] = &[(5, 1), (0, 0), (12, 2)];

/// Run `body` as the closure of a sys_enter_lseek probe on this thread's
/// calls, ended by a getpgid call; `maps` are declared first. Returns the
/// outcome, split or not.
fn run_closure(maps: &[&str], body: &str, no_split: bool, extra: &[&str]) -> Outcome {
    let mut src: String = maps.iter().map(|m| format!("let {m} = map();\n")).collect();
    src += "fn whence_of(ev) { ev.args.whence }\n";
    src += &format!(
        "probe(\"tracepoint:syscalls:sys_enter_lseek\", |e| {{\n    if e.tid == {} {{\n{body}\n    }}\n}});\n",
        tid()
    );
    src +=
        &format!("probe(\"tracepoint:syscalls:sys_enter_getpgid\", |e| {{ if e.tid == {} {{ exit(); }} }});\n", tid());
    let mut args: Vec<&str> = extra.to_vec();
    if no_split {
        args.push("--no-split");
    }
    args.extend(["-e", &src]);
    let mut t = Tracer::start(&args);
    t.wait_attached();
    for (off, whence) in CALLS {
        unsafe { libc::lseek(-1, *off, *whence) };
    }
    t.finish_by_getpgid(Duration::from_secs(30))
}

/// Both ways, the same stdout; that stdout.
fn both(maps: &[&str], body: &str) -> Outcome {
    let split = run_closure(maps, body, false, &[]);
    let whole = run_closure(maps, body, true, &[]);
    assert_eq!(split.code, Some(0), "{split}");
    assert_eq!(split.stdout, whole.stdout, "split and --no-split differ\nsplit:\n{split}\nwhole:\n{whole}");
    split
}

fn printed(out: &Outcome) -> Vec<String> {
    out.lines().into_iter().filter(|l| l.starts_with("> ")).map(str::to_string).collect()
}

kernel_test!(a_variable_changed_in_userspace_keeps_its_value_in_later_statements);
fn a_variable_changed_in_userspace_keeps_its_value_in_later_statements() {
    let _g = setup();
    let out = both(
        &[],
        r#"        let name = "lseek";
        name.make_upper();
        let n = e.args.offset;
        n += 0;
        let s = "x";
        s += "!";
        if n > 1 { print(`> ${name} ${n} ${s}`); }"#,
    );
    assert_eq!(printed(&out), vec!["> LSEEK 5 x!", "> LSEEK 12 x!"], "{out}");
}

kernel_test!(a_return_decided_in_userspace_guards_the_kernel_statements_after_it);
fn a_return_decided_in_userspace_guards_the_kernel_statements_after_it() {
    let _g = setup();
    let out = both(
        &["seen", "kept"],
        r#"        seen[e.args.offset] = 1;
        let label = `w${e.args.whence}`;
        if label == "w0" { return; }
        kept[e.args.offset] = 1;"#,
    );
    assert_eq!(out.map_lines("kept"), vec!["@kept[5]: 1", "@kept[12]: 1"], "{out}");
    assert_eq!(out.map_lines("seen").len(), 3, "{out}");
}

kernel_test!(a_map_read_in_userspace_sees_the_map_as_at_that_point_of_the_event);
fn a_map_read_in_userspace_sees_the_map_as_at_that_point_of_the_event() {
    let _g = setup();
    let out = both(
        &["start"],
        r#"        start[e.tid] = e.args.offset + 100;
        printf("> %d\n", start[e.tid]);
        start.remove(e.tid);"#,
    );
    assert_eq!(printed(&out), vec!["> 105", "> 100", "> 112"], "{out}");
}

kernel_test!(the_event_escapes_whole_through_aliases_closures_and_functions);
fn the_event_escapes_whole_through_aliases_closures_and_functions() {
    let _g = setup();
    let out = both(
        &[],
        r#"        let ev = e;
        let ys = [1, 2].map(|x| x + e.args.whence);
        let f = Fn("whence_of");
        print(`> ${ev.args.offset} ${ys[1]} ${f.call(e)} ${whence_of(ev)} ${e.args["whence"]}`);"#,
    );
    assert_eq!(printed(&out), vec!["> 5 3 1 1 1", "> 0 2 0 0 0", "> 12 4 2 2 2"], "{out}");
}

kernel_test!(the_time_of_an_event_is_read_once);
fn the_time_of_an_event_is_read_once() {
    let _g = setup();
    let out = both(
        &["t"],
        r#"        let a = e.nsecs;
        t[e.args.offset] = e.nsecs - a;
        print(`> ${a == e.nsecs} ${t[e.args.offset]} ${e.elapsed - e.elapsed}`);"#,
    );
    assert_eq!(printed(&out), vec!["> true 0 0"; 3], "{out}");
}

kernel_test!(a_userspace_store_with_a_string_key_types_the_map);
fn a_userspace_store_with_a_string_key_types_the_map() {
    let _g = setup();
    let out = both(
        &["sizes"],
        r#"        let n = `${e.args.offset}`.len();
        sizes[e.comm] = n;"#,
    );
    assert_eq!(out.map_lines("sizes"), vec![format!("@sizes[{}]: 2", comm())], "{out}");
}

kernel_test!(a_division_by_zero_in_a_kernel_statement_is_a_located_runtime_error);
fn a_division_by_zero_in_a_kernel_statement_is_a_located_runtime_error() {
    let _g = setup();
    for no_split in [false, true] {
        let out = run_closure(&["q"], "        q[e.args.offset] = 100 / e.args.whence;", no_split, &["--keep-going"]);
        // (The script's own exit() decides the exit status here.)
        let line = out.stderr_lines().into_iter().find(|l| l.contains("error:")).unwrap_or_default().to_string();
        assert!(line.starts_with("-e:5:") && line.contains("Division by zero"), "no_split={no_split}: {line}\n{out}");
        // The event stopped there; the others were stored.
        assert_eq!(out.map_lines("q"), vec!["@q[12]: 50", "@q[5]: 100"], "{out}");
    }
}

kernel_test!(an_aggregation_that_depends_on_userspace_is_refused_before_attaching);
fn an_aggregation_that_depends_on_userspace_is_refused_before_attaching() {
    let _g = setup();
    let src = r#"let m = map();
probe("tracepoint:syscalls:sys_enter_lseek", |e| {
    let name = e.comm;
    name.make_upper();
    m[name] = count();
});"#;
    let out = run(&["-e", src]);
    let err = assert_clean_error(&out);
    assert!(err.starts_with("-e:5:7: error:") && err.contains("`name` is computed in userspace at 4:5"), "{err}");
}

kernel_test!(top_level_constants_are_global_in_functions_every_callback_calls);
fn top_level_constants_are_global_in_functions_every_callback_calls() {
    let _g = setup();
    // docs/language.md: a top-level `const` is `global::NAME` in script
    // functions, whichever callback calls them.
    let src = format!(
        r#"const LIMIT = 3;
const TAG = "lseek";
fn limit() {{ global::LIMIT + 1 }}
fn tag() {{ global::TAG + "!" }}
probe("BEGIN", || {{ print(`begin ${{limit()}} ${{tag()}}`); }});
probe("tracepoint:syscalls:sys_enter_lseek", |e| {{
    if e.tid == {tid} {{ let s = tag(); s += "?"; print(`event ${{e.args.offset + limit()}} ${{s}}`); }}
}});
probe("tracepoint:syscalls:sys_enter_getpgid", |e| {{ if e.tid == {tid} {{ exit(); }} }});
probe("END", || {{ print(`end ${{limit()}} ${{global::TAG}}`); }});
"#,
        tid = tid()
    );
    for no_split in [false, true] {
        let mut args = vec!["-e", &src];
        if no_split {
            args.insert(0, "--no-split");
        }
        let mut t = Tracer::start(&args);
        t.wait_attached();
        unsafe { libc::lseek(-1, 7, 0) };
        let out = t.finish_by_getpgid(Duration::from_secs(30));
        assert_eq!(out.code, Some(0), "{out}");
        let lines: Vec<&str> = out.lines().into_iter().filter(|l| !l.starts_with("Attaching")).collect();
        assert_eq!(lines, ["begin 4 lseek!", "event 11 lseek!?", "end 4 lseek"], "--no-split {no_split}\n{out}");
    }
}
