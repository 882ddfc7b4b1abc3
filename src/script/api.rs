//! The functions a script calls at its top level and in userspace closures:
//! `map`, `probe`, `every`, `after`, `exit`, `fail`, `print(map)` and the map
//! methods. Kernel-side meanings of the same names (aggregations, `e.*`) are
//! handled by the compiler, not here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rhai::{Dynamic, Engine, EvalAltResult, FnPtr, ImmutableString, NativeCallContext, Position, AST};

use super::{parse_duration, ProbeDef, SharedRegistry, Timer};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// A script error with `msg` at `pos` (the call's place).
pub(super) fn fail_at<T>(msg: impl Into<String>, pos: Position) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg.into()), pos)))
}

/// Returned by `print(map)`, which writes the map itself; `on_print` skips it.
const PRINTED: &str = "\u{0}rtrace:printed";

/// What userspace can do with a map once it exists in the kernel.
pub trait MapBackend: Send + Sync {
    fn print(&self) -> Result<(), String>;
    fn clear(&self) -> Result<(), String>;
    fn zero(&self) -> Result<(), String>;
    fn len(&self) -> Result<usize, String>;
    fn keys(&self) -> Result<rhai::Array, String>;
    /// Folded stack lines (`comm;root;...;leaf count`) for flame graphs.
    fn folded(&self) -> Result<Vec<String>, String>;
    /// `m[k] = v` from userspace (plain-value maps).
    fn set(&self, key: &Dynamic, value: &Dynamic) -> Result<(), String>;
    fn contains(&self, key: &Dynamic) -> Result<bool, String>;
    fn remove(&self, key: &Dynamic) -> Result<(), String>;
    /// `[[key, value], ...]`, one consistent read.
    fn entries(&self) -> Result<rhai::Array, String>;
    /// The distribution of a hist/lhist/stats/quantiles map: all keys
    /// together, or one key's (`m[k]`).
    fn distribution(&self, key: Option<&Dynamic>) -> Result<crate::output::dist::Distribution, String>;
    fn get(&self, key: &Dynamic) -> Result<Dynamic, String>;
    /// `m[key] = agg(args)` done by userspace (`--no-split`).
    fn aggregate(&self, _key: &Dynamic, agg: &str, _args: &[Dynamic]) -> Result<(), String> {
        Err(format!("{agg}() can't update this map from userspace"))
    }
    /// Whether the map holds plain integers (the kernel can read a value
    /// for userspace at the event).
    fn holds_integers(&self) -> bool {
        false
    }
}

/// What `probe()` returns: lets a script attach `.on_event(...)`.
#[derive(Clone)]
pub struct ProbeHandle(usize);

/// Options given to `map(name, #{...})`.
#[derive(Clone, Debug, Default)]
pub struct MapOptions {
    pub max_entries: Option<u32>,
    pub lru: bool,
    /// How `--serve` exports the map (labels, help, reset on scrape).
    pub metrics: crate::output::metrics::MetricOptions,
    /// Where `map(...)` was called, for errors found later.
    pub pos: Position,
}

pub struct MapState {
    id: u32,
    name: Mutex<Option<String>>,
    pub options: MapOptions,
    backend: OnceLock<Arc<dyn MapBackend>>,
    /// The script cleared this map: at exit a keyless one prints only if written again.
    handled: AtomicBool,
    /// Printed with `print_folded()` (for flame-graph tools): not dumped at exit.
    folded: AtomicBool,
}

/// A map declared by `map()`: a handle the script passes around; the kernel
/// map behind it is created when probes are loaded.
#[derive(Clone)]
pub struct MapHandle(Arc<MapState>);

impl MapHandle {
    pub fn id(&self) -> u32 {
        self.0.id
    }
    pub fn name(&self) -> String {
        self.0.name.lock().unwrap().clone().unwrap_or_else(|| format!("map{}", self.0.id))
    }
    pub fn set_default_name(&self, name: &str) {
        let mut n = self.0.name.lock().unwrap();
        if n.is_none() {
            *n = Some(name.to_string());
        }
    }
    pub fn options(&self) -> &MapOptions {
        &self.0.options
    }
    pub fn attach_backend(&self, backend: Arc<dyn MapBackend>) {
        let _ = self.0.backend.set(backend);
    }
    pub fn handled_by_script(&self) -> bool {
        self.0.handled.load(Ordering::Relaxed)
    }
    pub fn mark_handled(&self) {
        self.0.handled.store(true, Ordering::Relaxed);
    }
    pub fn printed_folded(&self) -> bool {
        self.0.folded.load(Ordering::Relaxed)
    }

    pub(crate) fn with_backend<T>(
        &self,
        pos: Position,
        f: impl FnOnce(&dyn MapBackend) -> Result<T, String>,
    ) -> RhaiResult<T> {
        match self.0.backend.get() {
            Some(b) => f(b.as_ref()).or_else(|e| fail_at(e, pos)),
            None => fail_at(
                format!(
                    "map '{}' is used at the top level, before the probes exist: read and write maps in \
                     probes, BEGIN, END, every() or after() closures",
                    self.name()
                ),
                pos,
            ),
        }
    }
}

fn new_map(registry: &SharedRegistry, name: Option<String>, options: MapOptions) -> MapHandle {
    let mut reg = registry.lock().unwrap();
    let handle = MapHandle(Arc::new(MapState {
        id: reg.maps.len() as u32,
        name: Mutex::new(name),
        options,
        backend: OnceLock::new(),
        handled: AtomicBool::new(false),
        folded: AtomicBool::new(false),
    }));
    reg.maps.push(handle.clone());
    handle
}

fn duration_arg(d: &Dynamic, pos: Position) -> RhaiResult<Duration> {
    if let Some(s) = d.clone().try_cast::<rhai::ImmutableString>() {
        return parse_duration(&s)
            .map_or_else(|| fail_at(format!("'{s}' is not a duration; write e.g. \"1s\", \"500ms\""), pos), Ok);
    }
    if let Ok(secs) = d.as_int() {
        if secs > 0 && secs as f64 <= super::MAX_DURATION_SECS {
            return Ok(Duration::from_secs(secs as u64));
        }
    }
    fail_at("a duration must be a string like \"1s\" or \"500ms\", or whole seconds", pos)
}

/// Register rtrace's API on `engine`.
pub fn install(engine: &mut Engine, registry: &SharedRegistry) {
    engine.register_type_with_name::<MapHandle>("Map");
    engine.on_print(|text| {
        if text != PRINTED {
            crate::output::sink::script_text(&format!("{text}\n"));
        }
    });
    // Rhai's debug(): `[LINE:COL] text` on stderr, never a panic on a closed stderr.
    engine.on_debug(|text, _, pos| {
        let at = pos.line().map(|l| format!("[{l}:{}] ", pos.position().unwrap_or(0))).unwrap_or_default();
        crate::output::sink::script_stderr(&format!("{at}{text}\n"));
    });

    let r = registry.clone();
    engine.register_fn("map", move |ctx: NativeCallContext| {
        new_map(&r, None, MapOptions { pos: ctx.call_position(), ..MapOptions::default() })
    });
    let r = registry.clone();
    engine.register_fn("map", move |ctx: NativeCallContext, name: &str| {
        new_map(&r, Some(name.to_string()), MapOptions { pos: ctx.call_position(), ..MapOptions::default() })
    });
    let r = registry.clone();
    engine.register_fn("map", move |ctx: NativeCallContext, name: &str, opts: rhai::Map| -> RhaiResult<MapHandle> {
        let mut options = MapOptions { pos: ctx.call_position(), ..MapOptions::default() };
        for (k, v) in opts.iter() {
            match k.as_str() {
                "max_entries" => match v.as_int() {
                    Ok(n) if n > 0 && n <= u32::MAX as i64 => options.max_entries = Some(n as u32),
                    _ => return fail_at("max_entries must be a positive integer", ctx.call_position()),
                },
                "type" => match v.clone().into_string().as_deref() {
                    Ok("lru") => options.lru = true,
                    Ok("hash") => options.lru = false,
                    _ => return fail_at("map type must be \"hash\" or \"lru\"", ctx.call_position()),
                },
                k if crate::output::metrics::OPTION_NAMES.contains(&k) => {
                    if let Err(e) = options.metrics.set(k, v) {
                        return fail_at(e, ctx.call_position());
                    }
                }
                other => {
                    return fail_at(
                        format!(
                            "unknown map option '{other}' (known: max_entries, type, {})",
                            crate::output::metrics::OPTION_NAMES.join(", ")
                        ),
                        ctx.call_position(),
                    )
                }
            }
        }
        Ok(new_map(&r, Some(name.to_string()), options))
    });

    engine.register_type_with_name::<ProbeHandle>("Probe");
    let r = registry.clone();
    engine.register_fn("probe", move |ctx: NativeCallContext, spec: &str, f: FnPtr| -> RhaiResult<ProbeHandle> {
        let ast = current_ast(&ctx)?;
        let mut reg = r.lock().unwrap();
        reg.probes.push(ProbeDef {
            spec: spec.to_string(),
            closure: f,
            ast,
            pos: ctx.call_position(),
            source: None,
            source_placed: false,
            on_event: None,
            unfiltered: false,
        });
        Ok(ProbeHandle(reg.probes.len() - 1))
    });
    let r = registry.clone();
    engine.register_fn("probe", move |ctx: NativeCallContext, spec: &str, source: &str| -> RhaiResult<ProbeHandle> {
        // Compiled once the top level has finished, with its variables in scope.
        let ast = current_ast(&ctx)?;
        let mut reg = r.lock().unwrap();
        reg.probes.push(ProbeDef {
            spec: spec.to_string(),
            closure: FnPtr::new("pending_probe_source")?,
            ast,
            pos: ctx.call_position(),
            source: Some(source.to_string()),
            source_placed: false,
            on_event: None,
            unfiltered: false,
        });
        Ok(ProbeHandle(reg.probes.len() - 1))
    });
    // `probe(...).on_event(|rec| ...)`: receives what the probe `emit()`s.
    let r = registry.clone();
    engine.register_fn("on_event", move |p: &mut ProbeHandle, f: FnPtr| -> ProbeHandle {
        if let Some(def) = r.lock().unwrap().probes.get_mut(p.0) {
            def.on_event = Some(f);
        }
        p.clone()
    });

    // `probe(...).unfiltered()`: sees every process under -p/-c, for a
    // probe whose event names another task than the current one
    // (sched_switch's next_pid) and which filters on traced_pid() itself.
    let r = registry.clone();
    engine.register_fn("unfiltered", move |p: &mut ProbeHandle| -> ProbeHandle {
        if let Some(def) = r.lock().unwrap().probes.get_mut(p.0) {
            def.unfiltered = true;
        }
        p.clone()
    });
    // command_stdout_to_stderr(): at the top level, before the -c command starts.
    let r = registry.clone();
    engine.register_fn("command_stdout_to_stderr", move || {
        r.lock().unwrap().command_stdout_to_stderr = true;
    });
    // ring_size(SIZE): the event ring's size, `4M` or bytes (a tool's -b/--buffer-pages);
    // stack_entries(N): distinct stacks per stack map (profile's --stack-storage-size).
    install_map_sizes(engine, registry);
    // traced_pid(): the process -p names, or -1.
    let r = registry.clone();
    engine.register_fn("traced_pid", move || -> i64 { r.lock().unwrap().traced_pid.map_or(-1, i64::from) });

    for (name, repeat) in [("every", true), ("after", false)] {
        let r = registry.clone();
        engine.register_fn(name, move |ctx: NativeCallContext, d: Dynamic, f: FnPtr| -> RhaiResult<()> {
            let period = duration_arg(&d, ctx.call_position())?;
            r.lock().unwrap().timers.push(Timer { period, repeat, closure: f, pos: ctx.call_position() });
            Ok(())
        });
    }

    let r = registry.clone();
    engine.register_fn("exit", move || -> RhaiResult<()> {
        r.lock().unwrap().exit_code.get_or_insert(0);
        Err(Box::new(EvalAltResult::ErrorTerminated(Dynamic::UNIT, Position::NONE)))
    });
    let r = registry.clone();
    engine.register_fn("exit", move |code: i64| -> RhaiResult<()> {
        r.lock().unwrap().exit_code.get_or_insert(exit_status(code));
        Err(Box::new(EvalAltResult::ErrorTerminated(Dynamic::UNIT, Position::NONE)))
    });
    // Anything but an integer (Rhai's own `exit(value)` would end silently).
    engine.register_fn("exit", |ctx: NativeCallContext, code: Dynamic| -> RhaiResult<()> {
        fail_at(format!("exit() takes an integer status, not {}", code.type_name()), ctx.call_position())
    });
    let r = registry.clone();
    engine.register_fn("fail", move |msg: &str| -> RhaiResult<()> {
        let mut reg = r.lock().unwrap();
        reg.failure.get_or_insert(msg.to_string());
        reg.exit_code.get_or_insert(1);
        Err(Box::new(EvalAltResult::ErrorTerminated(Dynamic::UNIT, Position::NONE)))
    });

    // Rhai's `print` hands the returned text to on_print; a map prints itself.
    engine.register_fn("print", |ctx: NativeCallContext, m: MapHandle| -> RhaiResult<String> {
        m.with_backend(ctx.call_position(), |b| b.print())?;
        Ok(PRINTED.to_string())
    });
    // print(number) / print(bool): a `value` record under -f json (numbers stay numbers).
    engine.register_fn("print", |n: i64| -> String {
        crate::output::records::value(&n.to_string(), &n.to_string());
        PRINTED.to_string()
    });
    engine.register_fn("print", |f: f64| -> String {
        crate::output::records::value(&Dynamic::from(f).to_string(), &crate::output::records::float_json(f));
        PRINTED.to_string()
    });
    engine.register_fn("print", |b: bool| -> String {
        crate::output::records::value(&b.to_string(), &b.to_string());
        PRINTED.to_string()
    });
    // print([..]) / print(#{..}): a `value` record with a JSON array / object.
    engine.register_fn("print", |a: rhai::Array| -> String {
        crate::output::records::script_value(&Dynamic::from(a));
        PRINTED.to_string()
    });
    engine.register_fn("print", |m: rhai::Map| -> String {
        crate::output::records::script_value(&Dynamic::from(m));
        PRINTED.to_string()
    });
    engine.register_fn("clear", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<()> {
        m.mark_handled();
        crate::script::kernel_reads::note_map_write(&ctx, m.0.id);
        m.with_backend(ctx.call_position(), |b| b.clear())
    });
    engine.register_fn("zero", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<()> {
        crate::script::kernel_reads::note_map_write(&ctx, m.0.id);
        m.with_backend(ctx.call_position(), |b| b.zero())
    });
    engine.register_fn("len", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<i64> {
        m.with_backend(ctx.call_position(), |b| b.len().map(|n| n as i64))
    });
    engine.register_fn("keys", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<rhai::Array> {
        m.with_backend(ctx.call_position(), |b| b.keys())
    });
    engine.register_indexer_get(|ctx: NativeCallContext, m: &mut MapHandle, key: Dynamic| -> RhaiResult<Dynamic> {
        if let Some(v) = crate::script::kernel_reads::map_read_at_event(&ctx, m.0.id) {
            if m.with_backend(ctx.call_position(), |b| Ok(b.holds_integers()))? {
                return Ok(v);
            }
        }
        m.with_backend(ctx.call_position(), |b| b.get(&key))
    });
    engine.register_fn("to_string", |m: &mut MapHandle| format!("@{}", m.name()));
    engine.register_indexer_set(
        |ctx: NativeCallContext, m: &mut MapHandle, key: Dynamic, value: Dynamic| -> RhaiResult<()> {
            crate::script::kernel_reads::note_map_write(&ctx, m.0.id);
            m.with_backend(ctx.call_position(), |b| b.set(&key, &value))
        },
    );
    engine.register_fn("contains", |ctx: NativeCallContext, m: &mut MapHandle, key: Dynamic| -> RhaiResult<bool> {
        m.with_backend(ctx.call_position(), |b| b.contains(&key))
    });
    engine.register_fn("remove", |ctx: NativeCallContext, m: &mut MapHandle, key: Dynamic| -> RhaiResult<()> {
        crate::script::kernel_reads::note_map_write(&ctx, m.0.id);
        m.with_backend(ctx.call_position(), |b| b.remove(&key))
    });
    engine.register_fn("entries", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<rhai::Array> {
        m.with_backend(ctx.call_position(), |b| b.entries())
    });
    engine.register_fn("top", |ctx: NativeCallContext, m: &mut MapHandle, n: i64| -> RhaiResult<rhai::Array> {
        let mut all = m.with_backend(ctx.call_position(), |b| b.entries())?;
        let value_of = |e: &Dynamic| {
            e.clone()
                .into_typed_array::<Dynamic>()
                .ok()
                .and_then(|v| v.get(1).and_then(|x| x.as_int().ok()))
                .unwrap_or(0)
        };
        all.sort_by_key(|e| std::cmp::Reverse(value_of(e)));
        all.truncate(n.max(0) as usize);
        Ok(all)
    });
    engine.register_fn("folded", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<String> {
        m.with_backend(ctx.call_position(), |b| b.folded()).map(|lines| lines.join("\n"))
    });
    engine.register_fn("print_folded", |ctx: NativeCallContext, m: &mut MapHandle| -> RhaiResult<()> {
        m.0.folded.store(true, Ordering::Relaxed);
        let lines = m.with_backend(ctx.call_position(), |b| b.folded())?;
        crate::output::records::folded(&m.name(), &lines);
        Ok(())
    });

    // `--no-split`: `m[k] = agg(args)` rewritten as a call (compile/no_split.rs).
    fn aggregate(
        ctx: &NativeCallContext,
        m: &mut MapHandle,
        key: Dynamic,
        agg: &str,
        args: &[Dynamic],
    ) -> RhaiResult<()> {
        crate::script::kernel_reads::note_map_write(ctx, m.0.id);
        m.with_backend(ctx.call_position(), |b| b.aggregate(&key, agg, args))
    }
    const AGG: &str = "__rtrace_aggregate";
    engine.register_fn(AGG, |ctx: NativeCallContext, m: &mut MapHandle, k: Dynamic, agg: ImmutableString| {
        aggregate(&ctx, m, k, &agg, &[])
    });
    engine.register_fn(
        AGG,
        |ctx: NativeCallContext, m: &mut MapHandle, k: Dynamic, agg: ImmutableString, a: Dynamic| {
            aggregate(&ctx, m, k, &agg, &[a])
        },
    );
    engine.register_fn(
        AGG,
        |ctx: NativeCallContext, m: &mut MapHandle, k: Dynamic, agg: ImmutableString, a: Dynamic, b: Dynamic| {
            aggregate(&ctx, m, k, &agg, &[a, b])
        },
    );
    engine.register_fn(
        AGG,
        |ctx: NativeCallContext,
         m: &mut MapHandle,
         k: Dynamic,
         agg: ImmutableString,
         a: Dynamic,
         b: Dynamic,
         c: Dynamic,
         d: Dynamic| { aggregate(&ctx, m, k, &agg, &[a, b, c, d]) },
    );
    // The aggregations (builtins::AGGREGATIONS) are kernel-only calls on the
    // right of a map assignment; called anywhere else they fail with a hint.
    for agg in crate::builtins::AGGREGATIONS.iter().map(|a| a.name) {
        let msg = format!(
            "{agg}() is an aggregation that runs in the kernel: use it inside a probe, e.g. `m[e.comm] = {agg}(...)`"
        );
        let m2 = msg.clone();
        engine.register_fn(agg, move |ctx: NativeCallContext| -> RhaiResult<()> {
            fail_at(m2.clone(), ctx.call_position())
        });
        let m2 = msg.clone();
        engine.register_fn(agg, move |ctx: NativeCallContext, _: Dynamic| -> RhaiResult<()> {
            fail_at(m2.clone(), ctx.call_position())
        });
    }
}

/// The process exit status for `exit(code)`: 0 stays 0, any other code
/// stays non-zero (clamped to 1..=255, so 256 doesn't wrap to success).
pub fn exit_status(code: i64) -> i32 {
    if code == 0 {
        0
    } else {
        code.clamp(1, 255) as i32
    }
}

/// The AST of the script being run (closures registered by it live there).
fn current_ast(ctx: &NativeCallContext) -> RhaiResult<Arc<AST>> {
    CURRENT_AST.with(|a| a.borrow().clone()).map_or_else(
        || fail_at("probe() can only be called while the script's top level runs", ctx.call_position()),
        Ok,
    )
}

thread_local! {
    /// The AST whose top level is running, for `probe()` to remember.
    pub static CURRENT_AST: std::cell::RefCell<Option<Arc<AST>>> = const { std::cell::RefCell::new(None) };
}

/// `ring_size("4M")` / `ring_size(bytes)` and `stack_entries(n)`: sizes set
/// from the top level; a size out of range is an error at the call.
fn install_map_sizes(engine: &mut Engine, registry: &SharedRegistry) {
    let r = registry.clone();
    engine.register_fn("stack_entries", move |ctx: NativeCallContext, n: i64| -> RhaiResult<()> {
        if !(16..=1 << 20).contains(&n) {
            return fail_at(
                format!("stack_entries({n}): give from 16 to 1048576 distinct stacks"),
                ctx.call_position(),
            );
        }
        r.lock().unwrap().stack_entries = Some(n as u32);
        Ok(())
    });
    let r = registry.clone();
    engine.register_fn("ring_size", move |ctx: NativeCallContext, size: Dynamic| -> RhaiResult<()> {
        let text = if size.is_int() { size.as_int().unwrap_or(0).to_string() } else { size.to_string() };
        match crate::config::ring_size(&text) {
            Ok(bytes) => {
                r.lock().unwrap().ring_size = Some(bytes);
                Ok(())
            }
            Err(e) => fail_at(e.to_string(), ctx.call_position()),
        }
    });
}
