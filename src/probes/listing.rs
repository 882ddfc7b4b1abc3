//! What `-l` asks of a probe type ([`super::ProbeType::list`]) and the
//! helpers the types share: the listing (full probe name → detail lines
//! shown with `-v`), matching a part of the pattern, naming a binary.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};

use crate::util::wildcard::{has_wildcard, wildcard_match};

/// One `-l` item for one probe type: what follows `TYPE:`.
pub struct ListQuery<'a> {
    pub rest: &'a str,
    /// `-lv`: with details (format fields, BTF arguments, USDT operands).
    pub verbose: bool,
    /// The type was named (not a wildcard or a bare word): say why nothing
    /// can be listed, and a pattern that doesn't fit the type is an error.
    pub explicit: bool,
    /// `-p PID`: `*` (or no binary) names every file that process has mapped.
    pub pid: Option<i32>,
}

/// Probes found: full name → detail lines; and notes (why a type lists
/// nothing here), printed on stderr.
#[derive(Default)]
pub struct Listing {
    pub probes: BTreeMap<String, Vec<String>>,
    pub notes: Vec<String>,
}

impl Listing {
    /// Add a probe with no details (kept if already listed with some).
    pub fn add(&mut self, name: String) {
        self.probes.entry(name).or_default();
    }

    pub fn add_with(&mut self, name: String, details: Vec<String>) {
        self.probes.insert(name, details);
    }

    pub fn extend(&mut self, other: Listing) {
        for (name, details) in other.probes {
            match self.probes.get(&name) {
                Some(d) if !d.is_empty() => {}
                _ => {
                    self.probes.insert(name, details);
                }
            }
        }
        self.notes.extend(other.notes);
    }
}

/// `s == pattern`, or a wildcard match when `pattern` has `*`/`?`.
pub fn matches(pattern: &str, s: &str) -> bool {
    if has_wildcard(pattern) {
        wildcard_match(pattern, s)
    } else {
        pattern == s
    }
}

/// `*` for an empty part.
pub fn or_star(s: &str) -> &str {
    if s.is_empty() {
        "*"
    } else {
        s
    }
}

/// The name part of a kernel-side pattern: `NAME` or `MODULE:NAME`
/// (`vmlinux:vfs_read`, `sched:sched_switch`); None when the pattern has a
/// path or more parts, so it names no kernel probe (`*:./prog:*`).
pub fn kernel_name(rest: &str) -> Option<&str> {
    match rest.split(':').collect::<Vec<_>>().as_slice() {
        [name] => Some(or_star(name)),
        [module, name] if !module.contains('/') => Some(or_star(name)),
        _ => None,
    }
}

/// A format field as bpftrace prints it: `const char * filename`,
/// `char prev_comm[16]`, `__data_loc char[] name`.
pub fn field_decl(name: &str, c_type: &str) -> String {
    if c_type.starts_with("__data_loc") || c_type.starts_with("__rel_loc") {
        return format!("{c_type} {name}");
    }
    match c_type.find('[') {
        Some(open) if c_type.ends_with(']') => format!("{} {name}{}", c_type[..open].trim_end(), &c_type[open..]),
        _ => format!("{c_type} {name}"),
    }
}

/// The binaries a `-l 'uprobe:BIN:...'` / `'usdt:BIN...'` item names (BIN
/// may have wildcards in a path: `./bin/prog*`; with `-p PID`, `*` is every
/// file that process has mapped). None when the item is not explicit and
/// BIN is no path (a bare word or `*:NAME` searches no binary).
pub fn binaries(kind: &str, bin: &str, q: &ListQuery) -> Result<Option<Vec<PathBuf>>> {
    if let (Some(pid), true, true) = (q.pid, q.explicit, bin == "*" || bin.is_empty()) {
        return crate::symbols::mapped_objects(pid).map(Some).map_err(|e| anyhow!("-l {kind}: -p {pid}: {e}"));
    }
    if !q.explicit && !bin.contains('/') {
        return Ok(None);
    }
    if bin.is_empty() || (has_wildcard(bin) && !bin.contains('/')) {
        bail!(
            "-l: {kind} probes are listed per binary: give one, e.g. -l '{kind}:/bin/bash:*' or '{kind}:./bin/prog*:*', or add -p PID to list those of every file a process has mapped"
        );
    }
    let found = crate::symbols::resolve_binaries(bin, q.pid).map_err(|e| anyhow!("{kind}:{}: {e}", q.rest))?;
    Ok(Some(found))
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
    fn names() {
        assert!(matches("sys_*", "sys_read"));
        assert!(matches("read", "read"));
        assert!(!matches("read", "readv"));
        assert_eq!(kernel_name("vfs_*"), Some("vfs_*"));
        assert_eq!(kernel_name("vmlinux:vfs_read"), Some("vfs_read"));
        assert_eq!(kernel_name("./prog:*"), None);
        assert_eq!(kernel_name(""), Some("*"));
    }
}
