//! `--serve ADDR:PORT`: an HTTP endpoint with the script's maps and rtrace's
//! own counters as Prometheus/OpenMetrics metrics on `/metrics`.
//!
//! The endpoint runs on its own thread and reads the kernel maps through the
//! same dump path `print` uses, so a scrape never waits for (or holds up) the
//! event loop. One scrape reads every map once, then renders: all the
//! samples of a family come from one read (a histogram's buckets and count
//! agree). Requests are answered one at a time, so two scrapes never
//! interleave their resets. The listening socket outlives a run, so the
//! exporter's reload swaps the maps behind it without dropping the port.
//! Formatting lives in `output::metrics`.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};

use super::kmaps::KernelMap;
use super::{probe_stats, Loaded};
use crate::output::metrics::{self, Family, Format, Number, Type};
use crate::output::{KeyPart, MapDump, MapValue};
use crate::plan::site::ValueMeaning;
use crate::plan::Plan;
use crate::script::Session;

/// Records handed to userspace statements so far (updated by the event loop).
static RECORDS: AtomicU64 = AtomicU64::new(0);
/// Errors in userspace statements so far.
static CALLBACK_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The event loop's running totals, for the endpoint to read.
pub fn note_progress(records: u64, errors: u64) {
    RECORDS.store(records, Ordering::Relaxed);
    CALLBACK_ERRORS.store(errors, Ordering::Relaxed);
}

/// One script map as the endpoint serves it.
struct Served {
    map: Arc<KernelMap>,
    metric: String,
    help: String,
    labels: Vec<String>,
    counter: bool,
    reset: bool,
    folded: bool,
}

/// What a scrape reads: maps, loss counters, program statistics.
struct Sources {
    maps: Vec<Served>,
    lost: libbpf_rs::MapHandle,
    /// Label of each probe (its spec; `#N` added when a spec repeats).
    probes: Vec<String>,
    programs: Vec<(usize, OwnedFd)>,
    stats: bool,
    /// `-k`/`-kk`: the failed-helper counters, and the script file their
    /// positions are in.
    helper_errors: Option<super::helper_errors::Counters>,
    file: String,
}

/// The listening endpoint: it lives as long as rtrace does, so that an
/// exporter's reload (a new script, new maps) keeps the port.
struct Endpoint {
    addr: String,
    sources: Arc<Mutex<Option<Sources>>>,
}

static ENDPOINT: Mutex<Option<Endpoint>> = Mutex::new(None);

/// While this lives, the endpoint serves one run's maps; dropping it
/// leaves only an empty exposition until the next run.
pub struct Serving(());

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(ep) = ENDPOINT.lock().unwrap().as_ref() {
            *ep.sources.lock().unwrap() = None;
        }
    }
}

/// Check the maps' metric options, listen on `addr` (once per process) and
/// serve this run's maps. Called before anything is attached: an error
/// here leaves nothing behind.
pub fn start(
    addr: &str,
    prefix: &str,
    stats: bool,
    session: &Session,
    plan: &Plan,
    loaded: &Loaded,
) -> Result<Serving> {
    let new = sources(prefix, stats, session, plan, loaded)?;
    let mut ep = ENDPOINT.lock().unwrap();
    if ep.as_ref().is_some_and(|e| e.addr != addr) {
        bail!("--serve {addr}: already serving on another address");
    }
    if ep.is_none() {
        let server = tiny_http::Server::http(addr).map_err(|e| anyhow!("--serve {addr}: cannot listen there: {e}"))?;
        let sources: Arc<Mutex<Option<Sources>>> = Arc::new(Mutex::new(None));
        let s = sources.clone();
        std::thread::Builder::new()
            .name("rtrace-serve".into())
            .spawn(move || serve(&server, &s))
            .map_err(|e| anyhow!("--serve: cannot start the server thread: {e}"))?;
        *ep = Some(Endpoint { addr: addr.to_string(), sources });
    }
    if let Some(e) = ep.as_ref() {
        *e.sources.lock().unwrap() = Some(new);
    }
    Ok(Serving(()))
}

/// Built-in family names; a map must not be exported under one of them.
const BUILTIN: &[&str] = &[
    "rtrace_lost_events",
    "rtrace_lost_control_messages",
    "rtrace_dropped_control_messages",
    "rtrace_records",
    "rtrace_callback_errors",
    "rtrace_actions",
    "rtrace_probe_runs",
    "rtrace_probe_run_seconds",
    "process_cpu_seconds",
    "process_resident_memory_bytes",
];

fn sources(prefix: &str, stats: bool, session: &Session, plan: &Plan, loaded: &Loaded) -> Result<Sources> {
    let handles = session.registry.lock().unwrap().maps.clone();
    let mut maps: Vec<Served> = Vec::new();
    for (handle, km) in handles.iter().zip(&loaded.maps) {
        let opts = &handle.options().metrics;
        let refuse = |msg: String| -> anyhow::Error {
            crate::diag::Diagnostic::at(&session.file_name, handle.options().pos, msg).into()
        };
        let shape = &km.shape;
        let stacks = shape.key_sems.iter().any(|s| matches!(s, ValueMeaning::Stack { .. }));
        if !opts.enabled || (stacks && !opts.folded_stacks) {
            continue;
        }
        let parts = if stacks { 1 } else { shape.layout.key.len() };
        if let Some(l) = &opts.labels {
            if shape.layout.key.is_empty() && !l.is_empty() {
                return Err(refuse(format!("map '{}' has no key, so it takes no labels: drop `labels`", km.name)));
            }
            if !shape.layout.key.is_empty() && l.len() != parts {
                let what = if stacks {
                    "a folded stack is one label".to_string()
                } else {
                    format!("its keys have {parts} part(s)")
                };
                return Err(refuse(format!(
                    "map '{}' names {} label(s) but {what}: give one name per key part",
                    km.name,
                    l.len()
                )));
            }
        }
        let metric = metrics::metric_name(prefix, &km.name);
        if BUILTIN.contains(&metric.as_str()) || maps.iter().any(|m| m.metric == metric) {
            return Err(refuse(format!(
                "map '{}' would be served as {metric}, a name already in use: rename the map, change --metrics-prefix or set `metrics: false`",
                km.name
            )));
        }
        let counter = matches!(shape.agg, Some(probes_ebpf::ir::AggOp::Count | probes_ebpf::ir::AggOp::Sum));
        let help = opts.help.clone().unwrap_or_else(|| format!("rtrace map @{}", km.name));
        maps.push(Served {
            map: km.clone(),
            metric,
            help,
            labels: opts.label_names(parts, stacks),
            counter,
            reset: opts.reset_on_scrape,
            folded: stacks,
        });
    }
    let lost = libbpf_rs::MapHandle::try_from(&loaded.lost).map_err(|e| anyhow!("--serve: {e}"))?;
    Ok(Sources {
        maps,
        lost,
        probes: probe_labels(&plan.probes),
        programs: probe_stats::probe_programs(plan, &loaded.programs),
        stats,
        helper_errors: super::helper_errors::Counters::of(plan, loaded)?,
        file: session.file_name.clone(),
    })
}

/// Probe specs as label values; a spec used twice gets `#2`, `#3`, ...
fn probe_labels(probes: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in probes {
        let n = probes[..out.len()].iter().filter(|q| *q == p).count();
        out.push(if n == 0 { p.clone() } else { format!("{p}#{}", n + 1) });
    }
    out
}

fn serve(server: &tiny_http::Server, sources: &Mutex<Option<Sources>>) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("").to_string();
        let get = matches!(request.method(), tiny_http::Method::Get | tiny_http::Method::Head);
        let accept = request.headers().iter().find(|h| h.field.equiv("Accept")).map(|h| h.value.as_str().to_string());
        let (status, content_type, body) = match (get, path.as_str()) {
            (false, _) => (405, "text/plain; charset=utf-8", "only GET and HEAD are served\n".to_string()),
            (true, "/metrics") => {
                let format = Format::negotiate(accept.as_deref());
                // Held while one scrape reads; only a reload waits for it.
                let families = sources.lock().unwrap().as_ref().map(scrape).unwrap_or_default();
                (200, format.content_type(), metrics::render(&families, format))
            }
            (true, "/") => (200, "text/plain; charset=utf-8", "rtrace: metrics are on /metrics\n".to_string()),
            (true, _) => (404, "text/plain; charset=utf-8", "not found: metrics are on /metrics\n".to_string()),
        };
        let mut response = tiny_http::Response::from_string(body).with_status_code(status);
        if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
            response = response.with_header(h);
        }
        let _ = request.respond(response);
    }
}

/// Every family, from one read of each map.
fn scrape(sources: &Sources) -> Vec<Family> {
    let mut families = Vec::new();
    for m in &sources.maps {
        let dump = if m.folded {
            folded_dump(&m.map)
        } else if m.reset {
            m.map.take()
        } else {
            m.map.dump()
        };
        let Ok(dump) = dump else { continue };
        if m.folded && m.reset {
            let _ = crate::script::api::MapBackend::clear(m.map.as_ref());
        }
        if let Some(f) = metrics::map_family(&m.metric, &m.help, &dump, m.counter, &m.labels) {
            families.push(f);
        }
    }
    families.extend(builtin(sources));
    families
}

/// A stack-keyed map as `folded stack -> count` entries.
fn folded_dump(map: &KernelMap) -> Result<MapDump, String> {
    let entries = map
        .folded_lines()?
        .into_iter()
        .filter_map(|line| {
            let (stack, count) = line.rsplit_once(' ')?;
            Some((vec![KeyPart::Str(stack.to_string())], MapValue::Int(count.parse().ok()?)))
        })
        .collect();
    Ok(MapDump { name: map.name.clone(), keyless: false, entries })
}

fn builtin(sources: &Sources) -> Vec<Family> {
    let probe = |i: usize| vec![("probe".to_string(), sources.probes[i].clone())];
    let mut lost = Family::new("rtrace_lost_events", Type::Counter, "Events a probe could not put on the ring buffer");
    let mut lost_controls = Family::new(
        "rtrace_lost_control_messages",
        Type::Counter,
        "Control messages (print/clear/zero) a probe could not put on the control ring",
    );
    for (i, (records, controls)) in
        super::limits::kernel_losses(&sources.lost, sources.probes.len()).into_iter().enumerate()
    {
        lost.push(probe(i), Number::Int(records as i64));
        lost_controls.push(probe(i), Number::Int(controls as i64));
    }
    let mut dropped = Family::new(
        "rtrace_dropped_control_messages",
        Type::Counter,
        "Control messages dropped in userspace because it fell behind",
    );
    dropped.push(Vec::new(), Number::Int(super::reader::DROPPED_CONTROLS.load(Ordering::Relaxed) as i64));
    let mut records = Family::new("rtrace_records", Type::Counter, "Records delivered to userspace statements");
    records.push(Vec::new(), Number::Int(RECORDS.load(Ordering::Relaxed) as i64));
    let mut errors =
        Family::new("rtrace_callback_errors", Type::Counter, "Errors in userspace statements (with --keep-going)");
    errors.push(Vec::new(), Number::Int(CALLBACK_ERRORS.load(Ordering::Relaxed) as i64));
    let mut actions = Family::new(
        "rtrace_actions",
        Type::Counter,
        "Actions of the script (system, exec, kill, signal, deny) by outcome: done, failed, timed_out, \
         not_done (--monitor), rate_limited, dropped, unfinished",
    );
    for ((function, outcome), n) in crate::output::audit::counts() {
        actions.push(
            vec![("action".to_string(), function), ("outcome".to_string(), outcome.to_string())],
            Number::Int(n as i64),
        );
    }
    let mut out = vec![lost, lost_controls, dropped, records, errors, actions];
    if let Some(counters) = &sources.helper_errors {
        out.push(helper_errors(sources, counters));
    }
    if sources.stats {
        let mut runs = Family::new("rtrace_probe_runs", Type::Counter, "Times a probe's BPF programs ran");
        let mut secs =
            Family::new("rtrace_probe_run_seconds", Type::Counter, "Time a probe's BPF programs ran in the kernel");
        let stats = probe_stats::per_probe(&sources.probes, &sources.programs);
        for s in stats {
            let label = vec![("probe".to_string(), s.probe.clone())];
            runs.push(label.clone(), Number::Int(s.runs as i64));
            secs.push(label, Number::Float(s.total_ns as f64 / 1e9));
        }
        out.push(runs);
        out.push(secs);
    }
    let mut cpu = Family::new("process_cpu_seconds", Type::Counter, "CPU time rtrace used, user and system");
    cpu.push(Vec::new(), Number::Float(cpu_seconds()));
    out.push(cpu);
    if let Some(rss) = rss_bytes() {
        let mut f = Family::new("process_resident_memory_bytes", Type::Gauge, "rtrace's resident memory");
        f.push(Vec::new(), Number::Int(rss as i64));
        out.push(f);
    }
    out
}

/// `-k`/`-kk`: failed helper calls per probe, helper and script position.
fn helper_errors(sources: &Sources, counters: &super::helper_errors::Counters) -> Family {
    let mut f = Family::new(
        "rtrace_helper_errors",
        Type::Counter,
        "Failed BPF helper calls (-k: map updates, -kk: memory reads too) per probe, helper and statement",
    );
    for ((probe, line, col, helper), (count, _)) in counters.totals() {
        let labels = vec![
            ("probe".to_string(), sources.probes.get(probe).cloned().unwrap_or_default()),
            ("helper".to_string(), probes_ebpf::helpers::name(helper).to_string()),
            ("location".to_string(), format!("{}:{line}:{col}", sources.file)),
        ];
        f.push(labels, Number::Int(count as i64));
    }
    f
}

fn cpu_seconds() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_probe_specs_get_distinct_labels() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(probe_labels(&p(&["a", "b", "a", "a"])), p(&["a", "b", "a#2", "a#3"]));
    }
}
