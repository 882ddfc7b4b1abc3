//! `rtrace -l [PATTERN]` / `-lv` on a real kernel: tracepoints against the
//! tracefs directories (and bpftrace's output where bpftrace is installed),
//! software/hardware events, bare words across types, uprobe and USDT
//! listings of a fixture built here, errors, kernel functions per what this
//! kernel supports, and speed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

/// A program with known functions (`rttl_alpha`, `rttl_alps`, `rttl_beta`,
/// `rttl_gamma`) and USDT probes `rttl:start` (2 args), `other:tick` (1 arg)
/// and `rttl:stop` (none). Without <sys/sdt.h> the notes are written the
/// way that header writes them.
const FIXTURE: &str = r#"
#include <stdlib.h>
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define RTT_PROBE0(p, n) STAP_PROBE(p, n)
#define RTT_PROBE1(p, n, a) STAP_PROBE1(p, n, a)
#define RTT_PROBE2(p, n, a, b) STAP_PROBE2(p, n, a, b)
#else
#define RTT_NOTE(p, n, args)                                                    \
    "990: nop\n"                                                                \
    ".pushsection .note.stapsdt,\"?\",\"note\"\n"                               \
    ".balign 4\n"                                                               \
    ".4byte 992f-991f,994f-993f,3\n"                                            \
    "991: .asciz \"stapsdt\"\n"                                                 \
    "992: .balign 4\n"                                                          \
    "993: .8byte 990b\n"                                                        \
    ".8byte _.stapsdt.base\n"                                                   \
    ".8byte 0\n"                                                                \
    ".asciz \"" #p "\"\n"                                                       \
    ".asciz \"" #n "\"\n"                                                       \
    ".asciz \"" args "\"\n"                                                     \
    "994: .balign 4\n"                                                          \
    ".popsection\n"                                                             \
    ".ifndef _.stapsdt.base\n"                                                  \
    ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"     \
    ".weak _.stapsdt.base\n"                                                    \
    ".hidden _.stapsdt.base\n"                                                  \
    "_.stapsdt.base: .space 1\n"                                                \
    ".size _.stapsdt.base,1\n"                                                  \
    ".popsection\n"                                                             \
    ".endif\n"
#define RTT_PROBE0(p, n) __asm__ __volatile__(RTT_NOTE(p, n, ""))
#define RTT_PROBE1(p, n, a) __asm__ __volatile__(RTT_NOTE(p, n, "-4@%0") :: "r"((int)(a)))
#define RTT_PROBE2(p, n, a, b) __asm__ __volatile__(RTT_NOTE(p, n, "-4@%0 8@%1") :: "r"((int)(a)), "r"((long)(b)))
#endif

__attribute__((noinline, used)) int rttl_alpha(int x) { __asm__ volatile(""); return x + 1; }
__attribute__((noinline, used)) int rttl_alps(int x) { __asm__ volatile(""); return x + 2; }
__attribute__((noinline, used)) int rttl_beta(int x) { __asm__ volatile(""); return x * 3; }
__attribute__((noinline, used)) int rttl_gamma(int x) { __asm__ volatile(""); return x - 4; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1;
    int total = 0;
    RTT_PROBE2(rttl, start, argc, n);
    for (long i = 0; i < n; i++) {
        total += rttl_alpha((int)i) + rttl_alps((int)i) + rttl_beta((int)i) + rttl_gamma((int)i);
        RTT_PROBE1(other, tick, i);
    }
    RTT_PROBE0(rttl, stop);
    return total == 12345 ? 1 : 0;
}
"#;

fn fixture() -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    let bin = build_c(&dir, "rttl_fixture", FIXTURE, &["-O0"]);
    (dir, bin)
}

/// `rtrace -l ARGS...`, which must succeed; its stdout lines.
fn list(args: &[&str]) -> Vec<String> {
    let out = run(args);
    assert_eq!(out.code, Some(0), "rtrace {args:?} failed\n{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
    out.lines().iter().map(|l| l.to_string()).collect()
}

fn tracefs() -> PathBuf {
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("events").is_dir() {
            return PathBuf::from(p);
        }
    }
    panic!("no tracefs with an events/ directory");
}

fn assert_sorted_unique(lines: &[String]) {
    for w in lines.windows(2) {
        assert!(w[0] < w[1], "listing not sorted/unique at {:?} / {:?}", w[0], w[1]);
    }
}

kernel_test!(tracepoint_wildcard_lists_the_tracefs_directory);
fn tracepoint_wildcard_lists_the_tracefs_directory() {
    let _g = setup();
    let got = list(&["-l", "tracepoint:syscalls:sys_enter_open*"]);
    let dir = tracefs().join("events/syscalls");
    let mut want: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sys_enter_open"))
        .map(|n| format!("tracepoint:syscalls:{n}"))
        .collect();
    want.sort();
    assert!(!want.is_empty(), "no sys_enter_open* in {}", dir.display());
    assert_eq!(got, want);
    // The short alias, `?`, and a wildcard category give the same.
    assert_eq!(list(&["-l", "t:syscalls:sys_enter_open*"]), want);
    assert_eq!(list(&["-l", "t:sys*:sys_enter_open*"]), want);
    let q = list(&["-l", "t:syscalls:sys_enter_opena?"]);
    assert_eq!(q, vec!["tracepoint:syscalls:sys_enter_openat".to_string()]);
}

kernel_test!(tracepoint_category_and_bare_event_names);
fn tracepoint_category_and_bare_event_names() {
    let _g = setup();
    // `t:CATEGORY` lists the category; `t:NAME` finds the event in any category.
    let cat = list(&["-l", "t:sched"]);
    assert!(cat.contains(&"tracepoint:sched:sched_switch".to_string()), "{cat:?}");
    assert!(cat.iter().all(|l| l.starts_with("tracepoint:sched:")), "{cat:?}");
    assert_eq!(list(&["-l", "t:sys_enter_openat"]), vec!["tracepoint:syscalls:sys_enter_openat".to_string()]);
    assert_eq!(
        list(&["-l", "tracepoint:*:sys_enter_openat"]),
        vec!["tracepoint:syscalls:sys_enter_openat".to_string()]
    );
    // A comma list is the union.
    let both = list(&["-l", "t:syscalls:sys_enter_openat,t:syscalls:sys_exit_openat"]);
    assert_eq!(both, vec!["tracepoint:syscalls:sys_enter_openat", "tracepoint:syscalls:sys_exit_openat"]);
}

kernel_test!(verbose_shows_tracepoint_fields);
fn verbose_shows_tracepoint_fields() {
    let _g = setup();
    let got = list(&["-lv", "tracepoint:syscalls:sys_enter_openat"]);
    assert_eq!(got[0], "tracepoint:syscalls:sys_enter_openat");
    assert!(got.contains(&"    const char * filename".to_string()), "{got:?}");
    assert!(got.contains(&"    int flags".to_string()), "{got:?}");
    assert!(got[1..].iter().all(|l| l.starts_with("    ")), "{got:?}");
    assert!(!got.iter().any(|l| l.contains("common_pid")), "common fields are not listed: {got:?}");
    // Arrays and __data_loc strings are written as in the format file.
    let sw = list(&["-lv", "t:sched:sched_switch"]);
    assert!(sw.contains(&"    char prev_comm[16]".to_string()), "{sw:?}");
    // Without -v: names only.
    assert_eq!(list(&["-l", "tracepoint:syscalls:sys_enter_openat"]).len(), 1);
}

kernel_test!(verbose_output_matches_bpftrace, needs: Program("bpftrace"));
fn verbose_output_matches_bpftrace() {
    let _g = setup();
    for pattern in ["tracepoint:syscalls:sys_enter_open*", "t:sched:*"] {
        let ours = run(&["-lv", pattern]);
        let theirs = Command::new("bpftrace").args(["-lv", pattern]).output().unwrap();
        assert_eq!(ours.stdout, String::from_utf8_lossy(&theirs.stdout), "-lv {pattern} differs from bpftrace");
    }
    let ours = run(&["-l", "tracepoint:*"]);
    let theirs = Command::new("bpftrace").args(["-l", "tracepoint:*"]).output().unwrap();
    assert_eq!(ours.stdout, String::from_utf8_lossy(&theirs.stdout), "-l tracepoint:* differs from bpftrace");
}

kernel_test!(software_and_hardware_events);
fn software_and_hardware_events() {
    let _g = setup();
    let sw = list(&["-l", "software:*"]);
    assert!(sw.contains(&"software:cpu-clock:".to_string()), "{sw:?}");
    assert!(sw.contains(&"software:page-faults:".to_string()), "{sw:?}");
    assert!(sw.iter().all(|l| l.starts_with("software:") && l.ends_with(':')), "{sw:?}");
    assert_sorted_unique(&sw);
    assert_eq!(list(&["-l", "s:*"]), sw);
    assert_eq!(list(&["-l", "software:cpu-clock"]), vec!["software:cpu-clock:"]);
    // Aliases find their event.
    assert_eq!(list(&["-l", "s:faults"]), vec!["software:page-faults:"]);
    assert_eq!(list(&["-l", "s:*-clock"]), vec!["software:cpu-clock:", "software:task-clock:"]);
    let hw = list(&["-l", "h:*"]);
    assert!(hw.contains(&"hardware:cpu-cycles:".to_string()), "{hw:?}");
    assert!(hw.iter().all(|l| l.starts_with("hardware:") && l.ends_with(':')), "{hw:?}");
}

kernel_test!(profile_and_interval_list_nothing_like_bpftrace);
fn profile_and_interval_list_nothing_like_bpftrace() {
    let _g = setup();
    for p in ["profile:*", "p:*", "interval:*", "i:*"] {
        assert!(list(&["-l", p]).is_empty(), "-l {p}");
    }
}

kernel_test!(bare_words_match_across_types);
fn bare_words_match_across_types() {
    let _g = setup();
    let got = list(&["-l", "*clock*"]);
    assert!(got.contains(&"software:cpu-clock:".to_string()), "{got:?}");
    assert!(got.contains(&"software:task-clock:".to_string()), "{got:?}");
    if tracefs().join("events/syscalls/sys_enter_clock_gettime").is_dir() {
        assert!(got.contains(&"tracepoint:syscalls:sys_enter_clock_gettime".to_string()), "{got:?}");
    }
    assert_sorted_unique(&got);
    let open = list(&["-l", "sys_enter_open*"]);
    assert!(open.contains(&"tracepoint:syscalls:sys_enter_openat".to_string()), "{open:?}");
    assert!(open.iter().all(|l| l.starts_with("tracepoint:syscalls:sys_enter_open")), "{open:?}");
    // A raw tracepoint is found by name too.
    let raw = list(&["-l", "sched_switch"]);
    assert!(raw.contains(&"tracepoint:sched:sched_switch".to_string()), "{raw:?}");
    assert!(raw.contains(&"rawtracepoint:sched_switch".to_string()), "{raw:?}");
    // With no pattern: everything listable without a binary.
    let all = list(&["-l"]);
    assert!(all.contains(&"tracepoint:syscalls:sys_enter_openat".to_string()));
    assert!(all.contains(&"software:cpu-clock:".to_string()));
    assert_sorted_unique(&all);
}

kernel_test!(uprobe_listing_of_a_fixture, needs: Program("gcc"));
fn uprobe_listing_of_a_fixture() {
    let _g = setup();
    let (_dir, bin) = fixture();
    let p = bin.to_str().unwrap();
    assert_eq!(
        list(&["-l", &format!("uprobe:{p}:rttl_al*")]),
        vec![format!("uprobe:{p}:rttl_alpha"), format!("uprobe:{p}:rttl_alps")]
    );
    assert_eq!(list(&["-l", &format!("u:{p}:rttl_bet?")]), vec![format!("uprobe:{p}:rttl_beta")]);
    let all = list(&["-l", &format!("uprobe:{p}:rttl_*")]);
    assert_eq!(all, ["alpha", "alps", "beta", "gamma"].map(|f| format!("uprobe:{p}:rttl_{f}")).to_vec());
    assert_eq!(list(&["-l", &format!("ur:{p}:rttl_gamma")]), vec![format!("uretprobe:{p}:rttl_gamma")]);
    assert!(list(&["-l", &format!("uprobe:{p}:main")]).contains(&format!("uprobe:{p}:main")));
    // -v adds nothing for uprobes.
    assert_eq!(list(&["-lv", &format!("uprobe:{p}:rttl_beta")]), vec![format!("uprobe:{p}:rttl_beta")]);
    // A library by name, printed with its path.
    let libc = list(&["-l", "u:libc:getpid"]);
    assert_eq!(libc.len(), 1, "{libc:?}");
    assert!(libc[0].starts_with("uprobe:/") && libc[0].contains("libc.so") && libc[0].ends_with(":getpid"), "{libc:?}");
}

kernel_test!(usdt_listing_of_a_fixture, needs: Program("gcc"));
fn usdt_listing_of_a_fixture() {
    let _g = setup();
    let (_dir, bin) = fixture();
    let p = bin.to_str().unwrap();
    let want: Vec<String> = ["other:tick", "rttl:start", "rttl:stop"].iter().map(|n| format!("usdt:{p}:{n}")).collect();
    assert_eq!(list(&["-l", &format!("usdt:{p}")]), want);
    assert_eq!(list(&["-l", &format!("U:{p}:*")]), want);
    assert_eq!(list(&["-l", &format!("usdt:{p}:rttl:*")]), want[1..].to_vec());
    assert_eq!(list(&["-l", &format!("U:{p}:tick")]), want[..1].to_vec());
    assert_eq!(list(&["-l", &format!("U:{p}:*:st*")]), want[1..].to_vec());
    // -v: the argument specs.
    let v = list(&["-lv", &format!("usdt:{p}:rttl:start")]);
    assert_eq!(v.len(), 3, "{v:?}");
    assert_eq!(v[0], want[1]);
    assert!(v[1].starts_with("    arg0: ") && v[1].contains('@'), "{v:?}");
    assert!(v[2].starts_with("    arg1: ") && v[2].contains('@'), "{v:?}");
    assert_eq!(list(&["-lv", &format!("usdt:{p}:rttl:stop")]), vec![want[2].clone()]);
    // A binary without USDT notes lists nothing.
    assert!(list(&["-l", "usdt:/bin/true"]).is_empty());
}

kernel_test!(unknown_binaries_and_types_are_one_line_errors);
fn unknown_binaries_and_types_are_one_line_errors() {
    let _g = setup();
    for pattern in
        ["uprobe:/nonexistent/rtt_bin:*", "usdt:/nonexistent/rtt_bin", "u:no_such_library_rtt:*", "usdt:/etc/passwd"]
    {
        let out = run(&["-l", pattern]);
        let line = assert_clean_error(&out);
        assert!(out.stdout.is_empty(), "{out}");
        assert!(line.contains("rtt") || line.contains("passwd"), "-l {pattern}: {line}");
    }
    let line = assert_clean_error(&run(&["-l", "uprobe"]));
    assert!(line.contains("binary"), "{line}");
    let line = assert_clean_error(&run(&["-l", "tracepiont:syscalls:*"]));
    assert!(line.contains("tracepoint"), "{line}");
    let line = assert_clean_error(&run(&["-l", "syscalls:sys_enter_openat"]));
    assert!(line.contains("tracepoint:syscalls:sys_enter_openat"), "{line}");
}

kernel_test!(kernel_functions_only_where_they_attach);
fn kernel_functions_only_where_they_attach() {
    let _g = setup();
    if Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        assert_eq!(list(&["-l", "kprobe:vfs_read"]), vec!["kprobe:vfs_read"]);
        let some = list(&["-l", "k:vfs_*"]);
        assert!(some.len() > 1 && some.iter().all(|l| l.starts_with("kprobe:vfs_")), "{some:?}");
        return;
    }
    eprintln!("no kprobes on this kernel: checking that none are listed");
    for p in ["kprobe:*", "k:vfs_read", "kretprobe:vfs_*"] {
        let out = run(&["-l", p]);
        assert_eq!(out.code, Some(0), "{out}");
        assert!(out.stdout.is_empty(), "-l {p} listed kprobes on a kernel without them\n{out}");
        assert!(out.stderr.contains("no kprobes"), "-l {p} should say why it lists nothing\n{out}");
    }
    let out = run(&["-l", "k:vfs_read"]);
    assert!(out.stderr.contains("tracepoint:syscalls:sys_enter_read"), "{out}");
    // Nor among a bare word's matches.
    let all = list(&["-l", "vfs_read"]);
    assert!(!all.iter().any(|l| l.starts_with("kprobe:") || l.starts_with("fentry:")), "{all:?}");
}

kernel_test!(tracepoint_listing_names_every_tracepoint_once);
fn tracepoint_listing_names_every_tracepoint_once() {
    let _g = setup();
    let got = list(&["-l", "tracepoint:*"]);
    assert!(got.len() > 100, "only {} tracepoints", got.len());
    assert!(got.iter().all(|l| l.starts_with("tracepoint:") && l.matches(':').count() == 2));
    assert_sorted_unique(&got);
}

kernel_test!(closed_pipe_ends_the_listing_quietly);
fn closed_pipe_ends_the_listing_quietly() {
    let _g = setup();
    let mut child =
        Command::new(rtrace_bin()).args(["-lv", "*"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(!first.is_empty());
    // stdout is closed now (`rtrace -l | head -1`).
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(matches!(out.status.code(), Some(0)), "{:?} {err}", out.status);
}
