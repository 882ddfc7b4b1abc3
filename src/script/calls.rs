//! The check before attaching: once the top level has run, every function
//! and method call in the script — its top level, probe closures, BEGIN/END,
//! timers, script functions, and the closures of `probe(spec, "source")`
//! strings — must name a function that exists, with a number of arguments
//! it takes. Known are: the engine's functions (Rhai's packages and rtrace's
//! API), the script's own functions, the functions of modules it imports,
//! and the kernel built-ins and aggregations a probe's kernel side knows
//! (`builtins::CALLS`, `builtins::AGGREGATIONS`).
//! A literal printf format is checked against its values, and a map given
//! where printf wants a number is refused. Errors are one line at the call,
//! with close names ("did you mean") and the rtrace form of bpftrace habits
//! (habits.rs). So a typo in a probe that never fires still fails the run,
//! before anything is attached.
//!
//! What is not checked (no false errors): calls of a name that is also a
//! variable (a function pointer), methods whose name is an object-map
//! property (`obj.f()`), and functions of modules imported from files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rhai::{ASTNode, Expr, FnCallExpr, FnNamespace, Position, Stmt, AST};

use super::formatting::MAX_VALUES;
use super::{habits, MapHandle, Session};
use crate::diag::Diagnostic;
use crate::output::printf::{self, Piece};

/// Rhai's keyword functions (not in any package; any arity is left to Rhai).
const KEYWORDS: &[&str] =
    &["print", "debug", "type_of", "eval", "Fn", "call", "curry", "is_shared", "is_def_var", "is_def_fn", "this"];

/// The functions that take a printf format first.
const FORMATTING: &[&str] = &["printf", "sprintf", "eprintf", "system"];

/// Name → the argument counts it is known with.
type Arities = HashMap<String, BTreeSet<usize>>;

/// What a call may name.
#[derive(Default)]
struct Known {
    /// Global functions: the engine's and the kernel built-ins.
    native: Arities,
    /// Aggregation calls: only their kernel forms (the userspace ones only say "use it in a probe").
    aggregations: Arities,
    /// The script's functions (a method call binds `this`, so `x.f(a)` calls `fn f(a)`).
    script: Arities,
    /// Module namespace → its functions.
    modules: HashMap<String, Arities>,
    /// `import "NAME" as ALIAS;` of an embedded module: ALIAS → NAME.
    aliases: HashMap<String, String>,
    /// Names bound as variables somewhere (they may hold function pointers).
    variables: HashSet<String>,
    /// Variables every binding and assignment of which is a string (`let
    /// name = e.comm;`), for printf's checks; `false`: some binding isn't.
    strings: HashMap<String, bool>,
    /// Object-map property names (they may hold methods).
    properties: HashSet<String>,
    /// Top-level variables holding maps.
    maps: HashSet<String>,
}

/// A problem found at a position of one AST.
struct Problem {
    pos: Position,
    message: String,
}

/// Check every call of the script `session` loaded (after its top level ran).
pub fn check(session: &Session) -> Result<(), Diagnostic> {
    let probes = session.registry.lock().map(|r| r.probes.clone()).unwrap_or_default();
    let sources: Vec<_> = probes.iter().filter(|p| p.source.is_some()).collect();
    let mut asts: Vec<&AST> = vec![&session.ast];
    asts.extend(sources.iter().map(|p| &*p.ast));
    let known = Known::new(session, &asts);
    if let Some(pos) = map_made_in_a_closure(&session.ast) {
        let msg = "a map is made inside a closure: declare maps at the top level (`let m = map();` above the \
                   probes), then write `m[k] = ...` in the probe";
        return Err(Diagnostic::at(&session.file_name, pos, msg));
    }
    if let Some(p) = problems(&known, &session.ast).into_iter().next() {
        return Err(Diagnostic::at(&session.file_name, p.pos, p.message));
    }
    for probe in sources {
        if let Some(p) = problems(&known, &probe.ast).into_iter().next() {
            return Err(probe.error_in_closure(&session.file_name, p.pos, p.message));
        }
    }
    Ok(())
}

impl Known {
    fn new(session: &Session, asts: &[&AST]) -> Known {
        let mut k = Known::default();
        let listed = session.engine.collect_fn_metadata(
            None,
            |info| {
                let global = info.metadata.namespace == FnNamespace::Global;
                Some((info.namespace.to_string(), info.metadata.name.to_string(), info.metadata.num_params, global))
            },
            true,
        );
        for (namespace, name, params, global) in listed {
            if namespace.is_empty() || global {
                k.native.entry(name.clone()).or_default().insert(params);
            }
            if !namespace.is_empty() {
                k.modules.entry(namespace).or_default().entry(name).or_default().insert(params);
            }
        }
        // The kernel's calls: those not also userspace functions would otherwise look unknown.
        for c in crate::builtins::CALLS {
            k.native.entry(c.name.to_string()).or_default().extend(c.arities.iter());
        }
        for a in crate::builtins::AGGREGATIONS {
            k.native.entry(a.name.to_string()).or_default().extend(a.arities.iter());
            // Only the kernel forms count (not the userspace stand-ins), except
            // where Rhai has the name too (`min(a, b)`).
            if !a.shares_rhai_name {
                k.aggregations.insert(a.name.to_string(), a.arities.iter().copied().collect());
            }
        }
        for name in FORMATTING {
            k.native.entry(name.to_string()).or_default().extend(1..=MAX_VALUES + 1);
        }
        for (name, _, value) in session.scope.iter() {
            k.variables.insert(name.to_string());
            k.bound(name, value.is_string());
            if value.flatten_clone().try_cast::<MapHandle>().is_some() {
                k.maps.insert(name.to_string());
            }
        }
        for ast in asts {
            for f in ast.iter_functions() {
                k.script.entry(f.name.to_string()).or_default().insert(f.params.len());
                k.variables.extend(f.params.iter().map(|p| p.to_string()));
                for p in f.params.iter() {
                    k.bound(p, false);
                }
            }
            k.collect_names(ast);
        }
        k
    }

    /// Variables, properties and imports anywhere in `ast`.
    fn collect_names(&mut self, ast: &AST) {
        ast.walk(&mut |path: &[ASTNode]| {
            match path.last() {
                Some(ASTNode::Stmt(Stmt::Var(x, ..))) => {
                    self.variables.insert(x.0.name.to_string());
                    self.bound(&x.0.name, string_valued(&x.1));
                }
                Some(ASTNode::Stmt(Stmt::Assignment(x))) => {
                    if let Expr::Variable(v, ..) = &x.1.lhs {
                        self.bound(&v.1, !x.0.is_op_assignment() && string_valued(&x.1.rhs));
                    }
                }
                Some(ASTNode::Stmt(Stmt::For(x, ..))) => {
                    self.variables.insert(x.0.name.to_string());
                    self.bound(&x.0.name, false);
                    if let Some(counter) = &x.1 {
                        self.variables.insert(counter.name.to_string());
                        self.bound(&counter.name, false);
                    }
                }
                Some(ASTNode::Stmt(Stmt::Import(x, ..))) => {
                    if let Expr::StringConstant(path, _) = &x.0 {
                        if self.modules.contains_key(path.as_str()) && !x.1.name.is_empty() {
                            self.aliases.insert(x.1.name.to_string(), path.to_string());
                        }
                    }
                }
                Some(ASTNode::Expr(Expr::Variable(v, ..))) => {
                    self.variables.insert(v.1.to_string());
                }
                Some(ASTNode::Expr(Expr::Property(p, _))) => {
                    self.properties.insert(p.2.to_string());
                }
                Some(ASTNode::Expr(Expr::Map(m, _))) => {
                    self.properties.extend(m.0.iter().map(|(ident, _)| ident.name.to_string()));
                }
                _ => {}
            }
            true
        });
    }

    /// `name` is bound (or assigned) a value that is (`string`) or may not be a string.
    fn bound(&mut self, name: &str, string: bool) {
        *self.strings.entry(name.to_string()).or_insert(true) &= string;
    }

    /// A value that is a string whatever runs it: [`string_valued`], or a
    /// variable only ever bound to such values.
    fn is_string(&self, e: &Expr) -> bool {
        match e {
            Expr::Variable(v, ..) => self.strings.get(v.1.as_str()) == Some(&true),
            _ => string_valued(e),
        }
    }

    /// Every name a call could mean, for "did you mean".
    fn names(&self) -> Vec<&str> {
        let names = self.native.keys().chain(self.script.keys()).map(String::as_str);
        let mut all: Vec<&str> = names.filter(|n| identifier(n) && !n.contains('$')).collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Where a closure (a probe's, a timer's: Rhai compiles each to an `anon$`
/// function) calls `map()`: a map made there would be a new, empty map each
/// time, never one the kernel fills.
fn map_made_in_a_closure(ast: &AST) -> Option<Position> {
    let key = |p: Position| (p.line().unwrap_or(0), p.position().unwrap_or(0));
    let closures: Vec<_> = ast
        .iter_fn_def()
        .filter(|f| f.name.starts_with("anon$"))
        .map(|f| (key(f.body.start_position()), key(f.body.end_position())))
        .collect();
    let mut found = None;
    ast.walk(&mut |path: &[ASTNode]| {
        if let Some(ASTNode::Expr(Expr::FnCall(call, pos))) | Some(ASTNode::Stmt(Stmt::FnCall(call, pos))) = path.last()
        {
            let at = key(*pos);
            // map(), map("name"), map("name", #{..}); not Rhai's map(array, f).
            let ours = matches!(
                call.args.as_ref(),
                [] | [Expr::StringConstant(..)] | [Expr::StringConstant(..), Expr::Map(..)]
            );
            if call.name == "map"
                && ours
                && call.namespace.is_empty()
                && closures.iter().any(|(a, b)| *a <= at && at <= *b)
            {
                found = Some(*pos);
            }
        }
        found.is_none()
    });
    found
}

/// Whether `name` is written like a function name (not an operator).
fn identifier(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The problems in `ast`, first position first.
fn problems(known: &Known, ast: &AST) -> Vec<Problem> {
    let mut found: BTreeMap<(usize, usize), Problem> = BTreeMap::new();
    ast.walk(&mut |path: &[ASTNode]| {
        let problem = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(call, pos))) | Some(ASTNode::Stmt(Stmt::FnCall(call, pos))) => {
                check_call(known, call, *pos, false)
            }
            Some(ASTNode::Expr(Expr::MethodCall(call, pos))) => check_call(known, call, *pos, true),
            _ => None,
        };
        if let Some(p) = problem {
            let at = (p.pos.line().unwrap_or(0), p.pos.position().unwrap_or(0));
            found.entry(at).or_insert(p);
        }
        true
    });
    found.into_values().collect()
}

fn check_call(known: &Known, call: &FnCallExpr, pos: Position, method: bool) -> Option<Problem> {
    let name = call.name.as_str();
    if call.op_token.is_some() || !identifier(name) || name.contains('$') {
        return None;
    }
    let problem = |message: String| Some(Problem { pos, message });
    let n = call.args.len();
    if !call.namespace.is_empty() {
        let ns = call.namespace.to_string();
        let ns = known.aliases.get(&ns).cloned().unwrap_or(ns);
        let functions = known.modules.get(&ns)?;
        return match functions.get(name) {
            Some(arities) if arities.contains(&n) => None,
            Some(arities) => problem(format!("`{ns}::{name}` takes {}, {n} given", counts(arities))),
            None => {
                let close = crate::util::similar::suggest(name, functions.keys().map(String::as_str));
                problem(format!("module `{ns}` has no function `{name}`{}", did_you_mean(&close, &format!("{ns}::"))))
            }
        };
    }
    if KEYWORDS.contains(&name) {
        return keyword_call(known, call, method).and_then(problem);
    }
    // A function pointer held in a variable, or a method held in a property.
    if (!method && known.variables.contains(name)) || (method && known.properties.contains(name)) {
        return None;
    }
    let native = match method {
        false if known.aggregations.contains_key(name) => known.aggregations.get(name),
        _ => known.native.get(name),
    };
    let script = known.script.get(name);
    let fits = if method {
        native.is_some_and(|a| a.contains(&(n + 1))) || script.is_some_and(|a| a.contains(&n) || a.contains(&(n + 1)))
    } else {
        native.is_some_and(|a| a.contains(&n)) || script.is_some_and(|a| a.contains(&n))
    };
    if fits {
        return format_problem(known, call).and_then(problem);
    }
    let shown = if method { format!("`.{name}()`") } else { format!("`{name}`") };
    if native.is_some() || script.is_some() {
        if FORMATTING.contains(&name) && n > MAX_VALUES {
            return problem(format!("{shown} takes a format and at most {MAX_VALUES} values, {} given", n - 1));
        }
        let mut arities: BTreeSet<usize> = script.cloned().unwrap_or_default();
        let skip = usize::from(method);
        arities.extend(native.into_iter().flatten().filter(|a| **a >= skip).map(|a| a - skip));
        let hint = habits::call_hint(name, &call.args).map(|h| format!(": {h}")).unwrap_or_default();
        return problem(format!("{shown} takes {}, {n} given{hint}", counts(&arities)));
    }
    let what = if method { "method" } else { "function" };
    let hint = match habits::call_hint(name, &call.args) {
        Some(h) => format!(": {h}"),
        None => did_you_mean(&crate::util::similar::suggest(name, known.names()), ""),
    };
    problem(format!("unknown {what} {shown}{hint}"))
}

/// `print(a, b)`, and `Fn("name")` naming no function.
fn keyword_call(known: &Known, call: &FnCallExpr, method: bool) -> Option<String> {
    let name = call.name.as_str();
    if name == "print"
        && !method
        && call.args.len() != 1
        && !known.native.get("print").is_some_and(|a| a.contains(&call.args.len()))
    {
        let hint = habits::call_hint(name, &call.args).map(|h| format!(": {h}")).unwrap_or_default();
        return Some(format!("`print` takes 1 argument, {} given{hint}", call.args.len()));
    }
    if name != "Fn" || method {
        return None;
    }
    let Some(Expr::StringConstant(target, _)) = call.args.first() else { return None };
    let target = target.as_str();
    if !identifier(target) || target.contains("::") || KEYWORDS.contains(&target) {
        return None;
    }
    if known.native.contains_key(target) || known.script.contains_key(target) {
        return None;
    }
    let close = crate::util::similar::suggest(target, known.names());
    Some(format!("Fn(\"{target}\") names no function{}", did_you_mean(&close, "")))
}

/// A literal format that does not fit its values, or a map where a number is printed.
fn format_problem(known: &Known, call: &FnCallExpr) -> Option<String> {
    let name = call.name.as_str();
    if !FORMATTING.contains(&name) {
        return None;
    }
    let Some(Expr::StringConstant(fmt, _)) = call.args.first() else { return None };
    let mut values: Vec<&Expr> = call.args[1..].iter().collect();
    if name == "system" && values.is_empty() {
        // A command without values runs as written (`date +%s`).
        return None;
    }
    if matches!(name, "sprintf" | "eprintf") && values.len() == 1 {
        match values[0] {
            Expr::Array(items, _) => values = items.iter().collect(),
            e if !literal(e) && !string_valued(e) => return None,
            _ => {}
        }
    }
    let pieces = match printf::parse(fmt) {
        Ok(p) => p,
        Err(e) => return Some(e.replacen("printf", name, 1)),
    };
    let specs: Vec<&printf::Spec> =
        pieces.iter().filter_map(|p| if let Piece::Conv(s) = p { Some(s) } else { None }).collect();
    let needed: usize = specs.iter().map(|s| s.values()).sum();
    if needed != values.len() {
        let s = if needed == 1 { "" } else { "s" };
        return Some(format!("{name}: the format {:?} takes {needed} value{s}, {} given", fmt.as_str(), values.len()));
    }
    // Which conversion each value feeds: `*` widths and precisions are numbers.
    let numeric = specs.iter().flat_map(|s| std::iter::repeat_n(true, s.values() - 1).chain([s.numeric()]));
    for (i, (value, numeric)) in values.iter().zip(numeric).enumerate() {
        if numeric && known.is_string(value) {
            return Some(format!(
                "{name}: the format {:?} prints value {} as a number, but it is a string (use %s)",
                fmt.as_str(),
                i + 1
            ));
        }
        if let Expr::Variable(v, _, _) = value {
            let m = v.1.as_str();
            if numeric && known.maps.contains(m) {
                return Some(format!(
                    "`{m}` is a map, and {name} prints values: write `{m}[key]` (a map without a key: `{m}[()]`), or print({m}) for the whole map"
                ));
            }
        }
    }
    None
}

/// A value that is a string whatever runs it: a string literal or
/// interpolation, a string event field (`e.comm`, `e.probe`, `e.func`).
fn string_valued(e: &Expr) -> bool {
    match e {
        Expr::StringConstant(..) | Expr::InterpolatedString(..) => true,
        Expr::Dot(x, _, _) => {
            let field = |p: &str| crate::builtins::event_field(p).map(|(_, row)| row.kind);
            matches!(&x.rhs, Expr::Property(p, _) if field(p.2.as_str()) == Some(crate::builtins::Kind::Str))
        }
        _ => false,
    }
}

fn literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::IntegerConstant(..)
            | Expr::FloatConstant(..)
            | Expr::StringConstant(..)
            | Expr::BoolConstant(..)
            | Expr::CharConstant(..)
    )
}

/// "1 argument", "0 or 1 arguments", "1 to 65 arguments".
fn counts(arities: &BTreeSet<usize>) -> String {
    let list: Vec<usize> = arities.iter().copied().collect();
    let unit = |n: usize| if n == 1 { "argument" } else { "arguments" };
    match list.as_slice() {
        [] => "no arguments".into(),
        [one] => format!("{one} {}", unit(*one)),
        [a, b] => format!("{a} or {b} arguments"),
        [first, .., last] if last - first + 1 == list.len() => format!("{first} to {last} arguments"),
        _ => {
            let text: Vec<String> = list.iter().map(usize::to_string).collect();
            format!("{} arguments", text.join(", "))
        }
    }
}

fn did_you_mean(close: &[String], prefix: &str) -> String {
    match close {
        [] => String::new(),
        [one] => format!("; did you mean `{prefix}{one}`?"),
        many => {
            let names: Vec<String> = many.iter().map(|c| format!("`{prefix}{c}`")).collect();
            format!("; did you mean {}?", names.join(", "))
        }
    }
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
