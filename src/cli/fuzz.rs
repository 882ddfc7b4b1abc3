//! A bounded fuzz run inside `cargo test`: scripts generated from a small
//! grammar of mixed kernel/userspace closures, plus random mutations of the
//! scripts in examples/, go through everything before the kernel load (parse,
//! the static checks, the top level, the split and code generation). The
//! finding that matters is a panic or a hang: every input must end in a
//! result or a clean error. `RTRACE_FUZZ_CASES` sets the number of cases
//! (default 400); `RTRACE_FUZZ_SEED` the seed.

use std::sync::mpsc;
use std::time::Duration;

use crate::compile;
use crate::config::Config;
use crate::kernel::fake::FakeKernel;
use crate::script::Session;

const EXAMPLES: &[&str] = &[
    include_str!("../../examples/count_events.rhai"),
    include_str!("../../examples/execsnoop.rhai"),
    include_str!("../../examples/opensnoop.rhai"),
    include_str!("../../examples/profile.rhai"),
    include_str!("../../examples/profile_kstacks.rhai"),
    include_str!("../../examples/read_latency.rhai"),
    include_str!("../../examples/read_sizes.rhai"),
    include_str!("../../examples/sched_switch.rhai"),
    include_str!("../../examples/syscall_rate.rhai"),
    include_str!("../../examples/syscalls_by_comm.rhai"),
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SPECS: &[&str] = &[
    "tracepoint:syscalls:sys_enter_getppid",
    "tracepoint:syscalls:sys_enter_read",
    "tracepoint:syscalls:sys_exit_read",
    "rawtracepoint:sys_enter",
    "profile:hz:99",
    "interval:ms:100",
    "software:cpu-clock:100000",
    "tracepoint:sched:sched_switch",
];

const INTS: &[&str] = &[
    "e.pid",
    "e.tid",
    "e.nsecs",
    "e.cpu",
    "e.uid",
    "0",
    "1",
    "-1",
    "64",
    "65",
    "9223372036854775807",
    "(e.pid % 7)",
    "(e.tid >> 3)",
    "(e.nsecs / 1000)",
    "(1 << 63)",
    "x",
    "(e.pid & 255)",
];

fn int(r: &mut Rng, depth: u32) -> String {
    if depth > 2 || r.below(3) == 0 {
        return r.pick(INTS).to_string();
    }
    let op = r.pick(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]);
    format!("({} {op} {})", int(r, depth + 1), int(r, depth + 1))
}

fn cond(r: &mut Rng) -> String {
    match r.below(4) {
        0 => format!("e.comm == \"{}\"", r.pick(&["sh", "rtrace", "", "a\\\"b"])),
        1 => format!("{} in m", int(r, 1)),
        _ => format!("{} {} {}", int(r, 1), r.pick(&["<", ">", "==", "!=", "<=", ">="]), int(r, 1)),
    }
}

fn stmt(r: &mut Rng, depth: u32) -> String {
    let k = if depth > 2 { r.below(9) } else { r.below(14) };
    match k {
        0 => format!("m[{}] = count();", int(r, 1)),
        1 => format!("m[e.comm] = {}({});", r.pick(&["sum", "avg", "min", "max", "hist", "stats"]), int(r, 1)),
        2 => format!("h = lhist({}, 0, 100, 10);", int(r, 1)),
        3 => format!("let x = {};", int(r, 0)),
        4 => "print(`${e.pid} ${e.comm}`);".to_string(),
        5 => format!("printf(\"%d %s\\n\", {}, e.comm);", int(r, 1)),
        6 => r.pick(&["return;", "exit();", "exit(3);", "print(m);", "m.clear();", "m.zero();"]).to_string(),
        7 => format!("n += {};", int(r, 1)),
        8 => format!("m.remove({});", int(r, 1)),
        9 => format!("if {} {{ {} }} else {{ {} }}", cond(r), stmt(r, depth + 1), stmt(r, depth + 1)),
        10 => format!("for i in 0..{} {{ {} }}", r.below(5), stmt(r, depth + 1)),
        11 => format!("let s = \"a\" + {}; let f = {}.0 / 3.0;", int(r, 1), r.below(10)),
        12 => format!("let arr = [{}, 2]; for v in arr {{ {} }}", int(r, 1), stmt(r, depth + 1)),
        _ => format!("if {} {{ {} {} }}", cond(r), stmt(r, depth + 1), stmt(r, depth + 1)),
    }
}

fn generated(r: &mut Rng) -> String {
    let mut s = String::from("let m = map();\nlet h = map();\nlet n = 0;\nlet x = 5;\n");
    for _ in 0..1 + r.below(3) {
        let body: Vec<String> = (0..1 + r.below(4)).map(|_| stmt(r, 0)).collect();
        s.push_str(&format!("probe(\"{}\", |e| {{\n    {}\n}});\n", r.pick(SPECS), body.join("\n    ")));
    }
    match r.below(4) {
        0 => s.push_str("probe(\"BEGIN\", || { print(\"go\"); });\n"),
        1 => s.push_str("probe(\"END\", || { print(m); m.clear(); });\n"),
        2 => s.push_str("every(\"1s\", || { print(m); });\n"),
        _ => {}
    }
    s
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    ";",
    "|e|",
    "e.",
    "\"",
    "`",
    "${",
    "probe(",
    "map()",
    "count()",
    "0..",
    "return;",
    "exit(",
    "\0",
    "é",
    "//",
    "/*",
    "1e999",
    "99999999999999999999",
    "..",
    "::",
    "fn ",
    "let ",
    "=",
    "==",
    "[",
    "]",
    "m[",
];

fn mutated(r: &mut Rng) -> String {
    let mut s: Vec<char> = EXAMPLES[r.below(EXAMPLES.len())].chars().collect();
    for _ in 0..1 + r.below(4) {
        let at = r.below(s.len() + 1);
        match r.below(4) {
            0 => {
                let end = (at + r.below(20)).min(s.len());
                s.drain(at..end);
            }
            1 => {
                let t: Vec<char> = r.pick(TOKENS).chars().collect();
                s.splice(at..at, t);
            }
            2 => {
                let end = (at + r.below(40)).min(s.len());
                let piece: Vec<char> = s[at..end].to_vec();
                let to = r.below(s.len() + 1);
                s.splice(to..to, piece);
            }
            _ => s.truncate(at),
        }
    }
    s.into_iter().collect()
}

/// Everything before the kernel load; `Err` is a clean rejection.
fn check(source: String) -> Result<(), String> {
    let mut session = Session::new("fuzz.rhai", &source, &[]).map_err(|e| e.to_string())?;
    session.engine.set_max_operations(200_000);
    session.run_top_level().map_err(|e| e.to_string())?;
    static KERNEL: std::sync::OnceLock<FakeKernel> = std::sync::OnceLock::new();
    let kernel = KERNEL.get_or_init(FakeKernel::from_fixtures);
    compile::compile(&session, &Config::defaults(), kernel).map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn fuzzed_scripts_never_panic_or_hang() {
    let cases: usize = std::env::var("RTRACE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let seed: u64 = std::env::var("RTRACE_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_1234);
    let mut r = Rng(seed | 1);
    let (mut ok, mut rejected) = (0usize, 0usize);
    let mut findings: Vec<String> = Vec::new();
    for i in 0..cases {
        let source = if i % 2 == 0 { generated(&mut r) } else { mutated(&mut r) };
        let (tx, rx) = mpsc::channel();
        let src = source.clone();
        let worker = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let _ = tx.send(check(src));
            })
            .unwrap();
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => ok += 1,
            Ok(Err(_)) => rejected += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                findings.push(format!("case {i}: hang (over 30 s)\n{source}"));
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => findings.push(format!("case {i}: panic\n{source}")),
        }
        if worker.is_finished() {
            let _ = worker.join();
        }
    }
    crate::util::errln!(
        "fuzz: {cases} cases (seed {seed}): {ok} compiled, {rejected} rejected cleanly, {} findings",
        findings.len()
    );
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
}
