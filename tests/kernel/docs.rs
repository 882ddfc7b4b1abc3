//! Every example in docs/ runs on the real kernel and prints what the page
//! says it prints, so a page can't go stale. The convention (written down in
//! docs/README.md, "Runnable examples"):
//!
//! - A fenced block whose first line is a comment naming a file
//!   (`// NAME.rhai`, `// NAME.rhai: what it does`, `# NAME.py`), or that
//!   follows `<!-- file: NAME -->`, is saved as NAME in the page's working
//!   directory, for the commands after it.
//! - A fenced block whose first line starts with `$ ` is a console example:
//!   each `$ COMMAND` (continued over lines while a quote is open) is run
//!   with `sh` in that directory, and the lines after it, up to the next
//!   `$ `, are its expected output (stdout and stderr together, as a
//!   terminal shows them). `[...]` on a line of its own stands for any number
//!   of lines. `sudo` is accepted and ignored (the tests run as root).
//! - `<!-- example: OPTIONS -->` just before a block adjusts the check:
//!   `shape` (every number, and the width of every histogram bar, may
//!   differ), `dots` (`...` inside a line stands for any text), `any=A,B` (the words A and B may be anything), `more` (other
//!   lines may come between and after the lines shown), `first=N` (only the
//!   first N lines shown are checked), `exit=N[,N...]` (the exit status of
//!   each command; default 1 when the output shown has an `error:` or
//!   `rtrace: fail:` line, else 0; `any`: not checked), `stop=DURATION` (Ctrl-C after DURATION, for
//!   examples that run until interrupted), `skip REASON` (not run; the
//!   reason is required), `compile` (on a block or table of side-by-side
//!   forms: every `rtrace ...` command in it is run with `--dry-run`, so it
//!   must compile and pass the verifier).

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{rtrace_bin, setup, TempDir};

/// Pages the tests below check; `every_page_is_checked` compares this list
/// with the directory.
const PAGES: &[&str] = &[
    "README.md",
    "automation.md",
    "ci.md",
    "cli.md",
    "fleet.md",
    "from-bpftrace.md",
    "getting-started.md",
    "language.md",
    "output.md",
    "probes-kernel.md",
    "probes-perf.md",
    "probes-user.md",
    "split.md",
    "stacks.md",
    "tools.md",
    "tutorial.md",
    "zh/tutorial.md",
];

/// Pages whose examples are not run yet, with the reason: they are checked
/// by hand for now, and `every_page_is_checked` keeps the list honest.
const NOT_RUN: &[(&str, &str)] = &[];

/// A command that has not ended after this long is killed and fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

// ---------------------------------------------------------------------------
// Parsing a page

#[derive(Debug, Default, Clone)]
struct Options {
    shape: bool,
    dots: bool,
    more: bool,
    any: Vec<String>,
    first: Option<usize>,
    exit: Vec<String>,
    stop: Option<Duration>,
    skip: Option<String>,
    compile: bool,
    file: Option<String>,
}

fn parse_duration(s: &str) -> Option<Duration> {
    let (num, unit) = s.find(|c: char| c.is_ascii_alphabetic()).map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let n: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

fn parse_options(text: &str, into: &mut Options, at: &str) {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("skip") {
        let reason = rest.trim();
        assert!(!reason.is_empty(), "{at}: `skip` needs a reason");
        into.skip = Some(reason.to_string());
        return;
    }
    for word in text.split_whitespace() {
        match word.split_once('=') {
            None if word == "shape" => into.shape = true,
            None if word == "dots" => into.dots = true,
            None if word == "more" => into.more = true,
            None if word == "compile" => into.compile = true,
            Some(("any", v)) => into.any.extend(v.split(',').map(str::to_string)),
            Some(("first", v)) => into.first = Some(v.parse().unwrap_or_else(|_| panic!("{at}: first={v}"))),
            Some(("exit", v)) => into.exit = v.split(',').map(str::to_string).collect(),
            Some(("stop", v)) => into.stop = Some(parse_duration(v).unwrap_or_else(|| panic!("{at}: stop={v}"))),
            _ => panic!("{at}: unknown example option {word:?}"),
        }
    }
}

#[derive(Debug)]
enum Block {
    /// A file to save: name, contents.
    File(String, String),
    /// A console example: commands with their expected output.
    Console { line: usize, opts: Options, steps: Vec<(String, Vec<String>)> },
    /// Side-by-side forms whose rtrace commands must compile.
    Compile { line: usize, commands: Vec<String> },
}

/// The name a block's first line gives it: `// NAME.ext[: ...]` or `# NAME.ext`.
fn file_name(first: &str) -> Option<String> {
    let rest = first.strip_prefix("//").or_else(|| first.strip_prefix('#'))?.trim_start();
    let name = rest.split([' ', ':']).next()?;
    let ok = name.contains('.')
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && (rest.len() == name.len() || rest[name.len()..].starts_with(':'));
    ok.then(|| name.to_string())
}

/// Whether `s` leaves a shell quote open (or ends with a backslash).
fn open_quote(s: &str) -> bool {
    let (mut single, mut double, mut escape) = (false, false, false);
    for c in s.chars() {
        if escape {
            escape = false;
            continue;
        }
        match c {
            '\\' if !single => escape = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
    }
    single || double || escape
}

/// Split a console block into commands and their expected output.
fn console_steps(lines: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(cmd) = lines[i].strip_prefix("$ ") {
            let mut cmd = cmd.to_string();
            while open_quote(&cmd) && i + 1 < lines.len() {
                i += 1;
                cmd.push('\n');
                cmd.push_str(lines[i]);
            }
            steps.push((cmd, Vec::new()));
        } else if let Some(last) = steps.last_mut() {
            last.1.push(lines[i].to_string());
        }
        i += 1;
    }
    steps
}

/// `rtrace ...` commands in a block of side-by-side forms: code lines, or
/// inline code spans in a table.
fn compile_commands(lines: &[&str], in_table: bool) -> Vec<String> {
    let mut out = Vec::new();
    if in_table {
        for l in lines {
            let l = l.replace("\\|", "|");
            for (k, span) in l.split('`').enumerate() {
                if k % 2 == 1 && span.starts_with("rtrace ") {
                    out.push(span.to_string());
                }
            }
        }
        return out;
    }
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if l.starts_with("rtrace ") {
            let mut cmd = l.to_string();
            while open_quote(&cmd) && i + 1 < lines.len() {
                i += 1;
                cmd.push('\n');
                cmd.push_str(lines[i]);
            }
            out.push(cmd);
        }
        i += 1;
    }
    out
}

fn parse_page(name: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut pending: Option<(usize, Options)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let at = format!("{name}:{}", i + 1);
        let trimmed = line.trim();
        if let Some(body) = trimmed.strip_prefix("<!--").and_then(|r| r.strip_suffix("-->")) {
            let body = body.trim();
            if let Some(opts) = body.strip_prefix("example:") {
                let mut o = Options::default();
                parse_options(opts, &mut o, &at);
                pending = Some((i, o));
            } else if let Some(file) = body.strip_prefix("file:") {
                pending = Some((i, Options { file: Some(file.trim().to_string()), ..Options::default() }));
            }
            i += 1;
            continue;
        }
        if trimmed.starts_with('|') {
            // A table: a pending `compile` applies to its inline code.
            let start = i;
            while i < lines.len() && lines[i].trim().starts_with('|') {
                i += 1;
            }
            if let Some((_, o)) = pending.take() {
                assert!(o.compile, "{at}: only `compile` applies to a table");
                blocks.push(Block::Compile { line: start + 1, commands: compile_commands(&lines[start..i], true) });
            }
            continue;
        }
        if let Some(fence) = trimmed.strip_prefix("```") {
            let indent = line.len() - line.trim_start().len();
            let _info = fence.trim();
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end].trim() != "```" {
                end += 1;
            }
            let body: Vec<&str> = lines[start..end].iter().map(|l| l.get(indent..).unwrap_or(l.trim_start())).collect();
            let opts = pending.take().map(|(_, o)| o).unwrap_or_default();
            let first = body.iter().find(|l| !l.trim().is_empty()).copied().unwrap_or("");
            if opts.compile {
                blocks.push(Block::Compile { line: start, commands: compile_commands(&body, false) });
            } else if let Some(file) = opts.file.clone().or_else(|| file_name(first)) {
                blocks.push(Block::File(file, body.join("\n") + "\n"));
            } else if first.starts_with("$ ") {
                blocks.push(Block::Console { line: start, opts, steps: console_steps(&body) });
            }
            i = end + 1;
            continue;
        }
        if !trimmed.is_empty() {
            pending = None;
        }
        i += 1;
    }
    blocks
}

// ---------------------------------------------------------------------------
// Matching output

/// Whether an actual line matches an expected one under the block's options.
fn line_matches(expected: &str, actual: &str, opts: &Options) -> bool {
    let (mut e, mut a) = (expected.trim_end(), actual.trim_end());
    if e == a {
        return true;
    }
    if opts.shape {
        // Right-aligned numbers move with their width.
        (e, a) = (e.trim_start(), a.trim_start());
    }
    let mut e = e.to_string();
    // Words that may be anything become a placeholder.
    for w in &opts.any {
        e = replace_word(&e, w, "\u{1}");
    }
    if opts.dots {
        e = e.replace("...", "\u{2}");
    }
    glob(e.as_bytes(), a.as_bytes(), opts.shape)
}

/// Replace whole-word occurrences of `w` in `s` by `by`.
fn replace_word(s: &str, w: &str, by: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(w) {
        let before_ok = rest[..at].chars().last().is_none_or(|c| !word(c));
        let after_ok = rest[at + w.len()..].chars().next().is_none_or(|c| !word(c));
        out.push_str(&rest[..at]);
        out.push_str(if before_ok && after_ok { by } else { w });
        rest = &rest[at + w.len()..];
    }
    out.push_str(rest);
    out
}

/// Match with placeholders: `\x01` is any word (no spaces); with `shape`, a
/// run of digits is any run of digits (with an optional `-`, or hex digits
/// after `0x`; a word of 8 or more hex digits is any hex word: an
/// address), and a run of `@` is any run of `@` and spaces of the same
/// width (a histogram bar), and a run of spaces is any run of spaces.
fn glob(e: &[u8], a: &[u8], shape: bool) -> bool {
    let Some(&c) = e.first() else { return a.is_empty() };
    if c == 2 {
        return (0..=a.len()).any(|k| glob(&e[1..], &a[k..], shape));
    }
    if c == 1 {
        let n = a.iter().take_while(|b| !b.is_ascii_whitespace()).count();
        return (1..=n).rev().any(|k| glob(&e[1..], &a[k..], shape)) || glob(&e[1..], a, shape);
    }
    if shape && c.is_ascii_hexdigit() && hex_word(e) >= 8 {
        // An address (`7f1045e82503`).
        let na = hex_word(a);
        return na > 0 && glob(&e[hex_word(e)..], &a[na..], shape);
    }
    if shape && (c.is_ascii_digit() || (c == b'-' && e.get(1).is_some_and(u8::is_ascii_digit))) {
        let hex = e.starts_with(b"0x");
        let skip = |s: &[u8]| {
            let s0 = if s.first() == Some(&b'-') { 1 } else { 0 };
            let s1 = if hex && s[s0..].starts_with(b"0x") { s0 + 2 } else { s0 };
            s1 + s[s1..].iter().take_while(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() }).count()
        };
        let ne = skip(e);
        let na = skip(a);
        if na == 0 || (hex && !a.starts_with(b"0x")) {
            return false;
        }
        return glob(&e[ne..], &a[na..], shape);
    }
    if shape && (c == b'@' || c == b' ') && bar_at(e) && bar_at(a) {
        let ne = e.iter().take_while(|b| **b == b'@' || **b == b' ').count();
        let na = a.iter().take_while(|b| **b == b'@' || **b == b' ').count();
        return ne == na && glob(&e[ne..], &a[na..], shape);
    }
    if shape && c == b' ' {
        // Columns shift with the width of the numbers.
        let ne = e.iter().take_while(|b| **b == b' ').count();
        let na = a.iter().take_while(|b| **b == b' ').count();
        return na > 0 && glob(&e[ne..], &a[na..], shape);
    }
    a.first() == Some(&c) && glob(&e[1..], &a[1..], shape)
}

/// The length of the run of hex digits at the start of `s`, if it ends a
/// word (0 otherwise).
fn hex_word(s: &[u8]) -> usize {
    let n = s.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if s.get(n).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        0
    } else {
        n
    }
}

/// Whether a histogram bar (`@`s and spaces up to a closing `|`) starts here.
fn bar_at(s: &[u8]) -> bool {
    let n = s.iter().take_while(|b| **b == b'@' || **b == b' ').count();
    n >= 8 && s.get(n) == Some(&b'|')
}

/// Whether the actual lines match the expected ones, `[...]` being any
/// number of lines.
fn lines_match(expected: &[String], actual: &[String], opts: &Options) -> bool {
    fn go(e: &[String], a: &[String], o: &Options) -> bool {
        match e.first() {
            None => a.is_empty() || o.more,
            Some(l) if l.trim() == "[...]" => (0..=a.len()).any(|k| go(&e[1..], &a[k..], o)),
            Some(l) => {
                if o.more {
                    (0..a.len()).any(|k| line_matches(l, &a[k], o) && go(&e[1..], &a[k + 1..], o))
                } else {
                    !a.is_empty() && line_matches(l, &a[0], o) && go(&e[1..], &a[1..], o)
                }
            }
        }
    }
    go(expected, actual, opts)
}

fn trim_blank_ends(v: &[String]) -> Vec<String> {
    let start = v.iter().position(|l| !l.trim().is_empty()).unwrap_or(v.len());
    let end = v.iter().rposition(|l| !l.trim().is_empty()).map(|p| p + 1).unwrap_or(start);
    v[start..end].to_vec()
}

// ---------------------------------------------------------------------------
// Running

struct Workdir {
    dir: TempDir,
    path_env: String,
}

impl Workdir {
    fn new() -> Workdir {
        let dir = TempDir::new();
        let bin = dir.join(".bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(rtrace_bin(), bin.join("rtrace")).unwrap();
        // `sudo [-E] [VAR=value...] cmd`: the tests are root already.
        std::fs::write(bin.join("sudo"), "#!/bin/sh\n[ \"$1\" = -E ] && shift\nexec env \"$@\"\n").unwrap();
        std::process::Command::new("chmod").arg("755").arg(bin.join("sudo")).status().unwrap();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for d in ["examples", "stdlib", "tests"] {
            std::os::unix::fs::symlink(repo.join(d), dir.join(d)).unwrap();
        }
        let path_env = format!("{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", bin.display());
        Workdir { dir, path_env }
    }

    /// Run one shell command; (exit status, output lines).
    fn run(&self, cmd: &str, prev: i32, stop: Option<Duration>) -> Result<(i32, Vec<String>), String> {
        // A command ended with Ctrl-C is exec'd, so that the interrupt
        // reaches it and not a shell around it.
        let script = match stop {
            Some(_) => format!("exec 2>&1; exec {cmd}"),
            None => format!("exec 2>&1; (exit {prev}); {cmd}"),
        };
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .current_dir(&self.dir.path)
            .env_clear()
            .env("PATH", &self.path_env)
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run sh: {e}"))?;
        let pgid = child.id() as i32;
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        });
        let started = Instant::now();
        let mut interrupted = false;
        let status = loop {
            if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
                break st;
            }
            if let Some(d) = stop {
                if !interrupted && started.elapsed() >= d {
                    unsafe { libc::kill(-pgid, libc::SIGINT) };
                    interrupted = true;
                }
            }
            if started.elapsed() > COMMAND_TIMEOUT {
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!("still running after {COMMAND_TIMEOUT:?}: killed"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let text = reader.join().unwrap();
        let code =
            status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
        Ok((code, text.lines().map(str::to_string).collect()))
    }
}

fn check_console(w: &Workdir, page: &str, line: usize, opts: &Options, steps: &[(String, Vec<String>)]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut prev = 0;
    for (k, (cmd, expected)) in steps.iter().enumerate() {
        let shows_error = expected.iter().any(|l| l.contains("error:") || l.starts_with("rtrace: fail:"));
        let want =
            opts.exit.get(k).or(opts.exit.last()).map(String::as_str).unwrap_or(if shows_error { "1" } else { "0" });
        let (code, actual) = match w.run(cmd, prev, opts.stop) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{page}:{line}: `$ {cmd}`: {e}"));
                continue;
            }
        };
        prev = code;
        let mut expected = trim_blank_ends(expected);
        if let Some(n) = opts.first {
            expected.truncate(n);
            expected.push("[...]".into());
        }
        let actual = trim_blank_ends(&actual);
        let status_ok = want == "any" || want == code.to_string();
        if !status_ok || !lines_match(&expected, &actual, opts) {
            failures.push(format!(
                "{page}:{line}: `$ {cmd}` (exit {code}, expected {want})\n--- expected ---\n{}\n--- actual ---\n{}\n",
                expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    failures
}

/// Run every example of one page; panics with all the failures.
fn check_page(page: &str) {
    let path = docs_dir().join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let failures = run_page(page, &text);
    assert!(failures.is_empty(), "{} stale example(s) in docs/{page}:\n\n{}", failures.len(), failures.join("\n"));
}

/// Run every example of a page's text; the failures, one message each.
fn run_page(page: &str, text: &str) -> Vec<String> {
    let blocks = parse_page(page, text);
    let w = Workdir::new();
    let mut failures = Vec::new();
    let (mut ran, mut skipped, mut compiled) = (0, 0, 0);
    for b in &blocks {
        match b {
            Block::File(name, body) => {
                let p = w.dir.join(name);
                std::fs::write(&p, body).unwrap();
            }
            Block::Console { line, opts, steps } => {
                if let Some(why) = &opts.skip {
                    eprintln!("{page}:{line}: not run: {why}");
                    skipped += 1;
                    continue;
                }
                ran += 1;
                failures.extend(check_console(&w, page, *line, opts, steps));
            }
            Block::Compile { line, commands } => {
                for cmd in commands {
                    compiled += 1;
                    let c = cmd.replacen("rtrace ", "rtrace --dry-run -q ", 1);
                    match w.run(&c, 0, None) {
                        Ok((0, _)) => {}
                        Ok((code, out)) => failures.push(format!(
                            "{page}:{line}: `{cmd}` does not compile (exit {code}):\n{}",
                            out.join("\n")
                        )),
                        Err(e) => failures.push(format!("{page}:{line}: `{cmd}`: {e}")),
                    }
                }
            }
        }
    }
    eprintln!("{page}: {ran} console example(s) run, {compiled} command(s) compiled, {skipped} not run");
    failures
}

kernel_test!(a_stale_example_is_caught);
/// The harness itself: a page whose output, exit status or compile check
/// is wrong fails, one failure per stale example; a right one passes.
fn a_stale_example_is_caught() {
    let _g = setup();
    let page = r#"
```rhai
// hi.rhai
probe("BEGIN", || { print("hi"); exit(); });
```

```
$ rtrace -q hi.rhai
hi
```

```
$ rtrace -q hi.rhai
hello
```

<!-- example: shape -->
```
$ rtrace -q -c "perl -e 'getppid() for 1..3'" -e 'let c = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { c = count(); } });'
@c: 7
```

```
$ rtrace -q -c "perl -e 'getppid() for 1..3'" -e 'let c = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { c = count(); } });'
@c: 7
```

```
$ rtrace -e 'probe("nope:x", || {});'
```

<!-- example: compile -->
```
rtrace -e 'probe("tracepoint:syscalls:sys_enter_nope", |e| { });'
```
"#;
    let failures = run_page("test.md", page);
    let at: Vec<&str> = failures.iter().map(|f| f.split(':').nth(1).unwrap_or("")).collect();
    assert_eq!(at, vec!["12", "23", "28", "33"], "{failures:#?}");
}

// ---------------------------------------------------------------------------
// The pages

macro_rules! page_tests {
    ($($name:ident => $page:expr),* $(,)?) => {
        $(
            kernel_test!($name);
            fn $name() {
                let _g = setup();
                check_page($page);
            }
        )*
    };
}

page_tests! {
    readme => "README.md",
    automation => "automation.md",
    ci => "ci.md",
    cli => "cli.md",
    fleet => "fleet.md",
    from_bpftrace => "from-bpftrace.md",
    getting_started => "getting-started.md",
    language => "language.md",
    output => "output.md",
    probes_kernel => "probes-kernel.md",
    probes_perf => "probes-perf.md",
    probes_user => "probes-user.md",
    split => "split.md",
    stacks => "stacks.md",
    tools => "tools.md",
    tutorial => "tutorial.md",
    zh_tutorial => "zh/tutorial.md",
}

kernel_test!(every_page_is_checked, without_root);
fn every_page_is_checked() {
    let mut found = BTreeSet::new();
    for sub in ["", "zh/"] {
        let Ok(rd) = std::fs::read_dir(docs_dir().join(sub)) else { continue };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".md") {
                found.insert(format!("{sub}{n}"));
            }
        }
    }
    let listed: BTreeSet<String> =
        PAGES.iter().map(|s| s.to_string()).chain(NOT_RUN.iter().map(|(p, _)| p.to_string())).collect();
    assert_eq!(found, listed, "docs pages and the PAGES list in tests/kernel/docs.rs differ");
}

/// The code blocks of a page (with the `<!-- example/file -->` marker before
/// each), in order.
fn code_blocks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim().starts_with("```") {
            let start = if i > 0 && lines[i - 1].starts_with("<!--") { i - 1 } else { i };
            let mut end = i + 1;
            while end < lines.len() && lines[end].trim() != "```" {
                end += 1;
            }
            out.push(lines[start..=end.min(lines.len() - 1)].join("\n"));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

kernel_test!(zh_tutorial_has_the_same_examples, without_root);
/// The Chinese tutorial keeps in step with the English one: the same
/// examples, with the same options, in the same order.
fn zh_tutorial_has_the_same_examples() {
    let en = std::fs::read_to_string(docs_dir().join("tutorial.md")).unwrap();
    let zh = std::fs::read_to_string(docs_dir().join("zh/tutorial.md")).unwrap();
    let (en, zh) = (code_blocks(&en), code_blocks(&zh));
    for (k, (a, b)) in en.iter().zip(&zh).enumerate() {
        assert_eq!(a, b, "code block {} differs between docs/tutorial.md and docs/zh/tutorial.md", k + 1);
    }
    assert_eq!(en.len(), zh.len(), "docs/tutorial.md and docs/zh/tutorial.md have different numbers of code blocks");
}

kernel_test!(matcher, without_root);
fn matcher() {
    let o = Options { shape: true, ..Options::default() };
    assert!(line_matches("@c[18845]: 5", "@c[1]: 12", &o));
    assert!(!line_matches("@c[18845]: 5", "@c[x]: 12", &o));
    assert!(line_matches("[4K, 8K)             100 |@@@@@@@@@@   |", "[4K, 8K)               3 |@@@          |", &o));
    assert!(!line_matches("[4K, 8K)             100 |@@@@@@@@@@   |", "[4K, 8K)               3 |@@@         |", &o));
    assert!(line_matches("22194 sleep", " 1844 sleep", &o));
    assert!(line_matches(
        "\t7fac2f8a2503 __GI___clock_nanosleep+35 (libc)",
        "\t7f0c2e8a2503 __GI___clock_nanosleep+35 (libc)",
        &o
    ));
    assert!(!line_matches("Attaching 2 probes...", "Attaching 2 probe...", &o));
    let exact = Options::default();
    assert!(!line_matches("@c[18845]: 5", "@c[18846]: 5", &exact));
    let any = Options { any: vec!["18845".into()], ..Options::default() };
    assert!(line_matches("@calls[18845]: 5", "@calls[2]: 5", &any));
    assert!(!line_matches("@calls[18845]: 5", "@calls[2]: 6", &any));
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&lines(&["a", "[...]", "d"]), &lines(&["a", "b", "c", "d"]), &exact));
    assert!(!lines_match(&lines(&["a", "d"]), &lines(&["a", "b", "d"]), &exact));
    let more = Options { more: true, ..Options::default() };
    assert!(lines_match(&lines(&["a", "d"]), &lines(&["a", "b", "d", "e"]), &more));
    assert_eq!(file_name("// vfsread.rhai"), Some("vfsread.rhai".into()));
    assert_eq!(file_name("// flood.rhai: a record"), Some("flood.rhai".into()));
    assert_eq!(file_name("// rtrace watchconn.rhai PID"), None);
    assert_eq!(file_name("// Count syscalls by process."), None);
    let steps = console_steps(&["$ rtrace -e 'a", "b'", "out", "$ echo $?", "1"]);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].0, "rtrace -e 'a\nb'");
    assert_eq!(steps[0].1, vec!["out".to_string()]);
}
