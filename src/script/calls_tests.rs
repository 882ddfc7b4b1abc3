//! Tests of the check before attaching (calls.rs): no false errors on what
//! rtrace ships, and one-line located errors with hints on mistakes.

use std::path::PathBuf;

use crate::script::Session;

/// The error of loading `src` and running its top level (which ends in the check).
fn error(src: &str) -> Option<String> {
    let mut s = match Session::new("t.rhai", src, &[]) {
        Ok(s) => s,
        Err(e) => return Some(format!("{e:#}")),
    };
    s.run_top_level().err().map(|e| format!("{e:#}"))
}

fn refused(src: &str, want: &[&str]) {
    let e = error(src).unwrap_or_else(|| panic!("accepted: {src}"));
    for w in want {
        assert!(e.contains(w), "{src}\n  error: {e}\n  wanted: {w}");
    }
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn what_rtrace_scripts_write_passes() {
    let ok = [
        // Kernel built-ins, map methods, event methods, `in`.
        r#"let m = map(); let q = map(); let l = map();
           probe("t:syscalls:sys_enter_read", |e| {
               m[e.comm] = count(); l[1] = lhist(e.args.count, 0, 100, 10); q[2] = quantiles(e.args.count, "us");
               m[e.pid] = hist(e.args.count); m[e.tid] = stats(1); m[0] = sum(1); m[1] = avg(1); m[2] = min(1); m[3] = max(1);
               if e.pid in m { m.remove(e.pid); }
               let s = e.kstack(3); let k = ksym(e.arg0); emit(1); print(m); clear(m); zero(m); m.clear();
               printf("%s %d %s\n", str(e.args.buf, 16), e.args.count, e.ustack);
               let b = buf(e.args.buf, 4); printf("%r %rx %rh|%-8rh|\n", b, b, b, b);
               exit(1);
           }).on_event(|r| print(r));"#,
        // Closures, function pointers in variables and properties, script functions as methods.
        r#"fn double(x) { x * 2 } fn twice() { this * 2 }
           let f = |x| x + 1; let g = Fn("double"); let obj = #{ run: |x| x };
           probe("BEGIN", || { print(f.call(1)); print(g.call(2)); print(obj.run(3)); print(5.twice()); print(double(4));
               let h = f; print(h(1)); [1, 2].filter(|x| x > 1).map(|x| x.to_string()); exit(); });"#,
        // Modules, formatting with many values, sprintf's array form, system without values.
        r#"import "fmt" as f;
           probe("END", || {
               print(f::bytes(1536)); print(fmt::ns(1500));
               printf("%d %d %d %d %d %d %d %d %d %d\n", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
               let s = sprintf("%s-%s", ["a", "b"]); let t = sprintf("%d", 1); eprintf("%s\n", [s]);
               if false { system("date +%s"); system("kill -%d %d", 9, 1); }
               printf("%*d|%-*s|%.*f\n", 5, 1, 3, "x", 2, 1.5);
           });"#,
        // Timers, assert, check, fail, Rhai's own library.
        r#"every("1s", || { let a = [3, 1]; a.sort(); print(a.len()); print("x".to_upper()); print(type_of(a)); });
           after("2s", || { check("n", true, "ok"); assert(true, "x"); if false { fail("no"); } exit(); });"#,
        // Userspace statements inside a probe (the split runs them in
        // userspace): loops, object maps, closures, switch, try/throw, `e`
        // as a value and its methods, `this`, kptr members, string searches.
        r#"fn show(ev) { ev.pid } fn bump() { this += 1; } let seen = #{}; let total = 0;
           probe("t:syscalls:sys_enter_getppid", |e| {
               for p in "a,b".split(",") { if p == "b" { continue; } }
               let i = 0; while i < 3 { i += 1; if i == 2 { break; } } do { i -= 1; } while i > 0; loop { break; }
               let o = #{ pid: e.pid }; o.extra = [1]; let f = |x| x + o.pid; let g = Fn("show");
               let v = f.call(1) + g.call(e); let n = 1; n.bump();
               switch e.pid { 1 => print("one"), _ => {} }
               try { throw "x"; } catch (err) { print(`${err}`); }
               seen[e.comm] = show(e); total += 1; print(e.keys().len()); print(o.to_json());
               print(kptr(e.pid, "struct task_struct").pid); print(strncmp(e.comm, "a", 1)); print(strcontains(e.comm, "a"));
           });"#,
        // A probe source string.
        r#"let n = 3; probe("t:syscalls:sys_enter_read", "|e| { if e.pid == n { printf(\"%d\\n\", e.pid); } }");"#,
    ];
    for src in ok {
        assert_eq!(error(src), None, "{src}");
    }
}

#[test]
fn unknown_functions_are_refused_with_close_names() {
    refused(
        r#"probe("t:syscalls:sys_enter_read", |e| { prnt(e.pid); });"#,
        &["t.rhai:1:42: error:", "unknown function `prnt`", "`print`"],
    );
    refused(
        "probe(\"END\", || {\n  let x = quantile(3);\n});",
        &["t.rhai:2:11:", "unknown function `quantile`", "`quantiles`"],
    );
    refused(r#"fn helper(a) { a } probe("END", || { helpr(1); });"#, &["unknown function `helpr`", "`helper`"]);
    refused(
        r#"probe("END", || { let a = "abc"; print(a.to_uper()); });"#,
        &["unknown method `.to_uper()`", "`to_upper`"],
    );
    refused(r#"probe("END", || { frobnicate(); });"#, &["unknown function `frobnicate`"]);
    refused(r#"probe("END", || { print(fmt::byts(1)); });"#, &["module `fmt` has no function `byts`", "`fmt::bytes`"]);
    refused(
        r#"import "fmt" as f; probe("END", || { print(f::nss(1)); });"#,
        &["module `fmt` has no function `nss`", "`fmt::ns`"],
    );
    refused(r#"probe("END", || { let f = Fn("helpr"); });"#, &["Fn(\"helpr\") names no function"]);
}

#[test]
fn wrong_argument_counts_are_refused() {
    refused(
        r#"let m = map(); probe("t:syscalls:sys_enter_read", |e| { m[1] = hist(1, 2, 3); });"#,
        &["`hist` takes 1 or 2 arguments, 3 given"],
    );
    refused(
        r#"let m = map(); probe("t:syscalls:sys_enter_read", |e| { m[1] = lhist(1); });"#,
        &["`lhist` takes", "1 given"],
    );
    refused(r#"let m = map(); probe("END", || { m.remove(); });"#, &["`.remove()` takes 1 argument, 0 given"]);
    refused(r#"fn f(a, b) { a } probe("END", || { f(1); });"#, &["`f` takes 2 arguments, 1 given"]);
    refused(r#"probe("END", || { print("%d", 1); });"#, &["`print` takes 1 argument, 2 given", "printf"]);
    let many = vec!["1"; 70].join(", ");
    refused(&format!(r#"probe("END", || {{ printf("", {many}); }});"#), &["at most 64 values, 70 given"]);
}

#[test]
fn literal_formats_are_checked_against_their_values() {
    refused(
        r#"probe("t:syscalls:sys_enter_read", |e| { printf("%d %s\n", e.pid); });"#,
        &["printf: the format \"%d %s\\n\" takes 2 values, 1 given"],
    );
    refused(
        r#"probe("END", || { let s = sprintf("%d", 1, 2); });"#,
        &["sprintf: the format", "takes 1 value, 2 given"],
    );
    refused(r#"probe("END", || { printf("%k\n", 1); });"#, &["unknown conversion %k"]);
    // `%rx` and `%rh` are one conversion each (the `x`/`h` is no text).
    refused(
        r#"probe("t:syscalls:sys_enter_read", |e| { let b = buf(e.args.buf, 4); printf("%rx %rh\n", b, b, b); });"#,
        &["printf: the format \"%rx %rh\\n\" takes 2 values, 3 given"],
    );
    refused(r#"probe("END", || { printf("%*d\n", 1); });"#, &["takes 2 values, 1 given"]);
    refused(r#"probe("END", || { system("kill %d %d", 1); });"#, &["system: the format", "takes 2 values, 1 given"]);
    // Through a variable only ever bound to strings, as written directly.
    for value in ["e.comm", "\"x\"", "`${e.pid}`"] {
        for (bind, print) in
            [("let v = VALUE;", "printf(\"%d\\n\", v)"), ("let v = e.comm; v = VALUE;", "printf(\"%s %x\\n\", v, v)")]
        {
            let src =
                format!("probe(\"t:syscalls:sys_enter_read\", |e| {{ {} {}; }});", bind.replace("VALUE", value), print);
            refused(&src, &["printf: the format", "as a number, but it is a string (use %s)"]);
        }
    }
    // A variable that may hold a number is left to run time.
    for src in [
        r#"probe("t:syscalls:sys_enter_read", |e| { let v = e.comm; if e.pid > 1 { v = e.pid.to_string(); } printf("%s\n", v); });"#,
        r#"probe("t:syscalls:sys_enter_read", |e| { let v = if e.pid > 1 { "a" } else { 1 }; printf("%d\n", v); });"#,
        r#"fn f(v) { printf("%d\n", v) } probe("END", || { let v = "a"; f(1); });"#,
    ] {
        assert_eq!(error(src), None, "{src}");
    }
}

#[test]
fn bpftrace_habits_get_the_rtrace_form() {
    refused(r#"let m = map(); probe("END", || { delete(m[1]); });"#, &["unknown function `delete`", "`m.remove(key)`"]);
    refused(r#"probe("t:syscalls:sys_enter_read", |e| { print(comm()); });"#, &["`e.comm`"]);
    refused(r#"let m = map(); probe("END", || { printf("%d\n", m); });"#, &["`m` is a map", "`m[key]`", "`m[()]`"]);
    refused("probe(\"END\", || {\n  @x = count();\n});", &["t.rhai:2:", "syntax error", "maps are variables"]);
    refused(r#"probe("END", || { print(strftime("%H", 1)); });"#, &["bpftrace's strftime()", "time(fmt)"]);
}

#[test]
fn probe_source_strings_are_checked_where_they_are_written() {
    // A literal: at its place in the script.
    refused(
        "let x = 1;\nprobe(\"t:syscalls:sys_enter_read\", \"|e| { prnt(e.pid); }\");",
        &["t.rhai:2:43:", "unknown function `prnt`"],
    );
    refused(
        "probe(\"t:syscalls:sys_enter_read\",\n  `|e| {\n    let n = e.pid;\n    prnt(n);\n  }`);",
        &["t.rhai:4:5:", "unknown function `prnt`"],
    );
    // Built at run time, or with escapes: at the probe() call, with the place inside.
    refused(
        "let x = 1;\nprobe(\"t:syscalls:sys_enter_read\", \"|e| { \" + \"prnt(e.pid); }\");",
        &["t.rhai:2:1:", "unknown function `prnt`", "in the probe source string, at 1:7"],
    );
    refused(
        "probe(\"t:syscalls:sys_enter_read\", \"|e| {\\n prnt(e.pid); }\");",
        &["t.rhai:1:1:", "unknown function `prnt`", "in the probe source string, at 2:2"],
    );
}

/// The embedded tools, with arguments that let their top level register probes.
fn tool_args(name: &str) -> Vec<String> {
    let args: &[&str] = match name {
        "argdist" => &["-C", "p:c:write(int fd):int:fd", "-H", "r:c:read():size_t:$retval"],
        "trace" => &["p:c:write \"%d\" arg1", "r::do_sys_openat2 \"%d\", retval"],
        "funccount" | "funclatency" | "stackcount" => &["c:write"],
        _ => &[],
    };
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn every_example_and_tool_passes_the_check() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut scripts: Vec<(String, String, Vec<String>)> = Vec::new();
    for dir in ["examples", "examples/ci"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "rhai") {
                let text = std::fs::read_to_string(&path).unwrap();
                scripts.push((path.display().to_string(), text, vec![]));
            }
        }
    }
    for (name, _) in crate::script::tools::list() {
        let text = crate::script::tools::find(name).unwrap().to_string();
        scripts.push((format!("tools/{name}.rhai"), text, tool_args(name)));
    }
    assert!(scripts.len() > 30, "{} scripts", scripts.len());
    let mut failures = Vec::new();
    for (file, text, args) in &scripts {
        let mut s = Session::new(file, text, args).unwrap_or_else(|e| panic!("{file}: {e}"));
        // The check runs also where the top level stopped early (a usage message).
        let _ = s.run_top_level();
        if let Err(e) = super::check(&s) {
            failures.push(e.to_string());
        }
    }
    assert!(failures.is_empty(), "the check refuses shipped scripts:\n{}", failures.join("\n"));
}

#[test]
fn a_string_given_to_a_number_conversion_is_refused() {
    for src in [
        r#"probe("BEGIN", || { print(sprintf("%d", "abc")); });"#,
        r#"probe("tracepoint:syscalls:sys_enter_lseek", |e| { let s = sprintf("%d", e.comm); print(s); });"#,
        r#"probe("BEGIN", || { printf("%s %x\n", "a", `b`); });"#,
    ] {
        refused(src, &["as a number, but it is a string"]);
    }
    assert_eq!(error(r#"probe("BEGIN", || { printf("%s %d\n", "a", 1); exit(); });"#), None);
}
