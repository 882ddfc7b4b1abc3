//! `buf()` values in userspace scripts: a [`Buf`] prints, interpolates and
//! concatenates as its escaped text (as bpftrace prints a buffer), compares
//! equal to that text, and `len()` is its byte count; printf's `%rx` and
//! `%rh` show its bytes as hex (src/output/printf.rs).

use rhai::{Engine, ImmutableString};

use crate::output::bytes::Buf;

pub fn install(engine: &mut Engine) {
    engine.register_type_with_name::<Buf>("buf");
    engine.register_fn("to_string", |b: &mut Buf| b.escaped());
    engine.register_fn("to_debug", |b: &mut Buf| format!("{:?}", b.escaped()));
    engine.register_fn("len", |b: &mut Buf| b.0.len() as i64);
    engine.register_fn("==", |a: Buf, b: Buf| a == b);
    engine.register_fn("!=", |a: Buf, b: Buf| a != b);
    engine.register_fn("==", |a: Buf, s: ImmutableString| a.escaped() == s.as_str());
    engine.register_fn("!=", |a: Buf, s: ImmutableString| a.escaped() != s.as_str());
    engine.register_fn("==", |s: ImmutableString, a: Buf| a.escaped() == s.as_str());
    engine.register_fn("!=", |s: ImmutableString, a: Buf| a.escaped() != s.as_str());
}

#[cfg(test)]
mod tests {
    use super::*;
    use rhai::Dynamic;

    fn eval(src: &str) -> String {
        let mut engine = Engine::new();
        install(&mut engine);
        let mut scope = rhai::Scope::new();
        scope.push_dynamic("b", Dynamic::from(Buf(vec![b'h', b'i', 0, 0xff])));
        engine.eval_with_scope::<Dynamic>(&mut scope, src).map(|d| d.to_string()).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn a_buf_is_its_escaped_text() {
        assert_eq!(eval(r#"`<${b}>`"#), r"<hi\x00\xff>");
        assert_eq!(eval(r#""<" + b"#), r"<hi\x00\xff");
        assert_eq!(eval(r#"b + ">""#), r"hi\x00\xff>");
        assert_eq!(eval(r#"b.to_string()"#), r"hi\x00\xff");
        assert_eq!(eval(r#"b == "hi\\x00\\xff""#), "true");
        assert_eq!(eval(r#""hi" != b"#), "true");
        assert_eq!(eval(r#"b == b"#), "true");
        assert_eq!(eval(r#"b.len()"#), "4");
    }
}
