//! bpftrace habits in an rtrace script, and what to write instead: the hints
//! of the check before attaching (calls.rs) and of syntax errors.

use rhai::{Expr, Position};

/// bpftrace functions rtrace has no function for (yet), with what to use.
const NO_FORM: &[(&str, &str)] = &[
    ("strftime", "time(fmt) formats the local time"),
    ("cat", "use system(\"cat FILE\") with --unsafe, or read the file in Rhai"),
    ("username", "e.uid is the user id; userspace can look its name up"),
    ("override", "rtrace does not change return values"),
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
    ("path", "rtrace has no path() yet"),
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

/// A hint for a syntax error at `pos` in `source` that comes from bpftrace syntax.
pub fn syntax_hint(source: &str, pos: Position) -> Option<&'static str> {
    let line = source.lines().nth(pos.line()?.checked_sub(1)?)?;
    let col = pos.position().unwrap_or(1).saturating_sub(1);
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
    None
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
    }

    #[test]
    fn call_hints() {
        assert!(call_hint("pid", &[]).unwrap().contains("`e.pid`"));
        assert!(call_hint("arg3", &[]).unwrap().contains("`e.arg3`"));
        assert!(call_hint("strftime", &[]).unwrap().contains("time(fmt)"));
        assert_eq!(call_hint("frobnicate", &[]), None);
    }
}
