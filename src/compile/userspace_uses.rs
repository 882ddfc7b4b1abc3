//! How userspace code uses maps, for their layouts: a map written only from
//! `BEGIN`, `END` or a timer (`m["abc"] = "aa"`, `m[[16, 17]] = 32`,
//! `xx[()] = 5`) gets string, tuple or keyless keys and string values from
//! those writes, as a map written by a probe does from the probe's.
//!
//! Userspace code runs after the maps are created, so its uses are read
//! from the script's AST: indexing (`m[k]`, `m[k] = v`, `m[k] += v`) and
//! `k in m` of a top-level variable holding a map, wherever it appears. A
//! key or value counts when its type is evident from the source: literals,
//! string interpolation, arithmetic on integers, top-level constants, tuples
//! of those, `()` for no key. Other keys leave the use out; other values make
//! it a read (the key still counts).

use probes_ebpf::ir::Ty;
use rhai::{ASTNode, Dynamic, Expr as RExpr, Scope, Stmt as RStmt, AST};

use super::maps::{MapUse, UseKind};
use crate::plan::site::ValueMeaning;
use crate::script::MapHandle;

/// Every userspace-evident use of a top-level map in `ast`. `str_max` is the
/// size given to strings whose length the source doesn't show.
pub fn uses(ast: &AST, scope: &Scope<'static>, str_max: u32) -> Vec<MapUse> {
    let cx = Cx { scope, str_max };
    let mut out = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Stmt(RStmt::Assignment(x))) => {
                let (op, bin) = x.as_ref();
                if let RExpr::Index(ix, _, pos) = &bin.lhs {
                    let kind = if op.get_op_assignment_info().is_some() {
                        Some(UseKind::Update)
                    } else {
                        cx.ty(&bin.rhs).map(UseKind::Store)
                    };
                    cx.push(&mut out, &ix.lhs, &ix.rhs, kind.unwrap_or(UseKind::Read), *pos);
                }
            }
            Some(ASTNode::Expr(RExpr::Index(ix, _, pos))) => {
                // The target of an assignment is visited as an expression
                // too; its read adds nothing the write doesn't.
                cx.push(&mut out, &ix.lhs, &ix.rhs, UseKind::Read, *pos);
            }
            Some(ASTNode::Expr(RExpr::FnCall(call, pos))) if call.name == "contains" && call.args.len() == 2 => {
                cx.push(&mut out, &call.args[0], &call.args[1], UseKind::Read, *pos);
            }
            _ => {}
        }
        true
    });
    out
}

struct Cx<'a> {
    scope: &'a Scope<'static>,
    str_max: u32,
}

impl Cx<'_> {
    fn top_level(&self, e: &RExpr) -> Option<Dynamic> {
        match e {
            RExpr::Variable(v, _, _) => self.scope.get_value::<Dynamic>(v.1.as_str()).map(|d| d.flatten_clone()),
            _ => None,
        }
    }

    fn map(&self, e: &RExpr) -> Option<MapHandle> {
        self.top_level(e)?.try_cast::<MapHandle>()
    }

    fn push(&self, out: &mut Vec<MapUse>, map: &RExpr, key: &RExpr, kind: UseKind, pos: rhai::Position) {
        let Some(m) = self.map(map) else { return };
        let Some(key) = self.key(key) else { return };
        let key_sems = vec![ValueMeaning::Plain; key.len()];
        let (value_meaning, at) = (ValueMeaning::Plain, crate::script::position_text(pos));
        out.push(MapUse { map: m.id(), key, key_sems, value_meaning, kind, at });
    }

    fn key(&self, e: &RExpr) -> Option<Vec<Ty>> {
        match e {
            RExpr::Unit(_) => Some(Vec::new()),
            RExpr::Array(parts, _) => parts.iter().map(|p| self.ty(p)).collect(),
            one => Some(vec![self.ty(one)?]),
        }
    }

    /// The type of a value when the source shows it.
    fn ty(&self, e: &RExpr) -> Option<Ty> {
        match e {
            RExpr::IntegerConstant(..) | RExpr::BoolConstant(..) | RExpr::CharConstant(..) => Some(Ty::Int),
            RExpr::StringConstant(s, _) => Some(Ty::Bytes(s.len() as u32 + 1)),
            RExpr::InterpolatedString(..) => Some(Ty::Bytes(self.str_max)),
            RExpr::DynamicConstant(d, _) => dynamic_ty(d),
            RExpr::Variable(..) => dynamic_ty(&self.top_level(e)?),
            RExpr::FnCall(call, _) if is_arith(call.name.as_str()) => {
                let tys: Option<Vec<Ty>> = call.args.iter().map(|a| self.ty(a)).collect();
                match tys?.as_slice() {
                    [Ty::Int] | [Ty::Int, Ty::Int] => Some(Ty::Int),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

fn dynamic_ty(d: &Dynamic) -> Option<Ty> {
    if d.is_int() || d.is_bool() || d.is_char() {
        Some(Ty::Int)
    } else if d.is_string() {
        Some(Ty::Bytes(d.clone().into_string().ok()?.len() as u32 + 1))
    } else {
        None
    }
}

fn is_arith(name: &str) -> bool {
    matches!(name, "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^" | "<<" | ">>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Session;

    fn uses_of(src: &str) -> Vec<(u32, Vec<Ty>, UseKind)> {
        let mut s = Session::new("t.rhai", src, &[]).unwrap();
        s.run_top_level().unwrap();
        uses(&s.ast, &s.scope, 64).into_iter().map(|u| (u.map, u.key, u.kind)).collect()
    }

    #[test]
    fn writes_in_userspace_closures_give_key_and_value_types() {
        let got = uses_of(
            r#"
let m = map(); let t = map(); let xx = map(); let n = map();
const NAME = "cfg";
probe("BEGIN", || {
    m["abc"] = "aa";
    t[[16, 17]] = 32 + 1;
    xx[()] = 5;
    n[NAME] += 1;
    let v = m["abc"];
});
"#,
        );
        assert!(got.contains(&(0, vec![Ty::Bytes(4)], UseKind::Store(Ty::Bytes(3)))), "{got:?}");
        assert!(got.contains(&(1, vec![Ty::Int, Ty::Int], UseKind::Store(Ty::Int))), "{got:?}");
        assert!(got.contains(&(2, vec![], UseKind::Store(Ty::Int))), "{got:?}");
        assert!(got.contains(&(3, vec![Ty::Bytes(4)], UseKind::Update)), "{got:?}");
        assert!(got.contains(&(0, vec![Ty::Bytes(4)], UseKind::Read)), "{got:?}");
    }

    #[test]
    fn unknown_keys_are_left_out_and_unknown_values_are_reads() {
        let got = uses_of(
            r#"
let m = map();
probe("BEGIN", || {
    let k = "x";
    m[k] = 1;
    m[2] = k;
});
"#,
        );
        assert_eq!(got, vec![(0, vec![Ty::Int], UseKind::Read), (0, vec![Ty::Int], UseKind::Read)]);
    }
}
