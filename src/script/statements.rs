//! bpftrace's printing statements: `time(fmt);` and `join(arr);` whose value
//! a statement drops print what they make (as `time` and `join` records under
//! `-f json`), while `let t = time(fmt)` still returns the text. Which calls
//! are statements is read from the AST before anything runs.

use std::collections::HashSet;
use std::sync::Mutex;

use rhai::{ASTNode, Expr, NativeCallContext, Position, Stmt, AST};

static STATEMENT_CALLS: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

const PRINTING: [&str; 2] = ["time", "join"];

fn key(pos: Position) -> Option<(usize, usize)> {
    Some((pos.line()?, pos.position().unwrap_or(0)))
}

/// Remember where `ast` calls `time(...)` or `join(...)` as a statement.
pub fn collect(ast: &AST) {
    let mut found = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        let call = match path.last() {
            Some(ASTNode::Stmt(Stmt::FnCall(call, pos))) => Some((call, pos)),
            Some(ASTNode::Stmt(Stmt::Expr(e))) => match e.as_ref() {
                Expr::FnCall(call, pos) => Some((call, pos)),
                _ => None,
            },
            _ => None,
        };
        if let Some((call, pos)) = call {
            if PRINTING.contains(&call.name.as_str()) && !call.is_qualified() {
                found.extend(key(*pos));
            }
        }
        true
    });
    let mut set = STATEMENT_CALLS.lock().unwrap();
    set.get_or_insert_with(HashSet::new).extend(found);
}

/// Whether the native call behind `ctx` is one of those statements.
pub fn is_statement(ctx: &NativeCallContext) -> bool {
    let Some(k) = key(ctx.call_position()) else { return false };
    STATEMENT_CALLS.lock().unwrap().as_ref().is_some_and(|s| s.contains(&k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_statement_calls_only() {
        let engine = rhai::Engine::new();
        let ast = engine.compile("let a = time(\"%H\");\ntime(\"%H\\n\");\nfn f() { join([1], \",\"); }").unwrap();
        collect(&ast);
        let set = STATEMENT_CALLS.lock().unwrap();
        let set = set.as_ref().unwrap();
        assert!(set.contains(&(2, 1)), "{set:?}");
        assert!(set.contains(&(3, 10)), "{set:?}");
        assert!(!set.contains(&(1, 9)), "{set:?}");
    }
}
