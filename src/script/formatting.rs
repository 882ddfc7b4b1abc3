//! Functions that take a printf format and any number of values
//! (`printf`, `sprintf`, `eprintf`, `system`), registered in one place.
//!
//! Rhai has no variadic functions, so each is registered for a format with 0
//! to [`LADDER`] values (what most calls use; every route reaches those:
//! method form, `Fn(...)`, `eval`), and calls with more values, up to
//! [`MAX_VALUES`], are answered by the engine's missing-function hook. (A
//! longer ladder would make every call slower: Rhai matches `Dynamic`
//! parameters by trying each combination of argument types.)

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext, Position};

/// The most values one call takes (after the format). A probe's record must
/// also fit the BPF stack, which bounds what its kernel side can send.
pub const MAX_VALUES: usize = 64;

/// Calls with up to this many values are registered functions.
pub const LADDER: usize = 6;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// A formatting function: the call's position, the format, the values.
pub type Formatter = Arc<dyn Fn(Position, &str, &[Dynamic]) -> RhaiResult<Dynamic> + Send + Sync>;

/// The formatting functions of one engine, collected for its hook.
#[derive(Default, Clone)]
pub struct Formatting {
    functions: HashMap<&'static str, Formatter>,
}

impl Formatting {
    /// Register `name(fmt)` .. `name(fmt, v1, .. v{LADDER})` on `engine`,
    /// and remember `f` for calls with more values.
    pub fn add<F>(&mut self, engine: &mut Engine, name: &'static str, f: F)
    where
        F: Fn(Position, &str, &[Dynamic]) -> RhaiResult<Dynamic> + Send + Sync + 'static,
    {
        let f: Formatter = Arc::new(f);
        for n in 0..=LADDER {
            let mut types = vec![TypeId::of::<ImmutableString>()];
            types.extend(std::iter::repeat_n(TypeId::of::<Dynamic>(), n));
            let f = f.clone();
            engine.register_raw_fn(name, types, move |ctx: NativeCallContext, args: &mut [&mut Dynamic]| {
                let fmt = args[0].clone().into_immutable_string().unwrap_or_default();
                let values: Vec<Dynamic> = args[1..].iter_mut().map(|a| std::mem::take(*a)).collect();
                f(ctx.call_position(), fmt.as_str(), &values)
            });
        }
        self.functions.insert(name, f);
    }

    /// Answer calls of the functions added with more than [`LADDER`] values.
    pub fn install(self, engine: &mut Engine) {
        // The hook is marked volatile (it may change in a later Rhai); rhai is pinned.
        #[allow(deprecated)]
        engine.on_missing_function(move |name, args, _method, _ctx| {
            let Some(f) = self.functions.get(name) else { return Ok(None) };
            if args.len() <= LADDER + 1 || args.len() > MAX_VALUES + 1 {
                return Ok(None);
            }
            let Ok(fmt) = args[0].clone().into_immutable_string() else { return Ok(None) };
            let values: Vec<Dynamic> = args[1..].iter_mut().map(|a| std::mem::take(*a)).collect();
            f(Position::NONE, fmt.as_str(), &values).map(Some)
        });
    }
}

/// Register printf, sprintf, eprintf and system on `engine`.
pub fn install(engine: &mut Engine) {
    let mut formatting = Formatting::default();
    formatting.add(engine, "printf", super::userlib::printf);
    formatting.add(engine, "sprintf", sprintf);
    formatting.add(engine, "eprintf", eprintf);
    formatting.add(engine, "system", super::system::request);
    formatting.install(engine);
}

fn formatted(pos: Position, fmt: &str, args: &[Dynamic]) -> RhaiResult<String> {
    crate::output::printf::format(fmt, args).map_err(|e| Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(e), pos)))
}

/// `sprintf(fmt, values...)` (or one array of values): the formatted text.
pub fn sprintf(pos: Position, fmt: &str, values: &[Dynamic]) -> RhaiResult<Dynamic> {
    formatted(pos, fmt, &spread(values)).map(Dynamic::from)
}

/// `eprintf(fmt, values...)` (or one array of values): the text on stderr.
pub fn eprintf(pos: Position, fmt: &str, values: &[Dynamic]) -> RhaiResult<Dynamic> {
    let text = formatted(pos, fmt, &spread(values))?;
    crate::output::sink::flush();
    crate::util::errtext!("{text}");
    Ok(Dynamic::UNIT)
}

/// A lone array stands for the values themselves (`sprintf(fmt, [a, b])`).
pub fn spread(values: &[Dynamic]) -> Vec<Dynamic> {
    match values {
        [one] if one.is_array() => one.clone().into_array().unwrap_or_default(),
        _ => values.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut engine = Engine::new();
        let mut formatting = Formatting::default();
        formatting.add(&mut engine, "fmt", |_, fmt: &str, v: &[Dynamic]| {
            crate::output::printf::format(fmt, v).map(Dynamic::from).map_err(|e| e.into())
        });
        formatting.install(&mut engine);
        engine
    }

    #[test]
    fn any_number_of_values_up_to_the_limit() {
        let engine = engine();
        assert_eq!(engine.eval::<String>(r#"fmt("x")"#).unwrap(), "x");
        for n in [1, LADDER, LADDER + 1, 20, MAX_VALUES] {
            let args: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let src = format!(r#"fmt("{}", {})"#, "%d".repeat(n), args.join(", "));
            assert_eq!(engine.eval::<String>(&src).unwrap(), args.concat(), "{n} values");
        }
        let src = format!(r#"fmt("", {})"#, vec!["1"; MAX_VALUES + 1].join(", "));
        assert!(engine.eval::<String>(&src).is_err());
        // The method form and function pointers reach it too.
        assert_eq!(engine.eval::<String>(r#""%d-%s".fmt(1, "a")"#).unwrap(), "1-a");
        assert_eq!(
            engine.eval::<String>(r#"Fn("fmt").call("%d%d%d%d%d%d%d%d", 1, 2, 3, 4, 5, 6, 7, 8)"#).unwrap(),
            "12345678"
        );
        // Within the ladder an error names the call's line (past it the
        // check before attaching names it, for a literal format).
        let e = engine.eval::<String>("let a = 1;\nfmt(\"%d\", 1, 2)").unwrap_err();
        assert_eq!(e.position().line(), Some(2), "{e}");
        let e = engine.eval::<String>("fmt(\"%d\", 1, 2, 3, 4, 5, 6, 7, 8)").unwrap_err();
        assert!(e.to_string().contains("too many values"), "{e}");
    }
}
