//! Rhai modules. Those shipped in stdlib/ are embedded in the binary (a
//! single file runs anywhere) and usable everywhere as `NAME::fn()`, also
//! after `import "NAME" as NAME;`; other `import "path"` statements load
//! `.rhai` files relative to the current directory.

use rhai::module_resolvers::{FileModuleResolver, ModuleResolversCollection, StaticModuleResolver};
use rhai::{Engine, Module, Scope};

/// The embedded stdlib modules: (import name, source).
const STDLIB: &[(&str, &str)] = &[
    ("fmt", include_str!("../../stdlib/fmt.rhai")),
    ("opts", include_str!("../../stdlib/opts.rhai")),
    ("hist", include_str!("../../stdlib/hist.rhai")),
    ("cexpr", include_str!("../../stdlib/cexpr.rhai")),
    ("net", include_str!("../../stdlib/net.rhai")),
    ("stacks", include_str!("../../stdlib/stacks.rhai")),
];

/// Install the resolver on `engine`.
pub fn install(engine: &mut Engine) {
    let mut embedded = StaticModuleResolver::new();
    for (name, source) in STDLIB {
        // Compiled with a plain engine: stdlib modules use only core Rhai.
        let plain = Engine::new();
        match plain
            .compile(source)
            .map_err(|e| e.to_string())
            .and_then(|ast| Module::eval_ast_as_new(Scope::new(), &ast, &plain).map_err(|e| e.to_string()))
        {
            Ok(module) => {
                // Also registered under its own name, so closures that run
                // later (BEGIN, probes, timers) see `fmt::...` too.
                engine.register_static_module(*name, module.clone().into());
                embedded.insert(*name, module);
            }
            Err(e) => eprintln!("rtrace: stdlib module {name}: {e}"),
        }
    }
    let mut resolvers = ModuleResolversCollection::new();
    resolvers.push(embedded);
    resolvers.push(FileModuleResolver::new());
    engine.set_module_resolver(resolvers);
}
