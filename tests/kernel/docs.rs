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

// ---------------------------------------------------------------------------
// Claims about what works

/// A feature the pages describe, with a script that shows whether it works.
struct Claim {
    feature: &'static str,
    /// Whether it works: the script exits 0 and prints `expect` as a line of
    /// its own; otherwise it exits non-zero with `expect` in its output.
    works: bool,
    /// For a working feature: words (lowercase) that must not occur where a
    /// page lists what is missing ([`missing_parts`]).
    markers: &'static [&'static str],
    /// Page and text that must not occur in it (stale wording).
    absent: &'static [(&'static str, &'static str)],
    /// Page and text that must occur in it (the limitation, stated).
    present: &'static [(&'static str, &'static str)],
    /// A shell command run in a scratch directory with `rtrace` on PATH.
    script: &'static str,
    expect: &'static str,
}

const CLAIMS: &[Claim] = &[
    Claim {
        feature: "a `#!` first line",
        works: true,
        markers: &["#!", "hashbang", "shebang"],
        absent: &[("language.md", "can't start with a `#!` line"), ("README.md", "`#!` lines in scripts")],
        present: &[("language.md", "A script file may start with a `#!` line")],
        script: r#"printf '#!/usr/bin/env -S rtrace -q\nprobe("BEGIN", || { print("shebang ok"); exit(); });\n' > sb.rhai && chmod +x sb.rhai && ./sb.rhai"#,
        expect: "shebang ok",
    },
    Claim {
        feature: "buf()",
        works: true,
        markers: &["`buf"],
        absent: &[],
        present: &[],
        script: r#"rtrace -q -c "dd if=/dev/zero of=/dev/null bs=4 count=1 status=none" -e 'probe("tracepoint:syscalls:sys_enter_write", |e| { if e.comm == "dd" { let b = buf(e.args.buf, e.args.count); print(b); } });'"#,
        expect: r"\x00\x00\x00\x00",
    },
    Claim {
        feature: "a cast: kptr(v, \"struct NAME\")",
        works: true,
        markers: &["cast", "kptr"],
        absent: &[("tutorial.md", "Casts don't exist"), ("zh/tutorial.md", "没有类型转换")],
        present: &[
            ("tutorial.md", "`kptr(e.arg0, \"struct pt_regs\")`"),
            ("zh/tutorial.md", "`kptr(e.arg0, \"struct pt_regs\")`"),
        ],
        script: r#"rtrace -q -c "dd if=/dev/zero of=/dev/null bs=1000 count=3 status=none" -e 'probe("rawtracepoint:sys_enter", |e| { let regs = kptr(e.arg0, "struct pt_regs"); if e.comm == "dd" && e.arg1 == 0 && regs.di == 0 { let size = regs.dx; printf("read(0, buf, %d)\n", size); } });'"#,
        expect: "read(0, buf, 1000)",
    },
    Claim {
        feature: "loops over an array and a map in a probe",
        works: true,
        markers: &["loop", "for p in", "for x in", "for k in"],
        absent: &[("README.md", "loops over anything but a constant range")],
        present: &[],
        script: r#"rtrace -q -c "perl -e 'getppid()'" -e 'let m = map(); let parts = ["a", "b"]; probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { m[7] = 1; let s = ""; for p in parts { s += p; } for k in m.keys() { s += `${k}`; } print(s); } });'"#,
        expect: "ab7",
    },
    Claim {
        feature: "a keyless map read in a probe: total[()]",
        works: true,
        markers: &["keyless", "[()]", "without a key"],
        absent: &[
            ("tutorial.md", "can be written in a probe but not read there"),
            ("zh/tutorial.md", "但不能在探针中读取"),
        ],
        present: &[
            ("tutorial.md", "is read in a probe as `total[()]`"),
            ("language.md", "A keyless map is read as `total[()]` in a probe"),
        ],
        script: r#"rtrace -q -c "perl -e 'getppid() for 1..3'" -e 'let total = map(); probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { total = count(); let n = total[()]; printf("call %d\n", n); } });'"#,
        expect: "call 3",
    },
    Claim {
        feature: "str(e.retval) inside a printf",
        works: true,
        markers: &["str(e.retval)", "str(e.argn)"],
        absent: &[
            ("from-bpftrace.md", "Write the string into a `let` first"),
            ("tutorial.md", "read the string into a `let` in the probe"),
        ],
        present: &[],
        script: r#"rtrace -q -c "sh -c 'cd /usr/lib && exec /bin/pwd >/dev/null'" -e 'probe("uretprobe:libc:getcwd", |e| { if e.comm == "pwd" { printf("getcwd() = %s\n", str(e.retval)); } });'"#,
        expect: "getcwd() = /usr/lib",
    },
    Claim {
        feature: "nested fields of a syscall's struct pointer (naptime's requested duration)",
        works: true,
        markers: &["rqtp", "user memory"],
        absent: &[("tools.md", "which probes can't read yet")],
        present: &[("tools.md", "`e.args.rqtp.tv_sec`")],
        script: r#"rtrace -q -c "sleep 0.25" -e 'probe("tracepoint:syscalls:sys_enter_clock_nanosleep", |e| { if e.comm == "sleep" { let ns = e.args.rqtp.tv_nsec; printf("%d\n", ns); } });'"#,
        expect: "250000000",
    },
    Claim {
        feature: "quantiles() maps served as summaries",
        works: true,
        markers: &["quantiles"],
        absent: &[("fleet.md", "they are not in this version")],
        present: &[("fleet.md", "| `quantiles(x)` | summary |")],
        script: r#"rtrace -q -d 20s --serve 127.0.0.1:9441 -e 'let lat = map("lat"); probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { lat = quantiles(7); } });' >/dev/null 2>&1 & for i in $(seq 50); do curl -s 127.0.0.1:9441/metrics | grep -q lat_count && break; perl -e 'getppid()'; sleep 0.2; done; curl -s 127.0.0.1:9441/metrics | grep 'quantile="0.99"'; kill -INT $!"#,
        expect: r#"rtrace_lat{quantile="0.99"} 7"#,
    },
    // Limitations the pages state: when one goes away, so must its wording.
    Claim {
        feature: "an if-expression inside another one, in a probe",
        works: false,
        markers: &[],
        absent: &[],
        present: &[("README.md", "an if-expression inside another one"), ("language.md", "is not accepted yet")],
        script: r#"rtrace -q -c "perl -e 'getppid()'" -e 'probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { let k = if e.pid > 0 { if e.tid > 0 { 2 } else { 1 } } else { 0 }; print(k); } });'"#,
        expect: "if-expression branches in probes must be single values",
    },
    Claim {
        feature: "a map of strings read in a probe",
        works: false,
        markers: &[],
        absent: &[],
        present: &[
            ("README.md", "Reading a map of strings in a probe"),
            ("language.md", "a map of strings can't be read in a probe yet"),
        ],
        script: r#"rtrace -q -c "cat /dev/null" -e 'let path = map(); probe("tracepoint:syscalls:sys_enter_openat", |e| { if e.comm == "cat" { path[e.tid] = str(e.args.filename); } }); probe("tracepoint:syscalls:sys_exit_openat", |e| { if e.comm == "cat" { let p = path[e.tid]; printf("%s\n", p); } });'"#,
        expect: "this map holds strings, which a probe can't read as a value yet",
    },
    Claim {
        feature: "array members of BTF structs",
        works: false,
        markers: &[],
        absent: &[],
        present: &[("README.md", "Array members of BTF structs"), ("from-bpftrace.md", "BTF struct arrays not yet")],
        script: r#"rtrace -q -c "perl -e 'getppid()'" -e 'probe("tracepoint:syscalls:sys_enter_getppid", |e| { if e.comm == "perl" { let r = e.curtask.signal.rlim[7].rlim_cur; printf("%d\n", r); } });'"#,
        expect: "'rlim'",
    },
    Claim {
        feature: "e.retval on a tracepoint",
        works: false,
        markers: &[],
        absent: &[],
        present: &[("language.md", "Not available: `e.retval` and `e.argN` on tracepoints")],
        script: r#"rtrace -q -e 'probe("tracepoint:syscalls:sys_exit_getppid", |e| { print(e.retval); });'"#,
        expect: "`e.retval` isn't available for this probe type",
    },
    Claim {
        feature: "buf() called directly in a print",
        works: false,
        markers: &[],
        absent: &[],
        present: &[("from-bpftrace.md", "keep it in a `let`, then print it")],
        script: r#"rtrace -q -c "dd if=/dev/zero of=/dev/null bs=4 count=1 status=none" -e 'probe("tracepoint:syscalls:sys_enter_write", |e| { if e.comm == "dd" { print(buf(e.args.buf, 4)); } });'"#,
        expect: "buf() reads kernel memory, but the statement",
    },
];

/// Text with every run of whitespace made one space (claims wrap anywhere).
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where a page says what is missing: sections headed "Not available",
/// paragraphs starting "Not available:", and table rows marked ✗.
fn missing_parts(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let level = l.chars().take_while(|&c| c == '#').count();
        if level > 0 && l[level..].starts_with(' ') && l.contains("Not available") {
            let end = (i + 1..lines.len())
                .find(|&j| {
                    let n = lines[j].chars().take_while(|&c| c == '#').count();
                    n > 0 && n <= level && lines[j][n..].starts_with(' ')
                })
                .unwrap_or(lines.len());
            out.push(lines[i + 1..end].join("\n"));
            i = end;
            continue;
        }
        if let Some(at) = l.find("Not available:") {
            let end = (i + 1..lines.len()).find(|&j| lines[j].trim().is_empty()).unwrap_or(lines.len());
            out.push(std::iter::once(&l[at..]).chain(lines[i + 1..end].iter().copied()).collect::<Vec<_>>().join("\n"));
            i = end;
            continue;
        }
        if l.trim_start().starts_with('|') && l.contains('✗') {
            out.push(l.to_string());
        }
        i += 1;
    }
    out
}

kernel_test!(docs_claims_about_features_hold);
/// The pages say what works and what doesn't, and each claim is checked
/// against a run: a working feature is not listed as missing anywhere (a
/// "Not available" section or paragraph, a ✗ row) and its script works; a
/// limitation the pages state still fails, so fixing it fails this test
/// until the pages stop stating it.
fn docs_claims_about_features_hold() {
    let _g = setup();
    let pages: Vec<(&str, String)> =
        PAGES.iter().map(|p| (*p, std::fs::read_to_string(docs_dir().join(p)).unwrap())).collect();
    let text = |page: &str| {
        let (_, t) = pages.iter().find(|(p, _)| *p == page).unwrap_or_else(|| panic!("no page {page}"));
        squeeze(t)
    };
    let missing: Vec<(&str, String)> =
        pages.iter().flat_map(|(p, t)| missing_parts(t).into_iter().map(move |s| (*p, s.to_lowercase()))).collect();
    assert!(
        missing.iter().any(|(p, s)| *p == "README.md" && s.contains("kprobe")),
        "the README's \"Not available yet\" section was not found: {missing:#?}"
    );
    let w = Workdir::new();
    let mut failures = Vec::new();
    for c in CLAIMS {
        for m in c.markers {
            for (page, part) in &missing {
                if squeeze(part).contains(m) {
                    let at = part.lines().find(|l| l.contains(m)).map(str::to_string).unwrap_or_else(|| squeeze(part));
                    failures.push(format!("{page} lists {} as not available ({m:?}): {}", c.feature, at.trim()));
                }
            }
        }
        for (page, phrase) in c.absent {
            if text(page).contains(&squeeze(phrase)) {
                failures.push(format!("{page} still says {phrase:?}, but {} works", c.feature));
            }
        }
        for (page, phrase) in c.present {
            if !text(page).contains(&squeeze(phrase)) {
                failures.push(format!("{page} no longer says {phrase:?} ({})", c.feature));
            }
        }
        let (code, out) = match w.run(c.script, 0, None) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{}: `{}`: {e}", c.feature, c.script));
                continue;
            }
        };
        let ok = if c.works {
            code == 0 && out.iter().any(|l| l.trim_end() == c.expect)
        } else {
            code != 0 && out.iter().any(|l| l.contains(c.expect))
        };
        if !ok {
            let want = if c.works { "works" } else { "fails" };
            failures.push(format!(
                "{}: the pages say it {want}, but `{}` exited {code} without {:?}:\n{}\n",
                c.feature,
                c.script,
                c.expect,
                out.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{} claim(s) in docs/ don't hold:\n\n{}", failures.len(), failures.join("\n"));
}

kernel_test!(missing_parts_are_found, without_root);
fn missing_parts_are_found() {
    let page = "# T\n\nNot available: `x` here.\nstill x.\n\nafter\n\n| a | b | ✗ no y |\n| a | b | ✓ |\n\n## Not available yet\n\n- z\n\n### sub\n\n- w\n\n## Next\n\nv\n";
    let parts = missing_parts(page);
    assert_eq!(parts.len(), 3, "{parts:#?}");
    assert_eq!(parts[0], "Not available: `x` here.\nstill x.");
    assert_eq!(parts[1], "| a | b | ✗ no y |");
    assert!(parts[2].contains("- z") && parts[2].contains("- w") && !parts[2].contains('v'), "{parts:#?}");
}
