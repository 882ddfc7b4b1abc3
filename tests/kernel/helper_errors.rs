//! `-k` / `-kk` (bpftrace's helper checks): failed helper calls are counted
//! per probe and statement and reported with the script position, the
//! helper, the error and the count; `-k` checks map updates, `-kk` memory
//! reads too; without either nothing is checked or reported.

use std::time::Duration;

use crate::common::*;

/// A probe on this thread's opens that reads a string from a bad user
/// address (the file name's pointer moved far past the mapped memory) and
/// writes a second key into a map with room for one.
fn script(dir: &TempDir) -> (std::path::PathBuf, String) {
    let src = fill(
        r#"let one = map("one", #{ max_entries: 1 });
probe("tracepoint:syscalls:sys_enter_openat", |e| {
    if e.tid == __ME__ {
        let name = str(e.args.filename + 0x7000_0000_0000);
        one[1] = 1;
        one[2] = 2;
    }
});
"#,
        &[("ME", &tid())],
    );
    (dir.write("checks.rhai", &src), src)
}

/// Open a missing file `n` times from this thread.
fn open_missing(n: usize) {
    for _ in 0..n {
        let _ = std::fs::File::open("/nonexistent/rtrace-helper-errors");
    }
}

/// Run the script with `flags`, make 3 opens, end the run.
fn run_with(flags: &[&str]) -> (Outcome, String, String) {
    let dir = TempDir::new();
    let (path, src) = script(&dir);
    let path = path.to_string_lossy().into_owned();
    let mut args: Vec<&str> = flags.to_vec();
    args.push(&path);
    let mut t = Tracer::start(&args);
    t.wait_line("attached", Duration::from_secs(30), |l| l.starts_with("Attaching ") || l.contains("attached_probes"));
    open_missing(3);
    // No wait: the failures are counted in the kernel as they happen, and
    // read when rtrace ends.
    (t.interrupt_and_finish(), path, src)
}

/// Failure counts reported on stderr for `FILE:L:C: warning: N failed HELPER in PROBE: MSG`,
/// summed over the reports (the run reports as they grow, then at exit).
fn reported(stderr: &str, prefix: &str, tail: &str) -> u64 {
    stderr.lines().filter_map(|l| l.strip_prefix(prefix)?.strip_suffix(tail)?.parse::<u64>().ok()).sum()
}

kernel_test!(kk_reports_failed_reads_and_updates_with_their_positions_and_counts);
fn kk_reports_failed_reads_and_updates_with_their_positions_and_counts() {
    let _g = setup();
    let (out, path, src) = run_with(&["-kk"]);
    assert_eq!(out.code, Some(0), "{out}");
    let (l, c) = position_of(&src, "let name");
    let read = reported(
        &out.stderr,
        &format!("{path}:{l}:{c}: warning: "),
        " failed probe_read_user_str in tracepoint:syscalls:sys_enter_openat: Bad address (-14)",
    );
    assert_eq!(read, 3, "three failed string reads\n{out}");
    let (l, c) = position_of(&src, "= 2;");
    let update = reported(
        &out.stderr,
        &format!("{path}:{l}:{c}: warning: "),
        " failed map_update_elem in tracepoint:syscalls:sys_enter_openat: Argument list too long (-7)",
    );
    assert_eq!(update, 3, "the second key never fits\n{out}");
    let (l, _) = position_of(&src, "= 1;");
    assert!(!out.stderr.contains(&format!("{path}:{l}:")), "the first key fits: no report\n{out}");
}

kernel_test!(k_checks_map_updates_but_not_reads);
fn k_checks_map_updates_but_not_reads() {
    let _g = setup();
    let (out, path, src) = run_with(&["-k"]);
    assert_eq!(out.code, Some(0), "{out}");
    let (l, c) = position_of(&src, "= 2;");
    let update = reported(
        &out.stderr,
        &format!("{path}:{l}:{c}: warning: "),
        " failed map_update_elem in tracepoint:syscalls:sys_enter_openat: Argument list too long (-7)",
    );
    assert_eq!(update, 3, "{out}");
    assert!(!out.stderr.contains("probe_read"), "-k leaves reads unchecked\n{out}");
}

kernel_test!(without_k_nothing_is_reported);
fn without_k_nothing_is_reported() {
    let _g = setup();
    let (out, _, _) = run_with(&[]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stderr.contains("warning"), "{out}");
    assert_eq!(out.map_lines("one"), vec!["@one[1]: 1"], "{out}");
}

kernel_test!(kk_json_writes_helper_error_records);
fn kk_json_writes_helper_error_records() {
    let _g = setup();
    let (out, _, src) = run_with(&["-kk", "-f", "json"]);
    assert_eq!(out.code, Some(0), "{out}");
    let records = json_records(&out.stdout);
    let errors = json_of_type(&records, "helper_error");
    let (l, c) = position_of(&src, "let name");
    let reads: Vec<_> = errors.iter().filter(|r| r["helper"] == "probe_read_user_str").collect();
    assert!(!reads.is_empty(), "{out}");
    for r in &reads {
        assert_eq!((r["line"].as_u64(), r["col"].as_u64()), (Some(l as u64), Some(c as u64)), "{r}");
        assert_eq!((r["msg"].as_str(), r["retcode"].as_i64()), (Some("Bad address"), Some(-14)), "{r}");
        assert_eq!(r["probe"], "tracepoint:syscalls:sys_enter_openat");
    }
    assert_eq!(reads.iter().map(|r| r["count"].as_u64().unwrap_or(0)).sum::<u64>(), 3, "{out}");
    assert!(errors.iter().any(|r| r["helper"] == "map_update_elem" && r["retcode"] == -7), "{out}");
}

kernel_test!(kk_counts_are_served_on_metrics_per_probe_helper_and_position);
fn kk_counts_are_served_on_metrics_per_probe_helper_and_position() {
    let _g = setup();
    let dir = TempDir::new();
    let (path, src) = script(&dir);
    let path = path.to_string_lossy().into_owned();
    let port = crate::serve::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut t = Tracer::start(&["-kk", "--serve", &addr, &path]);
    t.wait_attached();
    // The counters are kernel map slots bumped at each failed call, so they
    // read 3 as soon as the opens have returned.
    open_missing(3);
    let body = crate::serve::metrics(port);
    let series = |helper: &str, at: &str| {
        let (l, c) = position_of(&src, at);
        format!(
            "rtrace_helper_errors_total{{probe=\"tracepoint:syscalls:sys_enter_openat\",helper=\"{helper}\",location=\"{path}:{l}:{c}\"}} 3"
        )
    };
    assert!(body.contains("# TYPE rtrace_helper_errors_total counter\n"), "{body}");
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with("rtrace_helper_errors_total{")).collect();
    assert_eq!(lines, vec![series("probe_read_user_str", "let name"), series("map_update_elem", "= 2;")], "{body}");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

kernel_test!(without_k_no_helper_errors_are_served);
fn without_k_no_helper_errors_are_served() {
    let _g = setup();
    let dir = TempDir::new();
    let (path, _) = script(&dir);
    let path = path.to_string_lossy().into_owned();
    let port = crate::serve::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut t = Tracer::start(&["--serve", &addr, &path]);
    t.wait_attached();
    open_missing(3);
    let body = crate::serve::metrics(port);
    assert!(body.contains("rtrace_lost_events_total{"), "{body}");
    assert!(!body.contains("rtrace_helper_errors"), "{body}");
    drop(t.interrupt_and_finish());
}
