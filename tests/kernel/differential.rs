//! The split never changes what a program means. A generator writes probe
//! closures that mix kernel and userspace statements (lets, compound
//! assignments, in-place string methods, ifs on kernel or userspace
//! conditions, early returns, constant and userspace loops with `break`,
//! `switch`, closures capturing locals, script functions given `e`, `e`
//! aliased, map writes, reads and removes, aggregations, edge values); each
//! runs on the same events (lseek calls with known offsets, made by this
//! test) twice: split, and whole in userspace (`--no-split`, the reference).
//! The printed lines and the final maps of every program must be equal, or
//! the split must refuse the program before attaching with a located error.
//!
//! `RTRACE_DIFF_PROGRAMS` (default 240) and `RTRACE_DIFF_SEED` (default 1)
//! choose how many programs and which; e.g. `RTRACE_DIFF_PROGRAMS=5000
//! cargo test --release --test kernel differential` runs thousands.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;

/// Programs per script (one probe each, on the same tracepoint).
const BATCH: usize = 24;

/// The offsets the workload passes to lseek(-1, offset, whence), whence
/// cycling 0..4: small, large and edge values.
const OFFSETS: &[i64] = &[0, 1, 2, 3, 7, 100, 4096, -1, -100, 1 << 40, i64::MAX, i64::MIN, 5, 5, 12345, 64];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &'a [&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// One generated program: its index and its closure's body.
struct Program {
    index: usize,
    body: String,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    p: usize,
    /// Integer and string variables visible, per open block.
    ints: Vec<Vec<String>>,
    strs: Vec<Vec<String>>,
    names: usize,
    depth: usize,
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    fn int_var(&mut self) -> Option<String> {
        let all: Vec<String> = self.ints.iter().flatten().cloned().collect();
        (!all.is_empty()).then(|| all[self.rng.below(all.len())].clone())
    }

    fn str_var(&mut self) -> Option<String> {
        let all: Vec<String> = self.strs.iter().flatten().cloned().collect();
        (!all.is_empty()).then(|| all[self.rng.below(all.len())].clone())
    }

    fn int(&mut self, depth: usize) -> String {
        let p = self.p;
        match self.rng.below(if depth >= 2 { 5 } else { 9 }) {
            0 => "e.args.offset".into(),
            1 => "e.args.whence".into(),
            2 => self.rng.pick(&["0", "1", "2", "3", "7", "-3", "4096", "9223372036854775807"]).into(),
            3 | 4 => self.int_var().unwrap_or_else(|| "e.args.offset".into()),
            5 | 6 => {
                let op = self.rng.pick(&["+", "-", "*", "/", "%", "&", "|", "^"]);
                let (a, b) = (self.int(depth + 1), self.int(depth + 1));
                // Mostly operands that can't overflow or divide by zero; now
                // and then any (an error stops the closure, on both sides).
                if self.rng.below(10) == 0 || matches!(op, "&" | "|" | "^") {
                    format!("({a} {op} {b})")
                } else if matches!(op, "/" | "%") {
                    format!("({a} {op} ({b} % 7 + 8))")
                } else {
                    format!("(({a} % 1000) {op} ({b} % 1000))")
                }
            }
            7 => format!("m{p}[{} % 4]", self.int(depth + 1)),
            _ => self.rng.pick(&["(e.nsecs - e.nsecs)", "e.args.fd", "(e.args.offset % 5)"]).into(),
        }
    }

    fn string(&mut self) -> String {
        match self.rng.below(4) {
            0 => "e.comm".into(),
            1 => self.rng.pick(&["\"ab\"", "\"Xy-z\"", "\"\""]).into(),
            _ => self.str_var().unwrap_or_else(|| "e.comm".into()),
        }
    }

    fn block(&mut self, n: usize) -> String {
        self.ints.push(Vec::new());
        self.strs.push(Vec::new());
        self.depth += 1;
        let body: Vec<String> = (0..n).map(|_| self.stmt()).collect();
        self.depth -= 1;
        self.ints.pop();
        self.strs.pop();
        body.join(" ")
    }

    fn stmt(&mut self) -> String {
        let p = self.p;
        let nested = self.depth < 2;
        loop {
            let s = match self.rng.below(30) {
                0 | 1 => {
                    let v = self.fresh("v");
                    let e = self.int(0);
                    self.ints.last_mut().unwrap().push(v.clone());
                    format!("let {v} = {e};")
                }
                2 => {
                    let v = self.fresh("s");
                    let e = self.string();
                    self.strs.last_mut().unwrap().push(v.clone());
                    format!("let {v} = {e};")
                }
                3 | 4 => {
                    let Some(v) = self.int_var() else { continue };
                    match self.rng.pick(&["=", "+=", "-=", "*=", "/=", "%="]) {
                        "=" => format!("{v} = {};", self.int(0)),
                        op @ ("/=" | "%=") => format!("{v} {op} ({} % 7 + 8);", self.int(1)),
                        op => format!("{v} = {v} % 1000000; {v} {op} ({} % 100);", self.int(1)),
                    }
                }
                5 => {
                    let Some(s) = self.str_var() else { continue };
                    match self.rng.below(3) {
                        0 => format!("{s} += \"!\";"),
                        1 => format!("{s}.make_upper();"),
                        _ => format!("{s} = {s} + \"-\";"),
                    }
                }
                6 => {
                    let (Some(v), Some(s)) = (self.int_var(), self.str_var()) else { continue };
                    format!("{v} = {s}.len();")
                }
                7 | 8 if nested => {
                    let (a, b) = (self.int(1), self.int(1));
                    let op = self.rng.pick(&[">", "<", "==", "!=", ">="]);
                    let (t, f) = (self.block(2), self.block(1));
                    format!("if {a} {op} {b} {{ {t} }} else {{ {f} }}")
                }
                9 if nested => {
                    let Some(s) = self.str_var() else { continue };
                    let cond = match self.rng.below(2) {
                        0 => format!("{s}.contains(\"E\")"),
                        _ => format!("{s}.len() > 3"),
                    };
                    format!("if {cond} {{ {} }}", self.block(2))
                }
                10 => format!("if {} % 3 == 0 {{ return; }}", self.int(1)),
                11 => {
                    let Some(s) = self.str_var() else { continue };
                    format!("if {s}.len() % 3 == 2 {{ return; }}")
                }
                12 => {
                    let Some(v) = self.int_var() else { continue };
                    format!("for i in 0..3 {{ {v} += i; }}")
                }
                13 => {
                    let Some(v) = self.int_var() else { continue };
                    let xs = self.fresh("xs");
                    format!(
                        "let {xs} = [{}, {}]; {xs}.push({}); {v} = {xs}.len() + {xs}[1];",
                        self.int(1),
                        self.int(1),
                        self.int(1)
                    )
                }
                14 => {
                    let Some(v) = self.int_var() else { continue };
                    format!("for x in [{}, {}, 4] {{ if x > 5 {{ break; }} {v} += x; }}", self.int(1), self.int(1))
                }
                15 => {
                    let Some(v) = self.int_var() else { continue };
                    let w = self.fresh("w");
                    format!("let {w} = 0; while {w} < 3 {{ {w} += 1; {v} += {w}; }}")
                }
                16 => {
                    let Some(v) = self.int_var() else { continue };
                    format!(
                        "switch {} % 3 {{ 0 => {{ {v} += 1; }} 1 => {{ {v} -= 1; }} _ => {{ {v} *= 2; }} }}",
                        self.int(1)
                    )
                }
                17 => {
                    let (Some(a), Some(b)) = (self.int_var(), self.int_var()) else { continue };
                    let ys = self.fresh("ys");
                    format!("let {ys} = [1, 2, 3].map(|x| x + {a}); {b} = {ys}[2];")
                }
                18 => {
                    let Some(v) = self.int_var() else { continue };
                    match self.rng.below(3) {
                        0 => format!("{v} = dbl({});", self.int(1)),
                        1 => format!("{v} = off(e);"),
                        _ => {
                            let ev = self.fresh("ev");
                            format!("let {ev} = e; {v} = {ev}.args.whence;")
                        }
                    }
                }
                19 | 20 => match self.rng.below(3) {
                    0 => format!("m{p}[{} % 4] = {};", self.int(1), self.int(1)),
                    // (A map's `+=` in the kernel is one atomic add, which wraps.)
                    1 => format!("m{p}[{} % 4] += ({}) % 1000;", self.int(1), self.int(1)),
                    _ => format!("m{p}.remove({} % 4);", self.int(1)),
                },
                21 | 22 => match self.rng.below(4) {
                    0 => format!("c{p}[{} % 4] = count();", self.int(1)),
                    1 => format!("t{p} = sum({});", self.int(1)),
                    2 => format!("h{p} = hist({});", self.int(1)),
                    _ => format!("x{p}[{} % 2] = max({});", self.int(1), self.int(1)),
                },
                23..=25 => {
                    let a = self.int(1);
                    let s = self.string();
                    format!("print(`P{p}: ${{{a}}} ${{{s}}} ${{m{p}[{} % 4]}}`);", self.int(1))
                }
                26 => {
                    let Some(v) = self.int_var() else { continue };
                    let f = self.fresh("f");
                    format!("let {f} = ({v} % 1000).to_float() / 2.0; {v} = {f}.to_int();")
                }
                27 => {
                    let Some(s) = self.str_var() else { continue };
                    format!("m{p}[{s}.len() % 4] = {};", self.int(1))
                }
                28 => {
                    let Some(s) = self.str_var() else { continue };
                    format!("n{p}[{s}] = {};", self.int(1))
                }
                _ => {
                    let Some(v) = self.int_var() else { continue };
                    format!("if {v} > {} {{ {v} = 0; }}", self.int(1))
                }
            };
            return s;
        }
    }

    /// A closure body: statements, then a print of every variable left in scope.
    fn program(&mut self) -> String {
        let n = 3 + self.rng.below(7);
        let mut body: Vec<String> = (0..n).map(|_| self.stmt()).collect();
        let vars: Vec<String> =
            self.ints.iter().flatten().chain(self.strs.iter().flatten()).map(|v| format!("{v}=${{{v}}}")).collect();
        body.push(format!("print(`P{}: end {}`);", self.p, vars.join(" ")));
        body.join("\n        ")
    }
}

fn generate(seed: u64, count: usize) -> Vec<Program> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..count)
        .map(|index| {
            let mut g =
                Gen { rng: &mut rng, p: index, ints: vec![Vec::new()], strs: vec![Vec::new()], names: 0, depth: 0 };
            Program { index, body: g.program() }
        })
        .collect()
}

/// A script with every program as a probe on sys_enter_lseek (for this
/// thread's events), and a getpgid probe that ends the run; the first line
/// of each program, to find which one an error names.
fn script(progs: &[&Program]) -> (String, Vec<(usize, usize)>) {
    let mut src = String::from("fn dbl(x) { x * 2 }\nfn off(ev) { ev.args.offset }\n");
    for p in progs {
        let i = p.index;
        src += &format!("let m{i} = map(); let c{i} = map(); let t{i} = map(); let h{i} = map(); let x{i} = map(); let n{i} = map();\n");
    }
    let mut lines = Vec::new();
    for p in progs {
        lines.push((src.lines().count() + 1, p.index));
        src += &format!(
            "probe(\"tracepoint:syscalls:sys_enter_lseek\", |e| {{\n    if e.tid == {} {{\n        {}\n    }}\n}});\n",
            tid(),
            p.body
        );
    }
    src +=
        &format!("probe(\"tracepoint:syscalls:sys_enter_getpgid\", |e| {{ if e.tid == {} {{ exit(); }} }});\n", tid());
    (src, lines)
}

/// The program whose lines hold `line`.
fn program_at(lines: &[(usize, usize)], line: usize) -> Option<usize> {
    lines.iter().rev().find(|(first, _)| *first <= line).map(|(_, p)| *p)
}

/// `-e:LINE:COL: error: ...` → LINE.
fn error_line(text: &str) -> Option<usize> {
    let rest = text.lines().find_map(|l| l.strip_prefix("-e:"))?;
    rest.split(':').next()?.parse().ok()
}

fn mode_args(no_split: bool) -> Vec<&'static str> {
    if no_split {
        vec!["--no-split", "--keep-going"]
    } else {
        vec!["--keep-going"]
    }
}

/// Run the script on the workload; `None` when rtrace didn't attach.
fn run_workload(src: &str, no_split: bool) -> Outcome {
    let mut args = mode_args(no_split);
    args.extend(["-e", src]);
    let mut t = Tracer::start_env(&args, &[("RTRACE_ERRORS_SHOWN", "100000")]);
    t.wait_attached();
    for (i, off) in OFFSETS.iter().enumerate() {
        unsafe { libc::lseek(-1, *off, (i % 4) as i32) };
    }
    t.finish_by_getpgid(Duration::from_secs(60))
}

/// Per program: its printed lines in order, its runtime errors, and its
/// maps' final entries (sorted).
fn per_program(out: &Outcome, lines: &[(usize, usize)]) -> BTreeMap<usize, Vec<String>> {
    let mut got: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut maps: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut current: Option<usize> = None;
    for line in out.stdout.lines() {
        if let Some(rest) = line.strip_prefix('P') {
            if let Some((n, _)) = rest.split_once(':') {
                if let Ok(n) = n.parse::<usize>() {
                    got.entry(n).or_default().push(line.to_string());
                    continue;
                }
            }
        }
        if let Some(rest) = line.strip_prefix('@') {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            current = name.get(1..).and_then(|n| n.parse().ok());
        } else if line.is_empty() {
            continue;
        }
        if let Some(p) = current {
            maps.entry(p).or_default().push(line.to_string());
        }
    }
    for l in out.stderr.lines() {
        // The error's statement (its line, or "statements at L:C" when it
        // happened in a script function the statement called).
        let line = match l.split_once("statements at ") {
            Some((_, at)) => at.split(':').next().and_then(|n| n.parse().ok()),
            None => l.strip_prefix("-e:").and_then(|r| r.split(':').next()?.parse().ok()),
        };
        if let Some(p) = line.and_then(|n| program_at(lines, n)) {
            // The error, without where the statements it stopped began.
            let text = l.split_once(": error: ").map_or(l, |x| x.1);
            let text = text.split(" (in probe ").next().unwrap_or(text);
            // Rhai names the operands of an arithmetic error; the kernel can't.
            let arithmetic = ["overflow", "by zero"].iter().any(|w| text.contains(w));
            let text = if arithmetic { text.split(':').next().unwrap_or(text) } else { text };
            got.entry(p).or_default().push(format!("error {text}"));
        }
    }
    for lines in got.values_mut() {
        // Errors from kernel statements come on the control ring, apart
        // from the printed lines: compare them as a set, after the lines.
        let (mut errors, printed): (Vec<String>, Vec<String>) =
            std::mem::take(lines).into_iter().partition(|l| l.starts_with("error "));
        errors.sort();
        *lines = printed;
        lines.extend(errors);
    }
    for (p, mut m) in maps {
        m.sort();
        let lines = got.entry(p).or_default();
        // After a runtime error the kernel statements after it have run in
        // the split (docs/split.md): the maps are compared only without one.
        if !lines.iter().any(|l| l.starts_with("error ")) {
            lines.extend(m);
        }
    }
    got
}

/// A program whose two runs differ, and both outputs.
fn mismatch(p: &Program, seed: u64, what: &str, split: &[String], whole: &[String]) -> String {
    format!(
        "program {} (seed {seed}){what}\n    {}\n  split:\n    {}\n  whole in userspace:\n    {}",
        p.index,
        p.body,
        split.join("\n    "),
        whole.join("\n    ")
    )
}

kernel_test!(generated_programs_mean_the_same_split_and_whole_in_userspace);
fn generated_programs_mean_the_same_split_and_whole_in_userspace() {
    let _g = setup();
    let count: usize = std::env::var("RTRACE_DIFF_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(240);
    let seed: u64 = std::env::var("RTRACE_DIFF_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let programs = generate(seed, count);
    let (mut compared, mut refused, mut oracle_refused) = (0usize, Vec::new(), Vec::new());
    let mut mismatches: Vec<String> = Vec::new();
    let mut errored: Vec<usize> = Vec::new();
    for chunk in programs.chunks(BATCH) {
        let mut batch: Vec<&Program> = chunk.iter().collect();
        // Programs either mode refuses before attaching come out, one by one.
        let (src, lines) = loop {
            let (src, lines) = script(&batch);
            let mut removed = false;
            for no_split in [false, true] {
                let mut args = mode_args(no_split);
                args.extend(["--explain", "-e", &src]);
                let out = run(&args);
                if out.code == Some(0) {
                    continue;
                }
                let first = out.stderr.lines().next().unwrap_or("").to_string();
                let Some(p) = error_line(&out.stderr).and_then(|l| program_at(&lines, l)) else {
                    panic!("a refusal must name a line of the script (no_split={no_split}):\n{out}\n{src}");
                };
                assert!(first.contains(": error: "), "one located error line: {first}");
                let text = format!("P{p}: {first}\n    {}", programs[p].body);
                if no_split {
                    oracle_refused.push(text);
                } else {
                    refused.push(text);
                }
                batch.retain(|q| q.index != p);
                removed = true;
                break;
            }
            if !removed {
                break (src, lines);
            }
        };
        if batch.is_empty() {
            continue;
        }
        let split = run_workload(&src, false);
        let whole = run_workload(&src, true);
        assert!(split.has_attach_line() && whole.has_attach_line(), "{split}\n{whole}");
        let (a, b) = (per_program(&split, &lines), per_program(&whole, &lines));
        for p in &batch {
            let (x, y) = (a.get(&p.index).cloned().unwrap_or_default(), b.get(&p.index).cloned().unwrap_or_default());
            let errored_in = |v: &[String]| v.iter().any(|l| l.starts_with("error "));
            if errored_in(&x) || errored_in(&y) {
                // After a runtime error in a userspace statement the kernel
                // statements after it have run in the split (docs/split.md),
                // so what follows may differ; both must have stopped on one.
                errored.push(p.index);
                if errored_in(&x) != errored_in(&y) {
                    mismatches.push(mismatch(p, seed, ": a runtime error on one side only", &x, &y));
                }
                continue;
            }
            compared += 1;
            if x != y {
                mismatches.push(mismatch(p, seed, "", &x, &y));
            }
        }
    }
    println!(
        "{count} programs (seed {seed}): {compared} compared in full, {} refused by the split, {} not run by --no-split, {} stopped by a runtime error on both sides, {} differ",
        refused.len(),
        oracle_refused.len(),
        errored.len(),
        mismatches.len()
    );
    for r in refused.iter().take(5) {
        println!("refused: {r}");
    }
    for r in oracle_refused.iter().take(5) {
        println!("--no-split refused: {r}");
    }
    assert!(mismatches.is_empty(), "{} of {compared} programs differ:\n{}", mismatches.len(), mismatches.join("\n\n"));
    assert!(compared * 2 >= count, "too few programs compared in full: {compared} of {count}");
}
