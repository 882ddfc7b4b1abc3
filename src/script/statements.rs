//! bpftrace's printing statements: `time(fmt);` and `join(arr);` whose value
//! a statement drops print what they make (as `time` and `join` records under
//! `-f json`), while `let t = time(fmt)` still returns the text. Which calls
//! are statements is read from the AST before anything runs.

use std::collections::HashSet;
use std::sync::Mutex;

use rhai::{ASTNode, Expr, NativeCallContext, Position, Stmt, AST};

static STATEMENT_CALLS: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

const PRINTING: [&str; 2] = ["time", "join"];

/// A script position as (line, column).
type At = (usize, usize);

fn key(pos: Position) -> Option<At> {
    Some((pos.line()?, pos.position().unwrap_or(0)))
}

/// The position of a printing call that is `stmt` itself.
fn printing_call(stmt: &Stmt) -> Option<Position> {
    let (call, pos) = match stmt {
        Stmt::FnCall(call, pos) => (call, pos),
        Stmt::Expr(e) => match e.as_ref() {
            Expr::FnCall(call, pos) => (call, pos),
            _ => return None,
        },
        _ => return None,
    };
    (PRINTING.contains(&call.name.as_str()) && !call.is_qualified()).then_some(*pos)
}

/// Remember where `ast` calls `time(...)` or `join(...)` as a statement.
/// A call whose value is used is none: inside an expression (a `${...}` of
/// an interpolated string, an if-expression's branch) or the last
/// statement of a named function (its return value).
pub fn collect(ast: &AST) {
    let mut found = Vec::new();
    // Statements at the top of a block walked on their own (function
    // bodies): their position, and the printing call they are.
    let mut tops: Vec<(At, Option<At>)> = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        let Some(ASTNode::Stmt(stmt)) = path.last() else { return true };
        let in_expression = path[..path.len() - 1].iter().any(|n| matches!(n, ASTNode::Expr(_)));
        let call = printing_call(stmt).and_then(key);
        if path.len() == 1 {
            tops.extend(key(stmt.position()).map(|p| (p, call)));
        }
        if !in_expression {
            found.extend(call);
        }
        true
    });
    // A named function's last statement (the one furthest into its body).
    for f in ast.iter_fn_def().filter(|f| !f.name.starts_with("anon$")) {
        let (Some(start), Some(end)) = (key(f.body.start_position()), key(f.body.end_position())) else { continue };
        let last = tops.iter().filter(|(p, _)| *p > start && *p < end).max_by_key(|(p, _)| *p);
        if let Some((_, Some(call))) = last {
            found.retain(|x| x != call);
        }
    }
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
        let ast = engine
            .compile("let a = time(\"%H\");\ntime(\"%H\\n\");\nfn f() { join([1], \",\"); 1 }\nfn g() { join([1], \",\") }\nlet s = `${join([1])}`;")
            .unwrap();
        collect(&ast);
        let set = STATEMENT_CALLS.lock().unwrap();
        let set = set.as_ref().unwrap();
        assert!(set.contains(&(2, 1)), "{set:?}");
        assert!(set.contains(&(3, 10)), "{set:?}");
        assert!(!set.contains(&(1, 9)), "{set:?}");
        // A function's value and an interpolated value are used, not statements.
        assert!(!set.contains(&(4, 10)), "{set:?}");
        assert!(!set.contains(&(5, 12)), "{set:?}");
    }
}
