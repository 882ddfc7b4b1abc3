//! `time()`/`join()` as statements print; as values they don't. Which
//! calls are statements is known per source: the script, each stdlib
//! module, each imported file, so equal line:column in two of them never
//! mix (docs/language.md).

use crate::common::*;

kernel_test!(a_stdlib_join_at_the_scripts_statement_position_still_returns_its_value);
fn a_stdlib_join_at_the_scripts_statement_position_still_returns_its_value() {
    let _g = setup();
    // stdlib/hist.rhai's log2_text ends with `join(lines, "\n")` at 69:5,
    // its value; here 69:5 is a `join()` statement of the script.
    let mut src = String::from("probe(\"BEGIN\", || {\n");
    src.push_str(&"//\n".repeat(67));
    src.push_str("    join([\"X\", \"Y\"], \"-\");\n");
    src.push_str("    let t = hist::log2_text([0, 0, 3, 1], \"v\");\n");
    src.push_str("    print(`len ${t.len() > 0}`);\n    exit();\n});\n");
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.line_index("X-Y").is_some(), "{out}");
    assert!(out.line_index("len true").is_some(), "{out}");
    assert!(!out.stdout.contains("distribution"), "the module's join() printed: {out}");
}

kernel_test!(a_join_statement_in_an_imported_file_prints);
fn a_join_statement_in_an_imported_file_prints() {
    let _g = setup();
    let dir = TempDir::new();
    let module = dir.write(
        "stamp.rhai",
        "fn stamp() {\n    join([\"m\", \"n\"], \"+\");\n    let v = join([\"a\"], \",\");\n    v\n}\n",
    );
    let module = module.display().to_string();
    let src = format!(
        "import \"{}\" as m;\nprobe(\"BEGIN\", || {{\n    let v = m::stamp();\n    print(`got ${{v}}`);\n    exit();\n}});\n",
        module.trim_end_matches(".rhai")
    );
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        out.lines().into_iter().filter(|l| !l.starts_with("Attaching")).collect::<Vec<_>>(),
        ["m+n", "got a"],
        "{out}"
    );
}

kernel_test!(closures_made_in_a_module_run_when_their_time_comes);
/// A module's function that hands closures to `every()`, `after()` and
/// `probe("END")` (as `report::summaries` does): each runs later, from the
/// event loop, with the module's functions and the values it captured —
/// for a file module and for the embedded `report`.
fn closures_made_in_a_module_run_when_their_time_comes() {
    let _g = setup();
    let dir = TempDir::new();
    let module = dir.write(
        "ticks.rhai",
        "fn label(n) { `tick ${n}` }\nfn start(limit, show) {\n    let n = 0;\n    every(\"20ms\", || { n += 1; print(label(n)); if n == limit { show.call(n); exit(); } });\n    probe(\"END\", || { print(`end after ${n}`); });\n}\n",
    );
    let src = format!(
        "import \"{}\" as t;\nt::start(3, |n| {{ print(`shown at ${{n}}`); }});\n",
        module.display().to_string().trim_end_matches(".rhai")
    );
    let out = run(&["-q", "-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines(), ["tick 1", "tick 2", "tick 3", "shown at 3", "end after 3"], "{out}");
    // report::summaries: two summaries at the interval, then the run ends; no third at END.
    let src = "let n = 0;\nreport::summaries(1, 2, (), || { n += 1; print(`summary ${n}`); });\n";
    let out = run(&["-q", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines(), ["summary 1", "summary 2"], "{out}");
    // Without an interval: one summary when the run ends (-d here).
    let out = run(&["-q", "-d", "100ms", "-e", "report::summaries((), (), (), || { print(\"the summary\"); });"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.lines(), ["the summary"], "{out}");
}
