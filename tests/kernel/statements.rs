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
