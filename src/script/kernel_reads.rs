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
}

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
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64| read(&ctx));
    engine.register_fn("str", |ctx: NativeCallContext, _p: i64, _len: i64| read(&ctx));
}
