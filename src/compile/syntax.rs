//! Small facts about the closure's syntax that the split (`split.rs`) and
//! lowering (`lower/`) both need: a script position as an IR span, the
//! aggregation test (from `builtins`), and the shape
//! `e.args.F[I]`.

use probes_ebpf::ir::{BinOp, Expr, Span};

use crate::builtins::NameTable;
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

// ---------------------------------------------------------------------------
// Kernel values that print as names (syscall_name() ...): the value with a
// no-op operation as its mark, read by lowering to give the value's meaning.

/// The no-op each name table's value is wrapped in (`ksym()` has `| 0`), so
/// that the value's meaning survives into locals, keys and records.
fn name_marker(table: NameTable) -> (BinOp, i64) {
    match table {
        NameTable::Syscall => (BinOp::And, -1),
        NameTable::Errno => (BinOp::Xor, 0),
        NameTable::Signal => (BinOp::Shl, 0),
        NameTable::Strerror => (BinOp::Shr, 0),
    }
}

const NAME_TABLES: [NameTable; 4] = [NameTable::Syscall, NameTable::Errno, NameTable::Signal, NameTable::Strerror];

/// `v`, printing as a name of `table`.
pub(crate) fn name_value(table: NameTable, v: Expr) -> Expr {
    let (op, k) = name_marker(table);
    Expr::Binary(op, Box::new(v), Box::new(Expr::Int(k)))
}

/// The names a kernel value prints as, when it is a [`name_value`].
pub(crate) fn name_meaning(e: &Expr) -> Option<NameTable> {
    let Expr::Binary(op, _, b) = e else { return None };
    NAME_TABLES.into_iter().find(|t| {
        let (mop, k) = name_marker(*t);
        mop == *op && **b == Expr::Int(k)
    })
}
