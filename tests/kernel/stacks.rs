//! Stacks and symbols on a real kernel: `e.ustack` / `e.kstack` (limits,
//! modes) printed from userspace statements and used as map keys, folded
//! output of a profile, `ksym()` in the kernel and in userspace, `usym()`,
//! the stacks of a process that exits right after its event, and stacks the
//! kernel could not record (stack-id collisions).
//!
//! The user-side target is tests/fixtures/stacks.c, built here with
//! `gcc -O0 -fno-omit-frame-pointer -g` under a unique name (`rtt_XXXXXXXX`,
//! also its comm): main -> outer -> middle -> inner, where inner makes
//! getppid syscalls from its own code or spins on the CPU.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::common::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stacks.c");

/// The call chain every fixture stack starts with, leaf first.
const CHAIN: [&str; 4] = ["inner", "middle", "outer", "main"];

struct Fixture {
    _dir: TempDir,
    path: PathBuf,
    /// File name, also the comm of its processes.
    name: String,
}

impl Fixture {
    fn build() -> Fixture {
        let dir = TempDir::new();
        let name = format!("rtt_{}", token());
        let path = dir.join(&name);
        let out = gcc()
            .args(["-O0", "-fno-omit-frame-pointer", "-g", "-o"])
            .arg(&path)
            .arg(FIXTURE)
            .output()
            .expect("cannot run gcc");
        assert!(out.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
        Fixture { _dir: dir, path, name }
    }

    /// Virtual address and size of function `name` in the binary (`nm -S`).
    fn nm(&self, name: &str) -> (u64, u64) {
        let out = Command::new("nm").arg("-S").arg(&self.path).output().expect("cannot run nm");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(3) == Some(name))
            .unwrap_or_else(|| panic!("{name} is not in the nm output:\n{text}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        (u64::from_str_radix(w[0], 16).unwrap(), u64::from_str_radix(w[1], 16).unwrap())
    }

    /// Run it to completion; its stdout.
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.path).args(args).output().unwrap();
        assert!(out.status.success(), "{} {args:?} failed: {out:?}", self.path.display());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Start it with `args` (ending in `hold`): it prints its `addr` line,
    /// does its work, prints `done` and waits for [`Held::release`].
    fn hold(&self, args: &[&str]) -> Held {
        assert_eq!(args.last(), Some(&"hold"));
        let mut child = Command::new(&self.path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.path.display()));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let (inner, pid) = parse_addr_line(&line);
        assert_eq!(pid, child.id() as i32);
        Held { child, out, pid, inner }
    }
}

/// `addr inner=0x55d0c0a1b215 pid=123` → (address, pid).
fn parse_addr_line(line: &str) -> (u64, i32) {
    let mut inner = None;
    let mut pid = None;
    for w in line.split_whitespace() {
        if let Some(v) = w.strip_prefix("inner=0x") {
            inner = u64::from_str_radix(v, 16).ok();
        } else if let Some(v) = w.strip_prefix("pid=") {
            pid = v.parse().ok();
        }
    }
    match (inner, pid) {
        (Some(a), Some(p)) => (a, p),
        _ => panic!("odd fixture line {line:?}"),
    }
}

/// A fixture process that waits (after its work) until released.
struct Held {
    child: Child,
    out: BufReader<ChildStdout>,
    pid: i32,
    /// Run-time address of `inner`, as the process printed it.
    inner: u64,
}

impl Held {
    /// Wait until it printed `done` (its work is over; it is still alive).
    fn wait_done(&mut self) {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "the fixture ended before printing `done`");
            if line.trim() == "done" {
                return;
            }
        }
    }

    /// Let it exit.
    fn release(mut self) {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "fixture failed: {st}");
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Load base of `path` in process `pid`: the start of its mapping at file
/// offset 0 (the fixture is PIE, its first PT_LOAD at address 0).
fn load_base(pid: i32, path: &std::path::Path) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let want = path.to_str().unwrap();
    for l in maps.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() >= 6 && w[5] == want && u64::from_str_radix(w[2], 16) == Ok(0) {
            let start = w[0].split('-').next().unwrap();
            return u64::from_str_radix(start, 16).unwrap();
        }
    }
    panic!("{want} is not mapped at offset 0 in pid {pid}:\n{maps}");
}

fn names(frames: &[String]) -> Vec<&str> {
    frames.iter().map(|f| frame_func(f)).collect()
}

/// Every frame is `func+offset` and the stack starts inner, middle, outer, main.
fn assert_chain(frames: &[String], what: &str, out: &Outcome) {
    let n = names(frames);
    assert!(
        n.len() >= CHAIN.len() && n[..CHAIN.len()] == CHAIN,
        "{what}: expected the stack to start {CHAIN:?}, got {frames:?}\n{out}"
    );
    for f in &frames[..CHAIN.len()] {
        assert!(frame_func(f) != f.as_str(), "{what}: frame {f:?} is not func+offset\n{out}");
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A script whose getppid probe runs `body` for the fixture's processes
/// (by comm), after the top-level lines `prelude`.
fn fixture_script(fx: &Fixture, prelude: &str, body: &str) -> String {
    fill(
        r#"__PRELUDE__
// A syscall tracepoint hands BPF the user registers (no kernel stack on
// Debian's 6.1): rtrace puts a probe reading e.kstack on raw_syscalls.
probe("tracepoint:syscalls:sys_enter_getppid", |e| {
    if e.comm == "__COMM__" {
        __BODY__
    }
});"#,
        &[("PRELUDE", &prelude), ("COMM", &fx.name), ("BODY", &body)],
    )
}

/// Start `rtrace -e src` (with `env`), expect `probes` attached, run
/// `events` (which may return a fixture process still held), end with
/// SIGINT, then release the held process; the run must exit 0.
fn trace_fixture(
    src: &str,
    env: &[(&str, &str)],
    probes: usize,
    events: impl FnOnce(&mut Tracer) -> Option<Held>,
) -> Outcome {
    let mut t = Tracer::start_env(&["-e", src], env);
    assert_eq!(t.wait_attached(), probes);
    let held = events(&mut t);
    let out = t.interrupt_and_finish();
    if let Some(h) = held {
        h.release();
    }
    assert_eq!(out.code, Some(0), "{out}");
    out
}

// ---------------------------------------------------------------------------
// 1. ustack from a tracepoint

kernel_test!(ustack_printed_and_as_map_key_names_the_call_chain, needs: Program("gcc"));
fn ustack_printed_and_as_map_key_names_the_call_chain() {
    let _g = setup();
    let fx = Fixture::build();
    let src = fixture_script(&fx, "let s = map();", "s[e.ustack] = count();\n        print(`USTACK${e.ustack}`);");
    let out = trace_fixture(&src, &[], 1, |t| {
        let mut h = fx.hold(&["calls", "5", "hold"]);
        h.wait_done();
        t.wait_count("5 printed stacks", Duration::from_secs(10), 5, |l| l == "USTACK");
        Some(h)
    });

    let printed = printed_stacks(&out.stdout, "USTACK");
    assert_eq!(printed.len(), 5, "{out}");
    for s in &printed {
        assert_chain(s, "print(e.ustack)", &out);
        assert_eq!(s, &printed[0], "the same call site printed different stacks\n{out}");
    }
    let keys = stack_map_entries(&out.stdout, "s");
    assert_eq!(keys.len(), 1, "one call site, one stack key\n{out}");
    assert_chain(&keys[0].0, "@s key", &out);
    assert_eq!(keys[0].1, 5, "the key counts every call\n{out}");
    assert_eq!(keys[0].0, printed[0], "the key and the printed stack differ\n{out}");
}

// ---------------------------------------------------------------------------
// 2. kstack from a syscall tracepoint: limits and modes

/// Checks of a syscall-entry kernel stack in each mode; `def` is the default
/// (bpftrace) mode, `raw` the same stack's addresses.
fn check_kernel_stack(def: &[String], raw: &[String], perf: &[String], k3: &[String], ks: &Kallsyms, out: &Outcome) {
    let n = names(def);
    let sc = n.iter().position(|f| *f == "do_syscall_64");
    let entry = n.iter().position(|f| f.starts_with("entry_SYSCALL_64"));
    assert!(sc.is_some() && entry.is_some(), "kstack lacks the syscall entry path: {def:?}\n{out}");
    assert!(sc < entry, "kstack is not leaf first: {def:?}\n{out}");
    for f in def {
        assert!(frame_func(f) != f.as_str(), "kernel frame {f:?} is not func+offset\n{out}");
    }
    // Raw: the same frames as addresses, which kallsyms names the same way.
    assert_eq!(raw.len(), def.len(), "raw {raw:?} vs {def:?}\n{out}");
    for (r, d) in raw.iter().zip(def) {
        assert!(is_hex(r), "raw frame {r:?} is not hex only\n{out}");
        let addr = u64::from_str_radix(r, 16).unwrap();
        let (syms, off) = ks.containing(addr).unwrap_or_else(|| panic!("{r} is not in kallsyms"));
        let (name, doff) = d.rsplit_once('+').unwrap();
        assert!(
            syms.contains(&name) && doff == off.to_string(),
            "raw {r} is {syms:?}+{off} in kallsyms, printed {d}\n{out}"
        );
    }
    // Perf: `ADDR func+0xOFF ([kernel.kallsyms])`, as perf script prints.
    assert_eq!(perf.len(), def.len(), "perf {perf:?} vs {def:?}\n{out}");
    for ((p, d), r) in perf.iter().zip(def).zip(raw) {
        let w: Vec<&str> = p.split_whitespace().collect();
        assert_eq!(w.len(), 3, "perf frame {p:?} is not `ADDR func+0xOFF (module)`\n{out}");
        assert_eq!(w[0], r, "perf address\n{out}");
        let (name, off) = d.rsplit_once('+').unwrap();
        assert_eq!(w[1], format!("{name}+0x{:x}", off.parse::<u64>().unwrap()), "perf symbol\n{out}");
        assert_eq!(w[2], "([kernel.kallsyms])", "perf module {p:?}\n{out}");
    }
    // A limit of 3: the first 3 frames.
    assert!(k3.len() <= 3 && def.len() >= 3 && k3 == &def[..3], "kstack(3) is {k3:?}, full {def:?}\n{out}");
}

kernel_test!(kstack_map_keys_with_limit_and_modes, needs: Program("gcc"));
fn kstack_map_keys_with_limit_and_modes() {
    let _g = setup();
    let fx = Fixture::build();
    let ks = Kallsyms::load();
    let src = fixture_script(
        &fx,
        "let k = map();\nlet k3 = map();\nlet kp = map();\nlet kr = map();",
        r#"k[e.kstack] = count();
        k3[e.kstack(3)] = count();
        kp[e.kstack("perf")] = count();
        kr[e.kstack("raw")] = count();"#,
    );
    let out = trace_fixture(&src, &[], 1, |_| {
        fx.run(&["calls", "4"]);
        std::thread::sleep(Duration::from_millis(200));
        None
    });
    let one = |name: &str| {
        let e = stack_map_entries(&out.stdout, name);
        assert_eq!(e.len(), 1, "@{name}: one stack expected\n{out}");
        assert_eq!(e[0].1, 4, "@{name}: count\n{out}");
        e[0].0.clone()
    };
    let (def, k3, perf, raw) = (one("k"), one("k3"), one("kp"), one("kr"));
    check_kernel_stack(&def, &raw, &perf, &k3, &ks, &out);
}

kernel_test!(kstack_limit_and_modes_printed_from_userspace, needs: Program("gcc"));
fn kstack_limit_and_modes_printed_from_userspace() {
    let _g = setup();
    let fx = Fixture::build();
    let ks = Kallsyms::load();
    // One variant per probe: each probe's record carries one kstack.
    let mut src = String::new();
    for (mark, expr) in
        [("KDEF", "e.kstack"), ("K3", "e.kstack(3)"), ("KPERF", "e.kstack(\"perf\")"), ("KRAW", "e.kstack(\"raw\")")]
    {
        // raw_syscalls (getppid is 110): syscall tracepoints have no kernel stack before Linux 6.4ish.
        src += &format!(
            "probe(\"tracepoint:raw_syscalls:sys_enter\", |e| {{ if e.comm == \"{}\" && e.args.id == 110 {{ print(`{mark}${{{expr}}}`); }} }});\n",
            fx.name
        );
    }
    let out = trace_fixture(&src, &[], 4, |t| {
        fx.run(&["calls", "1"]);
        t.wait_count("4 printed stacks", Duration::from_secs(10), 4, |l| l.starts_with('K'));
        None
    });
    let get = |m: &str| {
        let s = printed_stacks(&out.stdout, m);
        assert_eq!(s.len(), 1, "{m}: one printed stack expected\n{out}");
        s[0].clone()
    };
    check_kernel_stack(&get("KDEF"), &get("KRAW"), &get("KPERF"), &get("K3"), &ks, &out);
}

kernel_test!(kstack_variants_in_one_probe_stay_distinct, needs: Program("gcc"));
/// Several kstack shapes printed by one probe: each statement must get the
/// stack it asked for (limit, mode), not one shared value. (A known problem
/// in docs/stacks.md: all of them print as the last one captured.)
fn kstack_variants_in_one_probe_stay_distinct() {
    let _g = setup();
    let fx = Fixture::build();
    let ks = Kallsyms::load();
    let src = fixture_script(
        &fx,
        "",
        r#"print(`K3${e.kstack(3)}`);
        print(`KPERF${e.kstack("perf")}`);
        print(`KRAW${e.kstack("raw")}`);
        print(`KDEF${e.kstack}`);"#,
    );
    let out = trace_fixture(&src, &[], 1, |t| {
        fx.run(&["calls", "1"]);
        t.wait_count("4 printed stacks", Duration::from_secs(10), 1, |l| l == "KDEF");
        None
    });
    let get = |m: &str| printed_stacks(&out.stdout, m).into_iter().next().unwrap_or_default();
    check_kernel_stack(&get("KDEF"), &get("KRAW"), &get("KPERF"), &get("K3"), &ks, &out);
}

kernel_test!(kstack_limit_then_mode_printed_from_userspace, needs: Program("gcc"));
/// `e.kstack(LIMIT, MODE)`: the kernel side takes the arguments in either
/// order; a userspace statement must too.
fn kstack_limit_then_mode_printed_from_userspace() {
    let _g = setup();
    let fx = Fixture::build();
    let src = fixture_script(
        &fx,
        "let m = map();",
        r#"m[e.kstack(2, "raw")] = count();
        print(`KR2${e.kstack(2, "raw")}`);"#,
    );
    let out = trace_fixture(&src, &[], 1, |t| {
        fx.run(&["calls", "1"]);
        // The first stack symbolized can take a while; Ctrl-C before it
        // prints would stop that userspace statement.
        t.wait_line("the printed stack", Duration::from_secs(10), |l| l == "KR2");
        None
    });
    let key = stack_map_entries(&out.stdout, "m");
    assert_eq!(key.len(), 1, "{out}");
    assert!(
        key[0].0.len() == 2 && key[0].0.iter().all(|f| is_hex(f)),
        "map key of kstack(2, \"raw\"): {:?}\n{out}",
        key[0].0
    );
    let printed = printed_stacks(&out.stdout, "KR2");
    assert_eq!(printed, vec![key[0].0.clone()], "printed kstack(2, \"raw\")\n{out}");
}

// ---------------------------------------------------------------------------
// 3. profile + folded output

/// Profile the fixture spinning in inner (kept alive until rtrace printed
/// its maps); returns the folded lines and `total`.
fn profile_fixture(fx: &Fixture) -> (Vec<String>, i64, Outcome) {
    let src = fill(
        r#"let s = map();
let total = map();
probe("profile:hz:99", |e| {
    if e.comm == "__COMM__" {
        s[e.ustack] = count();
        total = count();
    }
});
probe("END", || {
    print("FOLDED_STR");
    print(s.folded());
    print("FOLDED");
    print_folded(s);
    print("END_FOLDED");
    print(total);
});"#,
        &[("COMM", &fx.name)],
    );
    let out = trace_fixture(&src, &[], 2, |_| {
        let mut h = fx.hold(&["spin", "1500", "hold"]);
        h.wait_done();
        Some(h)
    });
    let lines: Vec<&str> = out.stdout.lines().collect();
    let from = lines.iter().position(|l| *l == "FOLDED").unwrap_or_else(|| panic!("no FOLDED marker\n{out}"));
    let to = lines.iter().position(|l| *l == "END_FOLDED").unwrap_or_else(|| panic!("no END_FOLDED marker\n{out}"));
    let folded: Vec<String> = lines[from + 1..to].iter().map(|l| l.to_string()).collect();
    // m.folded() returns the same lines as one string.
    let from_str =
        lines.iter().position(|l| *l == "FOLDED_STR").unwrap_or_else(|| panic!("no FOLDED_STR marker\n{out}"));
    let as_str: Vec<&str> = lines[from_str + 1..from].iter().copied().filter(|l| !l.is_empty()).collect();
    assert_eq!(as_str, folded.iter().map(String::as_str).collect::<Vec<_>>(), "m.folded() vs print_folded(m)\n{out}");
    // Printed by END, and again at exit (every non-empty map is).
    let total = out.map_lines("total");
    assert_eq!(total.len(), 2, "{out}");
    assert_eq!(total[0], total[1], "{out}");
    let total =
        total[0].strip_prefix("@total: ").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("odd {total:?}"));
    (folded, total, out)
}

fn parse_folded(line: &str) -> (String, i64) {
    let (frames, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("folded line {line:?} is not `frames count`"));
    let n: i64 = n.parse().unwrap_or_else(|_| panic!("folded line {line:?}: count is not a number"));
    assert!(frames.split(';').all(|f| !f.is_empty()), "folded line {line:?} has an empty frame");
    (frames.to_string(), n)
}

kernel_test!(profile_ustack_folded_output, needs: Program("gcc"));
fn profile_ustack_folded_output() {
    let _g = setup();
    let fx = Fixture::build();
    let (folded, total, out) = profile_fixture(&fx);
    assert!(total >= 20, "too few samples of a 1.5 s spin at 99 Hz: {total}\n{out}");
    let parsed: Vec<(String, i64)> = folded.iter().map(|l| parse_folded(l)).collect();
    let sum: i64 = parsed.iter().map(|(_, n)| n).sum();
    assert_eq!(sum, total, "folded counts vs total = count()\n{out}");
    let in_inner: i64 = parsed.iter().filter(|(f, _)| f.ends_with(";main;outer;middle;inner")).map(|(_, n)| n).sum();
    assert!(in_inner > 0, "no folded line ends in ;main;outer;middle;inner\n{out}");
    // The spin is inner's own loop; only its clock_gettime calls are elsewhere.
    assert!(in_inner * 10 >= total * 9, "only {in_inner} of {total} samples in inner\n{out}");
}

// ---------------------------------------------------------------------------
// 4. ksym / usym

kernel_test!(ksym_in_the_kernel_of_a_function_pointer);
fn ksym_in_the_kernel_of_a_function_pointer() {
    let _g = setup();
    let ks = Kallsyms::load();
    let src = r#"let f = map();
probe("tracepoint:timer:hrtimer_start", |e| {
    f[ksym(e.args.function)] = count();
    let a = e.args.function;
    let k = ksym(e.args.function);
    print(`KS ${a} ${k} ${ksym(a)}`);
});"#;
    let out = run(&["-d", "500ms", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("KS ")).collect();
    assert!(!lines.is_empty(), "no hrtimer_start events in 500 ms\n{out}");
    let mut seen = std::collections::BTreeSet::new();
    for l in &lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 4, "{l:?}\n{out}");
        let addr = w[1].parse::<i64>().unwrap_or_else(|_| panic!("{l:?}")) as u64;
        let at = ks.names_at(addr);
        assert!(at.contains(&w[2]), "ksym(0x{addr:x}) in the kernel is {:?}, kallsyms has {at:?}", w[2]);
        assert_eq!(w[3], w[2], "userspace ksym() of the same address\n{l}");
        seen.insert(w[2].to_string());
    }
    let keys: std::collections::BTreeSet<String> = out
        .map_lines("f")
        .iter()
        .map(|l| {
            l.strip_prefix("@f[").and_then(|r| r.split_once("]: ")).map(|(k, _)| k.to_string()).unwrap_or_default()
        })
        .collect();
    assert!(seen.is_subset(&keys), "printed {seen:?}, map keys {keys:?}\n{out}");
    for k in &keys {
        assert!(
            ks.unique_addr(k).is_some() || ks.syms.iter().any(|(_, n)| n == k),
            "map key {k:?} is not a kernel symbol\n{out}"
        );
    }
}

kernel_test!(ksym_in_userspace_of_kallsyms_addresses);
fn ksym_in_userspace_of_kallsyms_addresses() {
    let _g = setup();
    let ks = Kallsyms::load();
    let picks: Vec<(&str, u64)> =
        ["do_sys_openat2", "vfs_read", "hrtimer_wakeup", "tick_nohz_handler", "schedule", "do_syscall_64"]
            .into_iter()
            .filter_map(|n| ks.unique_addr(n).map(|a| (n, a)))
            .collect();
    assert!(picks.len() >= 2, "none of the chosen kernel functions has a unique kallsyms address");
    let mut src = String::from("probe(\"BEGIN\", || {\n");
    for (_, a) in &picks {
        src += &format!("    print(`KSYM ${{ksym(0x{a:x})}} ${{ksym(0x{:x})}}`);\n", a + 1);
    }
    src += "    exit();\n});\n";
    let out = run(&["-e", &src]);
    assert_eq!(out.code, Some(0), "{out}");
    let got: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("KSYM ")).collect();
    let want: Vec<String> = picks.iter().map(|(n, _)| format!("KSYM {n} {n}")).collect();
    assert_eq!(got, want, "{out}");
}

kernel_test!(usym_of_the_fixtures_functions, needs: Program("gcc"));
fn usym_of_the_fixtures_functions() {
    let _g = setup();
    let fx = Fixture::build();
    let h = fx.hold(&["calls", "0", "hold"]);
    let base = load_base(h.pid, &fx.path);
    let (inner, inner_size) = fx.nm("inner");
    let (middle, _) = fx.nm("middle");
    assert_eq!(base + inner, h.inner, "nm + load base vs the address the fixture printed");
    let src = format!(
        r#"probe("BEGIN", || {{
    print(`USYM ${{usym({a}, {p})}}`);
    print(`USYM ${{usym({b}, {p})}}`);
    print(`USYM ${{usym({c}, {p})}}`);
    exit();
}});"#,
        a = base + inner,
        b = base + inner + inner_size - 1,
        c = base + middle,
        p = h.pid
    );
    let out = run(&["-e", &src]);
    h.release();
    assert_eq!(out.code, Some(0), "{out}");
    let got: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("USYM ")).collect();
    assert_eq!(got, vec!["USYM inner", "USYM inner", "USYM middle"], "{out}");
}

// ---------------------------------------------------------------------------
// 5. A process that exits right after its event

kernel_test!(ustack_of_a_process_that_exited_is_symbolized, needs: Program("gcc"));
/// The fixture makes one getppid from inner and `_exit`s at once; rtrace
/// symbolizes when it handles the record, when the process may be gone.
/// The stacks must still name the functions.
fn ustack_of_a_process_that_exited_is_symbolized() {
    let _g = setup();
    let fx = Fixture::build();
    let (_, inner_size) = fx.nm("inner");
    let src = fixture_script(&fx, "", "print(`USTACK${e.ustack}`);");
    let runs = 3;
    let mut inners = Vec::new();
    let out = trace_fixture(&src, &[], 1, |t| {
        for _ in 0..runs {
            inners.push(parse_addr_line(&fx.run(&["once"])).0);
        }
        t.wait_count("the printed stacks", Duration::from_secs(10), runs, |l| l == "USTACK");
        None
    });
    let stacks = printed_stacks(&out.stdout, "USTACK");
    assert_eq!(stacks.len(), runs, "{out}");
    let mut unresolved = 0;
    for (s, inner) in stacks.iter().zip(&inners) {
        assert!(s.len() >= CHAIN.len(), "short stack {s:?}\n{out}");
        if names(s)[..CHAIN.len()] == CHAIN {
            continue;
        }
        // Not symbolized: at least the captured stack must be the right one.
        let leaf = s[0].strip_prefix("0x").filter(|h| is_hex(h)).map(|h| u64::from_str_radix(h, 16).unwrap());
        let leaf = leaf.unwrap_or_else(|| panic!("leaf frame {:?} is neither inner+off nor an address\n{out}", s[0]));
        assert!((*inner..inner + inner_size).contains(&leaf), "leaf 0x{leaf:x} is not in inner (0x{inner:x})\n{out}");
        unresolved += 1;
    }
    assert_eq!(
        unresolved, 0,
        "{unresolved} of {runs} user stacks of processes that exited right after the event were printed as bare addresses \
         (the right addresses: the leaf is in inner)\n{out}"
    );
}

// ---------------------------------------------------------------------------
// 6. Stack-id collisions are reported

kernel_test!(stack_id_collisions_are_reported, needs: Program("gcc"));
/// `RTRACE_STACK_ENTRIES=16` and 200 distinct user stacks: the stacks the
/// kernel could not store show as bracketed reasons, and stderr says so.
fn stack_id_collisions_are_reported() {
    let _g = setup();
    let fx = Fixture::build();
    let src = fixture_script(
        &fx,
        "let s = map();\nlet total = map();",
        "s[e.ustack] = count();\n        total = count();\n        print(`U${e.ustack}`);",
    );
    let out = trace_fixture(&src, &[("RTRACE_STACK_ENTRIES", "16")], 1, |t| {
        let mut h = fx.hold(&["recurse", "200", "hold"]);
        h.wait_done();
        t.wait_count("200 printed stacks", Duration::from_secs(20), 200, |l| l == "U");
        Some(h)
    });
    assert_eq!(out.map_lines("total"), vec!["@total: 200"], "{out}");

    let keys = stack_map_entries(&out.stdout, "s");
    let sum: i64 = keys.iter().map(|(_, n)| n).sum();
    assert_eq!(sum, 200, "every event counted under some key\n{out}");
    let lost_key: Vec<&(Vec<String>, i64)> =
        keys.iter().filter(|(f, _)| f.len() == 1 && f[0].starts_with('[')).collect();
    let good = keys.len() - lost_key.len();
    assert!(good <= 16, "{good} stacks stored in a 16-entry stack map\n{out}");
    assert_eq!(lost_key.len(), 1, "expected one bracketed key for the lost stacks\n{out}");
    assert_eq!(lost_key[0].0[0], "[stack id collision]", "{out}");
    for (f, _) in keys.iter().filter(|(f, _)| !f[0].starts_with('[')) {
        let n = names(f);
        assert!(n[0] == "inner" && n.contains(&"deep") && n.contains(&"middle"), "stored stack {f:?}\n{out}");
    }

    let printed = printed_stacks(&out.stdout, "U");
    assert_eq!(printed.len(), 200, "{out}");
    let lost_printed = printed.iter().filter(|s| s.len() == 1 && s[0] == "[stack id collision]").count();
    assert_eq!(lost_printed as i64, lost_key[0].1, "printed collisions vs the collision key's count\n{out}");
    assert!(
        out.stderr.lines().any(|l| l.starts_with("rtrace: ")
            && l.contains("stack-id hash collisions")
            && l.contains("RTRACE_STACK_ENTRIES")),
        "no collision report on stderr\n{out}"
    );
}

kernel_test!(stack_loss_report_counts_the_lost_events, needs: Program("gcc"));
/// The loss report counts lost stacks by events: a map-only script that lost
/// N events' stacks to collisions says N, not the number of printed keys.
fn stack_loss_report_counts_the_lost_events() {
    let _g = setup();
    let fx = Fixture::build();
    let src = fixture_script(&fx, "let s = map();", "s[e.ustack] = count();");
    let out = trace_fixture(&src, &[("RTRACE_STACK_ENTRIES", "16")], 1, |_| {
        let mut h = fx.hold(&["recurse", "200", "hold"]);
        h.wait_done();
        std::thread::sleep(Duration::from_millis(200));
        Some(h)
    });
    let keys = stack_map_entries(&out.stdout, "s");
    let lost: i64 = keys.iter().filter(|(f, _)| f.len() == 1 && f[0] == "[stack id collision]").map(|(_, n)| n).sum();
    assert!(lost > 0, "no collisions with 200 stacks in 16 entries\n{out}");
    let reported: Option<i64> = out.stderr.lines().find_map(|l| {
        l.strip_prefix("rtrace: warning: ")?
            .strip_suffix(" stack(s) lost to stack-id hash collisions (raise RTRACE_STACK_ENTRIES)")?
            .parse()
            .ok()
    });
    assert_eq!(reported, Some(lost), "events whose stacks were lost: {lost}; the report says {reported:?}\n{out}");
}

kernel_test!(ustack_of_kernel_threads_is_empty);
/// A kernel thread (or the idle task) has no user stack: bpftrace shows an
/// empty `ustack` for it (`@u[]: N`), not an error, and says nothing on
/// stderr.
fn ustack_of_kernel_threads_is_empty() {
    let _g = setup();
    // Kernel threads that switch out every now and then, even on a busy machine.
    let src = r#"let u = map();
probe("tracepoint:sched:sched_switch", |e| {
    if e.pid == 0 || e.comm == "rcu_preempt" || e.comm == "rcu_sched" || e.comm == "ksoftirqd/0" || e.comm == "ksoftirqd/1" {
        u[e.ustack] = count();
    }
});"#;
    let out = run(&["-d", "1s", "-e", src]);
    assert_eq!(out.code, Some(0), "{out}");
    let keys = stack_map_entries(&out.stdout, "u");
    if keys.is_empty() {
        inconclusive("none of the chosen kernel threads ran in 1 s");
        return;
    }
    assert!(keys.iter().all(|(f, _)| f.is_empty()), "a kernel thread's user stack should be empty: {keys:?}\n{out}");
    assert!(!out.stderr.contains("could not be read"), "{out}");
}
