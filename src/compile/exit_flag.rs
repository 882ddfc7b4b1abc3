//! `exit()` from a probe's kernel side can't be lost: besides its control
//! message, the program raises the stop flag with the exit status in it
//! (`plan::maps::EXIT_MARK` | status). Every program then leaves at once
//! (no further event callback runs, as design.md says for `exit()`), and
//! the runtime reads the status from the flag when the control ring had no
//! room for the message.

use probes_ebpf::ir::{BinOp, Expr, MapId, Stmt, StmtKind};

use probes_ebpf::record::CONTROL_EXIT;

use crate::plan::maps::EXIT_MARK;

/// After every kernel `exit(code)` in `body`, store `EXIT_MARK | status` in the stop flag.
pub fn mark_exits(body: &mut Vec<Stmt>, stop_map: MapId) {
    let mut i = 0;
    while i < body.len() {
        match &mut body[i].kind {
            StmtKind::If { then, otherwise, .. } => {
                mark_exits(then, stop_map);
                mark_exits(otherwise, stop_map);
            }
            StmtKind::Repeat { body: inner, .. } => mark_exits(inner, stop_map),
            StmtKind::Control { kind, arg, .. } if *kind == CONTROL_EXIT => {
                let store = StmtKind::MapStore { map: stop_map, key: vec![], value: flag_value(arg.clone()) };
                let span = body[i].span;
                body.insert(i + 1, Stmt { kind: store, span });
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
}

/// `EXIT_MARK | status`, with the status clamped as userspace clamps it
/// (0 stays 0, other codes to 1..=255).
fn flag_value(code: Expr) -> Expr {
    if let Expr::Int(c) = code {
        return Expr::Int(EXIT_MARK as i64 | crate::script::api::exit_status(c) as i64);
    }
    let b = |e: Expr| Box::new(e);
    let cmp = |op, v| Expr::Binary(op, b(code.clone()), b(Expr::Int(v)));
    let mark = |v: i64| Expr::Int(EXIT_MARK as i64 | v);
    let in_range = Expr::Binary(BinOp::Or, b(code.clone()), b(Expr::Int(EXIT_MARK as i64)));
    Expr::Cond(
        b(cmp(BinOp::Eq, 0)),
        b(mark(0)),
        b(Expr::Cond(
            b(cmp(BinOp::Lt, 1)),
            b(mark(1)),
            b(Expr::Cond(b(cmp(BinOp::Gt, 255)), b(mark(255)), b(in_range))),
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use probes_ebpf::ir::Span;

    fn exit_stmt(arg: Expr) -> Stmt {
        Stmt { kind: StmtKind::Control { ring: 1, lost: 2, kind: CONTROL_EXIT, probe: 0, arg }, span: Span::default() }
    }

    #[test]
    fn every_exit_also_raises_the_flag() {
        let nested = Stmt {
            kind: StmtKind::If { cond: Expr::Int(1), then: vec![exit_stmt(Expr::Int(256))], otherwise: vec![] },
            span: Span::default(),
        };
        let mut body = vec![exit_stmt(Expr::Int(0)), nested];
        mark_exits(&mut body, 9);
        assert_eq!(body.len(), 3);
        assert!(matches!(&body[1].kind, StmtKind::MapStore { map: 9, value: Expr::Int(0x100), .. }));
        let StmtKind::If { then, .. } = &body[2].kind else { panic!() };
        assert!(matches!(&then[1].kind, StmtKind::MapStore { map: 9, value: Expr::Int(0x1ff), .. }));
    }
}
