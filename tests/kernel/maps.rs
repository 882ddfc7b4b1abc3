//! Maps and aggregations on a real kernel: keys (comm, pid, strings, tuples,
//! none), every aggregation with known inputs, plain stores and `+=`,
//! `k in m` / `m.remove(k)`. Each test makes its own events and checks the
//! exact values rtrace prints at exit.

use crate::common::*;

/// Start `rtrace -e src`, wait until attached, run `events`, end with SIGINT.
fn trace(src: &str, events: impl FnOnce()) -> Outcome {
    let mut t = Tracer::start(&["-e", src]);
    t.wait_attached();
    events();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    out
}

#[test]
fn count_by_comm_of_this_thread() {
    let Some(_g) = setup() else { return };
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

#[test]
fn count_by_comm_of_spawned_processes() {
    let Some(_g) = setup() else { return };
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

#[test]
fn count_by_pid() {
    let Some(_g) = setup() else { return };
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

#[test]
fn count_by_filename_string() {
    let Some(_g) = setup() else { return };
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

#[test]
fn keyless_count() {
    let Some(_g) = setup() else { return };
    let src = fill(
        r#"
let me = __ME__;
let total = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == me { total = count(); }
});
"#,
        &[("ME", &tid())],
    );
    let out = trace(&src, || getppid_n(7));
    assert_eq!(out.map_lines("total"), vec!["@total: 7"], "{out}");
}

/// A script aggregating `e.args.count` of this thread's reads on `fd` into
/// the keyless map `s` with `agg`.
fn read_agg_script(agg: &str, fd: i32) -> String {
    fill(
        r#"
let me = __ME__;
let s = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        s = __AGG__(e.args.count);
    }
});
"#,
        &[("ME", &tid()), ("FD", &fd), ("AGG", &agg)],
    )
}

fn read_agg(agg: &str, sizes: &[usize]) -> Outcome {
    let mut z = Zero::open();
    let src = read_agg_script(agg, z.fd);
    trace(&src, || z.reads(sizes))
}

#[test]
fn sum_of_read_sizes() {
    let Some(_g) = setup() else { return };
    let out = read_agg("sum", &[100, 300, 1000]);
    assert_eq!(out.map_lines("s"), vec!["@s: 1400"], "{out}");
}

#[test]
fn min_of_read_sizes() {
    let Some(_g) = setup() else { return };
    let out = read_agg("min", &[300, 100, 1000]);
    assert_eq!(out.map_lines("s"), vec!["@s: 100"], "{out}");
}

#[test]
fn max_of_read_sizes() {
    let Some(_g) = setup() else { return };
    let out = read_agg("max", &[300, 1000, 100]);
    assert_eq!(out.map_lines("s"), vec!["@s: 1000"], "{out}");
}

#[test]
fn avg_of_read_sizes_truncates() {
    let Some(_g) = setup() else { return };
    // 1400 / 3 = 466.67: bpftrace prints the integer average, 466.
    let out = read_agg("avg", &[100, 300, 1000]);
    assert_eq!(out.map_lines("s"), vec!["@s: 466"], "{out}");
}

#[test]
fn stats_of_read_sizes() {
    let Some(_g) = setup() else { return };
    let out = read_agg("stats", &[100, 300, 1000]);
    assert_eq!(out.map_lines("s"), vec!["@s: count 3, average 466, total 1400"], "{out}");
}

#[test]
fn stats_keyed_by_fd() {
    let Some(_g) = setup() else { return };
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

#[test]
fn hist_buckets() {
    let Some(_g) = setup() else { return };
    let out = read_agg("hist", &[0, 1, 5, 6, 100, 1024, 1500]);
    assert_eq!(
        out.hist_rows("@s:"),
        vec![
            hist_row("[0]", 1, 26),
            hist_row("[1]", 1, 26),
            hist_row("[2, 4)", 0, 0),
            hist_row("[4, 8)", 2, 52),
            hist_row("[8, 16)", 0, 0),
            hist_row("[16, 32)", 0, 0),
            hist_row("[32, 64)", 0, 0),
            hist_row("[64, 128)", 1, 26),
            hist_row("[128, 256)", 0, 0),
            hist_row("[256, 512)", 0, 0),
            hist_row("[512, 1K)", 0, 0),
            hist_row("[1K, 2K)", 2, 52),
        ],
        "{out}"
    );
}

#[test]
fn hist_power_of_two_edges() {
    let Some(_g) = setup() else { return };
    // 2..3 share [2, 4); 4 starts [4, 8); 7 stays there; 8 starts [8, 16).
    let out = read_agg("hist", &[2, 3, 4, 7, 8, 8, 8]);
    assert_eq!(
        out.hist_rows("@s:"),
        vec![hist_row("[2, 4)", 2, 34), hist_row("[4, 8)", 2, 34), hist_row("[8, 16)", 3, 52)],
        "{out}"
    );
}

#[test]
fn lhist_buckets_with_below_min_and_above_max() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let l = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        l = lhist(e.args.count, 10, 50, 10);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[3, 10, 15, 49, 50, 500]));
    assert_eq!(
        out.hist_rows("@l:"),
        vec![
            hist_row("(..., 10)", 1, 26),
            hist_row("[10, 20)", 2, 52),
            hist_row("[20, 30)", 0, 0),
            hist_row("[30, 40)", 0, 0),
            hist_row("[40, 50)", 1, 26),
            hist_row("[50, ...)", 2, 52),
        ],
        "{out}"
    );
}

#[test]
fn lhist_only_inner_buckets() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let l = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        l = lhist(e.args.count, 0, 1000, 100);
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    // Rows run from the first to the last non-empty bucket only.
    let out = trace(&src, || z.reads(&[250, 299, 300, 550, 599, 598, 510]));
    assert_eq!(
        out.hist_rows("@l:"),
        vec![
            hist_row("[200, 300)", 2, 26),
            hist_row("[300, 400)", 1, 13),
            hist_row("[400, 500)", 0, 0),
            hist_row("[500, 600)", 4, 52),
        ],
        "{out}"
    );
}

#[test]
fn tuple_keys() {
    let Some(_g) = setup() else { return };
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

#[test]
fn map_store_and_plus_equal() {
    let Some(_g) = setup() else { return };
    let comm = unique_comm();
    let mut z = Zero::open();
    let me = tid();
    let src = fill(
        r#"
let me = __ME__;
let last = map();
let total = map();
let who = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        last[e.tid] = e.args.count;
        total[e.tid] += e.args.count;
        who[e.args.fd] = e.comm;
    }
});
"#,
        &[("ME", &me), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[10, 30, 20]));
    assert_eq!(out.map_lines("last"), vec![format!("@last[{me}]: 20")], "{out}");
    assert_eq!(out.map_lines("total"), vec![format!("@total[{me}]: 60")], "{out}");
    assert_eq!(out.map_lines("who"), vec![format!("@who[{}]: {comm}", z.fd)], "{out}");
}

#[test]
fn in_and_remove_for_read_latency() {
    let Some(_g) = setup() else { return };
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

#[test]
fn remove_leaves_other_keys() {
    let Some(_g) = setup() else { return };
    let mut z = Zero::open();
    let src = fill(
        r#"
let me = __ME__;
let seen = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == me && e.args.fd == __FD__ {
        if e.args.count == 99 {
            seen.remove(20);
        } else {
            seen[e.args.count] = e.args.count + 1;
        }
    }
});
"#,
        &[("ME", &tid()), ("FD", &z.fd)],
    );
    let out = trace(&src, || z.reads(&[10, 20, 30, 99]));
    assert_eq!(out.map_lines("seen"), vec!["@seen[10]: 11", "@seen[30]: 31"], "{out}");
}

#[test]
fn maps_print_at_exit_sorted_by_name_after_a_blank_line() {
    let Some(_g) = setup() else { return };
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
