//! The userspace library for probe continuations, BEGIN/END and timers:
//! `printf`, `time`, `join`, `str`, `system` (see system.rs), `assert`.

use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, Position};

use super::SharedRegistry;
use crate::output::{printf, sink};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

use super::api::fail_at;

/// `printf(fmt, values...)`: the text goes to the output (registered by formatting.rs).
pub fn printf(pos: Position, fmt: &str, args: &[Dynamic]) -> RhaiResult<Dynamic> {
    match printf::format(fmt, args) {
        Ok(text) => {
            sink::script_text(&text);
            Ok(Dynamic::UNIT)
        }
        Err(e) => fail_at(e, pos),
    }
}

/// Local time formatted with strftime(3).
pub fn local_time(fmt: &str) -> String {
    let Ok(cfmt) = std::ffi::CString::new(fmt) else { return String::new() };
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        let mut buf = vec![0u8; 256];
        let n = libc::strftime(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), cfmt.as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// Sleep `secs` seconds (nothing for 0 or less) after writing out what the
/// script printed, so output before a pause shows during it.
fn sleep_flushed(secs: f64) {
    crate::output::sink::flush();
    if secs > 0.0 && secs.is_finite() {
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(1e9)));
    }
}

pub fn install(engine: &mut Engine, registry: &SharedRegistry) {
    // As statements (`time("%H:%M\n");`, `join(arr);`) these print, as in bpftrace.
    engine.register_fn("time", |ctx: NativeCallContext| printing(&ctx, "time", local_time("%H:%M:%S"), "\n"));
    engine.register_fn("time", |ctx: NativeCallContext, fmt: &str| printing(&ctx, "time", local_time(fmt), ""));
    engine.register_fn("join", |ctx: NativeCallContext, a: rhai::Array| printing(&ctx, "join", join(&a, " "), "\n"));
    engine.register_fn("join", |ctx: NativeCallContext, a: rhai::Array, sep: &str| {
        printing(&ctx, "join", join(&a, sep), "\n")
    });
    // Rhai's sleep(), but what was printed before it goes out first.
    engine.register_fn("sleep", |secs: f64| sleep_flushed(secs));
    engine.register_fn("sleep", |secs: i64| sleep_flushed(secs as f64));
    // Strings captured by the kernel arrive as strings already.
    engine.register_fn("str", |s: &str| s.to_string());
    // bpftrace's string searches, also for userspace statements: strncmp
    // is 0 when the first n bytes agree.
    engine.register_fn("strncmp", |a: &str, b: &str, n: i64| -> i64 {
        let n = n.max(0) as usize;
        let (a, b) = (a.as_bytes(), b.as_bytes());
        (a[..a.len().min(n)] != b[..b.len().min(n)]) as i64
    });
    engine.register_fn("strcontains", |a: &str, b: &str| a.contains(b));
    // `kptr(v, "struct T").member` in a userspace statement: the members the
    // kernel read there, as an object map.
    engine.register_fn("kptr", |ctx: NativeCallContext, v: i64, ty: &str| -> RhaiResult<rhai::Map> {
        super::kernel_reads::kptr_members(&ctx, v, ty).ok_or_else(|| {
            Box::new(EvalAltResult::ErrorRuntime(
                "kptr(v, type) is read in a probe: follow it with a member (kptr(v, \"struct T\").field) or read it in a kernel `let`".into(),
                ctx.call_position(),
            ))
        })
    });
    // uptr(p) / kptr(p): which memory str(p) reads (in the kernel); the number itself here.
    engine.register_fn("uptr", |v: i64| v);
    engine.register_fn("kptr", |v: i64| v);
    // A `char *` argument arrives as its string already.
    engine.register_fn("uptr", |s: rhai::ImmutableString| s);
    engine.register_fn("kptr", |s: rhai::ImmutableString| s);
    engine.register_fn("str", |s: &str, _len: i64| s.to_string());
    // str(address): the string the kernel read for this record (kernel_reads.rs).
    super::kernel_reads::install(engine);
    // Symbols: kernel addresses, user addresses of a process.
    engine.register_fn("ksym", |addr: i64| crate::symbols::stacks::ksym_name(addr as u64));
    engine.register_fn("usym", |addr: i64, pid: i64| {
        let frames = crate::symbols::stacks::user_frames(pid as u32, &[addr as u64]);
        frames.first().map(|f| crate::symbols::stacks::frame_function(f).to_string()).unwrap_or_default()
    });
    // `e.kstack(...)` / `e.ustack(...)` in userspace statements: the kernel
    // captured the stack; these return its text.
    for name in crate::builtins::field_names().filter(|n| crate::builtins::is_stack(n)) {
        engine.register_fn(name, move |e: &mut rhai::Map| stack_text(e, name.to_string()));
        engine.register_fn(name, move |e: &mut rhai::Map, limit: i64| stack_text(e, format!("{name}/{limit}")));
        engine.register_fn(name, move |e: &mut rhai::Map, mode: &str| stack_text(e, format!("{name}/{mode}")));
        engine.register_fn(name, move |e: &mut rhai::Map, mode: &str, limit: i64| {
            stack_text(e, format!("{name}/{mode}/{limit}"))
        });
        engine.register_fn(name, move |e: &mut rhai::Map, limit: i64, mode: &str| {
            stack_text(e, format!("{name}/{limit}/{mode}"))
        });
    }
    // The integer casts, ncpus() and the names (builtins::CALLS): what the
    // kernel computes for the same call (util::names).
    for c in crate::builtins::CALLS {
        match c.call {
            crate::builtins::Call::Cast { bits, signed } => {
                engine.register_fn(c.name, move |x: i64| crate::util::names::cast(x, bits, signed));
                engine.register_fn(c.name, move |x: bool| x as i64);
            }
            crate::builtins::Call::Name(table) => {
                engine.register_fn(c.name, move |n: i64| table.render(n));
                // A kernel value that arrived as its name already.
                engine.register_fn(c.name, |s: rhai::ImmutableString| s);
            }
            _ => {}
        }
    }
    engine.register_fn("ncpus", crate::util::names::possible_cpus);
    let r = registry.clone();
    engine.register_fn("assert", move |cond: bool, msg: &str| -> RhaiResult<()> {
        if cond {
            return Ok(());
        }
        let mut reg = r.lock().unwrap();
        reg.failure.get_or_insert(format!("assertion failed: {msg}"));
        reg.exit_code.get_or_insert(1);
        Err(Box::new(EvalAltResult::ErrorTerminated(Dynamic::UNIT, Position::NONE)))
    });
}

/// The text of `time(...)`/`join(...)`; printed (with `end` in text mode) when the call is a statement.
fn printing(ctx: &NativeCallContext, kind: &str, text: String, end: &str) -> String {
    super::statements::print_if_statement(ctx, kind, &text, end);
    text
}

fn join(a: &rhai::Array, sep: &str) -> String {
    a.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(sep)
}

/// The stack the kernel captured for `e.kstack(...)`: stored in `e` under
/// the call's name and arguments (`kstack/3/raw`), as written in the probe.
fn stack_text(e: &mut rhai::Map, key: String) -> String {
    e.get(key.as_str()).map(|v| v.to_string()).unwrap_or_default()
}
