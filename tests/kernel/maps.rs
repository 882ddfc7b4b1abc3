//! Maps and aggregations on a real kernel: keys (comm, pid, strings, tuples,
//! none), every aggregation with known inputs, plain stores and `+=`,
//! `k in m` / `m.remove(k)`. Each test makes its own events and checks the
//! exact values rtrace prints at exit.

use crate::common::*;

kernel_test!(count_by_comm_of_this_thread);
fn count_by_comm_of_this_thread() {
    let _g = setup();
    let comm = unique_comm();
    let src = r#"
let calls = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    calls[e.comm] = count();
});
"#;
    let out = trace(src, || getppid_n(5));
    let ours: Vec<String> = out.map_lines("calls").into_iter().filter(|l| l.contains(&comm)).collect();
    assert_eq!(ours, vec![format!("@calls[{comm}]: 5")], "{out}");
}

kernel_test!(count_by_comm_of_spawned_processes);
fn count_by_comm_of_spawned_processes() {
    let _g = setup();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let exe = dir.true_named(&name);
    let other = dir.true_named(&format!("rtu_{}", token()));
    let src = r#"
let exits = map();
probe("tracepoint:sched:sched_process_exit", |e| {
    exits[e.comm] = count();
});
"#;
    let out = trace(src, || {
        for _ in 0..3 {
            run_ok(&exe);
        }
        run_ok(&other);
    });
    let ours: Vec<String> =
        out.map_lines("exits").into_iter().filter(|l| l.contains("[rtt_") || l.contains("[rtu_")).collect();
    let other_name = other.file_name().unwrap().to_str().unwrap().to_string();
    // Sorted by value: 1 before 3.
    assert_eq!(ours, vec![format!("@exits[{other_name}]: 1"), format!("@exits[{name}]: 3")], "{out}");
}

kernel_test!(count_by_pid);
fn count_by_pid() {
    let _g = setup();
    let src = r#"
let calls = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    calls[e.pid] = count();
});
"#;
    let mut child = 0;
    let out = trace(src, || {
        getppid_n(3);
        child = fork_and_wait(|| getppid_n(5));
    });
    let me = pid();
    let lines = out.map_lines("calls");
    let ours: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with(&format!("@calls[{me}]")) || l.starts_with(&format!("@calls[{child}]")))
        .collect();
    assert_eq!(ours, vec![&format!("@calls[{me}]: 3"), &format!("@calls[{child}]: 5")], "{out}");
}

kernel_test!(count_by_filename_string);
fn count_by_filename_string() {
    let _g = setup();
    let dir = TempDir::new();
    let a = dir.write("a.txt", "a");
    let b = dir.write("b.txt", "b");
    let src = fill(
        r#"
let me = __ME__;
let opens = map();
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    if e.tid == me {
        opens[str(e.args.filename)] = count();
    }
});
"#,
        &[("ME", &tid())],
    );
    let out = trace(&src, || {
        for p in [&a, &b, &a, &a] {
            std::fs::File::open(p).unwrap();
        }
    });
    assert_eq!(
        out.map_lines("opens"),
        vec![format!("@opens[{}]: 1", b.display()), format!("@opens[{}]: 3", a.display())],
        "{out}"
    );
}

kernel_test!(keyless_count);
fn keyless_count() {
    let _g = setup();
    let src = getppid_script("let total = map();", "total = count();");
    let out = trace(&src, || getppid_n(7));
    assert_eq!(out.map_lines("total"), vec!["@total: 7"], "{out}");
}

kernel_test!(aggregations_of_read_sizes);
fn aggregations_of_read_sizes() {
    let _g = setup();
    let keyless = |name, body, sizes, line: &str| ReadCase {
        name,
        prelude: "let s = map();",
        body,
        sizes,
        want: vec![Want::map("s", &[line])],
    };
    run_read_cases(&[
        keyless("sum", "s = sum(e.args.count);", &[100, 300, 1000], "@s: 1400"),
        keyless("min", "s = min(e.args.count);", &[300, 100, 1000], "@s: 100"),
        keyless("max", "s = max(e.args.count);", &[300, 1000, 100], "@s: 1000"),
        // 1400 / 3 = 466.67: bpftrace prints the integer average, 466.
        keyless("avg truncates", "s = avg(e.args.count);", &[100, 300, 1000], "@s: 466"),
        keyless("stats", "s = stats(e.args.count);", &[100, 300, 1000], "@s: count 3, average 466, total 1400"),
        ReadCase {
            name: "hist buckets",
            prelude: "let s = map();",
            body: "s = hist(e.args.count);",
            sizes: &[0, 1, 5, 6, 100, 1024, 1500],
            want: vec![Want::hist(
                "@s:",
                &[
                    ("[0]", 1, 26),
                    ("[1]", 1, 26),
                    ("[2, 4)", 0, 0),
                    ("[4, 8)", 2, 52),
                    ("[8, 16)", 0, 0),
                    ("[16, 32)", 0, 0),
                    ("[32, 64)", 0, 0),
                    ("[64, 128)", 1, 26),
                    ("[128, 256)", 0, 0),
                    ("[256, 512)", 0, 0),
                    ("[512, 1K)", 0, 0),
                    ("[1K, 2K)", 2, 52),
                ],
            )],
        },
        // 2..3 share [2, 4); 4 starts [4, 8); 7 stays there; 8 starts [8, 16).
        ReadCase {
            name: "hist power-of-two edges",
            prelude: "let s = map();",
            body: "s = hist(e.args.count);",
            sizes: &[2, 3, 4, 7, 8, 8, 8],
            want: vec![Want::hist("@s:", &[("[2, 4)", 2, 34), ("[4, 8)", 2, 34), ("[8, 16)", 3, 52)])],
        },
        ReadCase {
            name: "lhist buckets with below-min and above-max",
            prelude: "let l = map();",
            body: "l = lhist(e.args.count, 10, 50, 10);",
            sizes: &[3, 10, 15, 49, 50, 500],
            want: vec![Want::hist(
                "@l:",
                &[
                    ("(..., 10)", 1, 26),
                    ("[10, 20)", 2, 52),
                    ("[20, 30)", 0, 0),
                    ("[30, 40)", 0, 0),
                    ("[40, 50)", 1, 26),
                    ("[50, ...)", 2, 52),
                ],
            )],
        },
        // Rows run from the first to the last non-empty bucket only.
        ReadCase {
            name: "lhist only inner buckets",
            prelude: "let l = map();",
            body: "l = lhist(e.args.count, 0, 1000, 100);",
            sizes: &[250, 299, 300, 550, 599, 598, 510],
            want: vec![Want::hist(
                "@l:",
                &[("[200, 300)", 2, 26), ("[300, 400)", 1, 13), ("[400, 500)", 0, 0), ("[500, 600)", 4, 52)],
            )],
        },
        ReadCase {
            name: "remove leaves other keys",
            prelude: "let seen = map();",
            body: "if e.args.count == 99 {
            seen.remove(20);
        } else {
            seen[e.args.count] = e.args.count + 1;
        }",
            sizes: &[10, 20, 30, 99],
            want: vec![Want::map("seen", &["@seen[10]: 11", "@seen[30]: 31"])],
        },
    ]);
}

kernel_test!(stats_keyed_by_fd);
fn stats_keyed_by_fd() {
    let _g = setup();
    let mut z1 = Zero::open();
    let mut z2 = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let s = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me {
        s[e.args.fd] = stats(e.args.count);
    }
});
"#,
        &[("ME", &tid())],
    );
    let out = trace(&src, || {
        z1.reads(&[10, 20]);
        z2.reads(&[1000, 3000, 5000]);
    });
    // Sorted by average: fd1 (15) before fd2 (3000).
    assert_eq!(
        out.map_lines("s"),
        vec![
            format!("@s[{}]: count 2, average 15, total 30", z1.fd),
            format!("@s[{}]: count 3, average 3000, total 9000", z2.fd),
        ],
        "{out}"
    );
}

kernel_test!(tuple_keys);
fn tuple_keys() {
    let _g = setup();
    let comm = unique_comm();
    let child_comm = format!("rtc_{}", token());
    let child_c = std::ffi::CString::new(child_comm.clone()).unwrap();
    let src = r#"
let m = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    m[[e.pid, e.comm]] = count();
});
"#;
    let mut child = 0;
    let out = trace(src, || {
        getppid_n(3);
        child = fork_and_wait(|| {
            set_comm_raw(&child_c);
            getppid_n(2);
        });
    });
    let me = pid();
    let ours: Vec<String> =
        out.map_lines("m").into_iter().filter(|l| l.contains(&comm) || l.contains(&child_comm)).collect();
    assert_eq!(ours, vec![format!("@m[{child}, {child_comm}]: 2"), format!("@m[{me}, {comm}]: 3")], "{out}");
}

kernel_test!(map_store_and_plus_equal);
fn map_store_and_plus_equal() {
    let _g = setup();
    let comm = unique_comm();
    let mut z = Zero::open();
    let me = tid();
    let src = reads_script(
        "let last = map();\nlet total = map();\nlet who = map();",
        "last[e.tid] = e.args.count;
        total[e.tid] += e.args.count;
        who[e.args.fd] = e.comm;",
        z.fd,
    );
    let out = trace(&src, || z.reads(&[10, 30, 20]));
    assert_eq!(out.map_lines("last"), vec![format!("@last[{me}]: 20")], "{out}");
    assert_eq!(out.map_lines("total"), vec![format!("@total[{me}]: 60")], "{out}");
    assert_eq!(out.map_lines("who"), vec![format!("@who[{}]: {comm}", z.fd)], "{out}");
}

kernel_test!(in_and_remove_for_read_latency);
fn in_and_remove_for_read_latency() {
    let _g = setup();
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let start = map();
let lat = map();
let matched = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        start[e.tid] = e.nsecs;
    }
});
probe("tracepoint:syscalls:sys_exit_read", |e| {
    if e.tid in start {
        lat = hist(e.nsecs - start[e.tid]);
        matched = count();
        start.remove(e.tid);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[100, 200, 300]));
    assert_eq!(out.map_lines("matched"), vec!["@matched: 3"], "{out}");
    // Every start entry was removed, so the map is empty and not printed.
    assert!(out.map_lines("start").is_empty(), "start[] should be empty at exit\n{out}");
    // Three latencies, all positive.
    let rows = out.hist_rows("@lat:");
    let mut total = 0;
    for r in &rows {
        assert!(!r.starts_with("(..., 0)") && !r.starts_with("[0]"), "latency <= 0 in {r:?}\n{out}");
        let count: u64 = r[16..24].trim().parse().unwrap_or_else(|_| panic!("bad row {r:?}\n{out}"));
        total += count;
    }
    assert_eq!(total, 3, "{out}");
}

kernel_test!(maps_print_at_exit_sorted_by_name_after_a_blank_line);
fn maps_print_at_exit_sorted_by_name_after_a_blank_line() {
    let _g = setup();
    let src = fill(
        r#"
let me = __ME__;
let zeta = map();
let alpha = map();
let mid = map();
let unused = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me {
        zeta = count();
        mid[e.tid] = count();
        alpha = sum(2);
    }
});
"#,
        &[("ME", &tid())],
    );
    let me = tid();
    let out = trace(&src, || getppid_n(2));
    let lines = out.lines();
    let first = lines.iter().position(|l| l.starts_with('@')).unwrap_or_else(|| panic!("no maps printed\n{out}"));
    assert_eq!(lines[first - 1], "", "a blank line comes before the maps\n{out}");
    let maps: Vec<&str> = lines[first..].iter().copied().filter(|l| !l.is_empty()).collect();
    // Empty maps are not printed.
    assert_eq!(maps, vec!["@alpha: 4".to_string(), format!("@mid[{me}]: 2"), "@zeta: 2".to_string()], "{out}");
}
