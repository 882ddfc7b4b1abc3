//! `--serve`: the metrics endpoint on a real kernel. Each test starts rtrace
//! on a free loopback port, makes known events from its own thread (getppid
//! calls, reads of /dev/zero), scrapes `/metrics` over a plain TCP
//! connection and checks exact values and the format; `promtool` and a
//! real Prometheus server check the output where the `prometheus` package
//! is installed (scripts/setup.sh installs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A loopback port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

/// `GET path` with an optional Accept header: (status line, headers, body).
fn get(port: u16, path: &str, accept: Option<&str>) -> (String, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect to :{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{accept}Connection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

pub(crate) fn metrics(port: u16) -> String {
    let (status, headers, body) = get(port, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK", "{headers}\n{body}");
    body
}

/// The body's lines that start with `prefix`.
fn lines_of(body: &str, prefix: &str) -> Vec<String> {
    body.lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect()
}

/// The value of the one sample line `name{labels}` (exact text before the value).
fn value(body: &str, series: &str) -> Option<String> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_string))
}

const SCRIPT: &str = r#"
let calls = map("calls", #{ labels: ["comm"], help: "getppid calls by comm" });
let pairs = map("pairs", #{ labels: ["comm", "tid"] });
let bytes = map();
let sizes = map();
let window = map("window", #{ reset_on_scrape: true });
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.tid == __ME__ {
        calls[e.comm] = count();
        window[e.tid] = count();
    }
});
probe("tracepoint:syscalls:sys_enter_read", |e| {
    if e.tid == __ME__ && e.args.fd == __FD__ {
        pairs[[e.comm, e.tid]] = count();
        bytes[e.tid] = sum(e.args.count);
        sizes = hist(e.args.count);
    }
});
probe("tracepoint:syscalls:sys_enter_getpid", |e| {
    if e.tid == __ME__ {
        print(`seen ${e.tid}`);
    }
});
"#;

/// rtrace serving SCRIPT on a fresh port, attached; with the /dev/zero fd.
fn start(extra: &[&str]) -> (Tracer, u16, Zero) {
    let zero = Zero::open();
    let src = fill(SCRIPT, &[("ME", &tid()), ("FD", &zero.fd)]);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["--serve", addr.as_str()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-e", &src]);
    let mut t = Tracer::start(&args);
    assert_eq!(t.wait_attached(), 3);
    (t, port, zero)
}

kernel_test!(maps_are_served_as_counters_histograms_and_labels);
fn maps_are_served_as_counters_histograms_and_labels() {
    let _g = setup();
    let comm = unique_comm();
    let me = tid();
    let (mut t, port, mut zero) = start(&[]);
    getppid_n(5);
    zero.reads(&[1, 2, 3, 100]);
    getpid_n(2);
    t.wait_count("two printed records", Duration::from_secs(10), 2, |l| l == format!("seen {me}"));

    let (status, headers, body) = get(port, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{headers}");
    // A counter named after the map, labelled as declared, with its help.
    assert!(
        body.contains("# HELP rtrace_calls_total getppid calls by comm\n# TYPE rtrace_calls_total counter\n"),
        "{body}"
    );
    assert_eq!(
        lines_of(&body, "rtrace_calls_total{"),
        vec![format!("rtrace_calls_total{{comm=\"{comm}\"}} 5")],
        "{body}"
    );
    // A tuple key: one label per part.
    assert_eq!(
        lines_of(&body, "rtrace_pairs_total{"),
        vec![format!("rtrace_pairs_total{{comm=\"{comm}\",tid=\"{me}\"}} 4")],
        "{body}"
    );
    // Default label name `key`; sum() is a counter too.
    assert_eq!(lines_of(&body, "rtrace_bytes_total{"), vec![format!("rtrace_bytes_total{{key=\"{me}\"}} 106")]);
    // hist(): cumulative buckets with inclusive integer bounds, +Inf, count.
    assert!(body.contains("# TYPE rtrace_sizes histogram\n"), "{body}");
    let expect: Vec<String> =
        [("0", 0), ("1", 1), ("3", 3), ("7", 3), ("15", 3), ("31", 3), ("63", 3), ("127", 4), ("+Inf", 4)]
            .iter()
            .map(|(le, n)| format!("rtrace_sizes_bucket{{le=\"{le}\"}} {n}"))
            .collect();
    assert_eq!(lines_of(&body, "rtrace_sizes_bucket"), expect, "{body}");
    assert_eq!(value(&body, "rtrace_sizes_count").as_deref(), Some("4"), "{body}");
    // Built-in metrics.
    let read_probe = "tracepoint:syscalls:sys_enter_read";
    assert_eq!(value(&body, &format!("rtrace_lost_events_total{{probe=\"{read_probe}\"}}")).as_deref(), Some("0"));
    let lost_controls = format!("rtrace_lost_control_messages_total{{probe=\"{read_probe}\"}}");
    assert_eq!(value(&body, &lost_controls).as_deref(), Some("0"), "{body}");
    assert_eq!(value(&body, "rtrace_dropped_control_messages_total").as_deref(), Some("0"), "{body}");
    let runs = value(&body, "rtrace_probe_runs_total{probe=\"tracepoint:syscalls:sys_enter_getppid\"}")
        .unwrap_or_else(|| panic!("no probe runs\n{body}"));
    assert!(runs.parse::<u64>().unwrap() >= 5, "{body}");
    assert!(value(&body, "rtrace_probe_run_seconds_total{probe=\"tracepoint:syscalls:sys_enter_getppid\"}").is_some());
    assert!(value(&body, "process_resident_memory_bytes").is_some_and(|v| v.parse::<u64>().unwrap() > 0), "{body}");
    assert!(value(&body, "process_cpu_seconds_total").is_some(), "{body}");
    assert_eq!(value(&body, "rtrace_callback_errors_total").as_deref(), Some("0"), "{body}");
    // Records delivered: the event loop publishes its count after each batch.
    let deadline = deadline_in(Duration::from_secs(10));
    while value(&metrics(port), "rtrace_records_total").as_deref() != Some("2") {
        assert!(Instant::now() < deadline, "rtrace_records_total never reached 2\n{}", metrics(port));
        std::thread::sleep(Duration::from_millis(20));
    }

    // OpenMetrics when asked for: counters by family name, `# EOF` last.
    let (_, headers, om) = get(port, "/metrics", Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"));
    assert!(headers.to_ascii_lowercase().contains("content-type: application/openmetrics-text; version=1.0.0"));
    assert!(om.contains("# TYPE rtrace_calls counter\n"), "{om}");
    assert!(om.contains(&format!("rtrace_calls_total{{comm=\"{comm}\"}} 5\n")), "{om}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (status, _, _) = get(port, "/nothing", None);
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.map_lines("calls").contains(&format!("@calls[{comm}]: 5")), "{out}");
}

kernel_test!(reset_on_scrape_counts_per_interval);
fn reset_on_scrape_counts_per_interval() {
    let _g = setup();
    let me = tid();
    let (t, port, _zero) = start(&[]);
    let series = format!("rtrace_window_total{{key=\"{me}\"}}");
    getppid_n(3);
    assert_eq!(value(&metrics(port), &series).as_deref(), Some("3"));
    assert_eq!(value(&metrics(port), &series), None, "the scrape did not empty the map");
    getppid_n(2);
    assert_eq!(value(&metrics(port), &series).as_deref(), Some("2"));
    // Maps without the option keep counting.
    getppid_n(1);
    let body = metrics(port);
    assert_eq!(lines_of(&body, "rtrace_calls_total{").len(), 1);
    assert!(lines_of(&body, "rtrace_calls_total{")[0].ends_with(" 6"), "{body}");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

kernel_test!(verbose_reports_probe_overhead_as_text_and_json);
fn verbose_reports_probe_overhead_as_text_and_json() {
    let _g = setup();
    let me = tid();
    let src = format!(
        r#"let c = map();
probe("tracepoint:syscalls:sys_enter_getppid", |e| {{ if e.tid == {me} {{ c = count(); }} }});"#
    );
    let probe = "tracepoint:syscalls:sys_enter_getppid";
    let mut t = Tracer::start(&["-v", "-e", &src]);
    t.wait_attached();
    getppid_n(3);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let line = out
        .stderr_lines()
        .into_iter()
        .find(|l| l.trim_start().starts_with(&format!("{probe}: ")))
        .unwrap_or_else(|| panic!("no overhead line\n{out}"))
        .to_string();
    let runs: u64 = line.split(": ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(runs >= 3, "{line}");
    assert!(line.ends_with(" ns/run"), "{line}");

    let mut t = Tracer::start(&["-v", "-f", "json", "-e", &src]);
    t.wait_line("the attached record", ATTACH_TIMEOUT, |l| l.contains("attached_probes"));
    getppid_n(3);
    let out = t.interrupt_and_finish();
    let records = json_records(&out.stdout);
    let stats = json_of_type(&records, "probe_stats");
    assert_eq!(stats.len(), 1, "{out}");
    let p = &stats[0]["data"][probe];
    assert!(p["runs"].as_u64().unwrap() >= 3, "{out}");
    let (runs, total) = (p["runs"].as_u64().unwrap(), p["total_ns"].as_u64().unwrap());
    assert_eq!(p["ns_per_run"].as_u64().unwrap(), total / runs, "{out}");
}

kernel_test!(bad_serve_settings_are_clean_errors);
fn bad_serve_settings_are_clean_errors() {
    let _g = setup();
    // A label count that doesn't match the key: named at the map() call.
    let src = "let m = map(\"m\", #{ labels: [\"a\", \"b\"] });\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| { m[e.pid] = count(); });";
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let line = assert_clean_error(&run(&["--serve", &addr, "-e", src]));
    assert!(line.starts_with("-e:1:9: error: map 'm' names 2 label(s)"), "{line}");
    // A reserved label name: rejected when the map is declared.
    let line = assert_clean_error(&run(&["-e", "let m = map(\"m\", #{ labels: [\"le\"] });"]));
    assert!(line.contains("-e:1:") && line.contains("reserved"), "{line}");
    // An address already in use.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let ok = "probe(\"tracepoint:syscalls:sys_enter_getppid\", |e| { });";
    let line = assert_clean_error(&run(&["--serve", &addr, "-e", ok]));
    assert!(line.contains(&format!("--serve {addr}: cannot listen there")), "{line}");
    assert_tracing_still_works();
}

kernel_test!(promtool_accepts_the_output, needs: Program("promtool"));
fn promtool_accepts_the_output() {
    let _g = setup();
    let (t, port, mut zero) = start(&[]);
    getppid_n(2);
    zero.reads(&[8, 4096]);
    let body = metrics(port);
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let res = child.wait_with_output().unwrap();
    assert!(
        res.status.success(),
        "promtool check metrics failed:\n{}{}\n{body}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

/// Kills the Prometheus server it holds when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b == b'_' { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

kernel_test!(prometheus_scrapes_rtrace_and_answers_a_query, needs: Program("prometheus"));
fn prometheus_scrapes_rtrace_and_answers_a_query() {
    let _g = setup();
    let comm = unique_comm();
    let (t, port, _zero) = start(&[]);
    getppid_n(7);
    let dir = TempDir::new();
    let config = dir.write(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: rtrace\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    );
    let web = free_port();
    let server = Server(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start prometheus"),
    );
    let query = url_encode(&format!("rtrace_calls_total{{comm=\"{comm}\"}}"));
    let deadline = deadline_in(Duration::from_secs(60));
    let mut last = String::new();
    let answer = loop {
        assert!(Instant::now() < deadline, "Prometheus never returned the value; last answer:\n{last}");
        std::thread::sleep(Duration::from_millis(250));
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", web)) else { continue };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = write!(s, "GET /api/v1/query?query={query} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        last.clear();
        let _ = s.read_to_string(&mut last);
        let Some((_, body)) = last.split_once("\r\n\r\n") else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else { continue };
        if let Some(r) = v["data"]["result"].as_array().and_then(|r| r.first()) {
            break r.clone();
        }
    };
    assert_eq!(answer["value"][1], "7", "{answer}");
    assert_eq!(answer["metric"]["job"], "rtrace", "{answer}");
    drop(server);
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
}

/// Make one getppid call at a time until the served `series` satisfies
/// `pred`; returns its value.
fn poll_getppid(port: u16, series: &str, pred: impl Fn(u64) -> bool) -> u64 {
    let deadline = deadline_in(Duration::from_secs(20));
    loop {
        getppid_n(1);
        // Before rtrace listens, the connection is refused.
        let body = if TcpStream::connect(("127.0.0.1", port)).is_ok() { metrics(port) } else { String::new() };
        if let Some(v) = value(&body, series).and_then(|v| v.parse::<u64>().ok()).filter(|v| pred(*v)) {
            return v;
        }
        assert!(Instant::now() < deadline, "{series} never got the expected value\n{body}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

kernel_test!(exporter_reloads_the_script_on_sighup_and_keeps_the_port);
fn exporter_reloads_the_script_on_sighup_and_keeps_the_port() {
    let _g = setup();
    let me = tid();
    let dir = TempDir::new();
    let script = |name: &str| {
        format!("let {name} = map();\nprobe(\"tracepoint:syscalls:sys_enter_getppid\", |e| {{ if e.tid == {me} {{ {name} = count(); }} }});\n")
    };
    let path = dir.write("exporter.rhai", &script("first"));
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let t = Tracer::start(&["--exporter", "--serve", &addr, path.to_str().unwrap()]);
    // Attached once the counter moves; then it counts exactly.
    let v = poll_getppid(port, "rtrace_first_total", |_| true);
    getppid_n(3);
    assert_eq!(value(&metrics(port), "rtrace_first_total"), Some((v + 3).to_string()));

    // SIGHUP: the new script's maps behind the same port, the old ones gone.
    dir.write("exporter.rhai", &script("second"));
    assert_eq!(unsafe { libc::kill(t.pid(), libc::SIGHUP) }, 0);
    let v = poll_getppid(port, "rtrace_second_total", |_| true);
    getppid_n(3);
    let body = metrics(port);
    assert_eq!(value(&body, "rtrace_second_total"), Some((v + 3).to_string()), "{body}");
    assert!(!body.contains("rtrace_first"), "{body}");

    // A script that doesn't compile: reported, and the last good one runs again
    // (with fresh maps, so its count starts over).
    dir.write("exporter.rhai", "probe(\"nosuch:x\", |e| { });\n");
    assert_eq!(unsafe { libc::kill(t.pid(), libc::SIGHUP) }, 0);
    poll_getppid(port, "rtrace_second_total", |v| v <= 2);

    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.stdout, "", "an exporter writes nothing unless the script prints\n{out}");
    let file = path.display().to_string();
    assert!(out.stderr.contains(&format!("rtrace: note: reloaded {file}\n")), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "rtrace: warning: reload failed, running the previous script again: {file}:1:1: error: unknown probe type 'nosuch'"
        )),
        "{out}"
    );
}

kernel_test!(stack_maps_only_when_asked_and_per_map_opt_out);
fn stack_maps_only_when_asked_and_per_map_opt_out() {
    let _g = setup();
    let me = tid();
    let src = format!(
        r#"let folded = map("folded", #{{ folded_stacks: true }});
let plain = map("plain");
let hidden = map("hidden", #{{ metrics: false }});
probe("tracepoint:raw_syscalls:sys_enter", |e| {{
    if e.tid == {me} && e.args.id == 110 {{ folded[e.kstack] = count(); plain[e.kstack] = count(); hidden = count(); }}
}});"#
    );
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut t = Tracer::start(&["--serve", &addr, "--metrics-prefix", "host_", "-e", &src]);
    t.wait_attached();
    getppid_n(3);
    let body = metrics(port);
    let rows = lines_of(&body, "host_folded_total{");
    assert_eq!(rows.len(), 1, "{body}");
    let (series, count) = rows[0].rsplit_once(' ').unwrap();
    assert_eq!(count, "3", "{body}");
    let stack = series.strip_prefix("host_folded_total{stack=\"").and_then(|s| s.strip_suffix("\"}")).unwrap();
    let frames: Vec<&str> = stack.split(';').collect();
    assert!(frames.contains(&"do_syscall_64"), "not a folded kernel stack: {stack}");
    assert!(!body.contains("host_plain") && !body.contains("host_hidden"), "{body}");
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("hidden"), vec!["@hidden: 3"], "{out}");
}
