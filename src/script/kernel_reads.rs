//! What the kernel read at the event for a record's userspace statements:
//! the strings of `str(ptr)` calls (memory only a probe can read), the
//! values of `m[k]` reads with a kernel key, the members of
//! `kptr(v, T).a.b`. The runtime decodes them from the record into an
//! [`AtEvent`] and hands it to [`super::Session::run_statements`], which
//! puts it in the evaluation's state (Rhai's tag): the functions below read
//! it from their call context, so nothing about one event outlives its run
//! or reaches another thread.
//!
//! The same value also keeps what the run does that later reads depend on:
//! the maps its statements wrote (from then on a read of them is live, as
//! the closure's order says) and whether the run reached its end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, Position};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// A value the kernel read at the script position `line:col`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadAt<T> {
    pub line: u32,
    pub col: u32,
    pub value: T,
}

/// The value read for the call at `pos`, if the kernel read one there.
fn read_for<T>(reads: &[ReadAt<T>], pos: Position) -> Option<&T> {
    let (line, col) = (pos.line()? as u32, pos.position()? as u32);
    reads.iter().find(|r| r.line == line && r.col == col).map(|r| &r.value)
}

/// What one record's userspace statements see of the event beyond `e` and
/// the kernel `let`s, and what they did that the event's later runs need.
#[derive(Debug, Default)]
pub struct AtEvent {
    /// `str(ptr)` at `line:col`: the string the kernel read.
    pub reads: Vec<ReadAt<String>>,
    /// `m[k]` at `line:col` with a kernel key: the value at the event.
    pub map_reads: Vec<ReadAt<Dynamic>>,
    /// `kptr(v, T)`: the members the kernel read, by (v, T).
    pub kptrs: std::collections::HashMap<(i64, String), rhai::Map>,
    /// Maps (by id) the event's userspace statements wrote so far.
    pub written: Mutex<Vec<u32>>,
    /// Set by the run's last statement ([`RUN_DONE_FN`]).
    pub run_done: AtomicBool,
}

impl AtEvent {
    /// Whether the statements have nothing to ask of it.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.map_reads.is_empty() && self.kptrs.is_empty()
    }

    /// The maps written so far, taken out (to carry to the event's next run).
    pub fn take_written(&self) -> Vec<u32> {
        std::mem::take(&mut *self.written.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn ran_to_end(&self) -> bool {
        self.run_done.load(Ordering::Relaxed)
    }

    fn wrote(&self, map: u32) -> bool {
        self.written.lock().unwrap_or_else(|e| e.into_inner()).contains(&map)
    }
}

/// The [`AtEvent`] of the run a native function is called from, if any.
fn at_event(ctx: &NativeCallContext) -> Option<Arc<AtEvent>> {
    ctx.tag()?.clone().try_cast::<Arc<AtEvent>>()
}

/// The value the kernel read at the event for the map read at `ctx`'s
/// position of map `map`, unless the event's userspace statements have
/// written that map since.
pub fn map_read_at_event(ctx: &NativeCallContext, map: u32) -> Option<Dynamic> {
    let at = at_event(ctx)?;
    if at.wrote(map) {
        return None;
    }
    read_for(&at.map_reads, ctx.call_position()).cloned()
}

/// A userspace statement wrote map `map`.
pub fn note_map_write(ctx: &NativeCallContext, map: u32) {
    if let Some(at) = at_event(ctx) {
        let mut w = at.written.lock().unwrap_or_else(|e| e.into_inner());
        if !w.contains(&map) {
            w.push(map);
        }
    }
}

/// What `kptr(v, T)` answers in a userspace statement: the members the
/// kernel read at the event.
pub fn kptr_members(ctx: &NativeCallContext, v: i64, ty: &str) -> Option<rhai::Map> {
    at_event(ctx)?.kptrs.get(&(v, kptr_type(ty))).cloned()
}

/// `"struct sock *"` and `"struct  sock"` name one type: `struct sock`.
pub fn kptr_type(written: &str) -> String {
    written.trim().trim_end_matches('*').split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The name of the statement appended to runs whose end must be seen.
pub const RUN_DONE_FN: &str = "__rtrace_run_done";

fn read(ctx: &NativeCallContext) -> RhaiResult<String> {
    match at_event(ctx).and_then(|at| read_for(&at.reads, ctx.call_position()).cloned()) {
        Some(s) => Ok(s),
        None => Err(Box::new(EvalAltResult::ErrorRuntime(
            "str(address) reads kernel or user memory, so it must run in a probe (here the address isn't a value of the event)"
                .into(),
            ctx.call_position(),
        ))),
    }
}

pub fn install(engine: &mut Engine) {
    engine.register_fn(RUN_DONE_FN, |ctx: NativeCallContext| {
        if let Some(at) = at_event(&ctx) {
            at.run_done.store(true, Ordering::Relaxed);
        }
    });
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64| read(&ctx));
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64, _len: i64| read(&ctx));
}
