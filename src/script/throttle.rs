//! `throttle(key, interval)`: true at most once per key per interval, for
//! hooks that must not fire on every event (`if throttle(e.pid, "1m") {
//! exec([...]) }`). Each call site keeps its own keys; keys not seen for
//! longer than their interval are forgotten once many are kept, so memory
//! stays bounded however many keys pass.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rhai::{Dynamic, EvalAltResult, NativeCallContext, Position};

/// Keys kept before the expired ones are swept out.
const SWEEP_AT: usize = 4096;

/// (call site, key) → when it last passed.
static LAST: Mutex<Option<HashMap<(Position, String), Instant>>> = Mutex::new(None);

/// Whether `key` at `site` may pass at `now`, at most once per `interval`.
fn pass(site: Position, key: String, interval: Duration, now: Instant) -> bool {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let last = last.get_or_insert_with(HashMap::new);
    if last.len() >= SWEEP_AT {
        last.retain(|_, at| now.saturating_duration_since(*at) < interval);
    }
    match last.get_mut(&(site, key.clone())) {
        Some(at) if now.saturating_duration_since(*at) < interval => false,
        Some(at) => {
            *at = now;
            true
        }
        None => {
            last.insert((site, key), now);
            true
        }
    }
}

fn throttle(ctx: NativeCallContext, key: Dynamic, interval: &str) -> Result<bool, Box<EvalAltResult>> {
    let Some(interval) = super::parse_duration(interval) else {
        let msg = format!("throttle(): `{interval}` is no interval; give one such as \"1m\", \"10s\" or \"500ms\"");
        return Err(Box::new(EvalAltResult::ErrorRuntime(msg.into(), ctx.call_position())));
    };
    Ok(pass(ctx.call_position(), key.to_string(), interval, Instant::now()))
}

pub fn install(engine: &mut rhai::Engine) {
    engine.register_fn("throttle", throttle);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_passes_once_per_interval_at_each_site() {
        let (a, b) = (Position::new(1, 1), Position::new(2, 1));
        let t0 = Instant::now();
        let s = Duration::from_secs(60);
        assert!(pass(a, "7".into(), s, t0));
        assert!(!pass(a, "7".into(), s, t0 + Duration::from_secs(59)));
        assert!(pass(a, "8".into(), s, t0), "another key");
        assert!(pass(b, "7".into(), s, t0), "another call site");
        assert!(pass(a, "7".into(), s, t0 + Duration::from_secs(60)));
        // Many keys: the expired ones go, the live ones stay.
        let c = Position::new(3, 1);
        for k in 0..10_000 {
            pass(c, k.to_string(), Duration::from_millis(1), t0 + Duration::from_millis(k));
        }
        assert!(LAST.lock().unwrap().as_ref().unwrap().len() < 2 * SWEEP_AT);
        assert!(!pass(c, "9999".into(), Duration::from_millis(1), t0 + Duration::from_millis(9999)));
    }
}
