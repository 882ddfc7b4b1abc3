//! C-style `printf` formatting with bpftrace's specifiers (`%d %u %x %s %c
//! %p %f %%`, flags `-+ 0#`, width, precision, ignored length modifiers).

use rhai::Dynamic;

/// Format `fmt` with `args`; a mismatch is reported in the result.
pub fn format(fmt: &str, args: &[Dynamic]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    let mut next = args.iter();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars.peek() {
            if "-+ 0#".contains(f) {
                flags.push(f);
                chars.next();
            } else {
                break;
            }
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                chars.next();
            }
            precision = Some(p.parse().unwrap_or(0));
        }
        while let Some(&m) = chars.peek() {
            if "hlLqjzt".contains(m) {
                chars.next();
            } else {
                break;
            }
        }
        let Some(conv) = chars.next() else {
            return Err("printf format ends in the middle of a % specifier".into());
        };
        let arg = next.next().ok_or_else(|| format!("printf: too few arguments for {fmt:?}"))?;
        let body = convert(conv, arg, precision, &flags)?;
        out.push_str(&pad(body, width.parse().unwrap_or(0), &flags, conv));
    }
    if next.next().is_some() {
        return Err(format!("printf: too many arguments for {fmt:?}"));
    }
    Ok(out)
}

fn int_of(arg: &Dynamic) -> Result<i64, String> {
    arg.as_int()
        .or_else(|_| arg.as_bool().map(|b| b as i64))
        .or_else(|_| arg.as_char().map(|c| c as i64))
        .or_else(|_| arg.as_float().map(|f| f as i64))
        .map_err(|_| format!("printf: expected a number, got {}", arg.type_name()))
}

fn convert(conv: char, arg: &Dynamic, precision: Option<usize>, flags: &str) -> Result<String, String> {
    Ok(match conv {
        'd' | 'i' => {
            let v = int_of(arg)?;
            if flags.contains('+') && v >= 0 {
                format!("+{v}")
            } else if flags.contains(' ') && v >= 0 {
                format!(" {v}")
            } else {
                v.to_string()
            }
        }
        'u' => (int_of(arg)? as u64).to_string(),
        'x' => format!("{}{:x}", if flags.contains('#') { "0x" } else { "" }, int_of(arg)?),
        'X' => format!("{}{:X}", if flags.contains('#') { "0X" } else { "" }, int_of(arg)?),
        'o' => format!("{:o}", int_of(arg)?),
        'p' => format!("0x{:x}", int_of(arg)?),
        'c' => char::from_u32(int_of(arg)? as u32).map(String::from).unwrap_or_default(),
        // `%r`: a buf() value, already shown hex-escaped.
        's' | 'r' => {
            let s = arg.to_string();
            match precision {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            }
        }
        'f' | 'F' | 'e' | 'g' => {
            let v = arg
                .as_float()
                .or_else(|_| arg.as_int().map(|i| i as f64))
                .map_err(|_| "printf: expected a number".to_string())?;
            let p = precision.unwrap_or(6);
            match conv {
                'e' => format!("{v:.p$e}"),
                'g' => format!("{v}"),
                _ => format!("{v:.p$}"),
            }
        }
        other => return Err(format!("printf: unknown conversion %{other}")),
    })
}

fn pad(body: String, width: usize, flags: &str, conv: char) -> String {
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = width - len;
    if flags.contains('-') {
        format!("{body}{}", " ".repeat(fill))
    } else if flags.contains('0') && conv != 's' && conv != 'c' {
        let (sign, digits) =
            if body.starts_with('-') || body.starts_with('+') { body.split_at(1) } else { ("", body.as_str()) };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: Vec<Dynamic>) -> String {
        format(fmt, &args).unwrap()
    }

    #[test]
    fn specifiers() {
        assert_eq!(f("%d %s\n", vec![Dynamic::from(42i64), Dynamic::from("bash")]), "42 bash\n");
        assert_eq!(
            f(
                "%-6s|%5d|%05d|%x|%%",
                vec!["ab".into(), Dynamic::from(7i64), Dynamic::from(-7i64), Dynamic::from(255i64)]
            ),
            "ab    |    7|-0007|ff|%"
        );
        assert_eq!(
            f("%lu %llu %.2f", vec![Dynamic::from(1i64), Dynamic::from(2i64), Dynamic::from(1.5f64)]),
            "1 2 1.50"
        );
        assert!(format("%d %d", &[Dynamic::from(1i64)]).unwrap_err().contains("too few"));
    }
}
