//! Integer arithmetic as the kernel does it, so a closure means the same on
//! both sides of the split: 64-bit, wrapping on overflow, `x / 0` is 0 and
//! `x % 0` is `x` (BPF's rule). Rhai would stop with an error instead; these
//! operators replace its integer ones in every script.

use rhai::{Engine, INT};

pub fn divide(a: INT, b: INT) -> INT {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b)
    }
}

pub fn remainder(a: INT, b: INT) -> INT {
    if b == 0 {
        a
    } else {
        a.wrapping_rem(b)
    }
}

pub fn install(engine: &mut Engine) {
    // Registered operators only replace the built-in ones when Rhai looks
    // operators up instead of taking its fast path.
    engine.set_fast_operators(false);
    engine.register_fn("+", |a: INT, b: INT| a.wrapping_add(b));
    engine.register_fn("-", |a: INT, b: INT| a.wrapping_sub(b));
    engine.register_fn("*", |a: INT, b: INT| a.wrapping_mul(b));
    engine.register_fn("/", divide);
    engine.register_fn("%", remainder);
    engine.register_fn("-", |a: INT| a.wrapping_neg());
    engine.register_fn("+=", |a: &mut INT, b: INT| *a = a.wrapping_add(b));
    engine.register_fn("-=", |a: &mut INT, b: INT| *a = a.wrapping_sub(b));
    engine.register_fn("*=", |a: &mut INT, b: INT| *a = a.wrapping_mul(b));
    engine.register_fn("/=", |a: &mut INT, b: INT| *a = divide(*a, b));
    engine.register_fn("%=", |a: &mut INT, b: INT| *a = remainder(*a, b));
}

#[cfg(test)]
mod tests {
    #[test]
    fn scripts_wrap_and_divide_by_zero_as_the_kernel() {
        let mut engine = rhai::Engine::new();
        super::install(&mut engine);
        let eval = |s: &str| engine.eval::<i64>(s).unwrap();
        assert_eq!(eval("9223372036854775807 + 1"), i64::MIN);
        assert_eq!(eval("let x = 9223372036854775807; x += 2; x"), i64::MIN + 1);
        assert_eq!(eval("(-9223372036854775807 - 1) * -1"), i64::MIN);
        assert_eq!(eval("(-9223372036854775807 - 1) / -1"), i64::MIN);
        assert_eq!(eval("let z = 0; 7 / z"), 0);
        assert_eq!(eval("let z = 0; -7 % z"), -7);
        assert_eq!(eval("let x = 5; x /= 0; x"), 0);
        assert_eq!(eval("-7 / 2"), -3);
        assert_eq!(eval("-7 % 2"), -1);
        assert_eq!(eval("let x = -9223372036854775807 - 1; -x"), i64::MIN);
        // Floats and strings keep Rhai's operators.
        assert_eq!(engine.eval::<f64>("1.5 + 1").unwrap(), 2.5);
        assert_eq!(engine.eval::<String>(r#""a" + 1"#).unwrap(), "a1");
    }
}
