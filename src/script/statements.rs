//! bpftrace's printing statements: `time(fmt);` and `join(arr);` whose value
//! a statement drops print what they make (as `time` and `join` records under
//! `-f json`), while `let t = time(fmt)` still returns the text. Which calls
//! are statements is read from the AST before anything runs: the script's,
//! each stdlib module's and each imported file's, keyed by the source the
//! call is in (Rhai's `source()`: none for the script, the module's name or
//! path otherwise) and its line:column, so two sources never collide.

use std::collections::HashSet;
use std::sync::Mutex;

use rhai::{ASTNode, Expr, NativeCallContext, Position, Stmt, AST};

static STATEMENT_CALLS: Mutex<Option<HashSet<(String, At)>>> = Mutex::new(None);

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
    let source = ast.source().unwrap_or("").to_string();
    let mut set = STATEMENT_CALLS.lock().unwrap();
    set.get_or_insert_with(HashSet::new).extend(found.into_iter().map(|at| (source.clone(), at)));
}

/// Print what a printing call makes when it is a statement: text mode adds
/// `end`; under `-f json` a `time` record keeps the newline of `time()`'s
/// default format (`{"type": "time", "data": "10:42:01\n"}`, as bpftrace
/// writes it), a `join` record has none.
pub fn print_if_statement(ctx: &NativeCallContext, kind: &str, text: &str, end: &str) {
    if is_statement(ctx) {
        crate::output::records::text_record(kind, &statement_text(crate::output::sink::format(), kind, text, end));
    }
}

/// What [`print_if_statement`] prints.
fn statement_text(format: crate::output::sink::Format, kind: &str, text: &str, end: &str) -> String {
    match (format, kind) {
        (crate::output::sink::Format::Json, "join") => text.to_string(),
        _ => format!("{text}{end}"),
    }
}

/// Whether the native call behind `ctx` is one of those statements.
pub fn is_statement(ctx: &NativeCallContext) -> bool {
    let Some(at) = key(ctx.call_position()) else { return false };
    let k = (ctx.call_source().unwrap_or("").to_string(), at);
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
        let at = |l, c| (String::new(), (l, c));
        assert!(set.contains(&at(2, 1)), "{set:?}");
        assert!(set.contains(&at(3, 10)), "{set:?}");
        assert!(!set.contains(&at(1, 9)), "{set:?}");
        // A function's value and an interpolated value are used, not statements.
        assert!(!set.contains(&at(4, 10)), "{set:?}");
        assert!(!set.contains(&at(5, 12)), "{set:?}");
    }

    #[test]
    fn json_time_keeps_its_newline_and_join_has_none() {
        use crate::output::sink::Format;
        assert_eq!(statement_text(Format::Json, "time", "10:42:01", "\n"), "10:42:01\n");
        assert_eq!(statement_text(Format::Json, "time", "10", ""), "10");
        assert_eq!(statement_text(Format::Json, "join", "a b", "\n"), "a b");
        assert_eq!(statement_text(Format::Text, "join", "a b", "\n"), "a b\n");
        assert_eq!(statement_text(Format::Text, "time", "10:42:01", "\n"), "10:42:01\n");
    }

    #[test]
    fn sources_are_told_apart() {
        let engine = rhai::Engine::new();
        let mut module = engine.compile("fn f() { time(\"%S\") }\nfn g() { 1 }").unwrap();
        module.set_source("lib");
        collect(&module);
        let script = engine.compile("fn h() { time(\"%S\"); 1 }").unwrap();
        collect(&script);
        let set = STATEMENT_CALLS.lock().unwrap();
        let set = set.as_ref().unwrap();
        assert!(set.contains(&(String::new(), (1, 10))), "{set:?}");
        assert!(!set.contains(&("lib".to_string(), (1, 10))), "{set:?}");
    }
}
