//! Functions that take a printf format and any number of values
//! (`printf`, `sprintf`, `eprintf`, `system`): registered here in one
//! place, for a format alone and for 1 to [`MAX_VALUES`] values.

use std::any::TypeId;

use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext, Variant};

/// The most values one call takes (after the format). A probe's record must
/// also fit the BPF stack, which bounds what the kernel side can send.
pub const MAX_VALUES: usize = 64;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// Register `name(fmt)` .. `name(fmt, v1, .. v{MAX_VALUES})`, each calling
/// `f(ctx, fmt, values)`.
pub fn register_formatting<T, F>(engine: &mut Engine, name: &'static str, f: F)
where
    T: Variant + Clone,
    F: Fn(&NativeCallContext, &str, &[Dynamic]) -> RhaiResult<T> + Clone + Send + Sync + 'static,
{
    for n in 0..=MAX_VALUES {
        let mut types = vec![TypeId::of::<ImmutableString>()];
        types.extend(std::iter::repeat_n(TypeId::of::<Dynamic>(), n));
        let f = f.clone();
        engine.register_raw_fn(name, types, move |ctx: NativeCallContext, args: &mut [&mut Dynamic]| {
            let fmt = args[0].clone().into_immutable_string().unwrap_or_default();
            let values: Vec<Dynamic> = args[1..].iter_mut().map(|a| std::mem::take(*a)).collect();
            f(&ctx, fmt.as_str(), &values)
        });
    }
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

    #[test]
    fn any_number_of_values_up_to_the_limit() {
        let mut engine = Engine::new();
        register_formatting(&mut engine, "fmt", |_: &NativeCallContext, fmt: &str, v: &[Dynamic]| {
            crate::output::printf::format(fmt, v).map_err(|e| e.into())
        });
        assert_eq!(engine.eval::<String>(r#"fmt("x")"#).unwrap(), "x");
        let args: Vec<String> = (0..MAX_VALUES).map(|i| i.to_string()).collect();
        let src = format!(r#"fmt("{}", {})"#, "%d".repeat(MAX_VALUES), args.join(", "));
        assert_eq!(engine.eval::<String>(&src).unwrap(), args.concat());
        let src = format!(r#"fmt("", {})"#, vec!["1"; MAX_VALUES + 1].join(", "));
        assert!(engine.eval::<String>(&src).is_err());
        // The method form reaches it too.
        assert_eq!(engine.eval::<String>(r#""%d-%s".fmt(1, "a")"#).unwrap(), "1-a");
    }
}
