//! bpftrace habits in an rtrace script, and what to write instead: the hints
//! of the check before attaching (calls.rs) and of syntax errors.

use rhai::{Expr, Position};

/// bpftrace functions rtrace has no function for (yet), with what to use.
const NO_FORM: &[(&str, &str)] = &[
    ("strftime", "time(fmt) formats the local time"),
    ("cat", "use system(\"cat FILE\") with --unsafe, or read the file in Rhai"),
    ("username", "e.uid is the user id; userspace can look its name up"),
    ("override", "use `override(VALUE)` in an `fmod_ret:FN` probe (see docs/probes-kernel.md)"),
    ("reg", "read arguments as e.arg0.. (see docs/probes-user.md)"),
    ("kaddr", "kernel addresses of symbols are not available to scripts yet"),
    ("uaddr", "user addresses of symbols are not available to scripts yet"),
    ("ntop", "rtrace has no ntop() yet"),
    ("pton", "rtrace has no pton() yet"),
    ("cgroupid", "e.cgroup is the current cgroup id"),
    ("macaddr", "rtrace has no macaddr() yet"),
    ("bswap", "swap bytes with shifts and masks"),
    ("sizeof", "rtrace has no sizeof() yet"),
    ("offsetof", "rtrace has no offsetof() yet"),
    ("strerror", "rtrace has no strerror() yet"),
    ("debugf", "use printf"),
];

/// A hint for a call of `name` with `args` that matches no function.
pub fn call_hint(name: &str, args: &[Expr]) -> Option<String> {
    match name {
        "delete" => {
            let map = match args {
                [Expr::Index(x, ..)] => variable(&x.lhs),
                [m, _] => variable(m),
                _ => None,
            };
            let map = map.unwrap_or("m");
            return Some(format!("bpftrace's delete(@{map}[key]) is `{map}.remove(key)` in rtrace"));
        }
        "prnt" | "pritn" | "pirnt" => return Some("did you mean `print`?".into()),
        "print" if args.len() > 1 => {
            return Some("print() takes one value; for a format and values use printf(fmt, ...)".into())
        }
        "exit" if args.len() > 1 => return Some("exit() takes at most one value, the exit status".into()),
        "usym" if args.len() == 1 => {
            return Some(
                "a user address means something only in its process: give the pid too, `usym(addr, e.pid)`".into(),
            )
        }
        _ => {}
    }
    // bpftrace's builtin variables, written as calls (`pid()`, `kstack()`).
    if crate::builtins::event_field(name).is_some() {
        return Some(format!("bpftrace's `{name}` is the event field `e.{name}` in rtrace: write `e.{name}`"));
    }
    NO_FORM.iter().find(|(n, _)| *n == name).map(|(n, what)| format!("bpftrace's {n}(): {what}"))
}

fn variable(e: &Expr) -> Option<&str> {
    match e {
        Expr::Variable(v, _, _) => Some(v.1.as_str()),
        _ => None,
    }
}

/// Probe types a bpftrace program starts a line with (`kprobe:f { ... }`).
const BPFTRACE_PROBES: &[&str] = &[
    "BEGIN",
    "END",
    "tracepoint",
    "t",
    "kprobe",
    "k",
    "kretprobe",
    "kr",
    "uprobe",
    "u",
    "uretprobe",
    "ur",
    "usdt",
    "U",
    "profile",
    "p",
    "interval",
    "i",
    "software",
    "s",
    "hardware",
    "h",
    "fentry",
    "f",
    "fexit",
    "fr",
    "kfunc",
    "kretfunc",
    "rawtracepoint",
    "rt",
    "watchpoint",
    "w",
    "iter",
    "lsm",
];

/// Whether `line` reads as a bpftrace probe: `BEGIN {`, `kprobe:f /pid == 1/ {`.
fn bpftrace_probe_line(line: &str) -> bool {
    let t = line.trim_start();
    let word: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let rest = t[word.len()..].trim_start();
    BPFTRACE_PROBES.contains(&word.as_str())
        && (rest.starts_with(':') || ((word == "BEGIN" || word == "END") && (rest.is_empty() || rest.starts_with('{'))))
}

/// A hint for a syntax error at `pos` in `source` that comes from bpftrace syntax.
pub fn syntax_hint(source: &str, pos: Position) -> Option<&'static str> {
    let line = source.lines().nth(pos.line()?.checked_sub(1)?)?;
    let col = pos.position().unwrap_or(1).saturating_sub(1);
    if bpftrace_probe_line(line) {
        return Some(
            "this is a bpftrace program; an rtrace script is Rhai: `probe(\"tracepoint:syscalls:sys_enter_openat\", \
             |e| { if e.pid == 1 { m[e.comm] = count(); } });` with `let m = map();` at the top \
             (docs/from-bpftrace.md)",
        );
    }
    // Look at the offending character and the one before it (the lexer may
    // point at either).
    let around: String = line.chars().skip(col.saturating_sub(1)).take(3).collect();
    if around.contains('@') {
        return Some(
            "rtrace maps are variables: declare `let m = map();` at the top level and write `m[key] = count();` (no @)",
        );
    }
    if around.contains("->") {
        return Some("members are read with `.` in rtrace: `e.args.filename`, `e.curtask.real_parent.pid`");
    }
    if around.contains('$') {
        return Some("locals are `let x = ...;` and script arguments are ARGS[0], ARGS[1], ... in rtrace (no $)");
    }
    if around.contains('?') {
        return Some("Rhai has no `c ? a : b`: write `if c { a } else { b }`, which is an expression");
    }
    if around.contains("++") || around.contains("--") {
        return Some("Rhai has no `++`/`--`: write `x += 1` or `x -= 1`");
    }
    if around.contains('~') {
        return Some("Rhai has no `~`: write `x ^ -1` for the bitwise not of x");
    }
    None
}

/// A hint for a variable that doesn't exist: bpftrace's builtin variables
/// (`comm`, `pid`, `retval`) are event fields.
pub fn variable_hint(name: &str) -> Option<String> {
    crate::builtins::event_field(name)
        .map(|_| format!("bpftrace's `{name}` is the event field `e.{name}` in rtrace: write `e.{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_hints_name_the_rtrace_form() {
        let src = "probe(\"BEGIN\", || {\n  @x = count();\n});";
        assert!(syntax_hint(src, Position::new(2, 3)).unwrap().contains("maps are variables"));
        assert!(syntax_hint("str(args->filename)", Position::new(1, 10)).unwrap().contains("`.`"));
        assert!(syntax_hint("print($1)", Position::new(1, 7)).unwrap().contains("ARGS[0]"));
        assert_eq!(syntax_hint("let x = ;", Position::new(1, 9)), None);
        for program in [
            "BEGIN { printf(\"hi\"); }",
            "tracepoint:syscalls:sys_enter_openat /pid == 1/ { @[comm] = count(); }",
            "  kprobe:vfs_read { }",
            "END",
        ] {
            assert!(syntax_hint(program, Position::new(1, 7)).unwrap().contains("bpftrace program"), "{program}");
        }
        assert_eq!(syntax_hint("let BEGIN = 1;", Position::new(1, 7)), None);
        assert!(syntax_hint("let x = a > 1 ? 1 : 2;", Position::new(1, 15)).unwrap().contains("if c { a } else { b }"));
        assert!(syntax_hint("x++;", Position::new(1, 2)).unwrap().contains("x += 1"));
        assert!(syntax_hint("let y = ~x;", Position::new(1, 9)).unwrap().contains("x ^ -1"));
        assert!(variable_hint("comm").unwrap().contains("`e.comm`"));
        assert_eq!(variable_hint("frobnicate"), None);
    }

    #[test]
    fn call_hints() {
        assert!(call_hint("pid", &[]).unwrap().contains("`e.pid`"));
        assert!(call_hint("arg3", &[]).unwrap().contains("`e.arg3`"));
        assert!(call_hint("strftime", &[]).unwrap().contains("time(fmt)"));
        assert_eq!(call_hint("frobnicate", &[]), None);
        let one = [Expr::IntegerConstant(1, Position::NONE)];
        assert!(call_hint("usym", &one).unwrap().contains("usym(addr, e.pid)"));
    }
}
