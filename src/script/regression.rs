//! `regression(name, m, max_pct)`: a check that this run's distribution
//! (a hist/lhist/quantiles map, one key's: `m[k]`, or an array of numbers
//! such as each `--repeat` run's CPU time) did not regress by
//! more than `max_pct` percent from the one saved under `name` in the
//! `--baseline FILE` (output::baseline says how it decides). With
//! `--save-baseline FILE` every distribution checked is written there at
//! the end, under its name, for later runs to compare with.

use std::sync::Mutex;

use rhai::{Array, Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

use super::api::MapHandle;
use super::SharedRegistry;
use crate::output::baseline::{self, Baseline};
use crate::output::dist::Distribution;
use crate::output::junit::{CheckResult, Measure};
use crate::output::MapValue;

/// `--baseline` (its path and what it holds) and `--save-baseline`.
struct Baselines {
    compare: Option<(String, Baseline)>,
    save: Option<String>,
    /// What this run measured, by name.
    measured: Baseline,
}

static BASELINES: Mutex<Option<Baselines>> = Mutex::new(None);

/// Before the script runs: read `--baseline FILE`, note `--save-baseline FILE`.
pub fn set(compare: Option<&str>, save: Option<&str>) -> Result<(), String> {
    let compare = match compare {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("--baseline {path}: {e}"))?;
            Some((path.to_string(), Baseline::parse(&text).map_err(|e| format!("--baseline {path}: {e}"))?))
        }
        None => None,
    };
    *BASELINES.lock().unwrap() =
        Some(Baselines { compare, save: save.map(str::to_string), measured: Baseline::default() });
    Ok(())
}

/// At the end: write `--save-baseline FILE`, if asked.
pub fn save() -> Result<(), String> {
    let Some(b) = BASELINES.lock().unwrap().take() else { return Ok(()) };
    match b.save {
        Some(path) => std::fs::write(&path, b.measured.render()).map_err(|e| format!("--save-baseline {path}: {e}")),
        None => Ok(()),
    }
}

pub fn install(engine: &mut Engine, registry: &SharedRegistry) {
    let r = registry.clone();
    engine.register_fn(
        "regression",
        move |ctx: NativeCallContext, name: ImmutableString, m: MapHandle, pct: Dynamic| -> RhaiResult<bool> {
            let d = m.with_backend(ctx.call_position(), |b| b.distribution(None))?;
            regression(&ctx, &r, &name, d, pct)
        },
    );
    let r = registry.clone();
    engine.register_fn(
        "regression",
        move |ctx: NativeCallContext, name: ImmutableString, d: Distribution, pct: Dynamic| -> RhaiResult<bool> {
            regression(&ctx, &r, &name, d, pct)
        },
    );
    let r = registry.clone();
    engine.register_fn(
        "regression",
        move |ctx: NativeCallContext, name: ImmutableString, samples: Array, pct: Dynamic| -> RhaiResult<bool> {
            let d = distribution_of(&name, &samples)
                .map_err(|msg| Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg), ctx.call_position())))?;
            regression(&ctx, &r, &name, d, pct)
        },
    );
}

/// An array of numbers as a distribution (the `quantiles()` buckets, ≤ 1.6%
/// wide, no unit), so it is saved and compared as a map's would be.
fn distribution_of(name: &str, samples: &Array) -> Result<Distribution, String> {
    let mut counts = vec![0u64; probes_ebpf::quantile::BUCKETS];
    for v in samples {
        let n = v.as_int().ok().or_else(|| v.as_float().ok().map(|f| f.round() as i64)).ok_or_else(|| {
            format!("regression(name, samples, max_pct): the samples are numbers (got a {})", v.type_name())
        })?;
        counts[probes_ebpf::quantile::bucket(n)] += 1;
    }
    if samples.is_empty() {
        return Err(format!("regression(\"{name}\"): the array of samples is empty"));
    }
    Ok(Distribution { map: name.to_string(), key: None, value: Some(MapValue::Quantiles { unit_ns: 0, counts }) })
}

fn regression(
    ctx: &NativeCallContext,
    registry: &SharedRegistry,
    name: &str,
    now: Distribution,
    pct: Dynamic,
) -> Result<bool, Box<rhai::EvalAltResult>> {
    let fail = |msg: String| Box::new(rhai::EvalAltResult::ErrorRuntime(Dynamic::from(msg), ctx.call_position()));
    let pct = pct.as_float().or_else(|_| pct.as_int().map(|i| i as f64)).map_err(|_| {
        fail(format!("regression(name, m, max_pct): max_pct is a number of percent (got {})", pct.type_name()))
    })?;
    if name.is_empty() || name.contains(['\t', '\n']) {
        return Err(fail("regression(): the name must be non-empty, without tabs or newlines".into()));
    }
    let now_count = now.count();
    let Some(value) = now.value.clone() else { return Err(fail(now.percentile(50.0).unwrap_err())) };
    // What to compare with, and this run's distribution kept for --save-baseline.
    let base = {
        let mut guard = BASELINES.lock().unwrap();
        let Some(b) = guard.as_mut() else { return Ok(true) };
        b.measured.dists.insert(name.to_string(), value);
        b.compare.as_ref().map(|(path, base)| (path.clone(), base.dists.get(name).cloned()))
    };
    let (path, base) = match base {
        None => {
            crate::output::sink::warn(format!(
                "regression(\"{name}\") at line {}: no --baseline FILE given, nothing to compare with",
                ctx.call_position().line().unwrap_or(0)
            ));
            return Ok(true);
        }
        Some(b) => b,
    };
    let mut result = match base {
        None => CheckResult::new(name, false, format!("{path} has no distribution named `{name}`")),
        Some(base) => {
            let base = Distribution { map: format!("{name} (baseline)"), key: None, value: Some(base) };
            let c = baseline::compare(&base, &now, pct).map_err(fail)?;
            let shown = c.shown(base.count(), now_count);
            let detail = if c.regressed { format!("{shown}: higher by more than {pct}%") } else { shown };
            let mut r = CheckResult::new(name, !c.regressed, detail);
            r.measure = Some(Measure {
                value: c.now_p50 as f64,
                budget: Some((c.base_p50 as f64 * (1.0 + pct / 100.0)).round()),
                unit: String::new(),
            });
            r
        }
    };
    result.line = ctx.call_position().line();
    let ok = result.ok;
    registry.lock().unwrap().checks.push(result);
    Ok(ok)
}
