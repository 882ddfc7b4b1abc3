//! The actions userspace code can take — `system(fmt, args...)` (a shell
//! command), `exec([argv...])` (a program, no shell), `kill(pid, SIG)` —
//! and the capability that decides whether they may.
//!
//! The capability itself decides, not a scan of the script: every route to
//! these functions (a direct call, the method form `"cmd".system()`,
//! `Fn("system")`, names built at run time, curried pointers, `eval`, probe
//! source strings, imported modules, timers) ends in [`request`], [`exec`]
//! or [`kill`], which refuse with an error unless the run was given
//! `--unsafe`. Under `--explain` and `--dry-run` nothing runs; under
//! `--monitor` each call is audited and nothing runs. Commands themselves
//! run in [`super::commands`].

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use rhai::{Dynamic, EvalAltResult, Position};

pub use super::commands::ShellCommand;
use super::commands::{self, Job};
use crate::output::audit::Outcome;
use crate::output::printf;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// What `system()` does in this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No `--unsafe`: every call is an error.
    Refuse,
    /// `--explain` / `--dry-run` with `--unsafe`: calls do nothing.
    Skip,
    /// `--unsafe`: commands run.
    Run,
    /// `--monitor`: each call is audited, nothing runs.
    Monitor,
}

static MODE: AtomicU8 = AtomicU8::new(0);
static SKIP_NOTED: AtomicBool = AtomicBool::new(false);

/// Set before the script's top level runs; the default refuses.
pub fn set_mode(mode: Mode) {
    MODE.store(mode as u8, Ordering::SeqCst);
}

fn mode() -> Mode {
    match MODE.load(Ordering::SeqCst) {
        3 => Mode::Monitor,
        2 => Mode::Run,
        1 => Mode::Skip,
        _ => Mode::Refuse,
    }
}

/// Where the shell is, in the format's text, when a value comes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quoting {
    Outside,
    Single,
    Double,
}

/// The command for `system(fmt, args...)`: `fmt` as-is without arguments
/// (so `date +%s` works), else printf-formatted like bpftrace's `system()`,
/// except that each value reaches the shell as a quoted positional
/// parameter, whatever the format's quoting around it: a file name holding
/// `;`, `$(...)`, backticks or a newline stays one word of data.
pub fn command_text(fmt: &str, args: &[Dynamic]) -> Result<ShellCommand, String> {
    if args.is_empty() {
        return Ok(ShellCommand { script: fmt.to_string(), values: Vec::new(), shown: fmt.to_string() });
    }
    let mut cmd = ShellCommand { script: String::new(), values: Vec::new(), shown: String::new() };
    let mut quoting = Quoting::Outside;
    let mut escaped = false;
    printf::format_with(fmt, args, |piece| match piece {
        printf::Formatted::Text(t) => {
            cmd.script.push_str(t);
            cmd.shown.push_str(t);
            for c in t.chars() {
                (quoting, escaped) = match (quoting, escaped, c) {
                    (q, true, _) => (q, false),
                    (Quoting::Outside | Quoting::Double, false, '\\') => (quoting, true),
                    (Quoting::Outside, false, '\'') => (Quoting::Single, false),
                    (Quoting::Outside, false, '"') => (Quoting::Double, false),
                    (Quoting::Single, false, '\'') | (Quoting::Double, false, '"') => (Quoting::Outside, false),
                    (q, false, _) => (q, false),
                };
            }
        }
        printf::Formatted::Value(v) => {
            cmd.values.push(v.to_string());
            cmd.shown.push_str(v);
            let n = cmd.values.len();
            cmd.script.push_str(&match quoting {
                Quoting::Outside => format!("\"${{{n}}}\""),
                Quoting::Double => format!("${{{n}}}"),
                Quoting::Single => format!("'\"${{{n}}}\"'"),
            });
        }
    })
    .map_err(|e| e.replacen("printf", "system", 1))?;
    Ok(cmd)
}

/// Every call of `system()`, whatever route reached it (registered by formatting.rs).
pub fn request(pos: Position, fmt: &str, args: &[Dynamic]) -> RhaiResult<Dynamic> {
    if mode() == Mode::Refuse {
        return fail_at(needs_unsafe("system"), pos);
    }
    let cmd = command_text(fmt, args).or_else(|e| fail_at(e, pos))?;
    act(pos, Job::Shell(cmd));
    Ok(Dynamic::UNIT)
}

/// `exec([program, args...])`: the program run with these arguments, no
/// shell between (the program is looked up in `PATH`).
fn exec(pos: Position, argv: rhai::Array) -> RhaiResult<()> {
    if mode() == Mode::Refuse {
        return fail_at(needs_unsafe("exec"), pos);
    }
    if argv.is_empty() {
        return fail_at(
            "exec() needs the program and its arguments: exec([\"logger\", \"-t\", \"rtrace\", text])",
            pos,
        );
    }
    let argv: Vec<String> = argv
        .into_iter()
        .map(|v| if v.is_string() { v.into_string().unwrap_or_default() } else { v.to_string() })
        .collect();
    if argv[0].is_empty() || argv.iter().any(|a| a.contains('\0')) {
        return fail_at("exec(): the program name is empty or an argument holds a NUL byte", pos);
    }
    act(pos, Job::Argv(argv));
    Ok(())
}

/// A command allowed by the capability: queued, audited under `--monitor`,
/// or noted once under `--explain`/`--dry-run`; over `--command-rate`, counted.
fn act(pos: Position, job: Job) {
    match mode() {
        Mode::Refuse => {}
        Mode::Skip => {
            if !SKIP_NOTED.swap(true, Ordering::SeqCst) {
                crate::util::errln!(
                    "rtrace: note: system() and exec() do not run commands under --explain or --dry-run"
                );
            }
        }
        Mode::Monitor => {
            if commands::within_rate(pos, job.name()) {
                commands::audited(pos, job.shown(), Outcome::NotDone, "not run (--monitor)".to_string());
            }
        }
        Mode::Run => {
            if commands::within_rate(pos, job.name()) {
                commands::submit(job, pos);
            }
        }
    }
}

use super::api::fail_at;

/// The functions that act on the system, and why each needs `--unsafe`.
const ACTIONS: &[(&str, &str)] = &[
    ("system", "system() runs commands and needs --unsafe"),
    ("exec", "exec() runs programs and needs --unsafe"),
    ("signal", "signal() sends a signal to the traced process and needs --unsafe"),
    ("kill", "kill() sends signals and needs --unsafe"),
    ("deny", "deny() makes the kernel refuse an operation and needs --unsafe"),
    ("override", "override() changes what a kernel function returns and needs --unsafe"),
];

/// Why action `name` (a name in [`ACTIONS`]) is refused without `--unsafe`.
pub fn needs_unsafe(name: &str) -> &'static str {
    ACTIONS.iter().find(|(n, _)| *n == name).map_or("this action needs --unsafe", |(_, why)| *why)
}

/// Where the script first calls an action (`system()`, `signal()`,
/// `kill()`) by name, and the error for it: the early, static refusal
/// without `--unsafe`. The run-time refusal covers the other routes (and
/// lowering refuses `signal()` from probe source strings).
pub fn find_action_call(ast: &rhai::AST) -> Option<(Position, &'static str)> {
    let mut found = None;
    let action = |name: &str| ACTIONS.iter().any(|(n, _)| *n == name).then(|| needs_unsafe(name));
    ast.walk(&mut |path: &[rhai::ASTNode]| {
        let (name, pos) = match path.last() {
            Some(rhai::ASTNode::Expr(rhai::Expr::FnCall(call, pos))) => (call.name.as_str(), *pos),
            Some(rhai::ASTNode::Expr(rhai::Expr::MethodCall(call, pos))) => (call.name.as_str(), *pos),
            Some(rhai::ASTNode::Stmt(rhai::Stmt::FnCall(call, pos))) => (call.name.as_str(), *pos),
            _ => return true,
        };
        if let Some(why) = action(name) {
            found.get_or_insert((pos, why));
        }
        found.is_none()
    });
    found
}

/// `kill(pid, SIG)` and `exec([argv])` from userspace code, and `signal()`'s userspace stand-in.
pub fn install(engine: &mut rhai::Engine) {
    engine.register_fn("exec", |ctx: rhai::NativeCallContext, argv: rhai::Array| exec(ctx.call_position(), argv));
    engine.register_fn("kill", |ctx: rhai::NativeCallContext, pid: i64, sig: Dynamic| {
        kill(ctx.call_position(), pid, &sig)
    });
    engine.register_fn("signal", |ctx: rhai::NativeCallContext, _sig: Dynamic| -> RhaiResult<()> {
        let msg =
            "signal() runs in a probe, on the process the event is in; userspace code sends one with kill(pid, SIG)";
        fail_at(msg, ctx.call_position())
    });
}

/// `kill(pid, SIG)`: true when the signal was sent. Refused without
/// `--unsafe`; every signal sent (or not) is reported on stderr.
fn kill(pos: Position, pid: i64, sig: &Dynamic) -> RhaiResult<bool> {
    use crate::util::signals;
    let number = match sig.as_int() {
        Ok(n) => signals::from_number(n),
        Err(_) => sig.clone().into_string().ok().and_then(|s| signals::number(&s)),
    };
    let Some(number) = number else {
        return fail_at(
            format!("kill(): `{sig}` is no signal; give a name (\"KILL\", \"SIGTERM\") or a number from 1 to 64"),
            pos,
        );
    };
    // 0, -1 and process groups would reach many processes: one process only.
    let Some(target) = i32::try_from(pid).ok().filter(|p| *p > 0) else {
        return fail_at(format!("kill(): {pid} is not one process id (give a pid > 0)"), pos);
    };
    match mode() {
        Mode::Refuse => fail_at(needs_unsafe("kill"), pos),
        held @ (Mode::Skip | Mode::Monitor) => {
            let why = if held == Mode::Monitor { "--monitor" } else { "--explain or --dry-run" };
            let action = format!("kill({target}, {})", crate::util::signals::shown(number));
            commands::audited(pos, action, Outcome::NotDone, format!("not sent ({why})"));
            Ok(false)
        }
        Mode::Run => {
            let sent = unsafe { libc::kill(target, number) } == 0;
            let (outcome, result) = match sent {
                true => (Outcome::Done, "sent".to_string()),
                false => (Outcome::Failed, std::io::Error::last_os_error().to_string()),
            };
            commands::audited(pos, format!("kill({target}, {})", crate::util::signals::shown(number)), outcome, result);
            Ok(sent)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut e = Engine::new();
        crate::script::formatting::install(&mut e);
        e
    }

    use rhai::Engine;
    use std::process::Command;

    #[test]
    fn every_route_refuses_without_unsafe() {
        set_mode(Mode::Refuse);
        let e = engine();
        for src in [
            r#"system("true")"#,
            r#""true".system()"#,
            r#"Fn("system").call("true")"#,
            r#"Fn("sys" + "tem").call("true")"#,
            r#"let f = Fn("system").curry("true"); f.call()"#,
            r#"eval("system(\"true\")")"#,
            r#"fn run_it(c) { system(c) } run_it("true")"#,
            r#"system("echo %d", 1)"#,
            r#"system("echo %d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8)"#,
        ] {
            let err = e.run(src).expect_err(src).to_string();
            assert!(err.contains("needs --unsafe"), "{src}: {err}");
        }
    }

    #[test]
    fn formatting_follows_printf_only_with_arguments() {
        assert_eq!(command_text("date +%s", &[]).unwrap().script, "date +%s");
        let kill = command_text("kill -%d %d", &[Dynamic::from(9_i64), Dynamic::from(42_i64)]).unwrap();
        assert_eq!(kill.shown, "kill -9 42");
        assert_eq!(kill.script, r#"kill -"${1}" "${2}""#);
        assert_eq!(kill.values, ["9", "42"]);
        assert!(command_text("echo %d %d", &[Dynamic::from(1_i64)]).unwrap_err().contains("system"));
    }

    #[test]
    fn hostile_values_reach_the_shell_as_data_in_every_quoting() {
        let dir = std::env::temp_dir().join(format!("rtrace-inject-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let x = dir.join("X");
        let x = x.display();
        let names = [
            format!("a;touch {x}"),
            format!("$(touch {x})"),
            format!("`touch {x}`"),
            format!("a\ntouch {x}"),
            format!("'; touch {x}; '"),
            format!("\"; touch {x}; \""),
            format!("\\'; touch {x} #"),
            "*".to_string(),
        ];
        for fmt in ["echo %s", "echo \"%s\"", "echo '%s'", "echo x%sy", "echo \"a\\\"%s\"", "echo 'it''%s'"] {
            for name in &names {
                let cmd = command_text(fmt, &[Dynamic::from(name.clone())]).unwrap();
                let out = Command::new("/bin/sh").arg("-c").arg(&cmd.script).arg("rtrace").args(&cmd.values).output();
                let out = String::from_utf8_lossy(&out.unwrap().stdout).into_owned();
                assert!(!dir.join("X").exists(), "{fmt} with {name:?} ran a command: {cmd:?}");
                assert!(out.contains(name.as_str()), "{fmt} with {name:?} printed {out:?}: {cmd:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_static_check_sees_direct_and_method_calls() {
        let e = Engine::new();
        for src in [r#"system("x");"#, r#"let a = "x".system();"#, r#"fn f() { system("y") }"#] {
            let ast = e.compile(src).unwrap();
            assert_eq!(find_action_call(&ast).map(|f| f.1), Some("system() runs commands and needs --unsafe"), "{src}");
        }
        for (src, name) in [(r#"signal("KILL");"#, "signal()"), (r#"fn f(p) { kill(p, 9) }"#, "kill()")] {
            let ast = e.compile(src).unwrap();
            assert!(find_action_call(&ast).is_some_and(|f| f.1.starts_with(name)), "{src}");
        }
        let ast = e.compile(r#"let s = "system"; let k = "kill";"#).unwrap();
        assert!(find_action_call(&ast).is_none());
    }

    #[test]
    fn kill_refuses_without_unsafe_and_takes_one_process() {
        set_mode(Mode::Refuse);
        let mut e = engine();
        install(&mut e);
        for src in [r#"kill(1, "KILL")"#, r#"Fn("ki" + "ll").call(1, 9)"#, r#"eval("kill(1, 9)")"#] {
            let err = e.run(src).expect_err(src).to_string();
            assert!(err.contains("kill() sends signals and needs --unsafe"), "{src}: {err}");
        }
        for (src, why) in [
            (r#"kill(-1, 9)"#, "not one process id"),
            (r#"kill(0, 9)"#, "not one process id"),
            (r#"kill(5, "NOPE")"#, "is no signal"),
        ] {
            let err = e.run(src).expect_err(src).to_string();
            assert!(err.contains(why), "{src}: {err}");
        }
        let err = e.run(r#"signal("KILL")"#).expect_err("signal").to_string();
        assert!(err.contains("signal() runs in a probe"), "{err}");
    }
}
