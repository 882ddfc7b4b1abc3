//! `system(fmt, args...)`: run a shell command from userspace code.
//!
//! The capability itself decides whether a command may run, not a scan of
//! the script: every route to the function (a direct call, the method form
//! `"cmd".system()`, `Fn("system")`, names built at run time, curried
//! pointers, `eval`, probe source strings, imported modules, timers) ends in
//! [`request`], which refuses with an error unless the run was given
//! `--unsafe`. Under `--explain` and `--dry-run` it never runs anything.
//!
//! Commands run off the event path, one at a time, on a worker thread fed by
//! a bounded queue ([`QUEUE`] commands): when the queue is full the command is
//! dropped and counted, and the count is reported at exit. A command that
//! fails (non-zero status, killed, cannot start) is reported on stderr. At
//! exit rtrace waits at most [`EXIT_WAIT`] for queued commands, then kills the
//! one running (its whole process group) and reports how many never ran.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use rhai::{Dynamic, EvalAltResult, Position};

use crate::output::{printf, sink};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// Commands waiting to run; more are dropped (and counted).
pub const QUEUE: usize = 256;
/// How long rtrace waits at exit for queued commands.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);

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
static DROPPED: AtomicU64 = AtomicU64::new(0);
static NOT_RUN: AtomicU64 = AtomicU64::new(0);
static ABANDON: AtomicBool = AtomicBool::new(false);
static SKIP_NOTED: AtomicBool = AtomicBool::new(false);
/// Process group of the command running now (0: none).
static RUNNING: AtomicI32 = AtomicI32::new(0);

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

struct Worker {
    commands: Option<Sender<(ShellCommand, Position)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

static WORKER: OnceLock<Mutex<Worker>> = OnceLock::new();

fn worker() -> &'static Mutex<Worker> {
    WORKER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded::<(ShellCommand, Position)>(QUEUE);
        let thread = std::thread::Builder::new().name("rtrace-system".into()).spawn(move || {
            for (cmd, pos) in rx {
                if ABANDON.load(Ordering::SeqCst) {
                    NOT_RUN.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                let result = run_one(&cmd);
                audit(pos, format!("system({:?})", cmd.shown), result);
            }
        });
        Mutex::new(Worker { commands: Some(tx), thread: thread.ok() })
    })
}

/// Run one command; what became of it, for the audit.
fn run_one(command: &ShellCommand) -> String {
    use std::os::unix::process::CommandExt;
    let cmd = &command.shown;
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg(&command.script)
        .arg("rtrace")
        .args(&command.values)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtrace: system({cmd:?}): cannot start /bin/sh: {e}");
            return format!("cannot start /bin/sh: {e}");
        }
    };
    RUNNING.store(child.id() as i32, Ordering::SeqCst);
    let out = child.wait_with_output();
    RUNNING.store(0, Ordering::SeqCst);
    match out {
        Ok(out) => {
            if !out.stdout.is_empty() {
                crate::output::records::text_record("syscall", &String::from_utf8_lossy(&out.stdout));
                sink::flush();
            }
            if !out.status.success() && !ABANDON.load(Ordering::SeqCst) {
                eprintln!("rtrace: system({cmd:?}): {}", describe(out.status));
            }
            match out.status.code() {
                Some(0) => "ran".to_string(),
                _ => describe(out.status),
            }
        }
        Err(e) => {
            eprintln!("rtrace: system({cmd:?}): {e}");
            e.to_string()
        }
    }
}

/// The audit line of an action of userspace code at `pos`.
fn audit(pos: Position, action: String, result: String) {
    let pos = pos.line().map(|l| crate::diag::Pos { line: l as u32, col: pos.position().unwrap_or(1) as u32 });
    sink::action(&crate::output::audit::ActionRecord::userspace(pos, action, result));
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("the command failed with exit status {c}"),
        (None, Some(s)) => format!("the command was killed by signal {s}"),
        _ => "the command failed".to_string(),
    }
}

/// A command for `/bin/sh -c`: the script, and the values it reads as its
/// positional parameters (`"${1}"`...). The values never become shell code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellCommand {
    pub script: String,
    pub values: Vec<String>,
    /// As the user would read it (the values in place), for messages.
    pub shown: String,
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
    match mode() {
        Mode::Refuse => fail_at(needs_unsafe("system"), pos),
        Mode::Skip => {
            if !SKIP_NOTED.swap(true, Ordering::SeqCst) {
                eprintln!("rtrace: note: system() does not run commands under --explain or --dry-run");
            }
            Ok(Dynamic::UNIT)
        }
        Mode::Monitor => {
            let cmd = command_text(fmt, args).or_else(|e| fail_at(e, pos))?;
            audit(pos, format!("system({:?})", cmd.shown), "not run (--monitor)".to_string());
            Ok(Dynamic::UNIT)
        }
        Mode::Run => {
            let cmd = command_text(fmt, args).or_else(|e| fail_at(e, pos))?;
            let Ok(w) = worker().lock() else { return Ok(Dynamic::UNIT) };
            if let Some(tx) = &w.commands {
                match tx.try_send((cmd, pos)) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                        DROPPED.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            Ok(Dynamic::UNIT)
        }
    }
}

fn fail_at<T>(msg: impl Into<String>, pos: Position) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg.into()), pos)))
}

/// At exit: wait up to [`EXIT_WAIT`] for the queued commands, then stop
/// waiting (killing the one running); report drops and commands not run.
pub fn finish() {
    if let Some(worker) = WORKER.get() {
        let thread = {
            let mut w = worker.lock().unwrap_or_else(|e| e.into_inner());
            w.commands = None;
            w.thread.take()
        };
        if let Some(t) = thread {
            let deadline = Instant::now() + EXIT_WAIT;
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if !t.is_finished() {
                ABANDON.store(true, Ordering::SeqCst);
                let pgid = RUNNING.load(Ordering::SeqCst);
                if pgid > 0 {
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    NOT_RUN.fetch_add(1, Ordering::SeqCst);
                }
            }
            let _ = t.join();
        }
    }
    let dropped = DROPPED.load(Ordering::SeqCst);
    if dropped > 0 {
        eprintln!("rtrace: {dropped} system() command(s) dropped: more than {QUEUE} were waiting to run");
    }
    let not_run = NOT_RUN.load(Ordering::SeqCst);
    if not_run > 0 {
        eprintln!(
            "rtrace: {not_run} system() command(s) did not finish: rtrace waits at most {}s for them at exit",
            EXIT_WAIT.as_secs()
        );
    }
}

/// The functions that act on the system, and why each needs `--unsafe`.
const ACTIONS: &[(&str, &str)] = &[
    ("system", "system() runs commands and needs --unsafe"),
    ("signal", "signal() sends a signal to the traced process and needs --unsafe"),
    ("kill", "kill() sends signals and needs --unsafe"),
    ("deny", "deny() makes the kernel refuse an operation and needs --unsafe"),
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

/// `kill(pid, SIG)` from userspace code, and `signal()`'s userspace stand-in.
pub fn install(engine: &mut rhai::Engine) {
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
            audit(pos, format!("kill({target}, {})", crate::util::signals::shown(number)), format!("not sent ({why})"));
            Ok(false)
        }
        Mode::Run => {
            let sent = unsafe { libc::kill(target, number) } == 0;
            let result = if sent { "sent".to_string() } else { std::io::Error::last_os_error().to_string() };
            audit(pos, format!("kill({target}, {})", crate::util::signals::shown(number)), result);
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
