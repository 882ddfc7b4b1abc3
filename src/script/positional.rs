//! `parse_int(text)` as bpftrace reads integer positional parameters (`$1`):
//! decimal, `0x` hex, leading-`0` octal, an optional sign, and the whole
//! u64 range (`0xffffffffffffffff` is the 64-bit pattern of all ones, -1 as
//! a signed integer, 18446744073709551615 with `%u`). Replaces Rhai's own
//! `parse_int(text)`, which reads decimal only; `parse_int(text, radix)`
//! stays Rhai's.

use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext};

/// The value of `text`, or why it isn't an integer.
pub fn parse(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        (16, h)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    let body = body.replace('_', "");
    let v = u64::from_str_radix(&body, radix)
        .map_err(|_| format!("parse_int: {text:?} is not an integer (decimal, 0x hex or 0 octal)"))?;
    if negative && v > i64::MAX as u64 + 1 {
        return Err(format!("parse_int: {text:?} is below the 64-bit range"));
    }
    let v = v as i64;
    Ok(if negative { v.wrapping_neg() } else { v })
}

pub fn install(engine: &mut Engine) {
    engine.register_fn("parse_int", |ctx: NativeCallContext, text: &str| -> Result<i64, Box<EvalAltResult>> {
        parse(text).map_err(|m| Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(m), ctx.call_position())))
    });
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn bases_signs_and_the_u64_range() {
        assert_eq!(parse("42"), Ok(42));
        assert_eq!(parse("-42"), Ok(-42));
        assert_eq!(parse("0x1f"), Ok(31));
        assert_eq!(parse("0775"), Ok(0o775));
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("0xffffffffffffffff"), Ok(-1));
        assert_eq!(parse("18446744073709551615"), Ok(-1));
        assert_eq!(parse("-9223372036854775808"), Ok(i64::MIN));
        assert!(parse("12abc").is_err());
        assert!(parse("089").is_err());
        assert!(parse("").is_err());
    }
}
