//! Kernel forms bpftrace scripts use for strings, buffers and typed
//! pointers, lowered here:
//!
//! - `strncmp(a, b, n)` (0 when the first `n` bytes agree, as bpftrace) and
//!   `strcontains(hay, needle)` (a bool) on strings read at run time, so
//!   filters and keys can use them;
//! - `buf(ptr, len)`: `len` bytes of memory (a constant up to 256, or a
//!   runtime length up to the string limit), shown hex-escaped (`\x01\x02`,
//!   printable ASCII kept) where userspace prints it;
//! - `kptr(v, "struct sock")`: bpftrace's `(struct sock *)v`, an integer
//!   made a pointer to a kernel struct through BTF, whose `.member` chains
//!   then read as for other BTF pointers (`let s = kptr(...); s.sk_family`,
//!   or `kptr(...).sk_family`). In a userspace statement, each
//!   `kptr(v, T).a.b` is read in the kernel and shipped with `v`, and
//!   userspace's `kptr(v, T)` is an object map of the members read.

use probes_ebpf::ir::{Memory, StrOp};

use crate::compile::fields;

use super::*;

/// `kptr(..)` with two arguments.
pub(crate) fn is_kptr(e: &RExpr) -> bool {
    matches!(e, RExpr::FnCall(c, _) if c.name == "kptr" && c.args.len() == 2)
}

/// The call at the end of `path` is the left side of a `.member` read
/// (`kptr(v, T).pid`), which userspace statements may use.
pub(crate) fn member_read(path: &[ASTNode]) -> bool {
    let [.., ASTNode::Expr(RExpr::Dot(x, _, _)), ASTNode::Expr(call)] = path else { return false };
    is_kptr(call) && x.lhs.position() == call.position()
}

/// A call of a kernel function that reads kernel memory: `buf(p, n)`,
/// `kptr(v, T)`; one-argument `kptr(p)` only marks a pointer (userspace has
/// its own `strncmp`/`strcontains`).
pub(crate) fn reads_kernel_memory(call: &rhai::FnCallExpr) -> bool {
    matches!(
        (builtin_call(call.name.as_str()).map(|r| r.call), call.args.len()),
        (Some(Call::Buf), 2) | (Some(Call::Kptr), 2)
    )
}

impl Lowerer<'_> {
    /// The kernel value of one of the calls lowered here (arities as in `builtins::CALLS`).
    pub(crate) fn string_call(&mut self, call: Call, args: &[RExpr], pos: Position) -> Result<Expr> {
        match (call, args.len()) {
            (Call::Strncmp, 3) => self.strncmp(args),
            (Call::Strcontains, 2) => {
                let a = self.string_arg(&args[0], "strcontains")?;
                if self.const_arg(&args[1]).is_some_and(|needle| needle.is_empty()) {
                    // Every string contains the empty one (and a search for
                    // nothing would be code the verifier finds unreachable).
                    return Ok(Expr::Int(1));
                }
                let b = self.string_arg(&args[1], "strcontains")?;
                Ok(Expr::StrSearch(StrOp::Contains, Box::new(a), Box::new(b)))
            }
            (Call::Buf, 2) => self.buf(args),
            (Call::Kptr, 2) => self.kptr(args).map(|a| self.typed_value(a)),
            // The pointer itself; str()/buf() read it from user / kernel memory.
            (Call::Uptr | Call::Kptr, 1) => self.int_expr(&args[0]),
            (_, n) => err(pos, format!("this call can't take {n} argument(s) in a probe")),
        }
    }

    /// A string operand: strings only (read a pointer with `str(p)` first).
    fn string_arg(&mut self, e: &RExpr, name: &str) -> Result<Expr> {
        let v = self.expr(e)?;
        match self.ty(&v) {
            Ty::Bytes(_) => Ok(v),
            Ty::Int => err(e.position(), format!("{name}() compares strings; read a pointer as one with str(ptr)")),
        }
    }

    fn strncmp(&mut self, args: &[RExpr]) -> Result<Expr> {
        let a = self.string_arg(&args[0], "strncmp")?;
        let b = self.string_arg(&args[1], "strncmp")?;
        let n = match self.const_int(&args[2]) {
            Some(n) if (0..=256).contains(&n) => n as u32,
            _ => return err(args[2].position(), "strncmp(a, b, n): n must be a constant from 0 to 256"),
        };
        Ok(Expr::StrSearch(StrOp::Ncmp(n), Box::new(a), Box::new(b)))
    }

    fn buf(&mut self, args: &[RExpr]) -> Result<Expr> {
        let ptr = self.int_expr(&args[0])?;
        let mem = self.pointer_memory(&args[0]);
        let (len, max) = match self.const_int(&args[1]) {
            Some(n) if (0..=256).contains(&n) => (Expr::Int(n), n as u32),
            Some(_) => return err(args[1].position(), "buf(ptr, len): a constant len must be from 0 to 256"),
            // A runtime length reads at most the string limit (RTRACE_STRLEN).
            None => (self.int_expr(&args[1])?, self.target.settings.str_max),
        };
        Ok(Expr::ReadBuf { ptr: Box::new(ptr), len: Box::new(len), max, mem })
    }

    /// `kptr(v, "struct NAME")` / `kptr(v, "union NAME")`: `v` as a pointer
    /// to that struct or union.
    pub(crate) fn kptr(&mut self, args: &[RExpr]) -> Result<fields::Access> {
        let value = self.int_expr(&args[0])?;
        let tpos = args[1].position();
        let Some(written) = self.const_arg(&args[1]) else {
            return err(tpos, "kptr(value, type): the type is a string constant, e.g. \"struct sock\"");
        };
        let name = written.trim().trim_end_matches('*').trim();
        let (kind, name) = match (name.strip_prefix("struct "), name.strip_prefix("union ")) {
            (Some(n), _) => ("struct", n.trim()),
            (_, Some(n)) => ("union", n.trim()),
            _ => {
                let hint = "write e.g. \"struct sock\" or \"union bpf_attr\"";
                return err(tpos, format!("kptr(): '{written}' is no struct or union type; {hint}"));
            }
        };
        let Some(btf) = self.target.btf else {
            return err(tpos, "kptr() needs the kernel's BTF (/sys/kernel/btf/vmlinux), which this kernel lacks");
        };
        let found = if kind == "struct" { btf.struct_named(name) } else { btf.union_named(name) };
        let Some(id) = found else {
            return err(tpos, format!("kptr(): the kernel's BTF has no {kind} {name}"));
        };
        Ok(fields::Access { expr: value, char_pointer: false, pointee: Some(id) })
    }

    /// `kptr(v, "struct NAME").a.b`: members through BTF.
    pub(crate) fn kptr_member(&mut self, args: &[RExpr], rhs: &RExpr, pos: Position) -> Result<fields::Access> {
        let base = self.kptr(args)?;
        let (chain, rest) = property_chain(rhs);
        if rest || chain.is_empty() {
            return err(pos, "only member names can follow kptr(...), e.g. kptr(p, \"struct sock\").sk_family");
        }
        let Some(btf) = self.target.btf else { return err(pos, "this kernel has no BTF") };
        let names: Vec<String> = chain.iter().map(|c| c.0.clone()).collect();
        let ty = base.pointee.unwrap_or(0);
        let base = fields::Base { value: base.expr, ty, pointee: true, name: "kptr(...)".into() };
        fields::walk(btf, base, &names).map_err(|(i, msg)| {
            let at = chain.get(i).or(chain.last()).map(|c| c.1).unwrap_or(pos);
            LowerError { pos: at, message: msg, userspace: false }
        })
    }

    /// The record fields for `kptr(v, T).a.b` in a userspace statement
    /// (occurrence `id`): `v`, and the member (a `char *` as its string).
    pub(crate) fn kptr_fields(
        &mut self,
        id: usize,
        call: &RExpr,
        rhs: &RExpr,
        pos: Position,
    ) -> Result<Vec<(RecordField, Expr)>> {
        let RExpr::FnCall(c, _) = call else { return Ok(vec![]) };
        let base = self.kptr(&c.args)?;
        let access = self.kptr_member(&c.args, rhs, pos)?;
        let ty = self.const_arg(&c.args[1]).unwrap_or_default();
        let path: Vec<String> = property_chain(rhs).0.into_iter().map(|c| c.0).collect();
        let member = if access.char_pointer {
            Expr::ReadStr { ptr: Box::new(access.expr), max: self.target.settings.str_max, mem: Memory::Kernel }
        } else {
            access.expr
        };
        Ok(vec![
            (RecordField::KptrBase { id, ty: ty_key(&ty) }, base.expr),
            (RecordField::KptrMember { id, path }, member),
        ])
    }
}

/// `"struct sock *"` and `"struct  sock"` name one type: `struct sock`.
fn ty_key(written: &str) -> String {
    written.trim().trim_end_matches('*').split_whitespace().collect::<Vec<_>>().join(" ")
}
