//! The Rhai side of a script: the engine with rtrace's API registered, the run
//! of the script's top level (which declares maps and registers probes), and
//! calls into userspace closures (`BEGIN`, `END`, `every`).

pub mod api;
mod bufs;
pub mod calls;
pub mod checks;
pub mod command_runs;
pub mod commands;
pub mod dist;
mod file_modules;
pub mod formatting;
pub mod habits;
pub mod kernel_reads;
pub mod modules;
pub mod positional;
pub mod regression;
pub mod statements;
pub mod system;
pub mod throttle;
pub mod tools;
pub mod userlib;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use rhai::{Dynamic, Engine, FnPtr, OptimizationLevel, Position, Scope, AST};

pub use api::MapHandle;

use crate::diag::{Diagnostic, Pos};

/// A probe as the script registered it.
#[derive(Clone)]
pub struct ProbeDef {
    pub spec: String,
    pub closure: FnPtr,
    /// The AST holding the closure's body: the script's, or the one compiled
    /// from a `probe(spec, "source")` string.
    pub ast: Arc<AST>,
    /// Where `probe(...)` was called.
    pub pos: Position,
    /// For `probe(spec, "source")`: the closure's source, compiled after the top level ran.
    pub source: Option<String>,
    /// The source is a literal of the script, compiled in its place there:
    /// positions in it are the script's.
    pub source_placed: bool,
    /// `.on_event(|rec| ...)`: called with each value the probe `emit()`s.
    pub on_event: Option<FnPtr>,
    /// `.unfiltered()`: not filtered to `-p`/`-c`'s processes (the probe
    /// filters itself, e.g. on a field naming another task).
    pub unfiltered: bool,
}

impl ProbeDef {
    /// Its closure comes from a source string not placed in the script
    /// (built at run time, or with escapes): its positions are the string's.
    pub fn source_unplaced(&self) -> bool {
        self.source.is_some() && !self.source_placed
    }

    /// An error at `pos` in this probe's closure (see [`closure_error`]).
    pub fn error_in_closure(&self, file: &str, pos: Position, msg: impl Into<String>) -> Diagnostic {
        closure_error(file, self.pos, self.source_unplaced(), pos, msg.into())
    }
}

/// An error at `pos` in the closure of the probe() called at `call`: at
/// `pos` when the script has the closure; at the call, with the place
/// inside, when the closure is a source string not placed in the script
/// (`unplaced`); at the call when there is no position.
pub fn closure_error(file: &str, call: Position, unplaced: bool, pos: Position, msg: String) -> Diagnostic {
    match (pos.is_none(), unplaced) {
        (true, _) => Diagnostic::at(file, call, msg),
        (false, true) => {
            Diagnostic::at(file, call, format!("{msg} (in the probe source string, at {})", position_text(pos)))
        }
        (false, false) => Diagnostic::at(file, pos, msg),
    }
}

/// A periodic or one-shot userspace callback.
#[derive(Clone)]
pub struct Timer {
    pub period: Duration,
    pub repeat: bool,
    pub closure: FnPtr,
    /// Where `every()`/`after()` was called.
    pub pos: Position,
}

/// Everything the top level registered, filled in by the API functions.
#[derive(Default)]
pub struct Registry {
    pub probes: Vec<ProbeDef>,
    pub maps: Vec<MapHandle>,
    pub timers: Vec<Timer>,
    /// Set by `exit()` in userspace code.
    pub exit_code: Option<i32>,
    /// Set by `fail(msg)`.
    pub failure: Option<String>,
    /// The exit came from a probe's kernel side (queued records still run).
    pub exit_from_kernel: bool,
    /// `check(name, ok, detail)` results, in order.
    pub checks: Vec<crate::output::junit::CheckResult>,
    /// Answers `probe_error(spec)`; set by the command line, which knows the kernel.
    pub spec_check: Option<tools::SpecCheck>,
    /// `-p PID`, for `traced_pid()`.
    pub traced_pid: Option<i32>,
    /// `command_stdout_to_stderr()`: the script's stdout is records (folded
    /// stacks), so a `-c` command's own stdout goes to stderr.
    pub command_stdout_to_stderr: bool,
    /// `ring_size(SIZE)` at the top level: the event ring's size in bytes
    /// (`--ring-size` and RTRACE_RING_SIZE win over it).
    pub ring_size: Option<u32>,
    /// `stack_entries(N)` at the top level: distinct stacks per stack map
    /// (RTRACE_STACK_ENTRIES wins over it).
    pub stack_entries: Option<u32>,
    /// Answers `kernel_has(type, member)`; set with `spec_check`.
    pub member_check: Option<tools::MemberCheck>,
    /// Answers `list_probes(pattern)`; set with `spec_check`.
    pub probe_list: Option<tools::ProbeList>,
}

pub type SharedRegistry = Arc<Mutex<Registry>>;

/// Rhai's `global::` constants (the type its global state holds).
type Constants = Arc<rhai::Locked<std::collections::BTreeMap<rhai::ImmutableString, Dynamic>>>;

/// A loaded script: engine, AST and the top level's scope.
pub struct Session {
    pub engine: Engine,
    pub ast: Arc<AST>,
    pub scope: Scope<'static>,
    pub registry: SharedRegistry,
    pub file_name: String,
    /// The top level's constants, as `global::NAME` in every callback.
    constants: Option<Constants>,
    /// The script's text (probe source strings are found in it).
    text: String,
    /// The modules it loaded (closures made in them run with them).
    libraries: modules::Libraries,
}

impl Session {
    /// Whether the script has asked to end (`exit()`, from a probe or userspace).
    pub fn exit_requested(&self) -> bool {
        self.registry.lock().unwrap().exit_code.is_some()
    }

    /// Parse `source`; syntax errors name line:column.
    pub fn new(file_name: &str, source: &str, args: &[String]) -> Result<Session> {
        let registry: SharedRegistry = Arc::default();
        let mut engine = Engine::new();
        engine.set_optimization_level(OptimizationLevel::None);
        engine.set_max_expr_depths(256, 256);
        api::install(&mut engine, &registry);
        dist::install(&mut engine);
        userlib::install(&mut engine, &registry);
        checks::install(&mut engine, &registry);
        command_runs::install(&mut engine);
        regression::install(&mut engine, &registry);
        positional::install(&mut engine);
        tools::install(&mut engine, &registry);
        formatting::install(&mut engine);
        system::install(&mut engine);
        throttle::install(&mut engine);
        bufs::install(&mut engine);
        let libraries = modules::install(&mut engine, source);
        let ast = engine.compile(source).map_err(|e| {
            let d = Diagnostic::at(file_name, e.1, format!("syntax error: {}", e.0));
            match habits::syntax_hint(source, e.1) {
                Some(hint) => d.hint(hint),
                None => d,
            }
        })?;
        statements::collect(&ast);
        let mut scope = Scope::new();
        let argv: rhai::Array = args.iter().map(|a| Dynamic::from(a.clone())).collect();
        scope.push_constant("ARGS", argv);
        Ok(Session {
            engine,
            ast: Arc::new(ast),
            scope,
            registry,
            file_name: file_name.to_string(),
            constants: None,
            text: source.to_string(),
            libraries,
        })
    }

    /// Run the top level once: declares maps, registers probes.
    pub fn run_top_level(&mut self) -> Result<()> {
        let ast = self.ast.clone();
        api::CURRENT_AST.with(|a| *a.borrow_mut() = Some(ast.clone()));
        match self.engine.run_ast_with_scope(&mut self.scope, &ast) {
            Ok(()) => {}
            // exit() at the top level: nothing will be attached.
            Err(e) if matches!(*e, rhai::EvalAltResult::ErrorTerminated(..)) => return Ok(()),
            Err(e) => return Err(self.top_level_error(&e).into()),
        }
        self.name_maps();
        self.keep_constants();
        modules::share_imports(&mut self.engine, &ast);
        self.compile_probe_sources()?;
        // Every call is checked before anything is attached.
        calls::check(self)?;
        Ok(())
    }

    /// Turn `probe(spec, "|e| ...")` strings into closures, seeing the top level's variables.
    /// A string written as a literal in the script keeps its place there:
    /// errors inside it name the script's line:column.
    fn compile_probe_sources(&mut self) -> Result<()> {
        let mut probes = std::mem::take(&mut self.registry.lock().unwrap().probes);
        if probes.iter().any(|p| p.source.is_some()) {
            self.share_top_level_variables();
        }
        for p in probes.iter_mut() {
            let Some(src) = p.source.clone() else { continue };
            let placed = self.placed_in_script(p.pos, &src);
            let error = |e: String, at: Position| match placed {
                Some(_) => Diagnostic::at(&self.file_name, at, format!("in the probe source string: {e}")),
                None => Diagnostic::at(&self.file_name, p.pos, format!("in the probe source string: {e}")),
            };
            let own =
                self.engine.compile_with_scope(&self.scope, placed.as_deref().unwrap_or(&src)).map_err(
                    |e| match placed {
                        Some(_) => error(e.0.to_string(), e.1),
                        None => error(e.to_string(), e.1),
                    },
                )?;
            // The script's functions are the closure's too (as for a closure
            // written in the script), before Rhai's built-ins of the same name.
            let ast = self.ast.clone_functions_only().merge(&own);
            let mut scope = self.scope.clone();
            let value = self
                .engine
                .eval_ast_with_scope::<Dynamic>(&mut scope, &ast)
                .map_err(|e| error(e.to_string(), e.position()))?;
            let Some(f) = value.try_cast::<FnPtr>() else {
                let msg = "the probe source string must be a closure like \"|e| { ... }\"";
                return Err(Diagnostic::at(&self.file_name, p.pos, msg).into());
            };
            p.closure = f;
            p.ast = Arc::new(ast);
            p.source_placed = placed.is_some();
        }
        self.registry.lock().unwrap().probes = probes;
        Ok(())
    }

    /// Make each top-level variable one shared value, as a closure written
    /// in the script makes those it captures: the closures compiled from
    /// probe source strings then update the same variable (a counter two
    /// string probes bump), not each its own copy.
    fn share_top_level_variables(&mut self) {
        let mut shared = Scope::new();
        for (name, constant, value) in self.scope.iter_raw() {
            if constant {
                shared.push_constant_dynamic(name.to_string(), value.clone());
            } else {
                shared.push_dynamic(name.to_string(), value.clone().into_shared());
            }
        }
        self.scope = shared;
    }

    /// `src`, the source string of the probe() call at `call`, placed where
    /// the script has it as a literal: blank lines and spaces before it, so
    /// Rhai's positions in it are the script's. None when it isn't written
    /// there as it reads (built at run time, or with escapes).
    fn placed_in_script(&self, call: Position, src: &str) -> Option<String> {
        let mut literal = None;
        self.ast.walk(&mut |path: &[rhai::ASTNode]| {
            if let Some(rhai::ASTNode::Expr(rhai::Expr::FnCall(c, at))) = path.last() {
                if c.name == "probe" && *at == call && c.args.len() == 2 {
                    if let rhai::Expr::StringConstant(_, lit) = &c.args[1] {
                        literal = Some(*lit);
                    }
                }
            }
            literal.is_none()
        });
        let lit = literal?;
        let (line, col) = (lit.line()?, lit.position()?);
        let line_start: usize = self.text.split_inclusive('\n').take(line - 1).map(str::len).sum();
        let from_line = self.text.get(line_start..)?;
        let quote_at = from_line.char_indices().nth(col - 1)?.0;
        let rest = &from_line[quote_at..];
        let quote = rest.chars().next().filter(|q| matches!(q, '"' | '`'))?;
        let inside = &rest[quote.len_utf8()..];
        let written_as_is = inside.strip_prefix(src).is_some_and(|after| after.starts_with(quote));
        written_as_is.then(|| format!("{}{}{src}", "\n".repeat(line - 1), " ".repeat(col)))
    }

    /// The top level's `const`s, for `global::NAME` in functions called
    /// from callbacks (Rhai keeps them only for the top level's own run).
    fn keep_constants(&mut self) {
        let constants: std::collections::BTreeMap<_, _> =
            self.scope.iter_raw().filter(|(_, constant, _)| *constant).map(|(n, _, v)| (n.into(), v.clone())).collect();
        self.constants = Some(Arc::new(rhai::Locked::new(constants)));
    }

    /// The state a callback runs in: the script's functions (those of `ast`)
    /// and the top level's constants.
    fn callback_state(&self, ast: &AST) -> rhai::GlobalRuntimeState {
        let mut global = self.engine.new_global_runtime_state();
        global.lib.push(ast.shared_lib().clone());
        global.lib.extend(self.libraries.lock().unwrap().iter().cloned());
        global.constants = self.constants.clone();
        global
    }

    /// Call the closure `f` (defined in `ast`) with `args`, as the top level would.
    pub fn call_closure(
        &self,
        ast: &AST,
        f: &FnPtr,
        args: impl rhai::FuncArgs,
    ) -> Result<Dynamic, Box<rhai::EvalAltResult>> {
        let global = self.callback_state(ast);
        let ctx =
            rhai::NativeCallContext::new_with_all_fields(&self.engine, f.fn_name(), None, &global, Position::NONE);
        let mut values = Vec::new();
        args.parse(&mut values);
        f.call_raw(&ctx, None, values)
    }

    /// Run `ast`'s statements in `scope`, as the top level would; `at_event`
    /// is what the kernel read at the event for them (see [`kernel_reads`]).
    pub fn run_statements(
        &self,
        scope: &mut Scope,
        ast: &AST,
        at_event: Option<Arc<kernel_reads::AtEvent>>,
    ) -> Result<(), Box<rhai::EvalAltResult>> {
        let mut global = self.callback_state(ast);
        global.source = ast.source().map(Into::into);
        if let Some(at) = at_event {
            global.tag = Dynamic::from(at);
        }
        #[allow(deprecated)] // the one entry that takes a prepared state
        self.engine.eval_statements_raw(&mut global, &mut rhai::Caches::new(), scope, ast.statements()).map(|_| ())
    }

    /// An error of the top level: an unknown function is reported as the
    /// call check reports it (close names, the rtrace form of a bpftrace
    /// habit), and a map is named after its variable.
    fn top_level_error(&self, e: &rhai::EvalAltResult) -> Diagnostic {
        if matches!(e, rhai::EvalAltResult::ErrorFunctionNotFound(..)) {
            if let Err(d) = calls::check(self) {
                return d;
            }
        }
        let mut d = self.runtime_error(e);
        let unnamed: Vec<(u32, String)> =
            self.registry.lock().unwrap().maps.iter().map(|m| (m.id(), m.name())).collect();
        self.name_maps();
        let reg = self.registry.lock().unwrap();
        for (id, old) in unnamed {
            if let Some(m) = reg.maps.iter().find(|m| m.id() == id) {
                d.message = d.message.replace(&format!("map '{old}'"), &format!("map '{}'", m.name()));
            }
        }
        d
    }

    /// Give every map without an explicit name the name of the variable holding it.
    fn name_maps(&self) {
        for (name, _, value) in self.scope.iter() {
            if let Some(m) = value.flatten_clone().try_cast::<MapHandle>() {
                m.set_default_name(name);
            }
        }
        for m in &self.registry.lock().unwrap().maps {
            m.set_default_name(&format!("map{}", m.id()));
        }
    }

    /// Userspace code was stopped (`ErrorTerminated`): by `exit()`, which
    /// says nothing, or because the run ended while it ran (a signal, `-d`,
    /// the `-c` command's exit: the reason is the payload), which one
    /// located warning says.
    /// `near`: the probe's or timer's place, when the stop has none.
    pub fn note_stopped(&self, e: &rhai::EvalAltResult, near: Option<Pos>) {
        if let rhai::EvalAltResult::ErrorTerminated(why, pos) = e {
            if let Some(why) = why.read_lock::<rhai::ImmutableString>() {
                let msg = format!("{}: stopped this probe's userspace code, still running", why.as_str());
                let place = Pos::of(*pos).or(near);
                crate::output::sink::report(&Diagnostic::new(&self.file_name, place, msg).warning());
            }
        }
    }

    /// Call a userspace closure (BEGIN, END, timers).
    pub fn call(&self, probe_ast: &AST, f: &FnPtr) -> Result<()> {
        let result = self.call_closure(probe_ast, f, ()).map(|_| ()).or_else(|e| match *e {
            rhai::EvalAltResult::ErrorTerminated(..) => {
                self.note_stopped(&e, Pos::of(self.registered_at(f)));
                Ok(())
            }
            _ => Err(self.runtime_error_near(&e, self.registered_at(f)).into()),
        });
        crate::output::sink::flush();
        result
    }

    /// Where the closure `f` was handed to `probe()`, `every()` or `after()`:
    /// the position for its errors that have none of their own (a stack
    /// overflow unwinds to the call from rtrace, which has no position).
    fn registered_at(&self, f: &FnPtr) -> Position {
        let reg = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let probe = reg.probes.iter().find(|p| p.closure.fn_name() == f.fn_name()).map(|p| p.pos);
        probe
            .or_else(|| reg.timers.iter().find(|t| t.closure.fn_name() == f.fn_name()).map(|t| t.pos))
            .unwrap_or(Position::NONE)
    }

    /// A Rhai runtime error as one line naming the script position.
    pub fn runtime_error(&self, e: &rhai::EvalAltResult) -> Diagnostic {
        self.runtime_error_near(e, Position::NONE)
    }

    /// `near`: the innermost known call position, for errors without one
    /// of their own (a stack overflow).
    fn runtime_error_near(&self, e: &rhai::EvalAltResult, near: Position) -> Diagnostic {
        let pos = if e.position().is_none() { near } else { e.position() };
        let mut msg = e.to_string();
        if let Some(i) = msg.rfind(" (line ") {
            msg.truncate(i);
        }
        // Errors raised by our own API functions carry their message as-is.
        if let rhai::EvalAltResult::ErrorRuntime(v, _) = e {
            msg = v.to_string();
        }
        if let rhai::EvalAltResult::ErrorInFunctionCall(_, _, inner, _) = e {
            return self.runtime_error_near(inner, pos);
        }
        if let rhai::EvalAltResult::ErrorVariableNotFound(name, _) = e {
            if let Some(hint) = habits::variable_hint(name) {
                return Diagnostic::at(&self.file_name, pos, msg).hint(hint);
            }
        }
        if let rhai::EvalAltResult::ErrorStackOverflow(_) = e {
            msg = format!(
                "Stack overflow: function calls nested over {} deep; does a recursion never end?",
                self.engine.max_call_levels()
            );
        }
        Diagnostic::at(&self.file_name, pos, msg)
    }
}

/// `line:column` of a Rhai position (`?` when unknown).
pub fn position_text(pos: Position) -> String {
    match (pos.line(), pos.position()) {
        (Some(l), Some(c)) => format!("{l}:{c}"),
        (Some(l), None) => format!("{l}:1"),
        _ => "?".to_string(),
    }
}

/// The longest duration accepted (-d, every(), after()): about 31 years.
pub const MAX_DURATION_SECS: f64 = 1e9;

/// Parse a duration like `5s`, `100ms`, `2m`, `1h`, `250us` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "ns" => v / 1e9,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    // Bounded: a huge value is not a duration (and must not panic).
    if !secs.is_finite() || !(0.0..=MAX_DURATION_SECS).contains(&secs) {
        return None;
    }
    Duration::try_from_secs_f64(secs).ok()
}
