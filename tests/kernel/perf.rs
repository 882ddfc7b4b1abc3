//! Perf-event probes on a real kernel: `profile` samples on every CPU at a
//! rate or period, `interval` ticks on one CPU, `software` events count
//! page faults and context switches of a known process, and `hardware`
//! events either count or fail with one clear line where there is no PMU.

use std::ffi::CString;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::*;

/// `@NAME[KEY]: VALUE` lines of map `name` as (KEY, VALUE).
fn entries(out: &Outcome, name: &str) -> Vec<(String, u64)> {
    out.map_lines(name)
        .iter()
        .filter_map(|l| {
            let rest = l.strip_prefix(&format!("@{name}["))?;
            let (key, value) = rest.rsplit_once("]: ")?;
            Some((key.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The value of the keyless map `name` (`@name: V`), or 0 when not printed.
fn scalar(out: &Outcome, name: &str) -> u64 {
    let prefix = format!("@{name}: ");
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("bad value for @{name}\n{out}")))
        .unwrap_or(0)
}

fn online_cpus() -> Vec<i64> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("read cpu/online");
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.parse::<i64>().unwrap()..=hi.parse::<i64>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A thread named `comm` (pinned to `cpu` when given) that spins until it
/// has had `want` of CPU time, or for at most `limit`; it returns the CPU
/// time it got (so rate checks hold on a loaded machine too).
fn burn(comm: &str, cpu: Option<i64>, want: Duration, limit: Duration) -> JoinHandle<Duration> {
    let comm = comm.to_string();
    std::thread::spawn(move || {
        set_comm(&comm);
        if let Some(cpu) = cpu {
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu as usize, &mut set);
                assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
            }
        }
        let start = Instant::now();
        let cpu0 = thread_cpu_time();
        let mut x: u64 = 1;
        while thread_cpu_time() - cpu0 < want && start.elapsed() < limit {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        thread_cpu_time() - cpu0
    })
}

/// Whether this machine has a hardware PMU: a counting cpu-cycles event
/// opens on CPU 0.
fn has_pmu() -> bool {
    // perf_event_attr, PERF_ATTR_SIZE_VER7 (128 bytes), all zero but
    // type (HARDWARE = 0), size and config (CPU_CYCLES = 0).
    let mut attr = [0u8; 128];
    attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), -1i32, 0i32, -1i32, 0u64) };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
        return true;
    }
    false
}

kernel_test!(profile_samples_a_busy_thread_at_the_rate);
fn profile_samples_a_busy_thread_at_the_rate() {
    let _g = setup();
    let comm = format!("rtp_{}", token());
    let src = r#"
let samples = map();
probe("profile:hz:99", |e| { samples[e.comm] = count(); });
"#;
    let mut t = Tracer::start(&["-e", src]);
    assert_eq!(t.wait_attached(), 1);
    // The thread spins until it has had 1 s of CPU however loaded the
    // machine is; the rate is checked against the CPU time it really got.
    let cpu = burn(&comm, None, Duration::from_secs(1), Duration::from_secs(120)).join().unwrap();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let n = entries(&out, "samples").into_iter().find(|(k, _)| *k == comm).map(|(_, v)| v).unwrap_or(0);
    // One sample per tick (99/s) while the thread runs.
    let cpu_s = cpu.as_secs_f64();
    assert!(
        (n as f64) >= 0.6 * 99.0 * cpu_s - 3.0 && (n as f64) <= 1.4 * 99.0 * cpu_s + 5.0,
        "profile:hz:99 took {n} samples of a thread that ran for {cpu:?}\n{out}"
    );
}

kernel_test!(profile_rate_and_period_over_all_cpus);
fn profile_rate_and_period_over_all_cpus() {
    let _g = setup();
    // A fully idle CPU may take no samples at all (tickless idle), so the
    // total is at least one CPU's worth and at most all CPUs' worth;
    // `profile_runs_on_every_cpu` checks every CPU with busy threads.
    let src = r#"
let hz = map();
let ms = map();
let names = map();
probe("profile:hz:99", |e| { hz = count(); names[e.probe] = count(); });
probe("p:ms:20", |e| { ms = count(); names[e.probe] = count(); });
"#;
    let mut t = Tracer::start(&["-d", "1s", "-e", src]);
    assert_eq!(t.wait_attached(), 2);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let ncpus = online_cpus().len() as f64;
    let longest = out.elapsed.as_secs_f64();
    for (name, rate) in [("hz", 99.0), ("ms", 50.0)] {
        let n = scalar(&out, name) as f64;
        assert!(
            n >= 0.85 * rate && n <= 1.15 * ncpus * rate * longest + 5.0,
            "@{name}: {n} samples on {ncpus} CPUs at {rate}/s over 1 s\n{out}"
        );
    }
    let names: Vec<String> = entries(&out, "names").into_iter().map(|(k, _)| k).collect();
    assert_eq!(names.len(), 2, "{out}");
    assert!(names.contains(&"profile:hz:99".to_string()), "{out}");
    assert!(names.contains(&"profile:ms:20".to_string()), "the p: alias is named in full\n{out}");
}

kernel_test!(profile_runs_on_every_cpu);
fn profile_runs_on_every_cpu() {
    let _g = setup();
    let cpus = online_cpus();
    let comm = format!("rtc_{}", token());
    let src = fill(
        r#"
let cpus = map();
probe("profile:hz:99", |e| {
    if e.comm == "__COMM__" { cpus[e.cpu] = count(); }
});
"#,
        &[("COMM", &comm)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1, "one probe, however many CPUs");
    let threads: Vec<_> =
        cpus.iter().map(|&c| burn(&comm, Some(c), Duration::from_millis(500), Duration::from_secs(120))).collect();
    let got: Vec<Duration> = threads.into_iter().map(|th| th.join().unwrap()).collect();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let seen = entries(&out, "cpus");
    let mut seen_cpus: Vec<i64> = seen.iter().map(|(k, _)| k.parse().unwrap()).collect();
    seen_cpus.sort();
    assert_eq!(seen_cpus, cpus, "samples from every online CPU\n{out}");
    // Each pinned thread had at least 500 ms of CPU (it spins until it has),
    // so each CPU took samples at about 99/s of that time.
    for (cpu, n) in &seen {
        assert!(*n >= 20, "CPU {cpu} took only {n} samples of a thread pinned there (CPU times {got:?})\n{out}");
    }
}

kernel_test!(interval_ticks_on_one_cpu);
fn interval_ticks_on_one_cpu() {
    let _g = setup();
    let src = r#"
let ticks = map();
let cpus = map();
let last = map();
let gap = map();
let n = map();
probe("i:ms:100", |e| {
    ticks = count();
    n[0] += 1;
    cpus[e.cpu] = count();
    if last[0] > 0 { gap = min(e.nsecs - last[0]); }
    last[0] = e.nsecs;
    if n[0] >= 6 { exit(); }
});
"#;
    // Ends itself after six ticks; a loaded machine only makes it slower.
    let mut t = Tracer::start(&["-d", "60s", "-e", src]);
    assert_eq!(t.wait_attached(), 1);
    let out = t.finish();
    assert_eq!(out.code, Some(0), "{out}");
    let ticks = scalar(&out, "ticks");
    assert!(ticks >= 6, "interval:ms:100 ended by exit() after its sixth tick\n{out}");
    // A timer never fires early: ticks are at least (about) 100 ms apart.
    let gap = scalar(&out, "gap");
    assert!(gap >= 90_000_000, "two interval:ms:100 ticks only {gap} ns apart\n{out}");
    let cpus = entries(&out, "cpus");
    assert_eq!(cpus.len(), 1, "interval fires on one CPU only\n{out}");
    assert_eq!(cpus[0].1, ticks, "{out}");
}

kernel_test!(interval_exit_after_the_fifth_tick);
fn interval_exit_after_the_fifth_tick() {
    let _g = setup();
    let src = r#"
let n = map();
let names = map();
probe("interval:ms:100", |e| {
    if n[0] < 5 {
        n[0] += 1;
        names[e.probe] = count();
        if n[0] == 5 { exit(); }
    }
});
"#;
    let mut t = Tracer::start(&["-d", "30s", "-e", src]);
    assert_eq!(t.wait_attached(), 1);
    let attached = Instant::now();
    let out = t.finish_within(Duration::from_secs(20));
    let took = out.ended_at - attached;
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("n"), vec!["@n[0]: 5"], "{out}");
    assert_eq!(out.map_lines("names"), vec!["@names[interval:ms:100]: 5"], "{out}");
    println!("five ticks of 100 ms ended the run {took:?} after the attach report");
}

kernel_test!(software_page_faults_of_a_child);
fn software_page_faults_of_a_child() {
    let _g = setup();
    const PAGES: usize = 256;
    let comm = format!("rtf_{}", token());
    let src = fill(
        r#"
let faults = map();
probe("software:page-faults:1", |e| {
    if e.comm == "__COMM__" { faults = count(); }
});
"#,
        &[("COMM", &comm)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 1);
    let name = CString::new(comm.clone()).unwrap();
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    fork_and_wait(|| unsafe {
        set_comm_raw(&name);
        let len = PAGES * page;
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            libc::_exit(1);
        }
        // One fault per page: no huge pages.
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
        for i in 0..PAGES {
            std::ptr::write_volatile((p as *mut u8).add(i * page), 1);
        }
        libc::munmap(p, len);
    });
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let faults = scalar(&out, "faults");
    assert!(
        faults >= PAGES as u64 && faults <= 4 * PAGES as u64 + 200,
        "a child touching {PAGES} fresh pages took {faults} page faults\n{out}"
    );
}

kernel_test!(software_context_switches_and_the_cs_alias);
fn software_context_switches_and_the_cs_alias() {
    let _g = setup();
    let comm = format!("rts_{}", token());
    let src = fill(
        r#"
let mine = map();
let all = map();
probe("s:cs:1", |e| {
    if e.comm == "__COMM__" { mine = count(); }
});
probe("software:context-switches", |e| { all = count(); });
"#,
        &[("COMM", &comm)],
    );
    let mut t = Tracer::start(&["-e", &src]);
    assert_eq!(t.wait_attached(), 2);
    let th = std::thread::spawn(move || {
        set_comm(&comm);
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    th.join().unwrap();
    let out = t.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    let mine = scalar(&out, "mine");
    assert!((20..=200).contains(&mine), "20 sleeps made {mine} context switches\n{out}");
}

kernel_test!(hardware_counts_or_says_there_is_no_pmu);
fn hardware_counts_or_says_there_is_no_pmu() {
    let _g = setup();
    let src = r#"
let c = map();
let calls = map();
probe("BEGIN", || { print("begun"); });
probe("t:syscalls:sys_enter_getppid", |e| { calls = count(); });
probe("hardware:cycles", |e| { c[e.comm] = count(); });
"#;
    if has_pmu() {
        let mut t = Tracer::start(&["-d", "500ms", "-e", src]);
        assert_eq!(t.wait_attached(), 3);
        let th = burn("rth_busy", None, Duration::from_millis(300), Duration::from_millis(400));
        th.join().unwrap();
        let out = t.finish();
        assert_eq!(out.code, Some(0), "{out}");
        assert!(!entries(&out, "c").is_empty(), "hardware:cycles sampled nothing\n{out}");
        return;
    }
    eprintln!("no hardware PMU here: checking the error");
    let out = run(&["-d", "2s", "-e", src]);
    let line = assert_clean_error(&out);
    assert!(!out.stdout.contains("begun"), "BEGIN must not run when attaching fails\n{out}");
    assert!(
        line.contains("hardware:cycles: this machine has no hardware performance counters (perf_event_open: ")
            && line.contains("use software:cpu-clock or profile:hz:N instead"),
        "{line}"
    );
    assert_tracing_still_works();
}

kernel_test!(hardware_probe_passes_the_verifier_in_dry_run);
fn hardware_probe_passes_the_verifier_in_dry_run() {
    let _g = setup();
    let src = r#"
let c = map();
probe("h:instructions:1e6", |e| { if e.pid > 1 { c[[e.comm, e.cpu]] = count(); } });
probe("hardware:cache-misses", |e| { c[[e.comm, e.cpu]] = count(); });
"#;
    let out = run(&["--dry-run", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("passed the verifier"), "{out}");
    assert!(!out.has_attach_line(), "{out}");
}

kernel_test!(bad_specs_are_clear_errors);
fn bad_specs_are_clear_errors() {
    let _g = setup();
    let cases = [
        ("profile:hz:0", "profile:hz:0: the rate must be at least 1"),
        (
            "profile:xx:5",
            "profile:xx:5: unknown unit 'xx'; write profile:hz:RATE, profile:s:N, profile:ms:N or profile:us:N",
        ),
        ("interval:s", "interval:s: missing the count; e.g. interval:s:1"),
        ("interval:ms:ten", "interval:ms:ten: 'ten' is not a whole number"),
        ("profile:99", "profile:99: expected UNIT:N"),
        ("software:page-fault", "unknown software event 'page-fault'; did you mean page-faults?"),
        (
            "s:bogus",
            "unknown software event 'bogus' (known: alignment-faults, bpf-output, context-switches/cs, cpu-clock/cpu,",
        ),
        ("h:cpu-clock", "unknown hardware event 'cpu-clock'"),
        ("software:cs:0", "software:cs:0: the count must be at least 1"),
        ("software:cs:x", "software:cs:x: the count 'x' is not a whole number"),
    ];
    for (spec, want) in cases {
        let src = format!("let m = map();\nprobe(\"{spec}\", |e| {{ m = count(); }});\n");
        let out = run(&["-e", &src]);
        let line = assert_clean_error(&out);
        assert!(line.starts_with("-e:2:"), "the error points at the probe() call: {line}");
        assert!(line.contains(want), "{spec}: expected {want:?} in\n{line}");
    }
}
