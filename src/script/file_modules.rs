//! `import "path"` of a `.rhai` file: Rhai's file resolver finds the file,
//! and the module is compiled here so that its `time()`/`join()`
//! statements are known (`statements::collect`) before it runs. The AST's
//! source is the import path, as Rhai's own resolver sets it; each file
//! is evaluated once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rhai::module_resolvers::FileModuleResolver;
use rhai::{Engine, EvalAltResult, Module, ModuleResolver, Position, Scope};

/// A module as resolvers hand it out (`rhai::Shared`, an `Arc` with the `sync` feature).
type SharedModule = std::sync::Arc<Module>;

/// The modules a script has loaded. A closure made inside a module's
/// function (`every(.., || ..)` in a stdlib helper) is defined in that
/// module, not in the script: callbacks run with these libraries beside the
/// script's own, so such a closure is found when it runs later.
pub type Libraries = std::sync::Arc<std::sync::Mutex<Vec<rhai::Shared<Module>>>>;

#[derive(Default)]
pub struct FileModules {
    files: FileModuleResolver,
    cache: Mutex<HashMap<PathBuf, SharedModule>>,
    /// Every module loaded (closures made in them run with them).
    loaded: Libraries,
}

impl FileModules {
    /// A resolver that lists what it loads in `loaded`.
    pub fn listing_into(loaded: Libraries) -> FileModules {
        FileModules { loaded, ..Default::default() }
    }
}

impl ModuleResolver for FileModules {
    fn resolve(
        &self,
        engine: &Engine,
        source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<SharedModule, Box<EvalAltResult>> {
        let file = self.files.get_file_path(path, source.map(Path::new));
        if let Some(m) = self.cache.lock().unwrap().get(&file) {
            return Ok(m.clone());
        }
        let mut ast = engine.compile_file(file.clone()).map_err(|err| match *err {
            EvalAltResult::ErrorSystem(.., e) if e.is::<std::io::Error>() => {
                Box::new(EvalAltResult::ErrorModuleNotFound(path.to_string(), pos))
            }
            _ => Box::new(EvalAltResult::ErrorInModule(path.to_string(), err, pos)),
        })?;
        ast.set_source(path);
        super::statements::collect(&ast);
        let module: SharedModule = Module::eval_ast_as_new(Scope::new(), &ast, engine)
            .map_err(|err| Box::new(EvalAltResult::ErrorInModule(path.to_string(), err, pos)))?
            .into();
        self.cache.lock().unwrap().insert(file, module.clone());
        self.loaded.lock().unwrap().push(module.clone());
        Ok(module)
    }
}
