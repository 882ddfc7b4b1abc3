//! C-style `printf` formatting as bpftrace does it: `%d %i %u %o %x %X %c %s
//! %p`, `%r` `%rx` `%rh` (a buf() value: escaped, every byte `\xNN`, or
//! space-separated hex; see [`super::bytes`]), the float forms `%f %F %e %E %g %G`, `%%`; flags `-+ 0#`; a width
//! and a precision, each a number or `*` (taken from the next value); length
//! modifiers `hh` (8 bits) and `h` (16 bits) truncate the value; `%x %X %o`
//! without a modifier print the low 32 bits as C and bpftrace do
//! (`0x12345678abcdef` → `78abcdef`), while `%d %i %u` keep all 64 bits so
//! sizes, pids and nanosecond times print whole; `l`, `ll`, `j`, `z`, `t`,
//! `q` and `L` keep 64 bits.
//!
//! Pure: [`parse`] splits a format into text and conversions (also used by
//! the check before attaching, to count the values a literal format needs),
//! [`format`] applies one to values.

use rhai::Dynamic;

use super::bytes::{self, Buf, BufForm};

/// Integer width named by a length modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// `hh`: 8 bits.
    Char,
    /// `h`: 16 bits.
    Short,
    /// No modifier: 32 bits for `%x %X %o`, 64 for the rest.
    Plain,
    /// `l`, `ll`, `j`, `z`, `t`, `q`, `L`: 64 bits.
    Full,
}

/// A width or precision: written in the format, or `*` (the next value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Fixed(usize),
    Arg,
}

/// One `%...` conversion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub left: bool,
    pub plus: bool,
    pub space: bool,
    pub zero: bool,
    pub alt: bool,
    pub width: Option<Count>,
    pub precision: Option<Count>,
    pub length: Length,
    pub conv: char,
    /// For `%r`: `%rx` and `%rh` show the bytes as hex.
    pub buf: BufForm,
}

impl Spec {
    /// How many values this conversion takes (`*` widths take one each).
    pub fn values(&self) -> usize {
        1 + usize::from(self.width == Some(Count::Arg)) + usize::from(self.precision == Some(Count::Arg))
    }

    /// Whether the conversion prints a number (a map handle there is a mistake).
    pub fn numeric(&self) -> bool {
        !matches!(self.conv, 's' | 'c' | 'r')
    }
}

/// A piece of a parsed format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Conv(Spec),
}

/// The conversions a `%` may end in.
const CONVERSIONS: &str = "diuoxXcsrpfFeEgG";

/// Split `fmt` into text and conversions; an unknown conversion or a `%`
/// cut short is an error naming it.
pub fn parse(fmt: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            text.push('%');
            continue;
        }
        let mut spec = Spec {
            left: false,
            plus: false,
            space: false,
            zero: false,
            alt: false,
            width: None,
            precision: None,
            length: Length::Full,
            conv: ' ',
            buf: BufForm::Escaped,
        };
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                '#' => spec.alt = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = count(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(count(&mut chars).unwrap_or(Count::Fixed(0)));
        }
        let mut modifier = String::new();
        while let Some(&m) = chars.peek().filter(|m| "hlLqjzt".contains(**m)) {
            modifier.push(m);
            chars.next();
        }
        spec.length = match modifier.as_str() {
            "hh" => Length::Char,
            "h" => Length::Short,
            "" => Length::Plain,
            "l" | "ll" | "j" | "z" | "t" | "q" | "L" => Length::Full,
            other => return Err(format!("printf: unknown length modifier `{other}` in {fmt:?}")),
        };
        let Some(conv) = chars.next() else {
            return Err(format!("printf: the format {fmt:?} ends in the middle of a % conversion (write %% for a %)"));
        };
        if !CONVERSIONS.contains(conv) {
            let hint = if "aA".contains(conv) { " (use %e for floats)" } else { " (write %% for a %)" };
            let shown = format!("%{modifier}{}", conv.escape_debug());
            return Err(format!("printf: unknown conversion {shown} in {fmt:?}{hint}"));
        }
        spec.conv = conv;
        if conv == 'r' {
            match chars.peek() {
                Some('x') => spec.buf = BufForm::Escapes,
                Some('h') => spec.buf = BufForm::Hex,
                _ => {}
            }
            if spec.buf != BufForm::Escaped {
                chars.next();
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Conv(spec));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn count(chars: &mut std::iter::Peekable<std::str::Chars>) -> Option<Count> {
    if chars.peek() == Some(&'*') {
        chars.next();
        return Some(Count::Arg);
    }
    let mut digits = String::new();
    while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
        digits.push(d);
        chars.next();
    }
    digits.parse().ok().map(|n: usize| Count::Fixed(n.min(MAX_WIDTH)))
}

/// Widths and precisions are capped here (a huge one is a mistake, not a request for gigabytes).
const MAX_WIDTH: usize = 4096;

/// Format `fmt` with `args`; a mismatch is reported in the result.
pub fn format(fmt: &str, args: &[Dynamic]) -> Result<String, String> {
    let mut out = String::new();
    format_with(fmt, args, |piece| match piece {
        Formatted::Text(t) | Formatted::Value(t) => out.push_str(t),
    })?;
    Ok(out)
}

/// A piece of a formatted text: the format's own text, or one converted value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formatted<'a> {
    Text(&'a str),
    Value(&'a str),
}

/// Format `fmt` with `args`, handing each piece to `out` in order (so a
/// caller can treat values apart from the format's text: `system()` passes
/// them to the shell as data).
pub fn format_with(fmt: &str, args: &[Dynamic], mut out: impl FnMut(Formatted)) -> Result<(), String> {
    let pieces = parse(fmt)?;
    let needed: usize = pieces.iter().map(|p| if let Piece::Conv(s) = p { s.values() } else { 0 }).sum();
    if needed != args.len() {
        let few = if needed > args.len() { "too few" } else { "too many" };
        return Err(format!("printf: {few} values for {fmt:?}: it takes {needed}, {} given", args.len()));
    }
    let mut next = args.iter();
    for piece in &pieces {
        let spec = match piece {
            Piece::Text(t) => {
                out(Formatted::Text(t));
                continue;
            }
            Piece::Conv(spec) => spec,
        };
        let mut spec = spec.clone();
        if spec.width == Some(Count::Arg) {
            let w = int_of(next.next().unwrap_or(&Dynamic::UNIT), '*')?;
            spec.left |= w < 0;
            spec.width = Some(Count::Fixed((w.unsigned_abs() as usize).min(MAX_WIDTH)));
        }
        if spec.precision == Some(Count::Arg) {
            let p = int_of(next.next().unwrap_or(&Dynamic::UNIT), '*')?;
            // A negative precision is taken as if it were omitted.
            spec.precision = (p >= 0).then(|| Count::Fixed((p as usize).min(MAX_WIDTH)));
        }
        let arg = next.next().unwrap_or(&Dynamic::UNIT);
        out(Formatted::Value(&convert(&spec, arg)?));
    }
    Ok(())
}

fn fixed(c: Option<Count>) -> Option<usize> {
    match c {
        Some(Count::Fixed(n)) => Some(n),
        _ => None,
    }
}

fn int_of(arg: &Dynamic, conv: char) -> Result<i64, String> {
    arg.as_int()
        .or_else(|_| arg.as_bool().map(|b| b as i64))
        .or_else(|_| arg.as_char().map(|c| c as i64))
        .or_else(|_| arg.as_float().map(|f| f as i64))
        .map_err(|_| format!("printf: %{conv} expects a number, got {}", arg.type_name()))
}

fn float_of(arg: &Dynamic, conv: char) -> Result<f64, String> {
    arg.as_float()
        .or_else(|_| arg.as_int().map(|i| i as f64))
        .or_else(|_| arg.as_bool().map(|b| b as i64 as f64))
        .map_err(|_| format!("printf: %{conv} expects a number, got {}", arg.type_name()))
}

fn convert(spec: &Spec, arg: &Dynamic) -> Result<String, String> {
    let width = fixed(spec.width).unwrap_or(0);
    let precision = fixed(spec.precision);
    Ok(match spec.conv {
        // `%s` of a buf() value prints it as `%r` does; `%r` of a string
        // shows its bytes.
        's' | 'r' => {
            let s = match (arg.read_lock::<Buf>(), spec.conv) {
                (Some(b), _) => bytes::show(&b.0, spec.buf),
                (None, 'r') => bytes::show(arg.to_string().as_bytes(), spec.buf),
                (None, _) => arg.to_string(),
            };
            let s = match precision {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            };
            pad(String::new(), s, width, spec.left, false)
        }
        'c' => {
            let c = match arg.as_char() {
                Ok(c) => c,
                Err(_) => char::from_u32(int_of(arg, 'c')? as u8 as u32).unwrap_or('?'),
            };
            pad(String::new(), c.to_string(), width, spec.left, false)
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => float_text(spec, float_of(arg, spec.conv)?, width, precision),
        _ => int_text(spec, int_of(arg, spec.conv)?, width, precision),
    })
}

/// `prefix` (sign, `0x`) then `body`, padded to `width`: spaces on the left,
/// spaces on the right (`-`), or zeros between prefix and body (`0`).
fn pad(prefix: String, body: String, width: usize, left: bool, zeros: bool) -> String {
    let len = prefix.chars().count() + body.chars().count();
    let fill = width.saturating_sub(len);
    if left {
        format!("{prefix}{body}{}", " ".repeat(fill))
    } else if zeros {
        format!("{prefix}{}{body}", "0".repeat(fill))
    } else {
        format!("{}{prefix}{body}", " ".repeat(fill))
    }
}

fn sign(spec: &Spec, negative: bool) -> &'static str {
    if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

fn int_text(spec: &Spec, v: i64, width: usize, precision: Option<usize>) -> String {
    let signed = matches!(spec.conv, 'd' | 'i');
    let (negative, magnitude): (bool, u64) = match (signed, spec.length) {
        (true, Length::Char) => ((v as i8) < 0, (v as i8).unsigned_abs() as u64),
        (true, Length::Short) => ((v as i16) < 0, (v as i16).unsigned_abs() as u64),
        (true, Length::Plain | Length::Full) => (v < 0, v.unsigned_abs()),
        (false, Length::Char) => (false, v as u8 as u64),
        (false, Length::Short) => (false, v as u16 as u64),
        (false, Length::Plain) if matches!(spec.conv, 'x' | 'X' | 'o') => (false, v as u32 as u64),
        (false, Length::Plain | Length::Full) => (false, v as u64),
    };
    let mut digits = match spec.conv {
        'o' => format!("{magnitude:o}"),
        'x' | 'p' => format!("{magnitude:x}"),
        'X' => format!("{magnitude:X}"),
        _ => magnitude.to_string(),
    };
    if let Some(p) = precision {
        if p == 0 && magnitude == 0 {
            digits.clear();
        } else if digits.len() < p {
            digits = format!("{}{digits}", "0".repeat(p - digits.len()));
        }
    }
    let prefix = match spec.conv {
        'd' | 'i' => sign(spec, negative).to_string(),
        'p' => "0x".to_string(),
        'x' if spec.alt && magnitude != 0 => "0x".to_string(),
        'X' if spec.alt && magnitude != 0 => "0X".to_string(),
        'o' if spec.alt && !digits.starts_with('0') => "0".to_string(),
        _ => String::new(),
    };
    // C: a precision turns the `0` flag off for integers.
    pad(prefix, digits, width, spec.left, spec.zero && precision.is_none())
}

fn float_text(spec: &Spec, v: f64, width: usize, precision: Option<usize>) -> String {
    let upper = spec.conv.is_ascii_uppercase();
    let prefix = sign(spec, v.is_sign_negative() && !v.is_nan()).to_string();
    if !v.is_finite() {
        let body = if v.is_nan() { "nan" } else { "inf" };
        let body = if upper { body.to_ascii_uppercase() } else { body.to_string() };
        return pad(prefix, body, width, spec.left, false);
    }
    let a = v.abs();
    let p = precision.unwrap_or(6);
    let mut body = match spec.conv.to_ascii_lowercase() {
        'f' => fixed_text(a, p, spec.alt),
        'e' => exp_text(a, p, spec.alt),
        _ => general_text(a, p, spec.alt),
    };
    if upper {
        body = body.to_ascii_uppercase();
    }
    pad(prefix, body, width, spec.left, spec.zero)
}

fn fixed_text(a: f64, p: usize, alt: bool) -> String {
    let mut s = format!("{a:.p$}");
    if alt && p == 0 {
        s.push('.');
    }
    s
}

/// C's `%e`: `d.ddde±XX`, at least two exponent digits.
fn exp_text(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let dot = if alt && p == 0 { "." } else { "" };
    format!("{mantissa}{dot}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
}

/// C's `%g`: `%e` when the exponent is below -4 or at least the precision,
/// else `%f`; trailing zeros dropped unless `#`.
fn general_text(a: f64, p: usize, alt: bool) -> String {
    let p = p.max(1);
    let exp: i32 = if a == 0.0 {
        0
    } else {
        let s = format!("{a:.*e}", p - 1);
        s.split_once('e').and_then(|(_, e)| e.parse().ok()).unwrap_or(0)
    };
    let mut s = if exp < -4 || exp >= p as i32 {
        exp_text(a, p - 1, alt)
    } else {
        fixed_text(a, (p as i32 - 1 - exp) as usize, alt)
    };
    if !alt {
        let (number, exponent) = match s.find('e') {
            Some(i) => s.split_at(i),
            None => (s.as_str(), ""),
        };
        if number.contains('.') {
            let trimmed = number.trim_end_matches('0').trim_end_matches('.');
            s = format!("{trimmed}{exponent}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: Vec<Dynamic>) -> String {
        format(fmt, &args).unwrap_or_else(|e| panic!("{fmt}: {e}"))
    }

    fn i(v: i64) -> Dynamic {
        Dynamic::from(v)
    }

    fn x(v: f64) -> Dynamic {
        Dynamic::from(v)
    }

    #[test]
    fn integers_flags_width_precision() {
        assert_eq!(f("%d %s\n", vec![i(42), "bash".into()]), "42 bash\n");
        assert_eq!(f("%-6s|%5d|%05d|%x|%%", vec!["ab".into(), i(7), i(-7), i(255)]), "ab    |    7|-0007|ff|%");
        assert_eq!(f("%lu %llu %.2f", vec![i(1), i(2), x(1.5)]), "1 2 1.50");
        // Expected strings from glibc's printf with the same arguments.
        assert_eq!(f("[%+d] [% d] [%+5d] [%-+5d]", vec![i(7), i(7), i(7), i(7)]), "[+7] [ 7] [   +7] [+7   ]");
        assert_eq!(
            f("[%.3d] [%8.3d] [%08.3d] [%.0d]", vec![i(7), i(-7), i(7), i(0)]),
            "[007] [    -007] [     007] []"
        );
        assert_eq!(
            f("[%#x] [%#X] [%#o] [%#x] [%#o]", vec![i(255), i(255), i(8), i(0), i(0)]),
            "[0xff] [0XFF] [010] [0] [0]"
        );
        assert_eq!(f("[%#010x] [%-#8x|]", vec![i(255), i(255)]), "[0x000000ff] [0xff    |]");
        assert_eq!(
            f("%u %x %lx %o", vec![i(-1), i(-1), i(-1), i(8)]),
            "18446744073709551615 ffffffff ffffffffffffffff 10"
        );
        assert_eq!(f("%p %c%c", vec![i(4096), i(65), i(0x142)]), "0x1000 AB");
        assert_eq!(f("%i|%5c|%-3c|", vec![i(-3), i(66), i(67)]), "-3|    B|C  |");
    }

    #[test]
    fn length_modifiers_truncate_like_c() {
        // bpftrace's runtime test: $x = 0x12345678abcdef.
        let v = 0x12345678abcdef_i64;
        assert_eq!(
            f("%hhx %hx %x %jx %lx %llx", vec![i(v), i(v), i(v), i(v), i(v), i(v)]),
            "ef cdef 78abcdef 12345678abcdef 12345678abcdef 12345678abcdef"
        );
        assert_eq!(f("%X %o %lo", vec![i(v), i(v), i(v)]), "78ABCDEF 17052746757 221505317052746757");
        assert_eq!(f("%d %u %i", vec![i(v), i(v), i(-v)]), "5124095577148911 5124095577148911 -5124095577148911");
        assert_eq!(f("%hhd %hhu %hd %hu", vec![i(255), i(255), i(65535), i(65535)]), "-1 255 -1 65535");
        assert_eq!(f("%hhd %hd %zd %td %qd", vec![i(0x180), i(0x18000), i(-5), i(-6), i(-7)]), "-128 -32768 -5 -6 -7");
        assert_eq!(f("%lld %ld %llu", vec![i(i64::MIN), i(-1), i(-1)]), "-9223372036854775808 -1 18446744073709551615");
    }

    #[test]
    fn floats_as_c() {
        // Each expected string is what glibc's printf prints.
        assert_eq!(f("%f %.0f %.1f %#.0f", vec![x(2.46813), x(2.5), x(0.05), x(3.0)]), "2.468130 2 0.1 3.");
        assert_eq!(
            f("%e %E %.2e %.0e", vec![x(1234.5), x(0.000123), x(-1e100), x(5.0)]),
            "1.234500e+03 1.230000E-04 -1.00e+100 5e+00"
        );
        assert_eq!(
            f("%g %g %g %g", vec![x(100000.0), x(1000000.0), x(0.0001), x(0.00001)]),
            "100000 1e+06 0.0001 1e-05"
        );
        assert_eq!(
            f("%g %G %.3g %.10g", vec![x(2.46813), x(1e-10), x(1234.5), x(1.0 / 3.0)]),
            "2.46813 1E-10 1.23e+03 0.3333333333"
        );
        assert_eq!(f("%#g %g %.0g %g", vec![x(1.5), x(0.0), x(123.0), x(-2.5)]), "1.50000 0 1e+02 -2.5");
        assert_eq!(
            f("[%10.3f] [%-10.2e|] [%010.2f] [%+.1f] [% .1f]", vec![x(2.46813), x(314.0), x(-2.46813), x(1.0), x(1.0)]),
            "[     2.468] [3.14e+02  |] [-000002.47] [+1.0] [ 1.0]"
        );
        assert_eq!(
            f(
                "%f %F %e %g %5.1f",
                vec![x(f64::INFINITY), x(f64::NEG_INFINITY), x(f64::NAN), x(f64::INFINITY), x(f64::NAN)]
            ),
            "inf -INF nan inf   nan"
        );
        assert_eq!(f("%f %e", vec![i(2), i(-3)]), "2.000000 -3.000000e+00");
        assert_eq!(f("%g %.2g", vec![x(999999.5), x(0.000999)]), "1e+06 0.001");
    }

    #[test]
    fn widths_and_precisions_from_values() {
        assert_eq!(
            f(
                "[%*d] [%-*s|] [%.*f] [%*.*s]",
                vec![i(5), i(42), i(4), "ab".into(), i(2), x(2.46813), i(4), i(2), "xyz".into()]
            ),
            "[   42] [ab  |] [2.47] [  xy]"
        );
        // A negative width left-aligns; a negative precision is as if omitted.
        assert_eq!(f("[%*d] [%.*f]", vec![i(-4), i(7), i(-1), x(1.5)]), "[7   ] [1.500000]");
        let needed: usize =
            parse("%*d %-*.*s %%").unwrap().iter().map(|p| if let Piece::Conv(s) = p { s.values() } else { 0 }).sum();
        assert_eq!(needed, 5);
    }

    #[test]
    fn any_number_of_values() {
        let fmt = "%d ".repeat(40);
        let args: Vec<Dynamic> = (0..40).map(i).collect();
        let want: String = (0..40).map(|n| format!("{n} ")).collect();
        assert_eq!(f(&fmt, args), want);
    }

    #[test]
    fn bufs_escaped_as_hex_escapes_and_as_hex() {
        let b = || Dynamic::from(Buf(vec![b'a', 0, 0xff, b' ', 0x0a]));
        assert_eq!(f("%r|%s", vec![b(), b()]), "a\\x00\\xff \\x0a|a\\x00\\xff \\x0a");
        assert_eq!(f("%rx", vec![b()]), "\\x61\\x00\\xff\\x20\\x0a");
        assert_eq!(f("[%rh]", vec![b()]), "[61 00 ff 20 0a]");
        assert_eq!(f("[%rh] [%rx]", vec![Dynamic::from(Buf(vec![])), Dynamic::from(Buf(vec![]))]), "[] []");
        // Width and precision apply to the shown text; `x`/`h` after `%r` belong to it.
        assert_eq!(f("[%12rh] [%-5.2rx]", vec![Dynamic::from(Buf(vec![1, 2])), b()]), "[       01 02] [\\x   ]");
        assert_eq!(f("%rhx", vec![Dynamic::from(Buf(vec![0xab]))]), "abx");
        // A string's bytes, in the same forms.
        assert_eq!(f("%rx %rh %r", vec!["hi".into(), "hi".into(), "hi".into()]), "\\x68\\x69 68 69 hi");
        let Piece::Conv(spec) = &parse("%rh").unwrap()[0] else { panic!("no conversion") };
        assert_eq!((spec.conv, spec.buf, spec.numeric()), ('r', BufForm::Hex, false));
    }

    #[test]
    fn mistakes_are_errors() {
        assert!(format("%d %d", &[i(1)]).unwrap_err().contains("too few values"));
        assert!(format("%d", &[i(1), i(2)]).unwrap_err().contains("too many values"));
        assert!(format("%d", &["x".into()]).unwrap_err().contains("%d expects a number, got string"));
        assert!(format("%k", &[i(1)]).unwrap_err().contains("unknown conversion %k"));
        // A length modifier with no conversion after it: the line stays one line.
        assert!(format("%q\n", &[i(1)]).unwrap_err().contains(r"unknown conversion %q\n in"));
        assert!(format("%a", &[x(1.0)]).unwrap_err().contains("use %e"));
        assert!(format("50%", &[]).unwrap_err().contains("ends in the middle"));
        assert!(format("%hhhd", &[i(1)]).unwrap_err().contains("length modifier"));
        assert_eq!(format("%%d", &[]).unwrap(), "%d");
    }
}
