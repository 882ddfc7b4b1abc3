//! Small facts about the closure's syntax that the split (`split.rs`) and
//! lowering (`lower/`) both need: a script position as an IR span, the
//! aggregation test (from `builtins`), and the shape
//! `e.args.F[I]`.

use probes_ebpf::ir::Span;
use rhai::{Expr as RExpr, Position};

/// A script position as the IR carries it.
pub(crate) fn span(pos: Position) -> Span {
    Span { line: pos.line().unwrap_or(0) as u32, col: pos.position().unwrap_or(0) as u32 }
}

/// Whether `name` is an aggregation (`builtins::AGGREGATIONS`).
pub(crate) use crate::builtins::is_aggregation;

/// `args.F[I]` at the end of an event's dot chain: F, its position, and I.
pub(crate) fn indexed_arg(rhs: &RExpr) -> Option<(&str, Position, &RExpr)> {
    let RExpr::Dot(x, _, _) = rhs else { return None };
    let RExpr::Property(a, _) = &x.lhs else { return None };
    if a.2.as_str() != "args" {
        return None;
    }
    let RExpr::Index(ix, _, _) = &x.rhs else { return None };
    let RExpr::Property(f, fpos) = &ix.lhs else { return None };
    Some((f.2.as_str(), *fpos, &ix.rhs))
}
