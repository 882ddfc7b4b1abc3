//! `emit(value)` in a probe and `probe(...).on_event(|rec| ...)`: the
//! explicit form of sending kernel values to userspace.

use crate::common::*;

kernel_test!(emitted_values_reach_on_event_in_order);
fn emitted_values_reach_on_event_in_order() {
    let _g = setup();
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

kernel_test!(emit_without_on_event_is_rejected_before_attaching);
fn emit_without_on_event_is_rejected_before_attaching() {
    let _g = setup();
    let out = run(&["-e", r#"probe("tracepoint:syscalls:sys_enter_getppid", |e| { emit(e.pid); });"#]);
    let line = assert_clean_error(&out);
    assert!(line.contains("on_event"), "{line}");
    assert!(line.contains(":1:1"), "{line}");
}

kernel_test!(join_of_a_user_char_pointer_array);
fn join_of_a_user_char_pointer_array() {
    let _g = setup();
    let name = unique_comm();
    let tok = token();
    let src = fill(
        r#"
probe("tracepoint:syscalls:sys_enter_execve", |e| {
    if e.comm == "__NAME__" {
        print(`argv: ${join(e.args.argv)}`);
        print(`sep: ${join(e.args.argv, ",")}`);
    }
});
"#,
        &[("NAME", &name)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let first = format!("alpha-{tok}");
    let status = std::process::Command::new("/bin/echo").args([first.as_str(), "beta", "gamma"]).output().unwrap();
    assert!(status.status.success());
    t.wait_line("the joined argv", std::time::Duration::from_secs(10), |l| l.starts_with("sep: "));
    let out = t.interrupt_and_finish();
    assert!(out.lines().contains(&format!("argv: /bin/echo {first} beta gamma").as_str()), "{out}");
    assert!(out.lines().contains(&format!("sep: /bin/echo,{first},beta,gamma").as_str()), "{out}");
}
