//! Output on a real kernel (design §2.6): `-f json` writes NDJSON records in
//! bpftrace's shapes, `-o FILE` sends everything there, and events the data
//! ring could not take are counted per probe and reported.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

/// Reads of sizes 1, 5, 5, 100 on one /dev/zero fd by this thread, counted,
/// histogrammed, summarised and printed.
fn reads_script(fd: i32) -> String {
    fill(
        r#"
let c = map();
let h = map();
let s = map();
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == __ME__ && e.args.fd == __FD__ {
        c[e.comm] = count();
        h = hist(e.args.count);
        s = stats(e.args.count);
        print(`ev ${e.args.count}`);
        printf("%s|%5d\n", e.comm, e.args.count);
    }
});
"#,
        &[("ME", &tid()), ("FD", &fd)],
    )
}

const SIZES: [usize; 4] = [1, 5, 5, 100];

/// The records the reads script must write, in order.
fn expected_records(comm: &str) -> Vec<Value> {
    let mut v = vec![json!({"type": "attached_probes", "data": {"probes": 1}})];
    for n in SIZES {
        v.push(json!({"type": "printf", "data": format!("ev {n}\n")}));
        v.push(json!({"type": "printf", "data": format!("{comm}|{n:>5}\n")}));
    }
    v.push(json!({"type": "map", "data": {"@c": {comm: 4}}}));
    v.push(json!({"type": "hist", "data": {"@h": [
        {"min": 1, "max": 1, "count": 1},
        {"min": 2, "max": 3, "count": 0},
        {"min": 4, "max": 7, "count": 2},
        {"min": 8, "max": 15, "count": 0},
        {"min": 16, "max": 31, "count": 0},
        {"min": 32, "max": 63, "count": 0},
        {"min": 64, "max": 127, "count": 1},
    ]}}));
    v.push(json!({"type": "stats", "data": {"@s": {"count": 4, "average": 27, "total": 111}}}));
    v
}

kernel_test!(json_output_is_ndjson_in_bpftrace_shapes);
fn json_output_is_ndjson_in_bpftrace_shapes() {
    let _g = setup();
    let comm = unique_comm();
    let mut z = Zero::open();
    let src = reads_script(z.fd);
    let mut t = Tracer::start(&["-f", "json", "-e", &src]);
    let first = t.wait_line("the attached_probes record", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    z.reads(&SIZES);
    t.wait_line("the last printf record", Duration::from_secs(10), |l| l.contains("|  100"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.contains("Attaching "), "no text line in JSON output\n{out}");
    let records = json_records(&out.stdout);
    assert_eq!(records[0], serde_json::from_str::<Value>(&first).unwrap());
    assert_eq!(records, expected_records(&comm), "{out}");
}

kernel_test!(output_file_gets_everything_and_stdout_nothing);
fn output_file_gets_everything_and_stdout_nothing() {
    let _g = setup();
    let comm = unique_comm();
    let mut z = Zero::open();
    let dir = TempDir::new();
    let path = dir.join("out.ndjson");
    let src = reads_script(z.fd);
    let t = Tracer::start(&["-f", "json", "-o", path.to_str().unwrap(), "-e", &src]);
    wait_file_line(&path, "the attached_probes record", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    z.reads(&SIZES);
    wait_file_line(&path, "the last printf record", Duration::from_secs(10), |l| l.contains("|  100"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "", "with -o nothing goes to stdout\n{out}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(json_records(&text), expected_records(&comm), "--- file ---\n{text}");
}

kernel_test!(output_file_in_text_format);
fn output_file_in_text_format() {
    let _g = setup();
    let comm = unique_comm();
    let mut z = Zero::open();
    let dir = TempDir::new();
    let path = dir.join("out.txt");
    let src = reads_script(z.fd);
    let t = Tracer::start(&["-o", path.to_str().unwrap(), "-e", &src]);
    wait_file_line(&path, "the Attaching line", ATTACH_TIMEOUT, |l| l.starts_with("Attaching "));
    z.reads(&SIZES);
    wait_file_line(&path, "the last printf line", Duration::from_secs(10), |l| l.ends_with("|  100"));
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "", "with -o nothing goes to stdout\n{out}");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Attaching 1 probe...", "--- file ---\n{text}");
    let mut want = Vec::new();
    for n in SIZES {
        want.push(format!("ev {n}"));
        want.push(format!("{comm}|{n:>5}"));
    }
    assert_eq!(lines[1..=want.len()], want[..], "--- file ---\n{text}");
    assert!(lines.contains(&format!("@c[{comm}]: 4").as_str()), "--- file ---\n{text}");
    assert!(lines.contains(&"@s: count 4, average 27, total 111"), "--- file ---\n{text}");
}

// ---------------------------------------------------------------------------
// Lost events

/// Events made by the flood.
const FLOOD: u64 = 200_000;

fn flood_script() -> String {
    fill(
        r#"
let n = 0;
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        n += 1;
        // Hold up userspace once, so the 4 KiB ring surely overflows
        // however fast the consumer is.
        if n == 1 { sleep(0.5); }
    }
});
// The test's getpgid calls after the flood end the run: its record comes
// after every getppid record in the ring (retried while the ring is full).
probe("tracepoint:syscalls:sys_enter_getpgid", |e| { if e.tid == __ME__ { exit(); } });
probe("END", || { print(`delivered=${n}`); });
"#,
        &[("ME", &tid())],
    )
}

/// Start rtrace with a 4 KiB data ring, make FLOOD getppid events, then
/// getpgid calls until the script's exit() ends the run (which processes
/// every queued record first); return the outcome.
fn flood(args: &[&str], env: &[(&str, &str)], attached: impl Fn(&str) -> bool) -> Outcome {
    let src = flood_script();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-e", &src]);
    let mut t = Tracer::start_env(&all, env);
    t.wait_line("the attach report", ATTACH_TIMEOUT, attached);
    getppid_n(FLOOD as usize);
    t.finish_by_getpgid(Duration::from_secs(30))
}

fn delivered(out: &Outcome, prefix: &str) -> u64 {
    let line =
        out.lines().into_iter().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line\n{out}"));
    line[prefix.len()..].parse().unwrap_or_else(|_| panic!("bad count in {line:?}\n{out}"))
}

fn check_text_losses(out: &Outcome) {
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stderr.contains("queued event"), "exit() must process every queued record\n{out}");
    let got = delivered(out, "delivered=");
    // Reported as loss happens (at most once a second) and at exit.
    let lost = lost_reports(&out.stderr);
    assert!(!lost.is_empty(), "a `Lost N events on probe ...` line for the flooded probe\n{out}");
    assert!(lost.iter().all(|(_, p)| p == "tracepoint:syscalls:sys_enter_getppid"), "{out}");
    let lost_n: u64 = lost.iter().map(|(n, _)| n).sum();
    println!("delivered {got}, lost {lost_n}, made {FLOOD}");
    assert!(lost_n > 0, "{out}");
    assert_eq!(got + lost_n, FLOOD, "delivered ({got}) + lost ({lost_n}) must be the events made\n{out}");
}

kernel_test!(lost_events_are_counted_exactly_with_ring_size_option);
fn lost_events_are_counted_exactly_with_ring_size_option() {
    let _g = setup();
    let out = flood(&["--ring-size", "4K"], &[], |l| l.starts_with("Attaching "));
    check_text_losses(&out);
}

kernel_test!(lost_events_are_counted_exactly_with_ring_size_env);
fn lost_events_are_counted_exactly_with_ring_size_env() {
    let _g = setup();
    let out = flood(&[], &[("RTRACE_RING_SIZE", "4096")], |l| l.starts_with("Attaching "));
    check_text_losses(&out);
}

kernel_test!(lost_events_record_in_json);
fn lost_events_record_in_json() {
    let _g = setup();
    let out = flood(&["--ring-size", "4K", "-f", "json"], &[], |l| l.contains("attached_probes"));
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stderr.contains("queued event"), "{out}");
    let records = json_records(&out.stdout);
    let prints = json_of_type(&records, "printf");
    let last = prints.last().unwrap_or_else(|| panic!("no printf record\n{out}"));
    let text = last["data"].as_str().unwrap();
    let got: u64 = text
        .strip_prefix("delivered=")
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad END record {last}\n{out}"));
    let lost = json_of_type(&records, "lost_events");
    assert!(!lost.is_empty(), "a lost_events record\n{out}");
    let lost_n: u64 = lost
        .iter()
        .map(|r| r["data"]["events"].as_u64().unwrap_or_else(|| panic!("lost_events without a count: {r}")))
        .sum();
    println!("json: delivered {got}, lost {lost_n}, made {FLOOD}");
    assert!(lost_n > 0);
    assert_eq!(got + lost_n, FLOOD, "delivered ({got}) + lost ({lost_n}) must be the events made\n{out}");
    assert!(lost_reports(&out.stderr).is_empty(), "in JSON mode the loss is a record, not a text line\n{out}");
}

kernel_test!(no_loss_report_when_nothing_is_lost);
fn no_loss_report_when_nothing_is_lost() {
    let _g = setup();
    let src = flood_script();
    let mut t = Tracer::start(&["-d", "1s", "-e", &src]);
    t.wait_attached();
    getppid_n(100);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(delivered(&out, "delivered="), 100, "{out}");
    assert!(lost_reports(&out.stderr).is_empty(), "{out}");
}

// ---------------------------------------------------------------------------
// buf() values: %rx, %rh, map keys

kernel_test!(bufs_print_as_hex_with_rx_and_rh_and_escaped_as_map_keys_and_values);
fn bufs_print_as_hex_with_rx_and_rh_and_escaped_as_map_keys_and_values() {
    let _g = setup();
    let data = [1u8, 2, b'a', 0, 0xff, b' '];
    let src = fill(
        r#"
let m = map();
let v = map();
probe("tracepoint:syscalls:sys_enter_write", |e| {
    if e.tid == __ME__ && e.args.count == __N__ {
        let b = buf(e.args.buf, e.args.count);
        m[buf(e.args.buf, e.args.count)] = count();
        v[e.args.count] = b;
        printf("%rx|%rh|%r|%s|%-20rh|\n", b, b, b, b, b);
    }
});
probe("END", || {
    for k in m.keys() { print(`key ${k} -> ${m[k]}`); }
    v[7] = v[__N__];
});
"#,
        &[("ME", &tid()), ("N", &data.len())],
    );
    let write_twice = || {
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "cannot open /dev/null");
        for _ in 0..2 {
            assert_eq!(unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) }, data.len() as isize);
        }
        unsafe { libc::close(fd) };
    };
    let printed =
        r"\x01\x02\x61\x00\xff\x20|01 02 61 00 ff 20|\x01\x02a\x00\xff |\x01\x02a\x00\xff |01 02 61 00 ff 20   |";
    let text = trace_until(&src, write_twice, printed);
    assert_eq!(text.lines().iter().filter(|l| **l == printed).count(), 2, "{text}");
    // The key prints as bpftrace prints a buffer, not as a C string; the
    // printed key finds its entry from userspace.
    assert_eq!(text.map_lines("m"), vec![r"@m[\x01\x02a\x00\xff ]: 2"], "{text}");
    assert!(text.line_index(r"key \x01\x02a\x00\xff  -> 2").is_some(), "{text}");
    // Stored as a value it prints the same way, also after a userspace copy.
    let value = r"\x01\x02a\x00\xff ";
    assert_eq!(text.map_lines("v"), vec![format!("@v[6]: {value}"), format!("@v[7]: {value}")], "{text}");

    let mut t = Tracer::start(&["-f", "json", "-e", &src]);
    t.wait_line("the attached_probes record", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    write_twice();
    t.wait_count("the printf records", Duration::from_secs(10), 2, |l| l.contains(r"01 02 61 00 ff 20"));
    let json = t.interrupt_and_finish();
    assert_eq!(json.code, Some(0), "{json}");
    let records = json_records(&json.stdout);
    let maps: Vec<&Value> = json_of_type(&records, "map").into_iter().map(|r| &r["data"]).collect();
    assert!(maps.contains(&&json!({"@m": {r"\x01\x02a\x00\xff ": 2}})), "{json}");
    assert!(maps.contains(&&json!({"@v": {"6": value, "7": value}})), "{json}");
    let prints: Vec<&str> = json_of_type(&records, "printf")
        .iter()
        .filter_map(|r| r["data"].as_str())
        .filter(|t| !t.starts_with("key "))
        .collect();
    assert_eq!(prints, vec![format!("{printed}\n"); 2], "{json}");
}

// ---------------------------------------------------------------------------
// Flushing

kernel_test!(text_printed_before_a_userspace_loop_shows_while_it_runs);
/// A header printed in BEGIN before a loop that runs on in userspace comes
/// out at once, also when stdout is a pipe (the tests read it through one):
/// output waits in the buffer a moment at most while userspace code runs.
fn text_printed_before_a_userspace_loop_shows_while_it_runs() {
    let _g = setup();
    let tok = token();
    let src = fill(
        r#"
let c = map();
probe("BEGIN", || {
    print("HEADER __TOK__");
    let n = 0;
    loop { n += 1; }
});
probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.tid == __ME__ { c = count(); } });
"#,
        &[("TOK", &tok), ("ME", &tid())],
    );
    let mut t = Tracer::start(&["-e", &src]);
    t.wait_attached();
    let header = format!("HEADER {tok}");
    t.wait_line("the header", Duration::from_secs(10), |l| l == header);
    // The loop still runs: the line came from a flush, not from the exit.
    assert!(t.is_running(), "rtrace ended before it was stopped: {:?}", t.lines);
    let out = t.interrupt_and_finish();
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert_eq!(out.lines().iter().filter(|l| **l == header).count(), 1, "{out}");
}
