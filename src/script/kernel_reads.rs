//! `str(ptr)` in userspace: memory only a probe can read. When such a call
//! sits in a userspace statement of a probe (`printf("%s\n", str(e.retval))`),
//! the split has the kernel read the string at the event and ship it in the
//! record; the runtime hands the record's strings over here, by the script
//! position of each call, before it runs the statements.

use std::cell::RefCell;

use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, Position};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

fn fail_at<T>(msg: &str, pos: Position) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg.to_string()), pos)))
}

thread_local! {
    /// The strings the kernel read for the record being run: (line, column, text).
    static READS: RefCell<Vec<(u32, u32, String)>> = const { RefCell::new(Vec::new()) };
    /// The map values (`m[k]` with a kernel key) the kernel read at the
    /// event for the record being run: (line, column, value).
    static MAP_READS: RefCell<Vec<(u32, u32, Dynamic)>> = const { RefCell::new(Vec::new()) };
    /// Maps (by id) the event's userspace statements wrote so far: from
    /// then on a read of them is live, as the closure's order says.
    static WRITTEN: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// Set by the last statement of a run: unset after the run, a `return`
    /// ended the closure there.
    static RUN_DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Set the map values of the record about to run.
pub fn with_map_reads(fill: impl FnOnce(&mut Vec<(u32, u32, Dynamic)>)) {
    MAP_READS.with(|r| {
        let mut r = r.borrow_mut();
        r.clear();
        fill(&mut r);
    });
}

/// The value the kernel read at the event for the map read at `pos` of map
/// `map`, unless the event's userspace statements have written that map since.
pub fn map_read_at_event(pos: Position, map: u32) -> Option<Dynamic> {
    let (line, col) = (pos.line()? as u32, pos.position()? as u32);
    if WRITTEN.with(|w| w.borrow().contains(&map)) {
        return None;
    }
    MAP_READS.with(|r| r.borrow().iter().find(|(l, c, _)| *l == line && *c == col).map(|(_, _, v)| v.clone()))
}

/// A userspace statement wrote map `map`.
pub fn note_map_write(map: u32) {
    WRITTEN.with(|w| {
        let mut w = w.borrow_mut();
        if !w.contains(&map) {
            w.push(map);
        }
    });
}

/// Swap the event's written-maps list in (before a run) or out (after).
pub fn swap_written(list: &mut Vec<u32>) {
    WRITTEN.with(|w| std::mem::swap(&mut *w.borrow_mut(), list));
}

/// Before a run: not done yet. After: whether it ran to its end.
pub fn set_run_done(done: bool) {
    RUN_DONE.with(|d| d.set(done));
}
pub fn run_done() -> bool {
    RUN_DONE.with(|d| d.get())
}

/// The name of the statement appended to runs whose end must be seen.
pub const RUN_DONE_FN: &str = "__rtrace_run_done";

/// Set the strings of the record about to run (`fill` pushes them); the
/// list's storage is reused from record to record.
pub fn with_reads(fill: impl FnOnce(&mut Vec<(u32, u32, String)>)) {
    READS.with(|r| {
        let mut r = r.borrow_mut();
        r.clear();
        fill(&mut r);
    });
}

fn captured(pos: Position) -> Option<String> {
    let (line, col) = (pos.line()? as u32, pos.position()? as u32);
    READS.with(|r| r.borrow().iter().find(|(l, c, _)| *l == line && *c == col).map(|(_, _, s)| s.clone()))
}

fn read(ctx: &NativeCallContext) -> RhaiResult<String> {
    match captured(ctx.call_position()) {
        Some(s) => Ok(s),
        None => fail_at(
            "str(address) reads kernel or user memory, so it must run in a probe (here the address isn't a value of the event)",
            ctx.call_position(),
        ),
    }
}

pub fn install(engine: &mut Engine) {
    engine.register_fn(RUN_DONE_FN, || set_run_done(true));
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64| read(&ctx));
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64, _len: i64| read(&ctx));
}
