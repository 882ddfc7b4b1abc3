//! `-l [PATTERN]`: list probes one per line as bpftrace prints them; `-lv`
//! adds details (tracepoint format fields, BTF arguments of raw tracepoints
//! and tp_btf, USDT argument specs).
//!
//! PATTERN is `TYPE:REST` (TYPE a probe type or its alias, or a wildcard
//! over type names), a comma list of those, or a bare word, which matches
//! the name part of every probe that needs no binary (tracepoints, raw
//! tracepoints, software/hardware events, kernel functions where kprobes or
//! fentry work here). `*` and `?` work in every part. uprobe/usdt listings
//! need a binary: `uprobe:/bin/bash:*read*`, `u:libc:get*`, `usdt:/path/bin`.
//! Output is sorted, one probe per line, with no duplicates.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{anyhow, bail, Result};

use crate::kernel::{tracefs, Kernel, LiveKernel};
use crate::probes::spec::{self, ProbeKind as Kind};
use crate::probes::{kernel_function, perf_event, rawtracepoint, tracepoint};
use crate::symbols::{self, elf::ElfFile};
use crate::util::similar::suggest;
use crate::util::wildcard::{has_wildcard, wildcard_match};

/// Listed probes: full name → detail lines printed under it with `-v`.
type Listing = BTreeMap<String, Vec<String>>;

/// What a bare word or a wildcard type searches: every kind listable
/// without naming a binary (return probes are listed under their entry kind).
const SEARCHED: &[Kind] =
    &[Kind::Tracepoint, Kind::RawTracepoint, Kind::Kprobe, Kind::Fentry, Kind::Software, Kind::Hardware];

pub fn run(pattern: Option<&str>, verbose: bool) -> Result<i32> {
    let pattern = pattern.map(str::trim).unwrap_or("");
    let items: Vec<&str> = pattern.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let items = if items.is_empty() { vec!["*"] } else { items };
    let mut listing = Listing::new();
    let mut notes: Vec<String> = Vec::new();
    for item in items {
        list_item(item, verbose, &mut listing, &mut notes)?;
    }
    notes.dedup();
    for n in &notes {
        eprintln!("rtrace: {n}");
    }
    // A closed pipe (`rtrace -l | head`) just ends the listing.
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    for (name, details) in &listing {
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

/// `s == pattern`, or a wildcard match when `pattern` has `*`/`?`.
fn matches(pattern: &str, s: &str) -> bool {
    if has_wildcard(pattern) {
        wildcard_match(pattern, s)
    } else {
        pattern == s
    }
}

fn or_star(s: &str) -> &str {
    if s.is_empty() {
        "*"
    } else {
        s
    }
}

fn list_item(item: &str, verbose: bool, out: &mut Listing, notes: &mut Vec<String>) -> Result<()> {
    let Some((ty, rest)) = item.split_once(':') else {
        // `-l tracepoint`, `-l software`: the whole type.
        if let Some(kind) = spec::type_names().any(|n| n == item).then(|| spec::kind_named(item)).flatten() {
            return list_kind(kind, "", verbose, true, out, notes);
        }
        // A bare word: the name part of every probe that needs no binary.
        for &kind in SEARCHED {
            let rest = if kind == Kind::Tracepoint { format!("*:{item}") } else { item.to_string() };
            if let Err(e) = list_kind(kind, &rest, verbose, false, out, notes) {
                notes.push(format!("{}: {e:#}", kind.name()));
            }
        }
        return Ok(());
    };
    if has_wildcard(ty) {
        for &kind in SEARCHED.iter().filter(|k| wildcard_match(ty, k.name())) {
            if let Err(e) = list_kind(kind, rest, verbose, false, out, notes) {
                notes.push(format!("{}: {e:#}", kind.name()));
            }
        }
        return Ok(());
    }
    let Some(kind) = spec::kind_named(ty) else {
        bail!("{}", unknown_type(ty, rest));
    };
    list_kind(kind, rest, verbose, true, out, notes)
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

/// List the probes of one kind matching `rest` (what follows `TYPE:`).
/// `explicit`: the type was named, so say why nothing can be listed.
fn list_kind(
    kind: Kind,
    rest: &str,
    verbose: bool,
    explicit: bool,
    out: &mut Listing,
    notes: &mut Vec<String>,
) -> Result<()> {
    match kind {
        Kind::Tracepoint => list_tracepoints(rest, verbose, out),
        Kind::RawTracepoint | Kind::TpBtf => {
            let name = or_star(rest.rsplit(':').next().unwrap_or(""));
            let btf = (&LiveKernel as &dyn Kernel).btf();
            let names = match (kind, btf) {
                (Kind::TpBtf, Some(b)) => crate::probes::tp_btf::matching(b, name),
                (Kind::TpBtf, None) => vec![],
                _ => rawtracepoint::expand_raw_tracepoints(name, &LiveKernel)?,
            };
            for n in names {
                let details = match btf.filter(|_| verbose).and_then(|b| Some((b, b.tracepoint_params(&n)?))) {
                    Some((b, ps)) => ps.iter().map(|p| field_decl(&p.name, &b.type_name(p.ty))).collect(),
                    None => vec![],
                };
                out.insert(format!("{}:{n}", kind.name()), details);
            }
            Ok(())
        }
        Kind::Software | Kind::Hardware => {
            let table = if kind == Kind::Software {
                perf_event::software_event_names()
            } else {
                perf_event::hardware_event_names()
            };
            let event = or_star(rest.split(':').next().unwrap_or(""));
            for (name, alias) in table {
                if matches(event, name) || (!alias.is_empty() && matches(event, alias)) {
                    out.entry(format!("{}:{name}:", kind.name())).or_default();
                }
            }
            Ok(())
        }
        Kind::Kprobe | Kind::Kretprobe | Kind::Fentry | Kind::Fexit => {
            list_kernel_functions(kind, rest, verbose, explicit, out, notes);
            Ok(())
        }
        Kind::Uprobe | Kind::Uretprobe => list_uprobes(kind, rest, explicit, out, notes),
        Kind::Usdt => list_usdt(rest, verbose, out),
        // bpftrace lists no profile/interval probes: they are rates, not places.
        // bpftrace lists no profile/interval probes; BEGIN/END are no listable type.
        Kind::Profile | Kind::Interval | Kind::Begin | Kind::End => Ok(()),
    }
}

fn list_tracepoints(rest: &str, verbose: bool, out: &mut Listing) -> Result<()> {
    let parts: Vec<&str> = rest.split(':').collect();
    let patterns: Vec<String> = match parts.as_slice() {
        [""] | ["*"] => vec!["*:*".into()],
        // One part: a category (`t:syscalls`) or an event name in any category.
        [one] => vec![format!("{one}:*"), format!("*:{one}")],
        [cat, name] => vec![format!("{}:{}", or_star(cat), or_star(name))],
        _ => bail!("-l: 'tracepoint:{rest}' has too many parts; write tracepoint:CATEGORY:NAME"),
    };
    for p in patterns {
        for (cat, name) in tracepoint::expand_tracepoints(&p, &LiveKernel)? {
            let key = format!("tracepoint:{cat}:{name}");
            if verbose && !out.contains_key(&key) {
                let details = match tracefs::read_format(&cat, &name) {
                    Ok(f) => f.event_fields().map(|f| field_decl(&f.name, &f.c_type)).collect(),
                    Err(e) => vec![format!("(cannot read the format: {e:#})")],
                };
                out.insert(key, details);
            } else {
                out.entry(key).or_default();
            }
        }
    }
    Ok(())
}

/// A format field as bpftrace prints it: `const char * filename`,
/// `char prev_comm[16]`, `__data_loc char[] name`.
fn field_decl(name: &str, c_type: &str) -> String {
    if c_type.starts_with("__data_loc") || c_type.starts_with("__rel_loc") {
        return format!("{c_type} {name}");
    }
    match c_type.find('[') {
        Some(open) if c_type.ends_with(']') => format!("{} {name}{}", c_type[..open].trim_end(), &c_type[open..]),
        _ => format!("{c_type} {name}"),
    }
}

/// kprobe/kretprobe/fentry/fexit: kernel functions, only where this kernel
/// can attach them.
fn list_kernel_functions(
    kind: Kind,
    rest: &str,
    verbose: bool,
    explicit: bool,
    out: &mut Listing,
    notes: &mut Vec<String>,
) {
    let available = match kind {
        Kind::Kprobe | Kind::Kretprobe => crate::kernel::sys::kprobes_available(),
        _ => crate::kernel::sys::fentry_available(),
    };
    // `kprobe:vmlinux:FN` / `kprobe:FN+OFF`: the function name part.
    let func = rest.rsplit(':').next().unwrap_or("");
    let func = or_star(func.split('+').next().unwrap_or(""));
    if !available {
        if explicit {
            let why = match kind {
                Kind::Kprobe | Kind::Kretprobe => {
                    "this kernel has no kprobes (CONFIG_KPROBES is off), so there are no kprobe probes to list"
                }
                _ => "this kernel refuses fentry/fexit programs, so there are no fentry probes to list",
            };
            let ret = matches!(kind, Kind::Kretprobe | Kind::Fexit);
            let instead = if has_wildcard(func) { None } else { kernel_function::alternative(func, ret, &LiveKernel) };
            let hint = match instead {
                Some(tp) => format!("; {tp} covers {func}"),
                None => "; see rtrace -l 'tracepoint:*'".to_string(),
            };
            notes.push(format!("{why}{hint}"));
        }
        return;
    }
    let btf = if verbose { (&LiveKernel as &dyn Kernel).btf() } else { None };
    for f in kernel_function::function_names().iter().filter(|f| matches(func, f)) {
        // -lv: the BTF signature (`struct file * file`, ..., `ssize_t retval`).
        let details = match btf.and_then(|b| b.function_params(f).map(|p| (b, p))) {
            Some((b, (params, ret))) => {
                let mut d: Vec<String> = params.iter().map(|p| field_decl(&p.name, &b.type_name(p.ty))).collect();
                if matches!(kind, Kind::Kretprobe | Kind::Fexit) {
                    d.push(field_decl("retval", &b.type_name(ret)));
                }
                d
            }
            None => vec![],
        };
        out.insert(format!("{}:{f}", kind.name()), details);
    }
}

/// The binary named in `-l 'uprobe:BIN:...'` / `'usdt:BIN...'`.
fn binary(kind: Kind, bin: &str, rest: &str) -> Result<std::path::PathBuf> {
    if bin.is_empty() || has_wildcard(bin) {
        bail!("-l: {} probes are listed per binary: give one, e.g. -l '{}:/bin/bash:*'", kind.name(), kind.name());
    }
    symbols::resolve_binary(bin, None).map_err(|e| anyhow!("{}:{rest}: {e}", kind.name()))
}

fn list_uprobes(kind: Kind, rest: &str, explicit: bool, out: &mut Listing, notes: &mut Vec<String>) -> Result<()> {
    let (bin, func) = rest.split_once(':').unwrap_or((rest, ""));
    let func = or_star(func.split('+').next().unwrap_or(""));
    let path = binary(kind, bin, rest)?;
    let elf = ElfFile::open(&path).map_err(|e| anyhow!("{}:{rest}: {e:#}", kind.name()))?;
    let functions = elf.functions()?;
    if functions.is_empty() && explicit {
        notes.push(format!("{} has no function symbols (stripped?)", path.display()));
    }
    let shown = path.to_string_lossy();
    for f in functions.iter().filter(|f| matches(func, &f.name)) {
        out.entry(format!("{}:{shown}:{}", kind.name(), f.name)).or_default();
    }
    Ok(())
}

/// One USDT probe note: provider, name and argument specs as written.
struct UsdtNote {
    provider: String,
    name: String,
    args: String,
}

fn usdt_notes(elf: &ElfFile) -> Result<Vec<UsdtNote>> {
    let mut out = Vec::new();
    for note in elf.notes(".note.stapsdt")? {
        if note.name != b"stapsdt" || note.n_type != 3 || note.desc.len() < 24 {
            continue;
        }
        let mut strings = note.desc[24..].split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
        let provider = strings.next().unwrap_or_default();
        let name = strings.next().unwrap_or_default();
        let args = strings.next().unwrap_or_default();
        out.push(UsdtNote { provider, name, args });
    }
    Ok(out)
}

fn list_usdt(rest: &str, verbose: bool, out: &mut Listing) -> Result<()> {
    let parts: Vec<&str> = rest.split(':').collect();
    let (bin, provider, name) = match parts.as_slice() {
        [bin] => (*bin, "*", "*"),
        [bin, name] => (*bin, "*", or_star(name)),
        [bin, provider, name] => (*bin, or_star(provider), or_star(name)),
        _ => bail!("-l: 'usdt:{rest}' has too many parts; write usdt:BINARY[:[PROVIDER:]NAME]"),
    };
    let path = binary(Kind::Usdt, bin, rest)?;
    let elf = ElfFile::open(&path).map_err(|e| anyhow!("usdt:{rest}: {e:#}"))?;
    let shown = path.to_string_lossy();
    for n in usdt_notes(&elf)? {
        if !matches(provider, &n.provider) || !matches(name, &n.name) {
            continue;
        }
        let key = format!("usdt:{shown}:{}:{}", n.provider, n.name);
        // One name may have several sites; the first one's arguments are shown.
        if out.contains_key(&key) {
            continue;
        }
        let details = if verbose {
            n.args.split_whitespace().enumerate().map(|(i, a)| format!("arg{i}: {a}")).collect()
        } else {
            vec![]
        };
        out.insert(key, details);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_declarations() {
        assert_eq!(field_decl("filename", "const char *"), "const char * filename");
        assert_eq!(field_decl("prev_comm", "char[16]"), "char prev_comm[16]");
        assert_eq!(field_decl("name", "__data_loc char[]"), "__data_loc char[] name");
        assert_eq!(field_decl("args", "unsigned long[6]"), "unsigned long args[6]");
        assert_eq!(field_decl("m", "u8[2][4]"), "u8 m[2][4]");
    }

    #[test]
    fn type_names() {
        assert!(unknown_type("tracepiont", "x:y").contains("did you mean tracepoint:x:y"));
        assert_eq!(Kind::Usdt.name(), "usdt");
        assert!(matches("sys_*", "sys_read"));
        assert!(matches("read", "read"));
        assert!(!matches("read", "readv"));
    }
}
