//! The tools on kernel types and their output layouts: argdist's C
//! expressions on BTF struct pointers (tracepoint fields, tp_btf and raw
//! tracepoint arguments), errors that name the part of a specifier a kernel
//! can't serve, the TCP tools on IPv6 loopback (and tcplife's byte counts),
//! stackcount's and profile's BCC layout, statsnoop's long paths.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::tools::{
    argdist_rows, lines_with, only_line_with, start_tool, tcp_tools_on_a_connection,
    tcpretrans_with_a_full_accept_queue, tool_until,
};

kernel_test!(argdist_follows_btf_struct_pointers_with_c_expressions);
fn argdist_follows_btf_struct_pointers_with_c_expressions() {
    let _g = setup();
    let me = pid();
    let comm = unique_comm();
    // A user struct through a tracepoint's `struct __kernel_timespec *`
    // field, a cast, `!` and `&` in the filter.
    let sleep = format!(
        "t:syscalls:sys_enter_clock_nanosleep():long:args->rqtp->tv_nsec:$PID == {me} && (u8)args->rqtp->tv_nsec == 0x87 && !(args->flags & 1)"
    );
    // Kernel structs through tp_btf and raw tracepoint arguments.
    let fork = format!("btf:sched:sched_process_fork():char*:args->child->comm:args->parent->tgid == {me}");
    let raw = format!("rt::sched_process_fork():int:args->child->pid > 0:args->parent->tgid == {me}");
    let t = start_tool(&["argdist", "-c", "-i", "1", "-C", &sleep, &fork, &raw]);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_nanos(1_234_567));
    }
    for _ in 0..2 {
        Command::new("true").status().unwrap();
    }
    let out = argdist_rows(t, "args->child->pid > 0 = 1");
    assert_eq!(out.code, Some(0), "{out}");
    let text = &out.stdout;
    assert!(text.contains("\t3          args->rqtp->tv_nsec = 1234567\n"), "{out}");
    assert!(text.contains(&format!("\t2          args->child->comm = {comm}\n")), "{out}");
    assert!(text.contains("\t2          args->child->pid > 0 = 1\n"), "{out}");
}

/// Whether this machine has an IPv6 loopback (::1).
fn ipv6_loopback() -> bool {
    TcpListener::bind("[::1]:0").is_ok()
}

kernel_test!(kernel_function_errors_name_the_specifier_part, needs: NoKprobes, NoFentry);
fn kernel_function_errors_name_the_specifier_part() {
    let _g = setup();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["argdist", "-H", "p::vfs_read(struct file *file):u64:file->f_pos"],
            &[
                "argdist: error parsing probe 'p::vfs_read(struct file *file):u64:file->f_pos': kernel function 'vfs_read': ",
                "use the tracepoint instead: t:syscalls:sys_enter_read",
            ],
        ),
        (
            &["trace", "r::do_sys_openat2 \"%d\", retval"],
            &["trace: error parsing probe", "kernel function 'do_sys_openat2'", "t:syscalls:sys_exit_openat"],
        ),
        (&["funccount", "vfs_rea*"], &["funccount: error: 'vfs_rea*': kernel function 'vfs_rea*': "]),
        (
            &["funclatency", "do_sys_openat2"],
            &["funclatency: error: 'do_sys_openat2': kernel function 'do_sys_openat2': ", "t:syscalls:sys_enter_openat"],
        ),
        (&["stackcount", "p::vfs_read"], &["stackcount: error: 'p::vfs_read': kernel function 'vfs_read'"]),
    ];
    assert_usage_errors(cases);
}

kernel_test!(specifier_parts_that_do_not_exist_are_named);
fn specifier_parts_that_do_not_exist_are_named() {
    let _g = setup();
    let cases: &[(&[&str], &[&str])] = &[
        (&["argdist", "-C", "p:c:rtt_no_such_fn(int x):int:x"], &["function 'rtt_no_such_fn' in 'c': "]),
        (&["argdist", "-C", "t:syscalls:rtt_no_such():int:args->x"], &["tracepoint 'syscalls:rtt_no_such': "]),
        (&["argdist", "-C", "p::rtt_no_such_fn(int x):int:x"], &["kernel function 'rtt_no_such_fn': "]),
        (&["argdist", "-C", "p:c:write(int fd):int:fd->x"], &["user-space functions have no BTF types"]),
        (&["argdist", "-C", "p:c:write(int fd):int:*fd"], &["'*' (pointer dereference)"]),
        (&["argdist", "-C", "q:c:write"], &["probe type must be 'p', 'r', 't', 'u', 'btf' or 'rt'"]),
        (
            &["funccount", "c:rtt_no_such_*"],
            &["funccount: error: 'c:rtt_no_such_*': function 'rtt_no_such_*' in 'c': "],
        ),
    ];
    assert_usage_errors(cases);
}

kernel_test!(
    tcp_tools_see_an_ipv6_loopback_connection_and_its_bytes,
    needs: Check("an IPv6 loopback (::1)", ipv6_loopback)
);
fn tcp_tools_see_an_ipv6_loopback_connection_and_its_bytes() {
    let _g = setup();
    let listener = TcpListener::bind("[::1]:0").expect("a listener on ::1");
    let me = pid().to_string();
    let port = listener.local_addr().unwrap().port();
    let ps = port.to_string();
    let ([out1, out2, out3], cport) = tcp_tools_on_a_connection(&listener, &["-6"], |c, a| {
        c.write_all(&vec![7u8; 300_000]).unwrap();
        let mut got = vec![0u8; 300_000];
        a.read_exact(&mut got).unwrap();
        a.write_all(&[9u8; 5000]).unwrap();
        let mut back = vec![0u8; 5000];
        c.read_exact(&mut back).unwrap();
    });
    let out = out1;
    let hit = only_line_with(&out, &[&format!("{me} ")]);
    assert!(hit.ends_with(&format!(" 6  ::1              ::1              {ps:<5}")), "{out}");
    let out = out2;
    let hit = only_line_with(&out, &[&format!("{me} ")]);
    assert!(hit.contains(&format!(" 6  ::1              {cport:<5} ::1              {port}")), "{out}");
    // tcplife -L: the server side (local port = the listener's) received
    // 300000 bytes and sent 5000: TX_KB 4, RX_KB 292, as BCC divides by 1024.
    let out = out3;
    let hit = only_line_with(&out, &[&format!("::1             {port:<5} ::1             {cport:<5}")]);
    assert!(hit.contains(&format!("{cport:<5}     4   292 ")), "{out}");
    assert!(lines_with(&out, &[&format!("::1             {cport:<5} ::1")]).is_empty(), "-L let the client in\n{out}");
}

kernel_test!(tcpretrans_sees_ipv6_syn_retransmits, needs: Check("an IPv6 loopback (::1)", ipv6_loopback));
fn tcpretrans_sees_ipv6_syn_retransmits() {
    let _g = setup();
    let listener = TcpListener::bind("[::1]:0").expect("a listener on ::1");
    let port = listener.local_addr().unwrap().port();
    let out = tcpretrans_with_a_full_accept_queue(&listener);
    let hits = lines_with(&out, &[" 6  ::1:", &format!("R> ::1:{port} ")]);
    assert!(!hits.is_empty(), "{out}");
}

kernel_test!(stackcount_prints_frames_then_the_count);
fn stackcount_prints_frames_then_the_count() {
    let _g = setup();
    let me = pid();
    let comm = unique_comm();
    // sched_process_fork fires in the parent with a kernel stack on every
    // kernel (syscall tracepoints have none before Linux 6.4ish).
    let t = start_tool(&["stackcount", "-P", "-K", "t:sched:sched_process_fork"]);
    for _ in 0..5 {
        fork_and_wait(|| {});
    }
    let out = t.interrupt_and_finish();
    let lines = out.lines();
    let at = lines.iter().position(|l| *l == format!("    {comm} [{me}]")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(lines[at + 1], "    5", "{out}");
    assert_eq!(lines[at + 2], "", "{out}");
    // Kernel frames before it, one per line, indented by two.
    assert!(at > 0 && lines[at - 1].starts_with("  ") && !lines[at - 1].starts_with("   "), "{out}");
    assert!(lines[..at].iter().rev().take_while(|l| !l.is_empty()).any(|l| *l == "  do_syscall_64"), "{out}");
    assert_eq!(out.lines().last(), Some(&"Detaching..."), "{out}");
}

kernel_test!(profile_prints_frames_then_the_process_and_count);
fn profile_prints_frames_then_the_process_and_count() {
    let _g = setup();
    let comm = unique_comm();
    let me = pid();
    let t = start_tool(&["profile", "-U", "-F", "199", "-p", &me.to_string()]);
    let until = std::time::Instant::now() + Duration::from_millis(500);
    let mut x = 0u64;
    while std::time::Instant::now() < until {
        x = x.wrapping_mul(31).wrapping_add(1);
    }
    std::hint::black_box(x);
    let out = t.interrupt_and_finish();
    let lines = out.lines();
    let proc_line = format!("    -                {comm} ({me})");
    let at = lines.iter().position(|l| *l == proc_line).unwrap_or_else(|| panic!("{out}"));
    let count = lines[at + 1].strip_prefix("        ").and_then(|n| n.parse::<u64>().ok());
    assert!(count.is_some_and(|n| n > 0), "{out}");
    assert!(at > 0 && lines[at - 1].starts_with("    ") && !lines[at - 1].starts_with("     "), "{out}");
}

kernel_test!(statsnoop_shows_paths_of_240_bytes);
fn statsnoop_shows_paths_of_240_bytes() {
    let _g = setup();
    let me = pid().to_string();
    let mut missing = format!("/tmp/rtt_{}_", token());
    while missing.len() < 240 {
        missing.push('x');
    }
    let out = tool_until(&["statsnoop", "-x", "-p", &me], || drop(std::fs::metadata(&missing)), &missing);
    let hits = lines_with(&out, &[&missing]);
    assert!(!hits.is_empty() && hits.iter().all(|l| l.ends_with(&format!("  -1   2 {missing}"))), "{out}");
}

kernel_test!(a_struct_that_begins_with_another_is_reached_by_its_name);
fn a_struct_that_begins_with_another_is_reached_by_its_name() {
    let _g = setup();
    let ok =
        "let m = map(); probe(\"tp_btf:inet_sock_set_state\", |e| { m[e.args.sk.tcp_sock.bytes_acked] = count(); });";
    let out = run(&["--dry-run", "-e", ok]);
    assert_eq!(out.code, Some(0), "{out}");
    // struct task_struct does not begin with struct sock: not a member, not a way in.
    let bad = "let m = map(); probe(\"tp_btf:inet_sock_set_state\", |e| { m[e.args.sk.task_struct.pid] = count(); });";
    let out = run(&["--dry-run", "-e", bad]);
    let line = assert_clean_error(&out);
    assert!(line.contains("has no member `task_struct`"), "{line}");
}
