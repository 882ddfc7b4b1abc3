//! `e.args` as a whole value in userspace (docs/split.md): every argument
//! of the tracepoint arrives as an object map; a `char *` stays a pointer
//! unless the closure reads that field by name.

use std::time::Duration;

use crate::common::*;

/// Trace this thread's openat calls with `body`, open `path`, wait for a
/// line starting with `mark`, and return the run.
fn open_traced(body: &str, path: &std::path::Path, mark: &str) -> Outcome {
    let src = fill(
        r#"
fn describe(a) { `desc ${a.dfd} ${a.flags} ${a.filename}` }
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    if e.tid == __ME__ {
        __BODY__
    }
});
"#,
        &[("ME", &tid()), ("BODY", &body)],
    );
    let mut t = Tracer::start(&["-d", "20s", "-e", &src]);
    t.wait_attached();
    let _ = std::fs::File::open(path);
    t.wait_line("the traced open", Duration::from_secs(10), |l| l.starts_with(mark));
    t.interrupt_and_finish()
}

kernel_test!(bare_args_is_an_object_map_of_every_field_with_pointers_as_numbers);
fn bare_args_is_an_object_map_of_every_field_with_pointers_as_numbers() {
    let _g = setup();
    let dir = TempDir::new();
    let path = dir.join(&format!("args-{}", token()));
    let out = open_traced("let a = e.args; print(`args ${a}`);", &path, "args");
    assert_eq!(out.code, Some(0), "{out}");
    let line = out.lines().into_iter().find(|l| l.starts_with("args ")).unwrap_or_default().to_string();
    // std::fs::File::open: openat(AT_FDCWD, path, O_RDONLY|O_CLOEXEC).
    for want in ["\"dfd\": -100", "\"flags\": 524288", "\"mode\": 0", "\"__syscall_nr\": 257", "\"filename\": "] {
        assert!(line.contains(want), "{want} in {line}\n{out}");
    }
    assert!(!line.contains(&path.display().to_string()), "filename is a pointer, not the string: {line}");
}

kernel_test!(args_passed_to_a_function_holds_named_fields_as_strings);
fn args_passed_to_a_function_holds_named_fields_as_strings() {
    let _g = setup();
    let dir = TempDir::new();
    let path = dir.join(&format!("args-{}", token()));
    let out = open_traced("print(describe(e.args)); print(`name ${e.args.filename}`);", &path, "name");
    assert_eq!(out.code, Some(0), "{out}");
    let want = format!("desc -100 524288 {}", path.display());
    assert!(out.line_index(&want).is_some(), "{want}\n{out}");
}
