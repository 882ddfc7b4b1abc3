//! User-space probes on a real kernel: uprobe/uretprobe on a test program
//! built here from tests/fixtures/uprobe_target.c (arguments, return values,
//! wildcards, offsets, addresses), on libc by library name, and its USDT
//! probes (arguments, strings, semaphores).

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/uprobe_target.c");

/// The fixture, compiled into a fresh directory under a unique name
/// (`rtt_XXXXXXXX`, also its comm), so that only this test's runs of it hit
/// its probes.
struct Target {
    dir: TempDir,
    path: PathBuf,
}

impl Target {
    fn build() -> Target {
        let dir = TempDir::new();
        let name = format!("rtt_{}", token());
        let path = dir.join(&name);
        let out = gcc().args(["-O2", "-o"]).arg(&path).arg(FIXTURE).output().expect("cannot run gcc");
        assert!(out.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
        Target { dir, path }
    }

    fn p(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// Whether it was built with <sys/sdt.h>.
    fn has_usdt(&self) -> bool {
        let data = std::fs::read(&self.path).unwrap();
        data.windows(7).any(|w| w == b"stapsdt")
    }

    /// Run it with `n`; returns the `guarded=G` count it printed.
    fn run(&self, n: usize) -> u64 {
        let out = Command::new(&self.path).arg(n.to_string()).output().unwrap();
        assert!(out.status.success(), "{} failed: {:?}", self.p(), out);
        let text = String::from_utf8_lossy(&out.stdout);
        let g = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("guarded="))
            .unwrap_or_else(|| panic!("odd output {text:?}"));
        g.parse().unwrap()
    }

    /// Virtual address of function `name`, from `nm`.
    fn addr_of(&self, name: &str) -> u64 {
        let out = Command::new("nm").arg(&self.path).output().expect("nm");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not in nm output"));
        u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
    }
}

/// `setup()` and the fixture built with its USDT probes (the test needs
/// `Program("gcc"), Sdt`).
fn usdt_setup() -> (std::sync::MutexGuard<'static, ()>, Target) {
    let guard = setup();
    let t = Target::build();
    assert!(t.has_usdt(), "the fixture, built with <sys/sdt.h>, has USDT probes");
    (guard, t)
}

/// (label, count) of each row of the histogram under `header`.
fn hist_counts(out: &Outcome, header: &str) -> Vec<(String, u64)> {
    out.hist_rows(header)
        .iter()
        .map(|r| {
            (r[..16].trim().to_string(), r[16..24].trim().parse().unwrap_or_else(|_| panic!("bad row {r:?}\n{out}")))
        })
        .collect()
}

fn trace_run(src: &str, t: &Target, n: usize) -> (usize, u64, Outcome) {
    let mut tr = Tracer::start(&["-e", src]);
    let attached = tr.wait_attached();
    let guarded = t.run(n);
    let out = tr.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    (attached, guarded, out)
}

kernel_test!(uprobe_reads_arguments_exactly, needs: Program("gcc"));
fn uprobe_reads_arguments_exactly() {
    let _g = setup();
    let t = Target::build();
    let src = fill(
        r#"
let sums = map();
let calls = map();
probe("uprobe:__BIN__:rtt_add", |e| {
    sums[e.arg0] = sum(e.arg1);
    calls[e.func] = count();
});
"#,
        &[("BIN", &t.p())],
    );
    let (attached, guarded, out) = trace_run(&src, &t, 6);
    assert_eq!(attached, 1);
    assert_eq!(guarded, 0, "no USDT probe attached, so no semaphore is set");
    assert_eq!(out.map_lines("calls"), vec!["@calls[rtt_add]: 6"], "{out}");
    let want: Vec<String> = (0..6).map(|i| format!("@sums[{i}]: {}", 10 * i)).collect();
    assert_eq!(out.map_lines("sums"), want, "{out}");
}

kernel_test!(uprobe_reads_stack_arguments, needs: Program("gcc"));
/// `many_args(i, 1, 2, 3, 4, 5, 100 + i, 200 + i)`: arguments 7 and 8
/// come from the stack (`e.arg6`, `e.arg7`), the rest from registers.
fn uprobe_reads_stack_arguments() {
    let _g = setup();
    let t = Target::build();
    let src = fill(
        r#"
let seventh = map();
let regs = map();
probe("uprobe:__BIN__:many_args", |e| {
    seventh[e.arg0] = sum(e.arg6 * 1000 + e.arg7);
    regs = sum(e.arg1 + e.arg2 + e.arg3 + e.arg4 + e.arg5);
});
"#,
        &[("BIN", &t.p())],
    );
    let (attached, _, out) = trace_run(&src, &t, 4);
    assert_eq!(attached, 1);
    let want: Vec<String> = (0..4).map(|i| format!("@seventh[{i}]: {}", (100 + i) * 1000 + 200 + i)).collect();
    assert_eq!(out.map_lines("seventh"), want, "{out}");
    assert_eq!(out.map_lines("regs"), vec!["@regs: 60"], "{out}");
}

kernel_test!(uretprobe_sees_return_values, needs: Program("gcc"));
fn uretprobe_sees_return_values() {
    let _g = setup();
    let t = Target::build();
    let src = fill(
        r#"
let h = map();
let total = map();
probe("ur:__BIN__:rtt_add", |e| { h = hist(e.retval); });
probe("uretprobe:__BIN__:rtt_mul", |e| { total = sum(e.retval); });
"#,
        &[("BIN", &t.p())],
    );
    // rtt_add(i, 10i) = 11i: 0 11 22 33 44 55 66 77; rtt_mul(i, 3) sums to 3 * 28.
    let (attached, _, out) = trace_run(&src, &t, 8);
    assert_eq!(attached, 2);
    assert_eq!(out.map_lines("total"), vec!["@total: 84"], "{out}");
    let rows = hist_counts(&out, "@h:");
    let want: Vec<(String, u64)> = [
        ("[0]", 1),
        ("[1]", 0),
        ("[2, 4)", 0),
        ("[4, 8)", 0),
        ("[8, 16)", 1),
        ("[16, 32)", 1),
        ("[32, 64)", 3),
        ("[64, 128)", 2),
    ]
    .iter()
    .map(|(l, c)| (l.to_string(), *c))
    .collect();
    assert_eq!(rows, want, "{out}");
}

kernel_test!(uprobe_wildcard_attaches_each_function, needs: Program("gcc"));
fn uprobe_wildcard_attaches_each_function() {
    let _g = setup();
    let t = Target::build();
    let src = fill(
        r#"
let c = map();
let p = map();
probe("u:__BIN__:rtt_*", |e| { c[e.func] = count(); p[e.probe] = count(); });
"#,
        &[("BIN", &t.p())],
    );
    let (attached, _, out) = trace_run(&src, &t, 5);
    assert_eq!(attached, 3, "rtt_add, rtt_fire, rtt_mul\n{out}");
    assert_eq!(out.map_lines("c"), vec!["@c[rtt_add]: 5", "@c[rtt_fire]: 5", "@c[rtt_mul]: 5"], "{out}");
    let bin = t.p();
    assert_eq!(
        out.map_lines("p"),
        vec![
            format!("@p[uprobe:{bin}:rtt_add]: 5"),
            format!("@p[uprobe:{bin}:rtt_fire]: 5"),
            format!("@p[uprobe:{bin}:rtt_mul]: 5"),
        ],
        "{out}"
    );
}

kernel_test!(uprobe_by_address_and_offset, needs: Program("gcc"));
fn uprobe_by_address_and_offset() {
    let _g = setup();
    let t = Target::build();
    let addr = t.addr_of("rtt_mul");
    let src = fill(
        r#"
let a = map();
let o = map();
probe("uprobe:__BIN__:__ADDR__", |e| { a[e.arg1] = count(); });
probe("uprobe:__BIN__:rtt_add+0", |e| { o = count(); });
"#,
        &[("BIN", &t.p()), ("ADDR", &format!("{addr:#x}"))],
    );
    let (attached, _, out) = trace_run(&src, &t, 4);
    assert_eq!(attached, 2);
    assert_eq!(out.map_lines("a"), vec!["@a[3]: 4"], "{out}");
    assert_eq!(out.map_lines("o"), vec!["@o: 4"], "{out}");
}

kernel_test!(uprobe_on_libc_by_library_name);
fn uprobe_on_libc_by_library_name() {
    let _g = setup();
    let comm = format!("rtt_{}", token());
    let ccomm = std::ffi::CString::new(comm.clone()).unwrap();
    let src = fill(
        r#"
let c = map();
let p = map();
probe("uprobe:libc:getpid", |e| {
    if e.comm == "__COMM__" { c = count(); p[e.probe] = count(); }
});
"#,
        &[("COMM", &comm)],
    );
    let mut tr = Tracer::start(&["-e", &src]);
    assert_eq!(tr.wait_attached(), 1);
    fork_and_wait(|| {
        set_comm_raw(&ccomm);
        for _ in 0..7 {
            unsafe { libc::getpid() };
        }
    });
    let out = tr.interrupt_and_finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.map_lines("c"), vec!["@c: 7"], "{out}");
    let p = out.map_lines("p");
    assert_eq!(p.len(), 1, "{out}");
    assert!(p[0].starts_with("@p[uprobe:/") && p[0].ends_with("libc.so.6:getpid]: 7"), "{out}");
}

kernel_test!(uprobe_errors_name_what_is_wrong, needs: Program("gcc"));
fn uprobe_errors_name_what_is_wrong() {
    let _g = setup();
    let t = Target::build();
    let bin = t.p();
    let cases: Vec<(String, Vec<String>)> = vec![
        (format!("uprobe:{bin}:rtt_ad"), vec![format!("no function 'rtt_ad' in {bin}"), "did you mean rtt_add".into()]),
        ("uprobe:no_such_library_rtt:f".into(), vec!["cannot find 'no_such_library_rtt'".into()]),
        (format!("uprobe:{bin}:nothing_like_it_*"), vec![format!("no function in {bin} matches 'nothing_like_it_*'")]),
        (format!("uprobe:{bin}"), vec!["needs BINARY:FUNCTION".into()]),
        (format!("uprobe:{}:f", t.dir.write("notelf", "text").display()), vec!["not an ELF file".into()]),
        (format!("uprobe:{bin}:rtt_add+100000"), vec!["past the end of rtt_add".into()]),
    ];
    for (spec, wants) in cases {
        let src = format!(r#"probe("{spec}", |e| {{ }});"#);
        let out = run(&["-e", &src]);
        let line = assert_clean_error(&out);
        for w in wants {
            assert!(line.contains(&w), "{spec}: expected {w:?} in {line:?}");
        }
    }
    assert_tracing_still_works();
}

kernel_test!(usdt_arguments_strings_and_memory_operands, needs: Program("gcc"), Sdt);
fn usdt_arguments_strings_and_memory_operands() {
    let (_g, t) = usdt_setup();
    let src = fill(
        r#"
let by_name = map();
let vals = map();
let seen = map();
probe("usdt:__BIN__:rtt:tick", |e| {
    by_name[str(e.arg1)] = count();
    vals[str(e.arg1)] = sum(e.arg2);
    seen[e.arg0] = count();
});
"#,
        &[("BIN", &t.p())],
    );
    // i = 0..7: alpha for 0 3 6, beta for 1 4, gamma for 2 5.
    let (attached, guarded, out) = trace_run(&src, &t, 7);
    assert_eq!(attached, 1);
    assert_eq!(guarded, 0, "only rtt:guarded's semaphore gates code\n{out}");
    let mut names = out.map_lines("by_name");
    names.sort();
    assert_eq!(names, vec!["@by_name[alpha]: 3", "@by_name[beta]: 2", "@by_name[gamma]: 2"], "{out}");
    let mut v = out.map_lines("vals");
    v.sort();
    assert_eq!(v, vec!["@vals[alpha]: 300", "@vals[beta]: 400", "@vals[gamma]: 600"], "{out}");
    let want: Vec<String> = (0..7).map(|i| format!("@seen[{i}]: 1")).collect();
    assert_eq!(out.map_lines("seen"), want, "{out}");
}

kernel_test!(usdt_semaphore_is_set_while_attached, needs: Program("gcc"), Sdt);
fn usdt_semaphore_is_set_while_attached() {
    let (_g, t) = usdt_setup();
    let src = fill(
        r#"
let c = map();
let s = map();
probe("U:__BIN__:guarded", |e| { c[e.probe] = count(); s = sum(e.arg0); });
"#,
        &[("BIN", &t.p())],
    );
    let (attached, guarded, out) = trace_run(&src, &t, 5);
    assert_eq!(attached, 1);
    assert_eq!(guarded, 5, "the probe's semaphore was set while attached\n{out}");
    assert_eq!(out.map_lines("c"), vec![format!("@c[usdt:{}:rtt:guarded]: 5", t.p())], "{out}");
    assert_eq!(out.map_lines("s"), vec!["@s: 10"], "{out}");
    // Detached: the semaphore is back to 0.
    assert_eq!(t.run(3), 0);
}

kernel_test!(usdt_wildcards_and_errors, needs: Program("gcc"), Sdt);
fn usdt_wildcards_and_errors() {
    let (_g, t) = usdt_setup();
    let bin = t.p();
    let src = fill(r#"let c = map(); probe("usdt:__BIN__:rtt:*", |e| { c[e.probe] = count(); });"#, &[("BIN", &bin)]);
    let (attached, guarded, out) = trace_run(&src, &t, 4);
    assert_eq!(attached, 2);
    assert_eq!(guarded, 4);
    assert_eq!(
        out.map_lines("c"),
        vec![format!("@c[usdt:{bin}:rtt:guarded]: 4"), format!("@c[usdt:{bin}:rtt:tick]: 4")],
        "{out}"
    );

    let cases: Vec<(String, &str)> = vec![
        (format!("usdt:{bin}:rtt:tock"), "did you mean rtt:tick"),
        (format!("usdt:{bin}:nope:*"), "no USDT probe in"),
        ("usdt:/bin/true:x:y".into(), "has no USDT probes"),
    ];
    for (spec, want) in cases {
        let src = format!(r#"probe("{spec}", |e| {{ }});"#);
        let line = assert_clean_error(&run(&["-e", &src]));
        assert!(line.contains(want), "{spec}: expected {want:?} in {line:?}");
    }
}

kernel_test!(usdt_arguments_in_globals, needs: Program("gcc"), Sdt);
/// `rttg:global(rtt_counter, rtt_small)`: the note reads both globals
/// `%rip`-relative (`-8@rtt_counter(%rip) -4@rtt_small(%rip)`); rtrace finds
/// them through the binary's symbols, wherever the PIE is loaded.
fn usdt_arguments_in_globals() {
    let (_g, t) = usdt_setup();
    let src = fill(
        r#"
let counter = map();
let small = map();
probe("usdt:__BIN__:rttg:global", |e| {
    counter[e.arg0] = count();
    small[e.arg1] = count();
});
"#,
        &[("BIN", &t.p())],
    );
    // The note really reads globals (a compiler could have used registers).
    let listed = run(&["-lv", &format!("usdt:{}:rttg:global", t.p())]);
    assert!(listed.stdout.contains("rtt_counter(%rip)"), "{listed}");
    let (attached, _, out) = trace_run(&src, &t, 3);
    assert_eq!(attached, 1);
    assert_eq!(out.map_lines("counter"), vec!["@counter[7]: 1", "@counter[14]: 1", "@counter[21]: 1"], "{out}");
    assert_eq!(out.map_lines("small"), vec!["@small[-9]: 1", "@small[-6]: 1", "@small[-3]: 1"], "{out}");
}
