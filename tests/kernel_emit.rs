//! `emit(value)` in a probe and `probe(...).on_event(|rec| ...)`: the
//! explicit form of sending kernel values to userspace.

mod common;

use common::*;

#[test]
fn emitted_values_reach_on_event_in_order() {
    let Some(_g) = setup() else { return };
    let src = fill(
        r#"
let seen = 0;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        emit([e.tid, e.comm]);
    }
}).on_event(|rec| {
    seen += 1;
    print(`rec ${seen} ${rec[0]} ${rec[1]}`);
});
probe("END", || { print(`seen=${seen}`); });
"#,
        &[("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    getppid_n(3);
    t.wait_count("three records", std::time::Duration::from_secs(10), 3, |l| l.starts_with("rec "));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let recs: Vec<&str> = out.lines().into_iter().filter(|l| l.starts_with("rec ")).collect();
    let me = tid();
    let c = comm();
    assert_eq!(recs, vec![format!("rec 1 {me} {c}"), format!("rec 2 {me} {c}"), format!("rec 3 {me} {c}")], "{out}");
    assert!(out.lines().contains(&"seen=3"), "{out}");
}

#[test]
fn emit_without_on_event_is_rejected_before_attaching() {
    let Some(_g) = setup() else { return };
    let out = run(&["-e", r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { emit(e.pid); });"#]);
    let line = assert_clean_error(&out);
    assert!(line.contains("on_event"), "{line}");
    assert!(line.contains(":1:1"), "{line}");
}
