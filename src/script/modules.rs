//! Rhai modules. Those shipped in stdlib/ are embedded in the binary (a
//! single file runs anywhere) and usable everywhere as `NAME::fn()`, also
//! after `import "NAME" as NAME;`; other `import "path"` statements load
//! `.rhai` files relative to the current directory.

use rhai::module_resolvers::{ModuleResolversCollection, StaticModuleResolver};
use rhai::{Engine, Expr, Module, Scope, Stmt, AST};

/// The embedded stdlib modules: (import name, source).
const STDLIB: &[(&str, &str)] = &[
    ("fmt", include_str!("../../stdlib/fmt.rhai")),
    ("opts", include_str!("../../stdlib/opts.rhai")),
    ("hist", include_str!("../../stdlib/hist.rhai")),
    ("cexpr", include_str!("../../stdlib/cexpr.rhai")),
    ("net", include_str!("../../stdlib/net.rhai")),
    ("stacks", include_str!("../../stdlib/stacks.rhai")),
    ("report", include_str!("../../stdlib/report.rhai")),
];

pub use super::file_modules::Libraries;

/// Install the resolver on `engine`, for a script whose text is `script`;
/// the modules it loads are listed in the returned [`Libraries`].
/// A stdlib module is compiled (a few milliseconds and some memory for them
/// all) only when the script names it (`fmt::`), or when it imports
/// anything: an imported file may use any of them.
pub fn install(engine: &mut Engine, script: &str) -> Libraries {
    let loaded = Libraries::default();
    let mut embedded = StaticModuleResolver::new();
    let every = script.contains("import");
    let mut plain = None;
    for (name, source) in STDLIB {
        if !every && !script.contains(&format!("{name}::")) {
            continue;
        }
        // Compiled with a plain engine: stdlib modules use only core Rhai.
        let plain = plain.get_or_insert_with(Engine::new);
        match plain.compile(source).map_err(|e| e.to_string()).and_then(|mut ast| {
            // Its source is its name: its `time()`/`join()` statements
            // are told apart from the script's.
            ast.set_source(*name);
            super::statements::collect(&ast);
            Module::eval_ast_as_new(Scope::new(), &ast, plain).map_err(|e| e.to_string())
        }) {
            Ok(module) => {
                // Also registered under its own name, so closures that run
                // later (BEGIN, probes, timers) see `fmt::...` too.
                let module: rhai::Shared<Module> = module.into();
                engine.register_static_module(*name, module.clone());
                loaded.lock().unwrap().push(module.clone());
                embedded.insert(*name, (*module).clone());
            }
            Err(e) => crate::output::sink::report(&crate::diag::Diagnostic::tool(format!("stdlib module {name}: {e}"))),
        }
    }
    let mut resolvers = ModuleResolversCollection::new();
    resolvers.push(embedded);
    resolvers.push(super::file_modules::FileModules::listing_into(loaded.clone()));
    engine.set_module_resolver(resolvers);
    loaded
}

/// Make the top level's `import "PATH" as NAME;` modules visible to the
/// code that runs after it (probes' userspace statements, BEGIN/END,
/// timers), which doesn't run the top level's imports again.
pub fn share_imports(engine: &mut Engine, ast: &AST) {
    for s in ast.statements() {
        let Stmt::Import(x, pos) = s else { continue };
        let (Expr::StringConstant(path, _), alias) = x.as_ref() else { continue };
        if alias.name.is_empty() {
            continue;
        }
        if let Ok(module) = engine.module_resolver().resolve(engine, None, path, *pos) {
            engine.register_static_module(alias.name.as_str(), module);
        }
    }
}
