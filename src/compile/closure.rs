//! Where each closure's body is in a script's AST. Rhai compiles closures
//! to script functions (`anon$…`) whose bodies are only reachable through a
//! walk of the whole AST; [`ClosureIndex`] walks once and gives every
//! function its own top-level statements (not those of closures nested in
//! it), so compile time stays linear in the number of `probe()` calls.

use std::cmp::Reverse;
use std::collections::HashMap;

use rhai::{ASTNode, Expr as RExpr, Position, Stmt, AST};

/// A closure's parameters and body statements, found in `ast` by function name.
#[derive(Clone)]
pub struct ClosureBody {
    pub params: Vec<String>,
    pub body: Vec<Stmt>,
}

/// Every script function's parameters and body, by name.
pub struct ClosureIndex(HashMap<String, ClosureBody>);

fn key(p: Position) -> (usize, usize) {
    (p.line().unwrap_or(0), p.position().unwrap_or(0))
}

impl ClosureIndex {
    pub fn new(ast: &AST) -> ClosureIndex {
        struct Def {
            name: String,
            params: Vec<String>,
            start: (usize, usize),
            end: (usize, usize),
        }
        let defs: Vec<Def> = ast
            .iter_fn_def()
            .map(|f| {
                let start = key(f.body.start_position());
                // A closure whose body is one expression (`|x| x == 300`) has
                // no end position: its one statement is at its start.
                let end = key(f.body.end_position()).max(start);
                Def { name: f.name.to_string(), params: f.params.iter().map(|p| p.to_string()).collect(), start, end }
            })
            .collect();
        // The top-level statements of function bodies, in walk order.
        let main_count = ast.statements().len();
        let mut seen = 0usize;
        let mut stmts: Vec<((usize, usize), Stmt)> = Vec::new();
        ast.walk(&mut |path: &[ASTNode]| {
            if path.len() == 1 {
                seen += 1;
                if seen > main_count {
                    if let ASTNode::Stmt(s) = path[0] {
                        stmts.push((key(s.position()), s.clone()));
                    }
                }
            }
            true
        });
        // Each statement belongs to the innermost function span holding it:
        // one sweep over spans (outer first at equal starts) and statements,
        // both sorted by position, with a stack of the open spans.
        let mut spans: Vec<usize> = (0..defs.len()).collect();
        spans.sort_by_key(|&i| (defs[i].start, Reverse(defs[i].end)));
        let mut by_pos: Vec<usize> = (0..stmts.len()).collect();
        by_pos.sort_by_key(|&i| (stmts[i].0, i));
        let mut owner: Vec<Option<usize>> = vec![None; stmts.len()];
        let mut open: Vec<usize> = Vec::new();
        let mut next = 0usize;
        for &si in &by_pos {
            let p = stmts[si].0;
            while next < spans.len() && defs[spans[next]].start <= p {
                let d = spans[next];
                while open.last().is_some_and(|&top| defs[top].end < defs[d].start) {
                    open.pop();
                }
                open.push(d);
                next += 1;
            }
            while open.last().is_some_and(|&top| defs[top].end < p) {
                open.pop();
            }
            owner[si] = open.last().copied();
        }
        let mut bodies: Vec<Vec<Stmt>> = vec![Vec::new(); defs.len()];
        for (si, (_, s)) in stmts.into_iter().enumerate() {
            if let Some(d) = owner[si] {
                bodies[d].push(s);
            }
        }
        let mut index = HashMap::new();
        for (d, body) in defs.into_iter().zip(bodies) {
            index.entry(d.name).or_insert(ClosureBody { params: d.params, body });
        }
        ClosureIndex(index)
    }

    /// The body of function `name` (the first one defined, for overloads).
    pub fn get(&self, name: &str) -> Option<ClosureBody> {
        self.0.get(name).cloned()
    }
}

/// `e.NAME` differs between a probe's attach points (`builtins::FIELDS`).
pub(crate) fn per_point(name: &str) -> bool {
    crate::builtins::event_field(name).is_some_and(|(_, row)| row.per_point)
}

/// Whether a closure body mentions `e.args`, `e.probe` or `e.func` (decides
/// whether wildcard attach points can share one program).
pub fn needs_per_point_program(body: &ClosureBody) -> bool {
    let event = match body.params.last() {
        Some(e) => e.clone(),
        None => return false,
    };
    let mut found = false;
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            // `e` as a whole value (an alias, a closure, `Fn(..).call(e)`):
            // it carries every argument, which only a program per point knows.
            if let Some(ASTNode::Expr(me @ RExpr::Variable(v, _, _))) = path.last() {
                let dot_lhs = matches!(path.len().checked_sub(2).map(|i| &path[i]),
                    Some(ASTNode::Expr(RExpr::Dot(x, _, _))) if std::ptr::eq(&x.lhs, *me));
                if v.1.as_str() == event && !dot_lhs {
                    found = true;
                }
            }
            if let Some(ASTNode::Expr(RExpr::Dot(x, _, _))) = path.last() {
                if let (RExpr::Variable(v, _, _), rhs) = (&x.lhs, &x.rhs) {
                    if v.1.as_str() == event {
                        let prop = match rhs {
                            RExpr::Property(p, _) => Some(p.2.as_str()),
                            RExpr::Dot(inner, _, _) => match &inner.lhs {
                                RExpr::Property(p, _) => Some(p.2.as_str()),
                                _ => None,
                            },
                            _ => None,
                        };
                        if prop.is_some_and(per_point) {
                            found = true;
                        }
                    }
                }
            }
            true
        });
    }
    found
}

/// Whether a closure body reads a kernel stack (`e.kstack`, `e.kstack(...)`,
/// or `kstack` of any value: a script function's copy of `e` included).
/// A `syscalls:sys_*` tracepoint hands BPF the syscall's user registers, so
/// a kernel stack taken there is empty on some kernels (Debian's 6.1): such
/// a probe goes on the raw_syscalls dispatch program, whose stack is the
/// kernel's.
pub fn reads_kernel_stack(body: &ClosureBody) -> bool {
    let mut found = false;
    for s in &body.body {
        s.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            match path.last() {
                Some(ASTNode::Expr(RExpr::Property(p, _))) if p.2.as_str() == "kstack" => found = true,
                Some(ASTNode::Expr(RExpr::MethodCall(c, _))) if c.name.as_str() == "kstack" => found = true,
                _ => {}
            }
            !found
        });
    }
    found
}

/// The property names of a dot chain (`args.prev.pid` → args, prev, pid)
/// with their positions, and whether something else (a method call, an
/// index) follows them.
pub(crate) fn property_chain(rhs: &RExpr) -> (Vec<(String, Position)>, bool) {
    let mut out = Vec::new();
    let mut cur = rhs;
    loop {
        match cur {
            RExpr::Property(p, pos) => {
                out.push((p.2.to_string(), *pos));
                return (out, false);
            }
            RExpr::Dot(x, _, _) => match &x.lhs {
                RExpr::Property(p, pos) => {
                    out.push((p.2.to_string(), *pos));
                    cur = &x.rhs;
                }
                _ => return (out, true),
            },
            _ => return (out, true),
        }
    }
}

/// `e.pid` → ["pid"]; `e.args.filename` → ["args", "filename"]; `e.comm.len()` → ["comm"].
/// Stack arguments are constants (`resolve` gives their text).
pub(crate) fn event_path(rhs: &RExpr, resolve: &dyn Fn(&RExpr) -> Option<String>) -> Option<Vec<String>> {
    match rhs {
        RExpr::Property(p, _) => Some(vec![p.2.to_string()]),
        RExpr::MethodCall(call, _) if crate::builtins::is_stack(call.name.as_str()) => {
            let mut path = vec![call.name.to_string()];
            for a in call.args.iter() {
                path.push(resolve(a)?);
            }
            Some(path)
        }
        RExpr::Dot(..) => {
            // `e.args.F[i]` ships F; userspace takes the element.
            if let Some((field, _, _)) = super::syntax::indexed_arg(rhs) {
                return Some(vec!["args".to_string(), field.to_string()]);
            }
            let (chain, _) = property_chain(rhs);
            (!chain.is_empty()).then(|| chain.into_iter().map(|c| c.0).collect())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> rhai::Engine {
        let mut e = rhai::Engine::new();
        e.set_optimization_level(rhai::OptimizationLevel::None);
        e
    }

    #[test]
    fn nested_closures_keep_their_own_statements() {
        let src = r#"
fn helper(x) { let y = x; y + 1 }
let outer = |e| {
    let a = 1;
    let inner = |z| { let q = z; q };
    a + 2
};
"#;
        let ast = engine().compile(src).unwrap();
        let index = ClosureIndex::new(&ast);
        assert_eq!(index.get("helper").unwrap().body.len(), 2);
        let names: Vec<String> = ast.iter_fn_def().map(|f| f.name.to_string()).collect();
        let mut lens: Vec<(usize, Vec<String>)> = names
            .iter()
            .filter(|n| n.starts_with("anon$"))
            .map(|n| {
                let b = index.get(n).unwrap();
                (b.body.len(), b.params)
            })
            .collect();
        lens.sort();
        assert_eq!(lens, vec![(2, vec!["z".to_string()]), (3, vec!["e".to_string()])]);
    }

    #[test]
    fn many_closures_each_get_their_body() {
        let mut src = String::new();
        for i in 0..3000 {
            src.push_str(&format!("let p{i} = |e| {{ let a = {i}; a + 1 }};\n"));
        }
        let ast = engine().compile(&src).unwrap();
        let index = ClosureIndex::new(&ast);
        for f in ast.iter_fn_def() {
            assert_eq!(index.get(&f.name).unwrap().body.len(), 2);
        }
    }
}
