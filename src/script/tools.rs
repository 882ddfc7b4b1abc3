//! The tools shipped in stdlib/tools/ (embedded by build.rs), and the script
//! functions that tools need and every script may use: `sprintf`, `eprint`,
//! `eprintf`, `rtrace_pid`, `probe_error`.

use std::sync::Arc;

use rhai::Engine;

use super::SharedRegistry;

/// Why a probe spec can't be attached on this kernel (`None`: it can).
pub type SpecCheck = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;
/// Whether the running kernel's type (`struct NAME`, `union NAME`) or
/// tracepoint (`tracepoint:CAT:NAME`) has a member or field of a name.
pub type MemberCheck = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The probes `rtrace -l PATTERN` lists, or why it can't list them.
pub type ProbeList = Arc<dyn Fn(&str) -> Result<Vec<String>, String> + Send + Sync>;

include!(concat!(env!("OUT_DIR"), "/tools.rs"));

/// The source of the embedded tool `name`.
pub fn find(name: &str) -> Option<&'static str> {
    TOOLS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// Every embedded tool: (name, one-line description).
pub fn list() -> Vec<(&'static str, String)> {
    TOOLS.iter().map(|(n, s)| (*n, description(n, s))).collect()
}

/// The description in a tool's first comment line: `// NAME: what it does`
/// (or `// NAME - what it does`) gives `what it does`.
pub fn description(name: &str, source: &str) -> String {
    let Some(first) = source.lines().map(str::trim).find(|l| l.starts_with("//")) else {
        return String::new();
    };
    let text = first.trim_start_matches('/').trim();
    let rest = text.strip_prefix(name).map(str::trim_start).unwrap_or(text);
    let rest = rest.strip_prefix(':').or_else(|| rest.strip_prefix('-')).unwrap_or(rest);
    rest.trim().to_string()
}

/// `rtrace_pid()`, `eprint(text)` and `probe_error(spec)` ("" when `spec`
/// can be attached here, else the error a run would give); sprintf and
/// eprintf: formatting.rs.
pub fn install(engine: &mut Engine, registry: &SharedRegistry) {
    let r = registry.clone();
    engine.register_fn("probe_error", move |spec: &str| -> String {
        let check = r.lock().unwrap().spec_check.clone();
        check.and_then(|c| c(spec)).unwrap_or_default()
    });
    // kernel_has("struct cfs_rq", "nr_queued"), kernel_has("tracepoint:sched:sched_process_exit",
    // "group_dead"): pick the route this kernel has (fields come and go between versions).
    let r = registry.clone();
    engine.register_fn("kernel_has", move |what: &str, member: &str| -> bool {
        let check = r.lock().unwrap().member_check.clone();
        check.is_some_and(|c| c(what, member))
    });
    // list_probes("kprobe:vfs_*"): what `rtrace -l` lists, as an array (a tool's -r/--regexp
    // filters it with regex_match); a pattern that can't be listed is an error at the call.
    let r = registry.clone();
    engine.register_fn(
        "list_probes",
        move |ctx: rhai::NativeCallContext, pattern: &str| -> Result<rhai::Array, Box<rhai::EvalAltResult>> {
            let list = r.lock().unwrap().probe_list.clone();
            let Some(list) = list else { return Ok(rhai::Array::new()) };
            match list(pattern) {
                Ok(names) => Ok(names.into_iter().map(rhai::Dynamic::from).collect()),
                Err(e) => super::api::fail_at(format!("list_probes({pattern:?}): {e}"), ctx.call_position()),
            }
        },
    );
    // regex_match(text, re): whether the regular expression `re` (Rust's regex
    // syntax, unanchored as Python's re.search) matches somewhere in `text`.
    engine.register_fn(
        "regex_match",
        |ctx: rhai::NativeCallContext, text: &str, re: &str| -> Result<bool, Box<rhai::EvalAltResult>> {
            match compiled_regex(re) {
                Ok(r) => Ok(r.is_match(text)),
                Err(e) => super::api::fail_at(e, ctx.call_position()),
            }
        },
    );
    // rtrace's own process id, so that a tool can leave out its own events.
    engine.register_fn("rtrace_pid", || std::process::id() as i64);
    engine.register_fn("eprint", |text: &str| crate::output::sink::script_stderr(&format!("{text}\n")));
}

/// `re` compiled (once per distinct text: a filter calls it per event).
fn compiled_regex(re: &str) -> Result<regex::Regex, String> {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, regex::Regex>> = Default::default();
    }
    CACHE.with(|c| {
        if let Some(r) = c.borrow().get(re) {
            return Ok(r.clone());
        }
        let compiled = regex::Regex::new(re).map_err(|e| {
            let first = e.to_string().lines().last().unwrap_or("").trim().trim_start_matches("error: ").to_string();
            format!("regex_match: {re:?} is not a regular expression: {first}")
        })?;
        let mut cache = c.borrow_mut();
        if cache.len() > 256 {
            cache.clear();
        }
        cache.insert(re.to_string(), compiled.clone());
        Ok(compiled)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_come_from_the_first_comment() {
        assert_eq!(description("x", "// x: count things\nlet a = 1;"), "count things");
        assert_eq!(description("x", "\n// x - count things\n"), "count things");
        assert_eq!(description("x", "let a = 1;"), "");
    }

    #[test]
    fn every_tool_has_a_description() {
        for (name, desc) in list() {
            assert!(!desc.is_empty(), "{name} has no description comment");
        }
    }
}
