//! The embedded tools (`rtrace TOOL ARGS...`) on a real kernel: each test
//! makes the events itself (calls into a fixture built here, opens, execs,
//! signals, TCP connections on 127.0.0.1, O_DIRECT writes) and looks for
//! them in the tool's output, filtered by its own pids or unique names.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/uprobe_target.c");

/// The uprobe fixture built under a unique name (so only this test's runs hit its probes).
pub(crate) fn fixture() -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    let src = std::fs::read_to_string(FIXTURE).unwrap();
    let bin = build_c(&dir, &format!("rtt_{}", token()), &src, &["-O2"]);
    (dir, bin)
}

/// Run the fixture with N rounds.
pub(crate) fn run_fixture(bin: &PathBuf, n: usize) {
    let out = Command::new(bin).arg(n.to_string()).output().unwrap();
    assert!(out.status.success(), "fixture failed: {out:?}");
}

/// Start `rtrace TOOL ARGS...` and wait until it has attached.
pub(crate) fn start_tool(args: &[&str]) -> Tracer {
    let mut t = Tracer::start(args);
    t.wait_attached();
    t
}

/// `rtrace TOOL ARGS...` around `event`, stopped once a line contains `marker`.
pub(crate) fn tool_until(args: &[&str], event: impl FnOnce(), marker: &str) -> Outcome {
    let mut t = start_tool(args);
    event();
    t.wait_line(&format!("a line with {marker:?}"), Duration::from_secs(10), |l| l.contains(marker));
    t.interrupt_and_finish()
}

/// Wait for an argdist summary line containing `want`, then for the next
/// interval's `[HH:MM:SS]` (so the interval that printed it is complete),
/// and stop.
pub(crate) fn argdist_rows(mut t: Tracer, want: &str) -> Outcome {
    t.wait_line("the summary", Duration::from_secs(10), |l| l.contains(want));
    t.wait_line("the next interval", Duration::from_secs(5), |l| l.starts_with('['));
    t.interrupt_and_finish()
}

/// The lines of `out` that contain every one of `words`.
pub(crate) fn lines_with<'a>(out: &'a Outcome, words: &[&str]) -> Vec<&'a str> {
    out.stdout.lines().filter(|l| words.iter().all(|w| l.contains(w))).collect()
}

/// The one stdout line that contains every word; the test fails when there
/// are none or several.
pub(crate) fn only_line_with<'a>(out: &'a Outcome, words: &[&str]) -> &'a str {
    let hits = lines_with(out, words);
    assert_eq!(hits.len(), 1, "{out}");
    hits[0]
}

/// Sum of the counts of BCC-layout histogram rows (`  lo -> hi : count |...|`).
fn bcc_hist_total(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains(" -> ") && l.contains('|'))
        .filter_map(|l| l.split(':').nth(1)?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

kernel_test!(list_tools_and_help);
fn list_tools_and_help() {
    let _g = setup();
    let out = run(&["--list-tools"]);
    assert_eq!(out.code, Some(0), "{out}");
    let names: Vec<&str> = out.stdout.lines().filter_map(|l| l.split_whitespace().next()).collect();
    for want in ["argdist", "trace", "funccount", "funclatency", "stackcount", "opensnoop", "execsnoop", "biolatency"] {
        assert!(names.contains(&want), "{want} missing from --list-tools\n{out}");
    }
    for l in out.stdout.lines() {
        assert!(l.len() > 17, "a tool without a description: {l:?}");
    }
    assert_eq!(run(&["tools"]).stdout, out.stdout);
    for name in names {
        let h = run(&[name, "-h"]);
        assert_eq!(h.code, Some(0), "{name} -h\n{h}");
        assert!(h.stdout.starts_with(&format!("usage: {name} [-h]")), "{name} -h\n{h}");
        assert!(!h.has_attach_line(), "{name} -h attached probes\n{h}");
    }
}

kernel_test!(bad_tool_arguments_are_one_line_errors);
fn bad_tool_arguments_are_one_line_errors() {
    let _g = setup();
    let cases: &[(&[&str], &[&str])] = &[
        (&["argdist", "-C", "x:c:write"], &["argdist: error parsing probe 'x:c:write': probe type must be"]),
        (&["argdist", "-C", "p:c:write(int fd):int:fdx"], &["unknown name 'fdx'"]),
        (&["argdist", "-C", "p:c:write(int fd):int,int:fd"], &["mismatched # of exprs and types"]),
        (&["argdist", "-H", "p:c:write"], &["histograms must have expr"]),
        (&["argdist", "-C", "p:c:write():int:$retval"], &["$retval is only available in return probes"]),
        (
            &["argdist", "-p", "abc", "-C", "p:c:write"],
            &["argdist: error: argument -p/--pid: invalid int value: 'abc'"],
        ),
        (&["argdist"], &["at least one specifier is required"]),
        (&["opensnoop", "--bogus"], &["opensnoop: error: unrecognized option '--bogus'"]),
        (&["funccount"], &["funccount: error: the following arguments are required: pattern"]),
        (&["trace", "p:c:write \"%d %d\" arg1"], &["the format has 2 conversions but 1 arguments"]),
    ];
    assert_usage_errors(cases);
}

kernel_test!(argdist_kernel_function_names_the_tracepoint, needs: NoKprobes);
fn argdist_kernel_function_names_the_tracepoint() {
    let _g = setup();
    let out = run(&["argdist", "-C", "p::do_sys_openat2(int dfd):int:dfd"]);
    let line = assert_clean_error(&out);
    assert!(line.contains("tracepoint:syscalls:sys_enter_openat"), "{line}");
}

kernel_test!(argdist_counts_and_histograms_of_a_programs_calls, needs: Program("gcc"));
fn argdist_counts_and_histograms_of_a_programs_calls() {
    let _g = setup();
    let (_d, bin) = fixture();
    let b = bin.to_str().unwrap();
    let count = format!("p:{b}:rtt_add(int a, int b):int:b");
    let pair = format!("r:{b}:rtt_add(int a, int b):int,int:$entry(a),$retval:$retval>10#sums");
    let rets = format!("r:{b}:rtt_mul()");
    let hist = format!("p:{b}:rtt_mul(long a, long b):long:a");
    let lat = format!("r:{b}:rtt_mul():u64:$latency");
    let t = start_tool(&["argdist", "-c", "-i", "1", "-C", &count, &pair, &rets, "-H", &hist, &lat]);
    run_fixture(&bin, 5);
    // The summary with all five calls.
    let out = argdist_rows(t, "b = 40");
    assert_eq!(out.code, Some(0), "{out}");
    let text = &out.stdout;
    assert!(text.contains(&format!("{count}\n\tCOUNT      EVENT\n")), "{out}");
    for i in 0..5 {
        assert!(text.contains(&format!("\t1          b = {}\n", 10 * i)), "b = {} missing\n{out}", 10 * i);
    }
    // The label names the specifier; $entry(a) and $retval with a filter.
    assert!(text.contains("sums\n\tCOUNT      EVENT\n"), "{out}");
    for i in 1..5 {
        // BCC shows `$entry(a)` as `a`.
        assert!(text.contains(&format!("\t1          a = {i}, $retval = {}\n", 11 * i)), "{out}");
    }
    assert!(!text.contains("a = 0,"), "the filter $retval>10 let 0 through\n{out}");
    assert!(!text.contains("$entry("), "{out}");
    // A return probe without expressions counts return values.
    assert!(text.contains("\t1          retval = 12\n"), "{out}");
    // The histogram of a = 0..4 in BCC's layout.
    assert!(
        text.contains(concat!(
            "     a                   : count     distribution\n",
            "         0 -> 1          : 2        |****************************************|\n",
            "         2 -> 3          : 2        |****************************************|\n",
            "         4 -> 7          : 1        |********************                    |\n"
        )),
        "{out}"
    );
    assert!(text.contains("     $latency            : count     distribution\n"), "{out}");
}

kernel_test!(argdist_usdt_arguments, needs: Program("gcc"), Sdt);
fn argdist_usdt_arguments() {
    let _g = setup();
    let (_d, bin) = fixture();
    assert!(std::fs::read(&bin).unwrap().windows(7).any(|w| w == b"stapsdt"), "the fixture has USDT probes");
    let spec = format!("u:{}:tick:long,char*:arg3,arg2", bin.display());
    let t = start_tool(&["argdist", "-c", "-i", "1", "-C", &spec]);
    run_fixture(&bin, 6);
    let out = argdist_rows(t, "arg3 = 300");
    for (v, name) in [(100, "alpha"), (200, "beta"), (300, "gamma")] {
        assert!(out.stdout.contains(&format!("\t2          arg3 = {v}, arg2 = {name}\n")), "{out}");
    }
}

kernel_test!(argdist_libc_calls_and_tracepoints_of_one_process);
fn argdist_libc_calls_and_tracepoints_of_one_process() {
    let _g = setup();
    let me = pid().to_string();
    let t = start_tool(&[
        "argdist",
        "-c",
        "-p",
        &me,
        "-i",
        "1",
        "-C",
        "p:c:getppid()",
        "-C",
        "t:syscalls:sys_enter_getppid",
    ]);
    for _ in 0..7 {
        unsafe { libc::getppid() };
    }
    let out = argdist_rows(t, "total calls");
    let libc_rows = out.stdout.split("p:c:getppid()\n").nth(1).unwrap_or("");
    assert!(libc_rows.contains("\t7          total calls\n"), "{out}");
    let tp_rows = out.stdout.split("t:syscalls:sys_enter_getppid\n").nth(1).unwrap_or("");
    assert!(tp_rows.contains("\t7          total calls\n"), "{out}");
}

kernel_test!(argdist_verbose_prints_the_generated_script);
fn argdist_verbose_prints_the_generated_script() {
    let _g = setup();
    let mut t = Tracer::start(&["argdist", "-v", "-C", "p:c:write(int fd):int:fd"]);
    t.wait_attached();
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("probe(\"uprobe:c:write\", \"|e| { __m0["), "{out}");
}

kernel_test!(trace_prints_calls_with_a_predicate, needs: Program("gcc"));
fn trace_prints_calls_with_a_predicate() {
    let _g = setup();
    let (_d, bin) = fixture();
    let spec = format!("p:{}:rtt_add(int a, int b) (b == 20) \"a=%d b=%d\", a, b", bin.display());
    let ret = format!("r:{}:rtt_mul \"ret %d\" retval", bin.display());
    let mut t = start_tool(&["trace", &spec, &ret]);
    run_fixture(&bin, 5);
    t.wait_line("the rtt_add line", Duration::from_secs(10), |l| l.contains("rtt_add"));
    t.wait_count("five rtt_mul lines", Duration::from_secs(10), 5, |l| l.contains("rtt_mul"));
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("\nPID     TID     COMM            FUNC             -\n"), "{out}");
    let adds = lines_with(&out, &["rtt_add "]);
    assert_eq!(adds.len(), 1, "{out}");
    assert!(adds[0].ends_with("rtt_add          a=2 b=20"), "{out}");
    for i in 0..5 {
        assert!(lines_with(&out, &["rtt_mul ", &format!("ret {}", 3 * i)]).len() == 1, "{out}");
    }
}

kernel_test!(funccount_funclatency_stackcount_on_a_program, needs: Program("gcc"));
fn funccount_funclatency_stackcount_on_a_program() {
    let _g = setup();
    let (_d, bin) = fixture();
    let b = bin.to_str().unwrap();
    let pattern = format!("{b}:rtt_*");
    let t = start_tool(&["funccount", &pattern]);
    run_fixture(&bin, 6);
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("FUNC                                    COUNT\n"), "{out}");
    for f in ["rtt_add", "rtt_mul"] {
        assert_eq!(lines_with(&out, &[&format!("{f:<36} {:>8}", 6)]).len(), 1, "{f}\n{out}");
    }

    let t = start_tool(&["funclatency", &format!("{b}:rtt_mul")]);
    run_fixture(&bin, 6);
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("     nsecs               : count     distribution\n"), "{out}");
    assert_eq!(bcc_hist_total(&out.stdout), 6, "{out}");
    assert!(out.stdout.contains(" nsecs, count: 6\n"), "{out}");

    let t = start_tool(&["stackcount", "-f", &format!("{b}:rtt_mul")]);
    run_fixture(&bin, 6);
    let out = t.interrupt_and_finish();
    let name = bin.file_name().unwrap().to_str().unwrap();
    // The fixture has no frame pointers: the stack at entry may be the function alone.
    let folded = lines_with(&out, &[&format!("{name};"), ";rtt_mul"]);
    assert_eq!(folded.len(), 1, "{out}");
    assert!(folded[0].ends_with(" 6"), "{out}");
}

kernel_test!(funccount_over_tracepoints);
fn funccount_over_tracepoints() {
    let _g = setup();
    let me = pid().to_string();
    let t = start_tool(&["funccount", "-p", &me, "t:syscalls:sys_enter_getppid"]);
    getppid_n(9);
    let out = t.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!("{:<36} {:>8}", "syscalls:sys_enter_getppid", 9)]).len(), 1, "{out}");
}

kernel_test!(opensnoop_statsnoop_show_paths_and_errors);
fn opensnoop_statsnoop_show_paths_and_errors() {
    let _g = setup();
    let me = pid().to_string();
    let missing = format!("/tmp/rtt_{}_missing", token());
    let out = tool_until(&["opensnoop", "-p", &me, "-x"], || drop(std::fs::File::open(&missing)), &missing);
    let hit = only_line_with(&out, &[&missing]);
    assert!(hit.starts_with(&format!("{me:<6} ")), "{out}");
    assert!(hit.ends_with(&format!("  -1   2 {missing}")), "{out}");

    let out = tool_until(&["statsnoop", "-p", &me], || drop(std::fs::metadata(&missing)), &missing);
    let hits = lines_with(&out, &[&missing]);
    assert!(!hits.is_empty() && hits.iter().all(|l| l.ends_with(&format!("  -1   2 {missing}"))), "{out}");
}

kernel_test!(execsnoop_exitsnoop_see_a_child);
fn execsnoop_exitsnoop_see_a_child() {
    let _g = setup();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let prog = dir.true_named(&name);
    let t1 = start_tool(&["execsnoop", "-n", &name]);
    let t2 = start_tool(&["exitsnoop"]);
    let child = Command::new(&prog).arg("first").arg("second").spawn().unwrap();
    let cpid = child.id().to_string();
    let st = child.wait_with_output().unwrap();
    assert!(st.status.success());
    let sh = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
    let shpid = sh.id().to_string();
    sh.wait_with_output().unwrap();
    let out = t1.interrupt_and_finish();
    let hit = only_line_with(&out, &[&name]);
    let w: Vec<&str> = hit.split_whitespace().collect();
    assert_eq!(&w[..3], &[name.as_str(), cpid.as_str(), &pid().to_string()], "{out}");
    assert_eq!(w[3], "0", "{out}");
    assert!(hit.ends_with(&format!("{} first second", prog.display())), "{out}");
    let out = t2.interrupt_and_finish();
    let hit = only_line_with(&out, &[&format!(" {cpid} ")]);
    assert!(hit.starts_with(&name) && hit.ends_with(" 0"), "{out}");
    assert!(only_line_with(&out, &[&format!(" {shpid} ")]).ends_with(" 3"), "{out}");
}

kernel_test!(killsnoop_setuids_syncsnoop_see_this_process);
fn killsnoop_setuids_syncsnoop_see_this_process() {
    let _g = setup();
    let me = pid().to_string();
    let t1 = start_tool(&["killsnoop", "-p", &me]);
    let t2 = start_tool(&["syncsnoop", "-p", &me]);
    let t3 = start_tool(&["setuids"]);
    unsafe { libc::kill(pid() as i32, 0) };
    unsafe { libc::kill(0x3fff_fff0, 0) };
    let dir = TempDir::new();
    let f = std::fs::File::create(dir.join("f")).unwrap();
    unsafe { libc::fsync(f.as_raw_fd()) };
    let child = fork_and_wait(|| unsafe {
        libc::syscall(libc::SYS_setuid, 0);
    });
    let out = t1.interrupt_and_finish();
    // Only this test's kill(..., 0) calls (it also sends SIGINT to tracers).
    let hits: Vec<&str> = lines_with(&out, &[&format!(" {me} ")])
        .into_iter()
        .filter(|l| l.split_whitespace().nth(3) == Some("0"))
        .collect();
    assert_eq!(hits.len(), 2, "{out}");
    assert!(hits[0].ends_with(&format!("0    {me:<7} 0")), "{out}");
    assert!(hits[1].ends_with(&format!("0    {:<7} -3", 0x3fff_fff0)), "{out}");
    let out = t2.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!(" {me} "), " fsync"]).len(), 1, "{out}");
    let out = t3.interrupt_and_finish();
    let hit = only_line_with(&out, &[&format!(" {child} ")]);
    assert!(hit.ends_with("setuid     uid=0 (ret=0)"), "{out}");
}

kernel_test!(threadsnoop_and_pidpersec);
fn threadsnoop_and_pidpersec() {
    let _g = setup();
    let me = pid().to_string();
    let spawn = || std::thread::spawn(|| {}).join().unwrap();
    let out = tool_until(&["threadsnoop", "-p", &me], spawn, &format!(" {me} "));
    assert!(!lines_with(&out, &[&format!(" {me} ")]).is_empty(), "{out}");

    let mut t = start_tool(&["pidpersec", "-n", "2"]);
    for _ in 0..5 {
        fork_and_wait(|| {});
    }
    t.wait_count("two intervals", Duration::from_secs(10), 2, |l| l.contains("PIDs/sec"));
    let out = t.finish();
    let total: u64 = out.stdout.lines().filter_map(|l| l.split("PIDs/sec: ").nth(1)?.trim().parse::<u64>().ok()).sum();
    assert!(total >= 5, "{out}");
}

kernel_test!(syscount_counts_this_process);
fn syscount_counts_this_process() {
    let _g = setup();
    let me = pid().to_string();
    // Hundreds of tracepoints: detaching them may take a while on a busy machine.
    let t = start_tool(&["syscount", "-p", &me, "-T", "50"]);
    getppid_n(13);
    t.interrupt();
    let out = t.finish_within(Duration::from_secs(120));
    assert_eq!(lines_with(&out, &[&format!("{:<22} {:>8}", "getppid", 13)]).len(), 1, "{out}");
    let t = start_tool(&["syscount", "-p", &me, "-L", "-T", "50"]);
    getppid_n(4);
    t.interrupt();
    let out = t.finish_within(Duration::from_secs(120));
    only_line_with(&out, &[&format!("{:<22} {:>8} ", "getppid", 4)]);
}

kernel_test!(scheduler_tools_see_this_thread_sleep);
fn scheduler_tools_see_this_thread_sleep() {
    let _g = setup();
    // runqlat's -p is the process (as BCC's); cpudist's the thread.
    for (tool, me) in [("runqlat", pid()), ("cpudist", tid())] {
        let me = me.to_string();
        let t = start_tool(&[tool, "-p", &me]);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let out = t.interrupt_and_finish();
        assert!(out.stdout.contains("     usecs               : count     distribution\n"), "{tool}\n{out}");
        assert!(bcc_hist_total(&out.stdout) >= 10, "{tool}\n{out}");
    }
    let comm = unique_comm();
    let t = start_tool(&["offcputime", "-f", "-p", &pid().to_string()]);
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(2));
    }
    // The stacks are joined to the off-CPU times in userspace: let it catch
    // up (events still queued when tracing stops are not handled).
    std::thread::sleep(Duration::from_millis(1500));
    let out = t.interrupt_and_finish();
    assert!(!lines_with(&out, &[&format!("{comm};"), "schedule"]).is_empty(), "{out}");
    // The same with rtrace's own -p: the switch-in of the traced process
    // runs in another task, so the tool's probe is `.unfiltered()`.
    let t = start_tool(&["-p", &pid().to_string(), "offcputime", "-f"]);
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let out = t.interrupt_and_finish();
    assert!(!lines_with(&out, &[&format!("{comm};"), "schedule"]).is_empty(), "rtrace -p PID offcputime\n{out}");

    let mut t = start_tool(&["runqlen", "1", "1"]);
    t.wait_line("the summary", Duration::from_secs(10), |l| l.contains("runqlen : count"));
    let out = t.interrupt_and_finish();
    assert!(lines_with(&out, &["        0   : "]).len() == 1, "{out}");
}

kernel_test!(profile_samples_a_busy_thread);
fn profile_samples_a_busy_thread() {
    let _g = setup();
    let comm = unique_comm();
    let t = start_tool(&["profile", "-f", "-F", "199", "-p", &pid().to_string()]);
    let until = std::time::Instant::now() + Duration::from_millis(500);
    let mut x = 0u64;
    while std::time::Instant::now() < until {
        x = x.wrapping_mul(31).wrapping_add(1);
    }
    std::hint::black_box(x);
    let out = t.interrupt_and_finish();
    assert!(!lines_with(&out, &[&format!("{comm};")]).is_empty(), "{out}");
}

/// Copy /bin/dd to `dir/name`, so that its I/O carries that comm.
fn dd_named(dir: &TempDir, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy("/bin/dd", &p).unwrap();
    p
}

kernel_test!(block_tools_see_direct_writes);
fn block_tools_see_direct_writes() {
    let _g = setup();
    let dir = TempDir::new();
    let name = format!("rtt_{}", token());
    let dd = dd_named(&dir, &name);
    let target = dir.join("data");
    let write = || {
        let st = Command::new(&dd)
            .arg("if=/dev/zero")
            .arg(format!("of={}", target.display()))
            .args(["bs=64k", "count=8", "oflag=direct"])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    };
    let mut t = start_tool(&["biosnoop"]);
    write();
    // dd's writes have completed when it exits; wait until their lines are
    // out (or give up after a while, for machines without a disk) before
    // ending the run.
    let comm = name[..name.len().min(14)].to_string();
    let seen = std::cell::Cell::new(0);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        t.wait_line("the 8th write", Duration::from_secs(10), |l| {
            if l.contains(&format!(" {comm} ")) {
                seen.set(seen.get() + 1);
            }
            seen.get() >= 8
        })
    }));
    let out = t.interrupt_and_finish();
    let hits = lines_with(&out, &[&format!(" {} ", &name[..name.len().min(14)])]);
    if hits.is_empty() && !out.stdout.lines().any(|l| l.contains(" W")) {
        inconclusive("no block I/O reached a device (the temporary directory is not on a disk)");
        return;
    }
    assert!(!hits.is_empty(), "{out}");
    let bytes: u64 = hits.iter().filter_map(|l| l.split_whitespace().nth(6)?.parse::<u64>().ok()).sum();
    assert!(bytes >= 8 * 65536, "{out}");

    let t = start_tool(&["bitesize"]);
    write();
    let out = t.interrupt_and_finish();
    let section = out.stdout.split(&format!("Process Name = {}", &name[..name.len().min(15)])).nth(1).unwrap_or("");
    assert!(bcc_hist_total(section.split("Process Name").next().unwrap()) >= 1, "{out}");

    let t = start_tool(&["biolatency", "-D"]);
    write();
    let out = t.interrupt_and_finish();
    assert!(out.stdout.contains("disk = "), "{out}");
    assert!(bcc_hist_total(&out.stdout) >= 1, "{out}");
}

/// tcpconnect and tcpaccept (`-P PORT`) and tcplife (`LIFE_FLAGS -L PORT`)
/// while this process connects to `listener`, runs `traffic` on (client,
/// server) and closes both; their outcomes, in that order, and the client's
/// port.
pub(crate) fn tcp_tools_on_a_connection(
    listener: &TcpListener,
    life_flags: &[&str],
    traffic: impl FnOnce(&mut TcpStream, &mut TcpStream),
) -> ([Outcome; 3], u16) {
    let to = listener.local_addr().unwrap();
    let port = to.port().to_string();
    let t1 = start_tool(&["tcpconnect", "-P", &port]);
    let t2 = start_tool(&["tcpaccept", "-P", &port]);
    let mut life = vec!["tcplife"];
    life.extend_from_slice(life_flags);
    life.extend(["-L", &port]);
    let t3 = start_tool(&life);
    let mut c = TcpStream::connect(to).unwrap();
    let cport = c.local_addr().unwrap().port();
    let (mut a, _) = listener.accept().unwrap();
    traffic(&mut c, &mut a);
    drop(c);
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    ([t1.interrupt_and_finish(), t2.interrupt_and_finish(), t3.interrupt_and_finish()], cport)
}

/// tcpretrans while 4 clients try to connect to `listener`, whose accept
/// queue is full (it drops their SYNs: they send them again).
pub(crate) fn tcpretrans_with_a_full_accept_queue(listener: &TcpListener) -> Outcome {
    let to = listener.local_addr().unwrap();
    unsafe { libc::listen(listener.as_raw_fd(), 0) };
    let t = start_tool(&["tcpretrans"]);
    let clients: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || TcpStream::connect_timeout(&to, Duration::from_millis(1500)).ok()))
        .collect();
    for c in clients {
        let _ = c.join();
    }
    t.interrupt_and_finish()
}

kernel_test!(tcp_tools_see_a_loopback_connection);
fn tcp_tools_see_a_loopback_connection() {
    let _g = setup();
    let me = pid().to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let ([out1, out2, out3], cport) = tcp_tools_on_a_connection(&listener, &[], |c, _| c.write_all(b"x").unwrap());
    let out = out1;
    let hit = only_line_with(&out, &[&format!("{me} ")]);
    assert!(hit.ends_with(&format!("127.0.0.1        127.0.0.1        {port:<5}")), "{out}");
    let out = out2;
    let hit = only_line_with(&out, &[&format!("{me} ")]);
    assert!(hit.contains(&format!("127.0.0.1        {cport:<5} 127.0.0.1        {port}")), "{out}");
    let out = out3;
    only_line_with(&out, &[&format!("127.0.0.1       {port:<5} 127.0.0.1       {cport:<5}")]);
}

kernel_test!(tcpretrans_sees_syn_retransmits);
fn tcpretrans_sees_syn_retransmits() {
    let _g = setup();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = tcpretrans_with_a_full_accept_queue(&listener);
    let hits = lines_with(&out, &[&format!("R> 127.0.0.1:{port} ")]);
    assert!(!hits.is_empty(), "{out}");
}

kernel_test!(gethostlatency_and_naptime_see_this_process);
fn gethostlatency_and_naptime_see_this_process() {
    let _g = setup();
    let me = pid().to_string();
    let t1 = start_tool(&["gethostlatency", "-p", &me]);
    let t2 = start_tool(&["naptime", "-p", &me]);
    use std::net::ToSocketAddrs;
    let _ = ("localhost", 80).to_socket_addrs();
    std::thread::sleep(Duration::from_millis(20));
    let out = t1.interrupt_and_finish();
    assert!(!lines_with(&out, &[&format!(" {me} "), " localhost"]).is_empty(), "{out}");
    let out = t2.interrupt_and_finish();
    // The requested duration (20 ms), not the measured sleep.
    assert!(!lines_with(&out, &[&format!(" {me} "), " 0.020"]).is_empty(), "{out}");
}

kernel_test!(writeback_sees_a_sync, needs: Path("/sys/kernel/tracing/events/writeback"));
fn writeback_sees_a_sync() {
    let _g = setup();
    let dir = TempDir::new();
    let t = start_tool(&["writeback"]);
    let mut f = std::fs::File::create(dir.join("dirty")).unwrap();
    f.write_all(&vec![7u8; 4 << 20]).unwrap();
    drop(f);
    unsafe { libc::sync() };
    let out = t.interrupt_and_finish();
    let rows: Vec<&str> = out.stdout.lines().skip_while(|l| !l.starts_with("TIME")).skip(1).collect();
    assert!(
        rows.iter().any(|l| l.contains(" sync ") || l.contains(" background ") || l.contains(" periodic ")),
        "{out}"
    );
}

kernel_test!(bashreadline_sees_a_typed_command, needs: Program("script"), Program("bash"));
fn bashreadline_sees_a_typed_command() {
    let _g = setup();
    let word = format!("rtt_{}", token());
    let t = start_tool(&["bashreadline"]);
    let mut sh = Command::new("script")
        .args(["-qfc", "bash --norc --noprofile -i", "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    sh.stdin.take().unwrap().write_all(format!("echo {word}\nexit\n").as_bytes()).unwrap();
    let _ = sh.wait();
    let out = t.interrupt_and_finish();
    assert_eq!(lines_with(&out, &[&format!(" echo {word}")]).len(), 1, "{out}");
}

/// A memory cgroup (v1 or v2) limited to `bytes`, removed on drop.
struct MemCgroup {
    path: PathBuf,
    procs: PathBuf,
}

impl MemCgroup {
    fn new(bytes: u64) -> Option<MemCgroup> {
        for (root, limit, procs) in [
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "tasks"),
            ("/sys/fs/cgroup", "memory.max", "cgroup.procs"),
        ] {
            let base = std::path::Path::new(root);
            if !base.join(limit).exists() && !base.join("cgroup.subtree_control").exists() {
                continue;
            }
            let path = base.join(format!("rtt_{}", token()));
            if std::fs::create_dir(&path).is_err() {
                continue;
            }
            let cg = MemCgroup { procs: path.join(procs), path: path.clone() };
            if std::fs::write(path.join(limit), bytes.to_string()).is_ok() {
                let _ = std::fs::write(path.join("memory.swap.max"), "0");
                return Some(cg);
            }
        }
        None
    }
}

/// Whether a memory cgroup can be made here.
fn memory_cgroup() -> bool {
    MemCgroup::new(32 << 20).is_some()
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

kernel_test!(
    oomkill_sees_a_memory_limited_child_killed,
    needs: Program("gcc"), Check("a memory cgroup to limit a child in", memory_cgroup)
);
fn oomkill_sees_a_memory_limited_child_killed() {
    let _g = setup();
    let cg = MemCgroup::new(32 << 20).expect("a memory cgroup to limit a child in");
    let dir = TempDir::new();
    let src = "#include <stdlib.h>\n#include <string.h>\nint main(void) { for (int i = 0; i < 1024; i++) { char *p = malloc(1 << 20); if (!p) return 1; memset(p, 1, 1 << 20); } return 0; }\n";
    let hog = build_c(&dir, "rtt_hog", src, &["-O0"]);
    let t = start_tool(&["oomkill"]);
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("echo $$ > {} && exec {}", cg.procs.display(), hog.display()))
        .spawn()
        .unwrap();
    let cpid = child.id();
    let st = child.wait_with_output().unwrap();
    let out = t.interrupt_and_finish();
    if st.status.success() {
        inconclusive("the limited child was not killed (swap, or no OOM killer in this cgroup)");
        return;
    }
    let line = only_line_with(&out, &[&format!("OOM kill of PID {cpid} (\"rtt_hog\")")]);
    // The kernel reports kB: a 32 MiB cgroup's victim has tens of thousands of kB resident.
    let rss: u64 =
        line.split("rss ").nth(1).and_then(|r| r.strip_suffix(" kB")).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!((4_000..=64_000).contains(&rss), "rss in kB: {line}");
}

kernel_test!(argdist_ends_with_its_table_and_none_of_its_own_maps, needs: Program("gcc"));
/// The run ends (here by -d) with a call still in flight: argdist prints
/// the interval so far, as at every interval, and none of the maps it keeps
/// the entry values and timestamps in.
fn argdist_ends_with_its_table_and_none_of_its_own_maps() {
    let _g = setup();
    let dir = TempDir::new();
    let bench = build_c(&dir, &format!("ad_{}", token()), include_str!("../fixtures/ci_target.c"), &["-O2"]);
    let b = bench.display();
    // Two calls of 1 ms, then one of 30 s, still running when -d ends the run.
    let spec = format!("r:{b}:ci_spin(long us):long:$entry(us):$latency > 0");
    let cmd = format!("sh -c '{b} 2 1000; exec {b} 1 30000000'");
    let out = run(&["-d", "3s", "-c", &cmd, "argdist", "-i", "60", "-C", &spec]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("\t2          us = 1000\n"), "the table at the end, BCC's label\n{out}");
    assert!(!out.stdout.contains("@__") && !out.stdout.contains("@argdist"), "internal maps printed\n{out}");
}

kernel_test!(profile_folds_user_frames_below_kernel_frames, needs: Program("gcc"));
/// `profile -f -d` under -c: a syscall's stack is `comm;user frames;-;kernel
/// frames` (root first, as BCC folds it), and the command's own stdout stays
/// out of the folded lines.
fn profile_folds_user_frames_below_kernel_frames() {
    let _g = setup();
    let dir = TempDir::new();
    let bench = build_c(&dir, &format!("pf_{}", token()), include_str!("../fixtures/ci_target.c"), &["-O2"]);
    let cmd = format!("sh -c 'echo marker_line; {} 200000 0'", bench.display());
    let out = run(&["-q", "-c", &cmd, "profile", "-f", "-d", "-F", "999"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.contains("marker_line") && out.stderr.contains("marker_line"), "{out}");
    let syscalls: Vec<&str> = out.stdout.lines().filter(|l| l.contains(";entry_SYSCALL_64")).collect();
    if syscalls.is_empty() {
        inconclusive("no sample landed in a system call");
        return;
    }
    for l in &syscalls {
        // The delimiter comes between a sample's user and kernel frames when
        // it has both (as BCC's); a process exiting has no user stack left.
        let at = l.find(";entry_SYSCALL_64").unwrap();
        let user_frames = l[..at].contains(';');
        assert!(!user_frames || l[..at].ends_with(";-"), "kernel frames after the user frames and the delimiter: {l}");
    }
    if !syscalls.iter().any(|l| l.contains(";-;entry_SYSCALL_64")) {
        inconclusive("no sample in a system call had a user stack");
        return;
    }
    for l in out.stdout.lines() {
        let count = l.rsplit(' ').next().unwrap_or("");
        assert!(count.parse::<u64>().is_ok(), "every line is `frames count`: {l:?}");
    }
}

kernel_test!(json_output_stays_records_when_the_command_prints);
/// `-f json -c CMD`: every stdout line is a JSON record; CMD's own output is on stderr.
fn json_output_stays_records_when_the_command_prints() {
    let _g = setup();
    let out =
        run(&["-f", "json", "-c", "sh -c 'echo plain text; echo more'", "-e", "probe(\"END\", || { print(\"x\"); });"]);
    assert_eq!(out.code, Some(0), "{out}");
    for l in out.stdout.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(l).is_ok(), "not a record: {l:?}\n{out}");
    }
    assert!(out.stderr.contains("plain text\nmore\n"), "{out}");
}
