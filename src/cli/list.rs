//! `-l [PATTERN]`: list probes one per line as bpftrace prints them; `-lv`
//! adds tracepoint format fields.

use anyhow::Result;

use crate::attach::tracefs;

pub fn run(pattern: Option<&str>, verbose: bool) -> Result<i32> {
    let pattern = pattern.unwrap_or("*");
    let (kind, rest) = pattern.split_once(':').unwrap_or(("*", pattern));
    let mut out = String::new();
    let want_kind = |names: &[&str]| kind == "*" || names.contains(&kind);
    if want_kind(&["tracepoint", "t"]) {
        let rest = if rest.contains(':') || kind == "*" && !pattern.contains(':') { rest.to_string() } else { format!("{rest}:*") };
        let rest = if rest.is_empty() { "*:*".to_string() } else { rest };
        for (cat, name) in tracefs::expand_tracepoints(&rest).unwrap_or_default() {
            out.push_str(&format!("tracepoint:{cat}:{name}\n"));
            if verbose {
                if let Ok(f) = tracefs::read_format(&cat, &name) {
                    for field in f.event_fields() {
                        out.push_str(&format!("    {} {};\n", field.c_type, field.name));
                    }
                }
            }
        }
    }
    if want_kind(&["rawtracepoint", "rt"]) {
        let rest = rest.rsplit(':').next().unwrap_or("*");
        for name in tracefs::expand_raw_tracepoints(if rest.is_empty() { "*" } else { rest }).unwrap_or_default() {
            out.push_str(&format!("rawtracepoint:{name}\n"));
        }
    }
    print!("{out}");
    Ok(0)
}
