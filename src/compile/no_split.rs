//! `--no-split`: a probe's closure runs whole in userspace. Its map
//! aggregations (`m[k] = count()`, `total = sum(x)`) then can't be Rhai
//! assignments (that would replace the map, or store a value), so each one
//! becomes a call `__rtrace_aggregate(m, k, "count", args...)` that updates
//! the kernel map from userspace (`script/api.rs`).

use std::collections::HashMap;

use rhai::{Expr as RExpr, Stmt as RStmt};

use super::syntax::is_aggregation;
use super::values::CapturedValue;

/// The function userspace aggregations call.
pub const AGGREGATE_FN: &str = "__rtrace_aggregate";

/// Rewrite every aggregation assignment in `stmts` (also inside blocks,
/// `if`s, loops and `try`) into an [`AGGREGATE_FN`] call.
pub fn rewrite_aggregations(stmts: &mut [RStmt], captures: &HashMap<String, CapturedValue>) {
    for s in stmts.iter_mut() {
        rewrite(s, captures);
    }
}

fn rewrite(s: &mut RStmt, captures: &HashMap<String, CapturedValue>) {
    let replacement = match s {
        RStmt::Assignment(x) if !x.0.is_op_assignment() => aggregate_call(&x.1.lhs, &x.1.rhs, captures, x.0.position()),
        RStmt::If(fc, _) | RStmt::While(fc, _) | RStmt::Do(fc, _, _) => {
            rewrite_aggregations(fc.body.statements_mut(), captures);
            rewrite_aggregations(fc.branch.statements_mut(), captures);
            None
        }
        RStmt::For(x, _) => {
            rewrite_aggregations(x.2.body.statements_mut(), captures);
            None
        }
        RStmt::Block(b) => {
            rewrite_aggregations(b.statements_mut(), captures);
            None
        }
        RStmt::TryCatch(t, _) => {
            rewrite_aggregations(t.body.statements_mut(), captures);
            rewrite_aggregations(t.branch.statements_mut(), captures);
            None
        }
        _ => None,
    };
    if let Some(r) = replacement {
        *s = r;
    }
}

/// `m[k] = agg(args)` or `m = agg(args)` of a captured map, as a call.
fn aggregate_call(
    lhs: &RExpr,
    rhs: &RExpr,
    captures: &HashMap<String, CapturedValue>,
    at: rhai::Position,
) -> Option<RStmt> {
    let RExpr::FnCall(agg, _) = rhs else { return None };
    if !is_aggregation(agg.name.as_str()) || agg.is_qualified() {
        return None;
    }
    let is_map = |e: &RExpr| matches!(e, RExpr::Variable(v, _, _) if matches!(captures.get(v.1.as_str()), Some(CapturedValue::Map(_))));
    let (map, key) = match lhs {
        RExpr::Index(ix, _, _) if is_map(&ix.lhs) => (ix.lhs.clone(), ix.rhs.clone()),
        m if is_map(m) => (m.clone(), RExpr::Unit(m.position())),
        _ => return None,
    };
    // A call of the right name and arity, compiled once per shape; its
    // arguments are then the closure's own expressions.
    let placeholders: Vec<String> = (0..agg.args.len()).map(|i| format!(", a{i}")).collect();
    let src = format!("{AGGREGATE_FN}(m, k, \"{}\"{});", agg.name, placeholders.concat());
    let ast = rhai::Engine::new_raw().compile(&src).ok()?;
    let mut stmt = ast.statements().first()?.clone();
    let call = match &mut stmt {
        RStmt::FnCall(call, pos) => {
            // Errors (a map of another shape) name the assignment.
            *pos = at;
            call
        }
        _ => return None,
    };
    call.args[0] = map;
    call.args[1] = key;
    for (i, a) in agg.args.iter().enumerate() {
        call.args[3 + i] = a.clone();
    }
    Some(stmt)
}
