//! Reading distributions from userspace: `m.percentile(p)`, `m.count()`,
//! `m.sum()`, `m.avg()`, `m.min()`, `m.max()` on a hist/lhist/stats/quantiles
//! map (all keys together), and the same methods on `m[k]`, one key's
//! distribution. The answers themselves come from `output::dist`.

use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, Position};

use super::api::MapHandle;
use crate::output::dist::Distribution;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

fn at<T>(r: Result<T, String>, pos: Position) -> RhaiResult<T> {
    r.map_err(|msg| Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg), pos)))
}

fn whole(m: &MapHandle, pos: Position) -> RhaiResult<Distribution> {
    m.with_backend(pos, |b| b.distribution(None))
}

/// A reader taking the distribution and answering one number.
type Reader = fn(&Distribution) -> Result<i64, String>;

const READERS: [(&str, Reader); 5] = [
    ("count", |d| Ok(d.count())),
    ("sum", Distribution::sum),
    ("avg", Distribution::avg),
    ("min", Distribution::min),
    ("max", Distribution::max),
];

pub fn install(engine: &mut Engine) {
    engine.register_type_with_name::<Distribution>("Distribution");
    for (name, read) in READERS {
        engine.register_fn(name, move |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<i64> {
            let d = whole(m, ctx.call_position())?;
            at(read(&d), ctx.call_position())
        });
        engine.register_fn(name, move |ctx: NativeCallContext, d: Distribution| -> RhaiResult<i64> {
            at(read(&d), ctx.call_position())
        });
    }
    engine.register_fn("percentile", |ctx: NativeCallContext, m: &mut MapHandle, p: i64| -> RhaiResult<i64> {
        let d = whole(m, ctx.call_position())?;
        at(d.percentile(p as f64), ctx.call_position())
    });
    engine.register_fn("percentile", |ctx: NativeCallContext, m: &mut MapHandle, p: f64| -> RhaiResult<i64> {
        let d = whole(m, ctx.call_position())?;
        at(d.percentile(p), ctx.call_position())
    });
    engine.register_fn("percentile", |ctx: NativeCallContext, d: Distribution, p: i64| -> RhaiResult<i64> {
        at(d.percentile(p as f64), ctx.call_position())
    });
    engine.register_fn("percentile", |ctx: NativeCallContext, d: Distribution, p: f64| -> RhaiResult<i64> {
        at(d.percentile(p), ctx.call_position())
    });
    engine.register_fn("to_string", |d: Distribution| match &d.key {
        Some(k) => format!("@{}{k} ({} samples)", d.map, d.count()),
        None => format!("@{} ({} samples)", d.map, d.count()),
    });
}
