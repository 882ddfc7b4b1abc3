//! Expressions in the kernel: operators (folded when constant), conditions,
//! if-expressions, string comparison, `str()`, `ksym()`, `k in m`.
use super::*;

impl Lowerer<'_> {
    pub(crate) fn expr(&mut self, e: &RExpr) -> Result<Expr> {
        let pos = e.position();
        match e {
            RExpr::IntegerConstant(v, _) => Ok(Expr::Int(*v)),
            RExpr::BoolConstant(b, _) => Ok(Expr::Int(*b as i64)),
            RExpr::CharConstant(c, _) => Ok(Expr::Int(*c as i64)),
            RExpr::StringConstant(s, _) => Ok(str_literal(s)),
            RExpr::DynamicConstant(d, _) => {
                if let Ok(i) = d.as_int() {
                    Ok(Expr::Int(i))
                } else if let Ok(s) = d.clone().into_string() {
                    Ok(str_literal(&s))
                } else {
                    err(pos, format!("a {} value can't be used in the kernel", d.type_name()))
                }
            }
            RExpr::Variable(v, _, _) => {
                let name = v.1.as_str();
                if let Some(id) = self.lookup_local(name) {
                    return Ok(Expr::Local(id));
                }
                if let Some((decl, _)) = self.userspace_vars.get(name) {
                    return Err(LowerError {
                        pos,
                        message: format!("`{name}` is computed in userspace at {}", at(*decl)),
                        userspace: true,
                    });
                }
                match self.captures.get(name) {
                    Some(CapturedValue::Int(i)) => Ok(Expr::Int(*i)),
                    Some(CapturedValue::Str(s)) => Ok(str_literal(s)),
                    Some(CapturedValue::Map(m)) => {
                        err(pos, format!("map `{}` needs a key here, e.g. `{name}[e.pid]`", m.name()))
                    }
                    Some(CapturedValue::Other(t)) => {
                        err(pos, format!("`{name}` is a {t}, which can't be used in the kernel"))
                    }
                    None if Some(name) == self.event.as_deref() => {
                        err(pos, format!("`{name}` is the event; use one of its fields, e.g. `{name}.pid`"))
                    }
                    None => err(pos, format!("unknown variable `{name}`")),
                }
            }
            RExpr::Dot(x, _, _) => self.dot(&x.lhs, &x.rhs, pos),
            RExpr::Index(x, _, _) => {
                let Some(map) = self.map_of(&x.lhs) else {
                    return err(pos, "only maps declared with map() can be indexed in a probe");
                };
                let key = self.key(&x.rhs)?;
                self.record_use(&map, &key, UseKind::Read, pos);
                Ok(Expr::MapGet { map: map.id(), key })
            }
            RExpr::And(list, _) | RExpr::Or(list, _) => {
                let is_and = matches!(e, RExpr::And(..));
                let mut parts = Vec::new();
                for p in list.iter() {
                    parts.push(self.cond(p)?);
                }
                let mut it = parts.into_iter();
                let first = it.next().unwrap_or(Expr::Int(is_and as i64));
                Ok(it.fold(first, |acc, p| {
                    if is_and {
                        Expr::LogicalAnd(Box::new(acc), Box::new(p))
                    } else {
                        Expr::LogicalOr(Box::new(acc), Box::new(p))
                    }
                }))
            }
            RExpr::FnCall(call, _) => self.call_expr(call.name.as_str(), &call.args, pos),
            RExpr::Stmt(block) => {
                // An if-expression: `if c { a } else { b }`.
                let stmts = block.statements();
                if let [RStmt::If(fc, _)] = stmts {
                    let c = self.cond(&fc.expr)?;
                    let a = self.block_value(fc.body.statements(), pos)?;
                    let b = self.block_value(fc.branch.statements(), pos)?;
                    if matches!(self.ty(&a), Ty::Int) != matches!(self.ty(&b), Ty::Int) {
                        return err(pos, "both branches of an if-expression must be numbers, or both strings");
                    }
                    return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
                }
                err(pos, "this block can't be used as a value in a probe")
            }
            RExpr::InterpolatedString(..) => Err(userspace_only("string interpolation", pos)),
            RExpr::FloatConstant(..) => Err(userspace_only("floating-point arithmetic", pos)),
            RExpr::Array(..) => err(pos, "arrays can only be map keys in a probe (`m[[a, b]]`)"),
            RExpr::Map(..) => Err(userspace_only("object maps", pos)),
            RExpr::MethodCall(..) => Err(userspace_only("this method call", pos)),
            _ => Err(userspace_only("this expression", pos)),
        }
    }

    /// A condition: numbers are true when non-zero.
    pub(crate) fn cond(&mut self, e: &RExpr) -> Result<Expr> {
        let c = self.expr(e)?;
        if self.ty(&c) != Ty::Int {
            return err(e.position(), "a string can't be used as a condition; compare it, e.g. `s == \"x\"`");
        }
        Ok(c)
    }

    /// The value of a `{ ...; value }` branch of an if-expression.
    pub(crate) fn block_value(&mut self, stmts: &[RStmt], pos: Position) -> Result<Expr> {
        match stmts {
            [RStmt::Expr(e)] => self.expr(e),
            [] => err(pos, "an if-expression needs an else branch with a value"),
            _ => err(pos, "if-expression branches in probes must be single values"),
        }
    }

    pub(crate) fn call_expr(&mut self, name: &str, args: &[RExpr], pos: Position) -> Result<Expr> {
        if let Some(op) = bin_op(name) {
            if args.len() == 2 {
                let a = self.expr(&args[0])?;
                let b = self.expr(&args[1])?;
                let (ta, tb) = (self.ty(&a), self.ty(&b));
                let strings = matches!(ta, Ty::Bytes(_)) || matches!(tb, Ty::Bytes(_));
                if strings {
                    if matches!(ta, Ty::Int) || matches!(tb, Ty::Int) {
                        let pointer = if matches!(ta, Ty::Int) { &a } else { &b };
                        if self.is_pointer(pointer) {
                            return err(
                                pos,
                                "a string is compared with a pointer; compare the string it points to: `str(ptr) == \"...\"`",
                            );
                        }
                        return err(pos, "a string is compared with a number");
                    }
                    return match op {
                        BinOp::Eq => Ok(Expr::StrEq(Box::new(a), Box::new(b))),
                        BinOp::Ne => Ok(Expr::Unary(UnOp::Not, Box::new(Expr::StrEq(Box::new(a), Box::new(b))))),
                        BinOp::Add => Err(userspace_only("string concatenation", pos)),
                        _ => err(pos, "strings can only be compared with == and != in a probe"),
                    };
                }
                self.check_div(op, &b, pos)?;
                return Ok(fold(op, a, b));
            }
            if args.len() == 1 && name == "-" {
                let a = self.int_expr(&args[0])?;
                return Ok(match a {
                    Expr::Int(v) if v != i64::MIN => Expr::Int(-v),
                    a => Expr::Unary(UnOp::Neg, Box::new(a)),
                });
            }
        }
        match (name, args.len()) {
            ("!", 1) => {
                let a = self.cond(&args[0])?;
                return Ok(Expr::Unary(UnOp::Not, Box::new(a)));
            }
            ("contains", 2) => {
                // `k in m` parses as contains(m, k).
                let Some(map) = self.map_of(&args[0]) else {
                    return err(pos, "`in` works on maps declared with map() in a probe");
                };
                let key = self.key(&args[1])?;
                self.record_use(&map, &key, UseKind::Read, pos);
                return Ok(Expr::MapContains { map: map.id(), key });
            }
            _ => {}
        }
        if is_aggregation(name) {
            return err(pos, format!("{name}() is an aggregation: assign it to a map, e.g. `m[e.comm] = {name}(...)`"));
        }
        let Some(call) = builtin_call_with(name, args.len()) else {
            return Err(userspace_only(&format!("`{name}(...)`"), pos));
        };
        match call {
            Call::Str => {
                let v = self.expr(&args[0])?;
                let max = match args.get(1) {
                    None => self.target.settings.str_max,
                    Some(a) => match self.const_int(a) {
                        Some(n) if n > 0 && n <= 256 => n as u32,
                        _ => return err(a.position(), "str(ptr, len): len must be a constant from 1 to 256"),
                    },
                };
                match self.ty(&v) {
                    Ty::Bytes(_) => Ok(v),
                    Ty::Int => {
                        let mem = self.pointer_memory(&args[0]);
                        Ok(Expr::ReadStr { ptr: Box::new(v), max, mem })
                    }
                }
            }
            Call::Ksym => {
                let v = self.int_expr(&args[0])?;
                Ok(Expr::Binary(BinOp::Or, Box::new(v), Box::new(Expr::Int(KSYM_TAG))))
            }
            Call::Strncmp | Call::Strcontains | Call::Buf | Call::Kptr | Call::Uptr => {
                self.string_call(call, args, pos)
            }
            Call::Cast { bits, signed } => {
                let v = self.int_expr(&args[0])?;
                Ok(cast(v, bits, signed))
            }
            Call::Ncpus => Ok(Expr::Int(crate::util::names::possible_cpus())),
            // The number, marked to print as the name (`syntax::name_meaning`).
            Call::Name(table) => Ok(crate::compile::syntax::name_value(table, self.int_expr(&args[0])?)),
            Call::Exit => err(pos, "exit() is a statement, not a value"),
            // Statements (lowered in stmt.rs), not values.
            Call::Emit | Call::Signal | Call::Deny | Call::Override | Call::Print | Call::Clear | Call::Zero => {
                Err(userspace_only(&format!("`{name}(...)`"), pos))
            }
        }
    }
}

/// `i8(x)` ... `u64(x)`: the low `bits` bits of `x`, sign-extended
/// (shifted up, then arithmetically down) or zero-extended (masked), as
/// `util::names::cast` computes them in userspace.
fn cast(v: Expr, bits: u8, signed: bool) -> Expr {
    if let Expr::Int(x) = v {
        return Expr::Int(crate::util::names::cast(x, bits, signed));
    }
    match (bits, signed) {
        (64, _) => v,
        (_, true) => {
            let up = Expr::Int(64 - bits as i64);
            let shifted = Expr::Binary(BinOp::Shl, Box::new(v), Box::new(up.clone()));
            Expr::Binary(BinOp::Shr, Box::new(shifted), Box::new(up))
        }
        (_, false) => Expr::Binary(BinOp::And, Box::new(v), Box::new(Expr::Int((1i64 << bits) - 1))),
    }
}

pub(crate) fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::Int => "number",
        Ty::Bytes(_) => "string",
    }
}

pub(crate) fn str_literal(s: &str) -> Expr {
    let bytes = s.as_bytes().to_vec();
    let len = bytes.len() as u32 + 1;
    Expr::Str { bytes, len }
}

pub(crate) fn bin_op(name: &str) -> Option<BinOp> {
    Some(match name {
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Mod,
        "&" => BinOp::And,
        "|" => BinOp::Or,
        "^" => BinOp::Xor,
        "<<" => BinOp::Shl,
        ">>" => BinOp::Shr,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        _ => return None,
    })
}

/// Build `a OP b`, folding constants (Rhai semantics: an overflow is an error at run time).
pub(crate) fn fold(op: BinOp, a: Expr, b: Expr) -> Expr {
    if let (Expr::Int(x), Expr::Int(y)) = (&a, &b) {
        let (x, y) = (*x, *y);
        let v = match op {
            // An overflow isn't folded: the program reports it when it runs, as Rhai does.
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            BinOp::Div => x.checked_div(y),
            BinOp::Mod => x.checked_rem(y),
            BinOp::And => Some(x & y),
            BinOp::Or => Some(x | y),
            BinOp::Xor => Some(x ^ y),
            BinOp::Shl | BinOp::Shr => Some(probes_ebpf::ir::shift(op == BinOp::Shl, x, y)),
            BinOp::Eq => Some((x == y) as i64),
            BinOp::Ne => Some((x != y) as i64),
            BinOp::Lt => Some((x < y) as i64),
            BinOp::Le => Some((x <= y) as i64),
            BinOp::Gt => Some((x > y) as i64),
            BinOp::Ge => Some((x >= y) as i64),
        };
        if let Some(v) = v {
            return Expr::Int(v);
        }
    }
    Expr::Binary(op, Box::new(a), Box::new(b))
}
