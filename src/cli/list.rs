//! `-l [PATTERN]`: list probes one per line as bpftrace prints them; `-lv`
//! adds details (tracepoint format fields, BTF arguments of raw tracepoints
//! and tp_btf, USDT argument specs).
//!
//! PATTERN is `TYPE:REST` (TYPE a probe type or its alias, or a wildcard
//! over type names), a comma list of those, or a bare word, which matches
//! the name part of every probe that needs no binary (tracepoints, raw
//! tracepoints, software/hardware events, kernel functions where kprobes or
//! fentry work here). `*` and `?` work in every part, the binary's path
//! too. uprobe/usdt listings need a binary: `uprobe:/bin/bash:*read*`,
//! `u:libc:get*`, `usdt:/path/bin`, `'*:./prog:*'` (both kinds of one binary).
//! Each probe type lists itself ([`crate::probes::ProbeType::list`]); this
//! file picks the types an item names and prints what they found, sorted,
//! one probe per line, with no duplicates.

use std::io::Write;

use anyhow::{bail, Result};

use crate::kernel::{btf_print, LiveKernel};
use crate::probes::listing::{ListQuery, Listing};
use crate::probes::spec::{self, ProbeKind as Kind};
use crate::probes::{tracepoint, TypeEntry, TYPES};
use crate::util::similar::suggest;
use crate::util::wildcard::{has_wildcard, wildcard_match};

/// Kinds a wildcard type or a bare word does not search: their probes are
/// listed under the entry kind (return probes) or the raw tracepoint (tp_btf).
const NOT_SEARCHED: &[Kind] = &[Kind::TpBtf, Kind::Kretprobe, Kind::Fexit, Kind::Uretprobe];

pub fn run(pattern: Option<&str>, verbose: bool, pid: Option<i32>) -> Result<i32> {
    if let Some(p) = pattern.filter(|p| btf_print::is_type_pattern(p.trim())) {
        return print_types(p.trim(), verbose);
    }
    let mut listing = listing(pattern.unwrap_or(""), verbose, pid)?;
    let mut notes = std::mem::take(&mut listing.notes);
    notes.dedup();
    for n in &notes {
        crate::output::sink::report(&crate::diag::Diagnostic::tool(n.clone()).note());
    }
    // A closed pipe (`rtrace -l | head`) just ends the listing.
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    for (name, details) in &listing.probes {
        if writeln!(out, "{name}").is_err() {
            return Ok(0);
        }
        for d in details {
            if writeln!(out, "    {d}").is_err() {
                return Ok(0);
            }
        }
    }
    let _ = out.flush();
    Ok(0)
}

/// `-l 'struct task_*'`: the kernel's struct (union, enum) names from BTF,
/// sorted; `-lv`: their definitions, each followed by a blank line, as
/// bpftrace prints them.
fn print_types(pattern: &str, verbose: bool) -> Result<i32> {
    let found = btf_print::list(pattern, verbose)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    for t in &found {
        // A definition ends in a newline: the blank line after it is bpftrace's.
        if writeln!(out, "{t}").is_err() {
            return Ok(0);
        }
    }
    let _ = out.flush();
    Ok(0)
}

/// What `-l PATTERN` finds (an empty PATTERN: everything); `pid`: `-p PID`,
/// whose mapped files `uprobe:*` and `usdt:*` search.
fn listing(pattern: &str, verbose: bool, pid: Option<i32>) -> Result<Listing> {
    let items: Vec<&str> = pattern.trim().split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let items = if items.is_empty() { vec!["*"] } else { items };
    let mut listing = Listing::default();
    for item in items {
        list_item(item, verbose, pid, &mut listing)?;
    }
    Ok(listing)
}

/// `list_probes(pattern)` in a script: the probes `-l PATTERN` prints, or
/// why there are none to list.
pub fn probe_names(pattern: &str) -> Result<Vec<String>, String> {
    listing(pattern, false, None).map(|l| l.probes.into_keys().collect()).map_err(|e| format!("{e:#}"))
}

/// Probe types `-l` lists (not BEGIN/END).
fn listed() -> impl Iterator<Item = &'static TypeEntry> {
    TYPES.iter().filter(|t| t.listed)
}

fn list_item(item: &str, verbose: bool, pid: Option<i32>, out: &mut Listing) -> Result<()> {
    let searched = || listed().filter(|t| !NOT_SEARCHED.contains(&t.kind));
    let Some((ty, rest)) = item.split_once(':') else {
        // `-l tracepoint`, `-l software`: the whole type.
        if let Some(t) = listed().find(|t| t.name() == item) {
            return list_type(t, "", verbose, true, pid, out);
        }
        // A bare word: the name part of every probe that needs no binary.
        for t in searched() {
            let rest = if t.kind == Kind::Tracepoint { format!("*:{item}") } else { item.to_string() };
            if let Err(e) = list_type(t, &rest, verbose, false, pid, out) {
                out.notes.push(format!("{}: {e:#}", t.name()));
            }
        }
        return Ok(());
    };
    if has_wildcard(ty) {
        // `*:./prog:*`: each type lists what fits its own syntax (uprobe
        // and usdt a binary's probes, kernel types none for a path).
        for t in searched().filter(|t| wildcard_match(ty, t.name())) {
            if let Err(e) = list_type(t, rest, verbose, false, pid, out) {
                out.notes.push(format!("{}: {e:#}", t.name()));
            }
        }
        return Ok(());
    }
    let Some(t) = spec::kind_named(ty).and_then(|k| listed().find(|t| t.kind == k)) else {
        bail!("{}", unknown_type(ty, rest));
    };
    list_type(t, rest, verbose, true, pid, out)
}

fn list_type(
    t: &TypeEntry,
    rest: &str,
    verbose: bool,
    explicit: bool,
    pid: Option<i32>,
    out: &mut Listing,
) -> Result<()> {
    let found = t.imp.list(&ListQuery { rest, verbose, explicit, pid }, &LiveKernel)?;
    out.extend(found);
    Ok(())
}

/// The error for `-l 'TYPE:REST'` with an unknown TYPE, with a suggestion.
fn unknown_type(ty: &str, rest: &str) -> String {
    let mut msg = format!("-l: unknown probe type '{ty}'");
    // `-l 'syscalls:sys_enter_open*'`: a tracepoint without its type.
    if !rest.contains(':') && !rest.is_empty() {
        if let Ok(found) = tracepoint::expand_tracepoints(&format!("{ty}:{rest}"), &LiveKernel) {
            if !found.is_empty() {
                msg.push_str(&format!("; did you mean tracepoint:{ty}:{rest}?"));
                return msg;
            }
        }
    }
    let hint = suggest(ty, spec::type_names());
    if let Some(h) = hint.first() {
        msg.push_str(&format!("; did you mean {h}:{rest}?"));
    } else {
        let names: Vec<&str> = spec::type_names().collect();
        msg.push_str(&format!(" (known: {})", names.join(", ")));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names() {
        assert!(unknown_type("tracepiont", "x:y").contains("did you mean tracepoint:x:y"));
        assert_eq!(Kind::Usdt.name(), "usdt");
    }
}
