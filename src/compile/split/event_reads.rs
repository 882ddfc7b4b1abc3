//! What a whole `e` holds in userspace: every `e.PATH` the closure reads,
//! also through the script functions it passes `e` to.

use std::collections::HashSet;

use rhai::{ASTNode, Expr as RExpr, Stmt as RStmt, AST};

use crate::compile::closure::{event_path, per_point, ClosureBody, ClosureIndex};

/// Whether the script functions a closure passes `e` to read `e.args`,
/// `e.probe` or `e.func` (then each attach point needs its own program,
/// as when the closure reads them itself).
pub fn functions_need_per_point(body: &ClosureBody, ast: &AST, captured: usize) -> bool {
    let Some(ev) = body.params.last().filter(|_| body.params.len() > captured) else { return false };
    event_reads(body, ev, Some(ast)).iter().any(|p| per_point(&p[0]))
}

/// Every `ev.PATH` the closure reads, also through the script functions
/// it passes `ev` to (and those they pass it on to).
pub(super) fn event_reads(body: &ClosureBody, ev: &str, ast: Option<&AST>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut todo: Vec<(Vec<RStmt>, String)> = vec![(body.body.clone(), ev.to_string())];
    // Function bodies, found only when `ev` is passed to one.
    let mut index: Option<ClosureIndex> = None;
    while let Some((stmts, name)) = todo.pop() {
        for s in &stmts {
            s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
                match path.last() {
                    Some(ASTNode::Expr(RExpr::Dot(x, _, _))) => {
                        if matches!(&x.lhs, RExpr::Variable(v, _, _) if v.1.as_str() == name) {
                            if let Some(p) = event_path(&x.rhs, &|_| None) {
                                if !out.contains(&p) {
                                    out.push(p);
                                }
                            }
                        }
                    }
                    Some(ASTNode::Expr(RExpr::FnCall(call, _))) => {
                        let Some(ast) = ast else { return true };
                        for (i, a) in call.args.iter().enumerate() {
                            if !matches!(a, RExpr::Variable(v, _, _) if v.1.as_str() == name) {
                                continue;
                            }
                            let index = index.get_or_insert_with(|| ClosureIndex::new(ast));
                            let Some(f) = index.get(call.name.as_str()) else { continue };
                            if f.params.len() == call.args.len() && seen.insert(format!("{}/{i}", call.name)) {
                                todo.push((f.body, f.params[i].clone()));
                            }
                        }
                    }
                    _ => {}
                }
                true
            });
        }
    }
    // A stack needs its arguments resolved by the closure itself; a bare
    // `e.curtask` prefix of a longer path can't be both. A bare `e.args`
    // stays: it holds every argument, beside those read by name.
    out.retain(|p| !crate::builtins::is_stack(p[0].as_str()));
    let all = out.clone();
    out.retain(|p| p == &["args"] || !all.iter().any(|q| q.len() > p.len() && q.starts_with(p)));
    out
}
