//! Indexing tracepoint fields in a probe: `e.args.args[0]` (an array
//! field, bpftrace's `args->args[0]`), `e.args.argv[1]` (what a pointer field
//! points to: here a user `char *`, so `str(e.args.argv[1])` reads the
//! string), with a constant index or any integer (a loop variable).

use super::*;
use crate::kernel::tracepoint_format::{c_int_width, TracepointFormat};
use probes_ebpf::ir::Memory;

/// An array field's element type and count: `unsigned long[6]` → ("unsigned long", 6).
fn array_of(c_type: &str) -> Option<(&str, u32)> {
    let (base, rest) = c_type.split_once('[')?;
    let n = rest.strip_suffix(']')?.trim().parse().ok()?;
    Some((base.trim(), n))
}

/// A C type without qualifiers, pointers written `char**`.
fn unqualified(t: &str) -> String {
    let spaced = t.replace('*', " * ");
    let words: Vec<&str> =
        spaced.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "__user")).collect();
    words.join(" ").replace(" *", "*")
}

/// Size and signedness of an integer element type.
fn int_type(t: &str) -> Option<(u32, bool)> {
    Some(match unqualified(t).as_str() {
        "char" | "signed char" | "s8" | "__s8" => (1, true),
        "unsigned char" | "u8" | "__u8" | "bool" => (1, false),
        "unsigned long" | "unsigned long long" | "size_t" | "u64" | "__u64" => (8, false),
        "long long" => (8, true),
        other => return c_int_width(other),
    })
}

/// The elements of an array field, for userspace (shipped one by one).
pub(crate) fn array_items(format: &TracepointFormat, field: &str) -> Option<Vec<Expr>> {
    let f = format.field(field)?;
    let (base, n) = array_of(&f.c_type)?;
    if n == 0 || n > 64 || f.kind == FieldKind::CharArray {
        return None;
    }
    let size = f.size / n;
    let (want, signed) = int_type(base)?;
    (want == size).then(|| (0..n).map(|i| Expr::CtxInt { offset: f.offset + i * size, size, signed }).collect())
}

impl Lowerer<'_> {
    /// `e.args.F[index]`: the element's value, and whether it is a `char *`.
    pub(crate) fn arg_element(&mut self, field: &str, fpos: Position, index: &RExpr) -> Result<(Expr, bool)> {
        if self.target.event.btf_args().is_some() {
            return err(fpos, "indexing BTF-typed arguments isn't supported yet");
        }
        let Some(f) = self.target.event.format().and_then(|fmt| fmt.field(field)).cloned() else {
            // No such field (or no tracepoint): its error names what there is.
            self.tracepoint_arg(field, fpos)?;
            return err(fpos, format!("`e.args.{field}` can't be indexed here"));
        };
        let ipos = index.position();
        if let Some((base, n)) = array_of(&f.c_type).filter(|_| f.kind != FieldKind::CharArray) {
            let size = f.size.checked_div(n).unwrap_or(0);
            let Some((_, signed)) = int_type(base).filter(|(w, _)| *w == size) else {
                return err(
                    fpos,
                    format!("`e.args.{field}` is `{}`: only arrays of integers can be indexed", f.c_type),
                );
            };
            let element = |i: u32| Expr::CtxInt { offset: f.offset + i * size, size, signed };
            if let Some(i) = self.const_int(index) {
                if i < 0 || i >= n as i64 {
                    return err(ipos, format!("index {i} is outside `e.args.{field}` ({} has {n} elements)", f.c_type));
                }
                return Ok((element(i as u32), false));
            }
            // A run-time index: choose among the elements (out of range reads 0).
            let i = self.int_expr(index)?;
            let mut value = Expr::Int(0);
            for k in (0..n).rev() {
                let hit = Expr::Binary(BinOp::Eq, Box::new(i.clone()), Box::new(Expr::Int(k as i64)));
                value = Expr::Cond(Box::new(hit), Box::new(element(k)), Box::new(value));
            }
            return Ok((value, false));
        }
        let FieldKind::Pointer { user, .. } = f.kind else {
            return err(fpos, format!("`e.args.{field}` is `{}`, which can't be indexed", f.c_type));
        };
        // What the pointer points to: one `*` less.
        let ty = unqualified(&f.c_type);
        let Some(element_ty) = ty.strip_suffix('*').map(str::trim) else {
            return err(fpos, format!("`e.args.{field}` is `{}`, which can't be indexed", f.c_type));
        };
        let (size, signed, char_pointer) = match element_ty.strip_suffix('*') {
            Some(inner) => (8, false, int_type(inner) == Some((1, true))),
            None => match int_type(element_ty) {
                Some((size, signed)) => (size, signed, false),
                None => {
                    return err(
                        fpos,
                        format!("`e.args.{field}` points to `{element_ty}`; only integers and pointers can be indexed"),
                    );
                }
            },
        };
        let i = self.int_expr(index)?;
        let ptr = Expr::CtxInt { offset: f.offset, size: 8, signed: false };
        let addr = fold(BinOp::Add, ptr, fold(BinOp::Mul, i, Expr::Int(size as i64)));
        Ok((Expr::ReadMem { addr: Box::new(addr), size, signed, mem: Memory::user(user) }, char_pointer))
    }
}
