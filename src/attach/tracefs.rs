//! tracefs access: locating (and when needed mounting) tracefs, parsing
//! tracepoint `format` files, listing and wildcard-expanding tracepoints and
//! raw tracepoints, and "did you mean" suggestions for unknown names.
//!
//! Everything here reads as little as possible: the tracefs root and the full
//! tracepoint / raw tracepoint lists are computed once per process and cached,
//! a literal `category:name` is checked with a single `stat`, and a wildcard
//! within one literal category reads only that category's directory.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Where tracefs is mounted on current kernels, and where this module mounts it.
const TRACEFS_MOUNT_POINT: &str = "/sys/kernel/tracing";
/// Legacy location, automounted by the kernel when debugfs is mounted.
const DEBUGFS_TRACING_DIR: &str = "/sys/kernel/debug/tracing";
const DEBUGFS_MOUNT_POINT: &str = "/sys/kernel/debug";
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
const BTF_DIR: &str = "/sys/kernel/btf";
const BTF_MAGIC: u16 = 0xeb9f;
const BTF_TRACE_PREFIX: &[u8] = b"btf_trace_";

/// Tracefs event categories that have no raw tracepoint of the same name
/// (syscall events are synthesized from `raw_syscalls:sys_enter`/`sys_exit`,
/// the rest are dynamic events). Used only when BTF is unavailable.
const NON_RAW_CATEGORIES: &[&str] =
    &["syscalls", "ftrace", "kprobes", "uprobes", "synthetic", "eprobes", "fprobes", "tracepoints"];

/// Category of ftrace's own events (`ftrace:function`, ...): they are not in
/// `available_events` and cannot take BPF programs, so wildcards skip them.
const FTRACE_INTERNAL_CATEGORY: &str = "ftrace";

static TRACEFS_ROOT: OnceLock<PathBuf> = OnceLock::new();
/// Serializes the first lookup so concurrent callers never mount twice.
static TRACEFS_ROOT_LOOKUP: Mutex<()> = Mutex::new(());
static TRACEPOINT_LIST: OnceLock<Vec<(String, String)>> = OnceLock::new();
static RAW_TRACEPOINT_LIST: OnceLock<Vec<String>> = OnceLock::new();

// ---------------------------------------------------------------------------
// tracefs root
// ---------------------------------------------------------------------------

/// The tracefs root directory (e.g. `/sys/kernel/tracing`), cached after the
/// first success. Checks `/sys/kernel/tracing`, then `/sys/kernel/debug/tracing`,
/// then any tracefs listed in `/proc/self/mounts`; if none is found, mounts
/// tracefs at `/sys/kernel/tracing` (this needs root or CAP_SYS_ADMIN).
pub fn tracefs_root() -> Result<PathBuf> {
    if let Some(root) = TRACEFS_ROOT.get() {
        return Ok(root.clone());
    }
    let _lookup = TRACEFS_ROOT_LOOKUP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(root) = TRACEFS_ROOT.get() {
        return Ok(root.clone());
    }
    let root = locate_or_mount_tracefs()?;
    Ok(TRACEFS_ROOT.get_or_init(|| root).clone())
}

fn locate_or_mount_tracefs() -> Result<PathBuf> {
    let mut access_error: Option<anyhow::Error> = None;
    for dir in [TRACEFS_MOUNT_POINT, DEBUGFS_TRACING_DIR] {
        match probe_tracefs_dir(Path::new(dir)) {
            Ok(true) => return Ok(PathBuf::from(dir)),
            Ok(false) => {}
            Err(e) => {
                access_error.get_or_insert(e);
            }
        }
    }
    if let Some(dir) = tracefs_from_mount_table() {
        if let Ok(true) = probe_tracefs_dir(&dir) {
            return Ok(dir);
        }
    }
    // tracefs exists but is unreadable by us: mounting again would not help.
    if let Some(e) = access_error {
        return Err(e);
    }
    mount_tracefs()
}

/// Ok(true) when `dir` is a usable tracefs (has `events/`), Ok(false) when it
/// is simply absent/empty, Err when it exists but cannot be accessed.
fn probe_tracefs_dir(dir: &Path) -> Result<bool> {
    let events = dir.join("events");
    match std::fs::metadata(&events) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            bail!("cannot access {}: permission denied (reading tracefs needs root)", events.display())
        }
        Err(_) => Ok(false),
    }
}

/// A tracefs mounted somewhere unusual, from `/proc/self/mounts`.
fn tracefs_from_mount_table() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        let _source = parts.next()?;
        let target = parts.next()?;
        let fstype = parts.next()?;
        (fstype == "tracefs").then(|| PathBuf::from(unescape_mount_path(target)))
    })
}

/// `/proc/mounts` escapes space, tab, newline and backslash as octal `\NNN`.
fn unescape_mount_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(value) = u8::try_from(value) {
                    out.push(value);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mount_tracefs() -> Result<PathBuf> {
    match mount_fs("tracefs", TRACEFS_MOUNT_POINT) {
        Ok(()) => {
            if probe_tracefs_dir(Path::new(TRACEFS_MOUNT_POINT))? {
                return Ok(PathBuf::from(TRACEFS_MOUNT_POINT));
            }
            bail!("mounted tracefs at {TRACEFS_MOUNT_POINT} but it has no events/ directory")
        }
        Err(err) => match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => bail!(
                "tracefs is not mounted and mounting it needs root or CAP_SYS_ADMIN \
                 (or run: mount -t tracefs tracefs {TRACEFS_MOUNT_POINT})"
            ),
            Some(libc::ENODEV) => {
                bail!("this kernel has no tracefs (built without CONFIG_FTRACE/CONFIG_TRACING?)")
            }
            Some(libc::ENOENT) => mount_debugfs_tracing()
                .with_context(|| format!("tracefs is not mounted and {TRACEFS_MOUNT_POINT} does not exist")),
            _ => bail!("tracefs is not mounted and mounting it at {TRACEFS_MOUNT_POINT} failed: {err}"),
        },
    }
}

/// Old kernels have no /sys/kernel/tracing; their tracing dir lives in debugfs.
fn mount_debugfs_tracing() -> Result<PathBuf> {
    if let Err(err) = mount_fs("debugfs", DEBUGFS_MOUNT_POINT) {
        if err.raw_os_error() != Some(libc::EBUSY) {
            bail!("mounting debugfs at {DEBUGFS_MOUNT_POINT} failed: {err}");
        }
    }
    if probe_tracefs_dir(Path::new(DEBUGFS_TRACING_DIR))? {
        Ok(PathBuf::from(DEBUGFS_TRACING_DIR))
    } else {
        bail!("mounted debugfs but {DEBUGFS_TRACING_DIR} has no events/ directory")
    }
}

fn mount_fs(fstype: &str, target: &str) -> std::io::Result<()> {
    let source = CString::new(fstype).expect("no NUL in fs type");
    let target_c = CString::new(target).expect("no NUL in mount point");
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: all pointers are valid NUL-terminated strings or null (data).
    let rc = unsafe { libc::mount(source.as_ptr(), target_c.as_ptr(), source.as_ptr(), flags, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

// ---------------------------------------------------------------------------
// format files
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub enum FieldKind {
    /// Any integer width/sign (also enums, bool, integer typedefs): see `size` and `signed`.
    Int,
    /// Fixed-size `char foo[16]` (a NUL-padded string such as `comm`).
    CharArray,
    /// `__data_loc char[] foo`: the u32 holds `len << 16 | offset from record start`.
    DataLocString,
    /// Any other `__data_loc` field (same u32 encoding, non-string payload).
    DataLocArray,
    /// A pointer. `user` is set for `__user` pointers and for every pointer in
    /// the `syscalls` category (the format files drop the `__user` annotation
    /// there, but all syscall pointer arguments are user pointers).
    /// `to_char` is set for `char *` / `const char *` (one level of pointer).
    Pointer { user: bool, to_char: bool },
    /// Arrays of non-char elements, structs, `__rel_loc` fields, odd sizes.
    Other,
}

#[derive(Clone, Debug)]
pub struct FormatField {
    /// Field name without any array suffix (`comm` for `char comm[16]`).
    pub name: String,
    /// C type as written, with the array suffix moved here (`char[16]`,
    /// `unsigned long[6]`, `__data_loc char[]`, `const char *`).
    pub c_type: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
    pub kind: FieldKind,
    /// One of the common header fields (`common_type`, `common_flags`,
    /// `common_preempt_count`, `common_pid`).
    pub common: bool,
}

#[cfg(test)]
impl FormatField {
    /// Element count of an array field (`Some(16)` for `char[16]`, `Some(0)`
    /// for a flexible `u32[]`), `None` for non-arrays and `__data_loc` fields.
    pub fn array_len(&self) -> Option<u32> {
        if self.c_type.starts_with("__data_loc") || self.c_type.starts_with("__rel_loc") {
            return None;
        }
        let open = self.c_type.rfind('[')?;
        let inner = self.c_type[open + 1..].strip_suffix(']')?.trim();
        if inner.is_empty() {
            Some(0)
        } else {
            inner.parse().ok()
        }
    }
}

#[derive(Clone, Debug)]
pub struct TracepointFormat {
    pub category: String,
    pub name: String,
    /// The tracepoint's perf event id (attaching reads only the id file).
    #[cfg_attr(not(test), allow(dead_code))]
    pub id: u32,
    /// All fields in file order, common header fields first.
    pub fields: Vec<FormatField>,
}

impl TracepointFormat {
    pub fn field(&self, name: &str) -> Option<&FormatField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The event's own fields, without the common header.
    pub fn event_fields(&self) -> impl Iterator<Item = &FormatField> {
        self.fields.iter().filter(|f| !f.common)
    }
}

/// Read and parse `events/<category>/<name>/format`. An unknown tracepoint
/// gives a one-line error with up to three close names.
pub fn read_format(category: &str, name: &str) -> Result<TracepointFormat> {
    check_path_component(category, "tracepoint category")?;
    check_path_component(name, "tracepoint name")?;
    let root = tracefs_root()?;
    let path = root.join("events").join(category).join(name).join("format");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!("{}", unknown_tracepoint_message(category, name))
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            bail!("cannot read {}: permission denied (needs root)", path.display())
        }
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    };
    parse_format(category, name, &text)
}

/// The perf event id of a tracepoint (`events/<category>/<name>/id`):
/// what attaching needs, without reading and parsing the whole format.
pub fn tracepoint_id(category: &str, name: &str) -> Result<u32> {
    check_path_component(category, "tracepoint category")?;
    check_path_component(name, "tracepoint name")?;
    let path = tracefs_root()?.join("events").join(category).join(name).join("id");
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| anyhow::anyhow!("bad tracepoint id in {}", path.display())),
        Err(e) if e.kind() == ErrorKind::NotFound => bail!("{}", unknown_tracepoint_message(category, name)),
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    }
}

/// Parse the text of a tracepoint `format` file.
pub fn parse_format(category: &str, name: &str, text: &str) -> Result<TracepointFormat> {
    let mut id = None;
    let mut fields = Vec::new();
    let mut in_format = false;
    let mut in_common_block = true;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(value) = trimmed.strip_prefix("ID:") {
            let value = value.trim();
            id =
                Some(value.parse::<u32>().with_context(|| format!("bad ID '{value}' in format of {category}:{name}"))?);
        } else if trimmed == "format:" {
            in_format = true;
        } else if trimmed.starts_with("print fmt:") {
            break;
        } else if in_format && trimmed.is_empty() {
            if !fields.is_empty() {
                in_common_block = false;
            }
        } else if in_format {
            let field = parse_field_line(category, trimmed, in_common_block)
                .with_context(|| format!("cannot parse format of {category}:{name}, line '{trimmed}'"))?;
            if let Some(field) = field {
                fields.push(field);
            }
        }
    }
    let Some(id) = id else {
        bail!("format of {category}:{name} has no ID line");
    };
    Ok(TracepointFormat { category: category.to_string(), name: name.to_string(), id, fields })
}

/// `field:const char * filename;\toffset:24;\tsize:8;\tsigned:0;`
/// Returns None for lines that are not field lines.
fn parse_field_line(category: &str, line: &str, in_common_block: bool) -> Result<Option<FormatField>> {
    let Some(rest) = line.strip_prefix("field:").or_else(|| line.strip_prefix("field special:")) else {
        return Ok(None);
    };
    let mut parts = rest.split(';');
    let declaration = parts.next().unwrap_or("").trim();
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in parts {
        let Some((key, value)) = part.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "offset" => offset = Some(value.parse::<u32>().context("bad offset")?),
            "size" => size = Some(value.parse::<u32>().context("bad size")?),
            "signed" => signed = value == "1",
            _ => {}
        }
    }
    let (Some(offset), Some(size)) = (offset, size) else {
        bail!("missing offset or size");
    };
    let (base_type, array_suffix, name) = split_declaration(declaration)?;
    let kind = classify_field(category, base_type, array_suffix, size);
    let c_type = if array_suffix.is_empty() { base_type.to_string() } else { format!("{base_type}{array_suffix}") };
    let common = in_common_block && name.starts_with("common_");
    Ok(Some(FormatField { name: name.to_string(), c_type, offset, size, signed, kind, common }))
}

/// Split `unsigned long args[6]` into ("unsigned long", "[6]", "args").
fn split_declaration(declaration: &str) -> Result<(&str, &str, &str)> {
    let mut decl = declaration.trim();
    let mut array_suffix = "";
    if decl.ends_with(']') {
        if let Some(open) = decl.rfind('[') {
            array_suffix = &decl[open..];
            decl = decl[..open].trim_end();
        }
    }
    let name_start = decl.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_').len();
    let name = &decl[name_start..];
    let base_type = decl[..name_start].trim_end();
    if name.is_empty() || base_type.is_empty() {
        bail!("cannot split '{declaration}' into type and name");
    }
    Ok((base_type, array_suffix, name))
}

fn classify_field(category: &str, base_type: &str, array_suffix: &str, size: u32) -> FieldKind {
    if let Some(element) = base_type.strip_prefix("__data_loc") {
        return if strip_qualifiers(element.trim().trim_end_matches("[]")) == "char" {
            FieldKind::DataLocString
        } else {
            FieldKind::DataLocArray
        };
    }
    if base_type.starts_with("__rel_loc") {
        return FieldKind::Other;
    }
    if !array_suffix.is_empty() {
        return if strip_qualifiers(base_type) == "char" && !base_type.contains('*') {
            FieldKind::CharArray
        } else {
            FieldKind::Other
        };
    }
    if let Some(star) = base_type.find('*') {
        let user = base_type.contains("__user") || category == "syscalls";
        let single_level = base_type.matches('*').count() == 1;
        let to_char = single_level && strip_qualifiers(&base_type[..star]) == "char";
        return FieldKind::Pointer { user, to_char };
    }
    if base_type.starts_with("struct ") || base_type.starts_with("union ") {
        return FieldKind::Other;
    }
    match size {
        1 | 2 | 4 | 8 => FieldKind::Int,
        _ => FieldKind::Other,
    }
}

/// `const char __user ` -> `char`; keeps `unsigned char` distinct from `char`.
fn strip_qualifiers(c_type: &str) -> String {
    c_type
        .split_whitespace()
        .filter(|word| !matches!(*word, "const" | "volatile" | "__user" | "__rcu" | "__percpu"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn check_path_component(part: &str, what: &str) -> Result<()> {
    if part.is_empty() || part == "." || part == ".." || part.contains('/') || part.contains('\0') {
        bail!("invalid {what} '{part}'");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// listing and wildcard expansion
// ---------------------------------------------------------------------------

#[cfg(test)]
/// All tracepoints as sorted (category, name) pairs, from `available_events`
/// (falling back to walking `events/`). Cached for the process lifetime.
pub fn list_tracepoints() -> Result<Vec<(String, String)>> {
    Ok(cached_tracepoints()?.clone())
}

fn cached_tracepoints() -> Result<&'static Vec<(String, String)>> {
    if let Some(list) = TRACEPOINT_LIST.get() {
        return Ok(list);
    }
    let root = tracefs_root()?;
    let list = match read_available_events(&root) {
        Ok(list) => list,
        Err(_) => walk_events_dir(&root)?,
    };
    Ok(TRACEPOINT_LIST.get_or_init(|| list))
}

fn read_available_events(root: &Path) -> Result<Vec<(String, String)>> {
    let path = root.join("available_events");
    let mut file = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut text = String::with_capacity(128 * 1024);
    file.read_to_string(&mut text).with_context(|| format!("cannot read {}", path.display()))?;
    let mut list: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(category, name)| (category.to_string(), name.to_string()))
        .collect();
    list.sort_unstable();
    list.dedup();
    Ok(list)
}

fn walk_events_dir(root: &Path) -> Result<Vec<(String, String)>> {
    let events = root.join("events");
    let entries = std::fs::read_dir(&events).with_context(|| format!("cannot list {}", events.display()))?;
    let mut list = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let category = entry.file_name().to_string_lossy().into_owned();
        for name in category_event_names(root, &category) {
            list.push((category.clone(), name));
        }
    }
    list.sort_unstable();
    Ok(list)
}

/// Event directory names inside one category; empty when it does not exist.
fn category_event_names(root: &Path, category: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("events").join(category)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Expand a bpftrace-style pattern `category:name`, where either part may
/// contain `*` and `?`, or a comma list `a:b,c:d`. A part without `:` matches
/// that name in any category. Results are sorted and deduplicated; an unknown
/// category or name simply yields nothing.
pub fn expand_tracepoints(pattern: &str) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for item in pattern.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let (category_pattern, name_pattern) = match item.split_once(':') {
            Some((category, name)) => (category, name),
            None => ("*", item),
        };
        if name_pattern.contains(':') || category_pattern.is_empty() || name_pattern.is_empty() {
            bail!("invalid tracepoint pattern '{item}' (expected category:name)");
        }
        expand_one_tracepoint(category_pattern, name_pattern, &mut found)?;
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

fn expand_one_tracepoint(category_pattern: &str, name_pattern: &str, found: &mut Vec<(String, String)>) -> Result<()> {
    let category_is_literal = !has_wildcard(category_pattern);
    let name_is_literal = !has_wildcard(name_pattern);
    if category_is_literal && (category_pattern.contains('/') || category_pattern.starts_with('.')) {
        return Ok(());
    }
    if category_is_literal && name_is_literal {
        if name_pattern.contains('/') || name_pattern.starts_with('.') {
            return Ok(());
        }
        let root = tracefs_root()?;
        let dir = root.join("events").join(category_pattern).join(name_pattern);
        if dir.join("format").exists() {
            found.push((category_pattern.to_string(), name_pattern.to_string()));
        }
    } else if category_is_literal {
        if category_pattern == FTRACE_INTERNAL_CATEGORY {
            return Ok(());
        }
        let root = tracefs_root()?;
        for name in category_event_names(&root, category_pattern) {
            if wildcard_match(name_pattern, &name) {
                found.push((category_pattern.to_string(), name));
            }
        }
    } else {
        for (category, name) in cached_tracepoints()? {
            if wildcard_match(category_pattern, category) && wildcard_match(name_pattern, name) {
                found.push((category.clone(), name.clone()));
            }
        }
    }
    Ok(())
}

/// Raw tracepoint names usable with BPF_RAW_TRACEPOINT_OPEN, sorted.
///
/// Taken from the `btf_trace_<name>` typedefs in `/sys/kernel/btf/vmlinux`
/// (mmapped and walked type by type where the kernel allows it, else its
/// string section is read and scanned) and in module BTF files under
/// `/sys/kernel/btf/` (string sections scanned). This includes bare
/// tracepoints that have no tracefs event (e.g. `sched_update_nr_running_tp`).
/// Without BTF, falls back to tracefs event names (the raw tracepoint name is
/// the event name, e.g. `sys_enter` for `raw_syscalls:sys_enter`), minus the
/// `syscalls` category and dynamic-event categories. Cached for the process.
pub fn list_raw_tracepoints() -> Result<Vec<String>> {
    Ok(cached_raw_tracepoints()?.clone())
}

fn cached_raw_tracepoints() -> Result<&'static Vec<String>> {
    if let Some(list) = RAW_TRACEPOINT_LIST.get() {
        return Ok(list);
    }
    let list = match raw_tracepoints_from_btf() {
        Ok(list) if !list.is_empty() => list,
        _ => raw_tracepoints_from_tracefs()?,
    };
    Ok(RAW_TRACEPOINT_LIST.get_or_init(|| list))
}

fn raw_tracepoints_from_btf() -> Result<Vec<String>> {
    let mut names = Vec::new();
    btf_trace_names(Path::new(VMLINUX_BTF), true, &mut names)?;
    if let Ok(entries) = std::fs::read_dir(BTF_DIR) {
        for entry in entries.flatten() {
            if entry.file_name() != "vmlinux" {
                // A module BTF that cannot be read only loses that module's names.
                let _ = btf_trace_names(&entry.path(), false, &mut names);
            }
        }
    }
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// Append the raw tracepoint names (`btf_trace_<name>`) found in one BTF file.
/// vmlinux BTF can be mmapped on recent kernels (no copy, tens of µs) and,
/// being self-contained (`self_contained`), walked type by type; module
/// (split) BTF and older kernels get their string section read and scanned.
fn btf_trace_names(path: &Path, self_contained: bool, names: &mut Vec<String>) -> Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    if let Some(mapping) = ReadOnlyMapping::new(&file) {
        if self_contained {
            if let Some(found) = btf_trace_typedef_names(mapping.bytes()) {
                names.extend(found);
                return Ok(());
            }
        }
        if let Some(strings) = btf_string_section(mapping.bytes()) {
            collect_btf_trace_names(strings, names);
            return Ok(());
        }
    }
    let mut header = [0u8; 24];
    file.read_exact_at(&mut header, 0).with_context(|| format!("cannot read BTF header of {}", path.display()))?;
    let Some((strings_start, strings_len)) = btf_string_section_range(&header) else {
        bail!("{} is not little-endian BTF", path.display());
    };
    let mut strings = vec![0u8; strings_len];
    file.read_exact_at(&mut strings, strings_start as u64)
        .with_context(|| format!("cannot read BTF strings of {}", path.display()))?;
    collect_btf_trace_names(&strings, names);
    Ok(())
}

/// (file offset, length) of the string section, from a BTF header.
fn btf_string_section_range(header: &[u8]) -> Option<(usize, usize)> {
    let word = |at: usize| -> Option<usize> {
        let bytes = header.get(at..at + 4)?;
        Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    };
    if header.len() < 24 || u16::from_le_bytes([header[0], header[1]]) != BTF_MAGIC {
        return None;
    }
    let (header_len, strings_offset, strings_len) = (word(4)?, word(16)?, word(20)?);
    Some((header_len.checked_add(strings_offset)?, strings_len))
}

/// Names of the `btf_trace_<name>` typedefs, found by walking the type
/// section record by record, so only typedef names are looked at. Only for
/// self-contained BTF (vmlinux): split module BTF numbers its strings after
/// the base's. None when the data has a kind this walk does not know;
/// callers then fall back to scanning the string section.
fn btf_trace_typedef_names(btf: &[u8]) -> Option<Vec<String>> {
    const KIND_TYPEDEF: u32 = 8;
    let read_u32 = |at: usize| -> Option<u32> {
        let bytes = btf.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    };
    let strings = btf_string_section(btf)?;
    let header_len = read_u32(4)? as usize;
    let types_start = header_len.checked_add(read_u32(8)? as usize)?;
    let types_end = types_start.checked_add(read_u32(12)? as usize)?;
    if types_end > btf.len() {
        return None;
    }
    let mut names = Vec::new();
    let mut pos = types_start;
    while pos < types_end {
        let name_offset = read_u32(pos)? as usize;
        let info = read_u32(pos + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let extra = match kind {
            1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
            2 | 7..=12 | 16 | 18 => 0,    // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
            3 => 12,                      // ARRAY
            4 | 5 | 15 | 19 => vlen * 12, // STRUCT, UNION, DATASEC, ENUM64
            6 | 13 => vlen * 8,           // ENUM, FUNC_PROTO
            _ => return None,
        };
        if kind == KIND_TYPEDEF {
            let name = strings.get(name_offset..)?;
            if let Some(rest) = name.strip_prefix(BTF_TRACE_PREFIX) {
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                if end > 0 {
                    names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
                }
            }
        }
        pos += 12 + extra;
    }
    (pos == types_end).then_some(names)
}

fn btf_string_section(btf: &[u8]) -> Option<&[u8]> {
    let (start, len) = btf_string_section_range(btf)?;
    btf.get(start..start.checked_add(len)?)
}

fn collect_btf_trace_names(strings: &[u8], names: &mut Vec<String>) {
    for start in find_prefixed_strings(strings, BTF_TRACE_PREFIX) {
        let rest = &strings[start + BTF_TRACE_PREFIX.len()..];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        if end > 0 {
            names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        }
    }
}

/// A private read-only mmap of a whole file, unmapped on drop.
struct ReadOnlyMapping {
    address: *mut libc::c_void,
    len: usize,
}

impl ReadOnlyMapping {
    fn new(file: &File) -> Option<ReadOnlyMapping> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh private read-only mapping of a file we hold open;
        // the kernel validates fd, length and protection.
        let address =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        (address != libc::MAP_FAILED).then_some(ReadOnlyMapping { address, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

impl Drop for ReadOnlyMapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region returned by mmap.
        unsafe {
            libc::munmap(self.address, self.len);
        }
    }
}

/// Start offsets of the NUL-separated strings in `table` that begin with
/// `prefix`. Boyer-Moore-Horspool over "\0prefix", so a multi-megabyte string
/// section is scanned in well under a millisecond.
fn find_prefixed_strings(table: &[u8], prefix: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    if table.starts_with(prefix) {
        starts.push(0);
    }
    let mut needle = Vec::with_capacity(prefix.len() + 1);
    needle.push(0u8);
    needle.extend_from_slice(prefix);
    let n = needle.len();
    if table.len() < n {
        return starts;
    }
    let mut skip = [n; 256];
    for (i, &b) in needle[..n - 1].iter().enumerate() {
        skip[b as usize] = n - 1 - i;
    }
    let mut pos = 0;
    while pos + n <= table.len() {
        let last = table[pos + n - 1];
        if last == needle[n - 1] && table[pos..pos + n] == needle[..] {
            starts.push(pos + 1);
        }
        pos += skip[last as usize];
    }
    starts
}

fn raw_tracepoints_from_tracefs() -> Result<Vec<String>> {
    let mut names: Vec<String> = cached_tracepoints()?
        .iter()
        .filter(|(category, _)| !NON_RAW_CATEGORIES.contains(&category.as_str()))
        .map(|(_, name)| name.clone())
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// Expand a raw tracepoint pattern (`*`/`?` wildcards, comma lists). A
/// `prefix:` before the name (a tracepoint category or module, as in
/// `sched:sched_switch` or `vmlinux:sched_switch`) is accepted and ignored.
/// Unknown names yield nothing. Sorted and deduplicated.
pub fn expand_raw_tracepoints(pattern: &str) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for item in pattern.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let name_pattern = item.rsplit_once(':').map_or(item, |(_, name)| name);
        if name_pattern.is_empty() {
            bail!("invalid raw tracepoint pattern '{item}'");
        }
        let all = cached_raw_tracepoints()?;
        if has_wildcard(name_pattern) {
            found.extend(all.iter().filter(|name| wildcard_match(name_pattern, name)).cloned());
        } else if all.binary_search_by(|name| name.as_str().cmp(name_pattern)).is_ok() {
            found.push(name_pattern.to_string());
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// True when `pattern` contains `*` or `?`.
pub fn has_wildcard(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Shell-style match of the whole `text`: `*` is any run of characters
/// (including none), `?` exactly one character.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pattern = pattern.as_bytes();
    let text = text.as_bytes();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None; // (pattern index after '*', text index)
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p + 1, t));
            p += 1;
        } else if let Some((after_star, star_text)) = star {
            p = after_star;
            t = star_text + 1;
            star = Some((after_star, star_text + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

// ---------------------------------------------------------------------------
// suggestions
// ---------------------------------------------------------------------------

/// The error for a probe pattern that matched nothing: the close names
/// when there are some (and the pattern has no wildcard), else that nothing
/// matches, with `listing` (e.g. ` (see ...)`) after it.
pub fn no_match(what: &str, pattern: &str, close: Vec<String>, listing: &str) -> anyhow::Error {
    if close.is_empty() || has_wildcard(pattern) {
        anyhow::anyhow!("no {what} matches '{pattern}'{listing}")
    } else {
        anyhow::anyhow!("unknown {what} '{pattern}'; did you mean {}?", close.join(", "))
    }
}

/// Up to 3 candidates close to `wanted`, best first (case-insensitive):
/// those within a small edit distance where they differ (an adjacent swap
/// counts as one edit), then those containing `wanted` or most of it. Only
/// when none of those exist, candidates sharing most letter pairs with it.
pub fn suggest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted = wanted.to_ascii_lowercase();
    let wanted_len = wanted.len();
    if wanted_len == 0 {
        return Vec::new();
    }
    let candidates: Vec<&'a str> = candidates.into_iter().collect();
    let max_distance = ((wanted_len + 2) / 4).max(1);
    // (tier, rank within tier, candidate); tier 0 = edit distance, 1 = containment
    let mut scored: Vec<(u8, usize, &'a str)> = Vec::new();
    for &candidate in &candidates {
        let lower = candidate.to_ascii_lowercase();
        let length_gap = lower.len().abs_diff(wanted_len);
        if length_gap <= max_distance {
            if let Some(distance) = close_name(&wanted, &lower, max_distance) {
                scored.push((0, distance, candidate));
                continue;
            }
        }
        // A fragment of a name, or a name with a little extra (not a mere prefix: `sys_enter`).
        let contains = (wanted_len >= 3 && lower.contains(&wanted))
            || (lower.len() >= 4 && lower.len() * 3 >= wanted_len * 2 && wanted.contains(&lower));
        if contains {
            scored.push((1, length_gap, candidate));
        }
    }
    if scored.is_empty() {
        // A weaker signal (tier 2): most letter pairs shared, as when parts
        // of a name are swapped (`enter_openat_sys`). A long shared prefix
        // alone (`syscalls:sys_enter_`) is not enough.
        for &candidate in &candidates {
            let similarity = strsim::sorensen_dice(&wanted, &candidate.to_ascii_lowercase());
            if similarity >= 0.85 {
                scored.push((2, ((1.0 - similarity) * 1000.0) as usize, candidate));
            }
        }
    }
    scored.sort_unstable_by(|a, b| (a.0, a.1, a.2.len(), a.2).cmp(&(b.0, b.1, b.2.len(), b.2)));
    let mut out: Vec<String> = Vec::new();
    for (_, _, candidate) in scored {
        if !out.iter().any(|seen| seen == candidate) {
            out.push(candidate.to_string());
            if out.len() == 3 {
                break;
            }
        }
    }
    out
}

/// Up to 3 known tracepoints (`category:name`) close to `wanted`, which may
/// be `category:name` or a bare name.
pub fn suggest_tracepoints(wanted: &str) -> Vec<String> {
    let Ok(list) = cached_tracepoints() else {
        return Vec::new();
    };
    // Right name, wrong or missing category comes first.
    let wanted_name = wanted.rsplit_once(':').map_or(wanted, |(_, name)| name);
    let mut out: Vec<String> = list
        .iter()
        .filter(|(_, name)| name == wanted_name)
        .map(|(category, name)| format!("{category}:{name}"))
        .filter(|full| full != wanted)
        .take(3)
        .collect();
    if out.is_empty() {
        let full_names: Vec<String> = list.iter().map(|(c, n)| format!("{c}:{n}")).collect();
        out = suggest(wanted, full_names.iter().map(String::as_str));
    }
    if out.is_empty() {
        let names = suggest(wanted_name, list.iter().map(|(_, n)| n.as_str()));
        out = names
            .iter()
            .filter_map(|name| list.iter().find(|(_, n)| n == name))
            .map(|(c, n)| format!("{c}:{n}"))
            .collect();
    }
    out
}

fn unknown_tracepoint_message(category: &str, name: &str) -> String {
    let suggestions = suggest_tracepoints(&format!("{category}:{name}"));
    if suggestions.is_empty() {
        format!("unknown tracepoint {category}:{name}")
    } else {
        format!("unknown tracepoint {category}:{name}, did you mean {}?", suggestions.join(", "))
    }
}

/// `a` and `b` without the prefix and suffix they share.
fn differing_parts<'a, 'b>(a: &'a [u8], b: &'b [u8]) -> (&'a [u8], &'b [u8]) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a.iter().rev().zip(b.iter().rev()).take(room).take_while(|(x, y)| x == y).count();
    (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix])
}

/// The edit distance (optimal string alignment: an adjacent swap is one
/// edit) between `wanted` and `candidate` when they are close: at most
/// `max_distance` edits, and few for the part where they differ (a shared
/// `sys_enter_` prefix does not make `nosuch` close to `mount`).
fn close_name(wanted: &str, candidate: &str, max_distance: usize) -> Option<usize> {
    let distance = strsim::osa_distance(wanted, candidate);
    if distance > max_distance {
        return None;
    }
    let (w, c) = differing_parts(wanted.as_bytes(), candidate.as_bytes());
    let differing = w.len().max(c.len());
    (distance <= differing.div_ceil(2).max(1)).then_some(distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests that read this machine's tracefs skip (with a note) when it is
    /// not reachable, e.g. when not running as root.
    fn tracefs_available() -> bool {
        match tracefs_root() {
            Ok(_) => true,
            Err(e) => {
                eprintln!("skipping: {e}");
                false
            }
        }
    }

    const OPENAT_FORMAT: &str = "name: sys_enter_openat
ID: 782
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char __user * filename;\toffset:24;\tsize:8;\tsigned:0;
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;

print fmt: \"dfd: 0x%08lx, filename: 0x%08lx\", ((unsigned long)(REC->dfd)), ((unsigned long)(REC->filename))
";

    #[test]
    fn parses_embedded_format() {
        let format = parse_format("syscalls", "sys_enter_openat", OPENAT_FORMAT).unwrap();
        assert_eq!(format.id, 782);
        assert_eq!(format.fields.len(), 9);
        assert_eq!(format.fields.iter().filter(|f| f.common).count(), 4);
        let filename = format.field("filename").unwrap();
        assert_eq!(filename.c_type, "const char __user *");
        assert_eq!(filename.kind, FieldKind::Pointer { user: true, to_char: true });
        assert_eq!((filename.offset, filename.size, filename.signed), (24, 8, false));
        let nr = format.field("__syscall_nr").unwrap();
        assert_eq!((nr.kind.clone(), nr.size, nr.signed, nr.common), (FieldKind::Int, 4, true, false));
        assert_eq!(format.event_fields().count(), 5);
    }

    #[test]
    fn splits_declarations() {
        assert_eq!(split_declaration("unsigned long args[6]").unwrap(), ("unsigned long", "[6]", "args"));
        assert_eq!(split_declaration("__data_loc char[] name").unwrap(), ("__data_loc char[]", "", "name"));
        assert_eq!(split_declaration("const void* ptr").unwrap(), ("const void*", "", "ptr"));
        assert_eq!(split_declaration("const char *const * argv").unwrap(), ("const char *const *", "", "argv"));
        assert_eq!(split_declaration("u32 buf[]").unwrap(), ("u32", "[]", "buf"));
        assert!(split_declaration("int").is_err());
    }

    #[test]
    fn classifies_fields() {
        assert_eq!(classify_field("sched", "char", "[16]", 16), FieldKind::CharArray);
        assert_eq!(classify_field("net", "u8", "[4]", 4), FieldKind::Other);
        assert_eq!(classify_field("sched", "__data_loc char[]", "", 4), FieldKind::DataLocString);
        assert_eq!(classify_field("x", "__data_loc u64[]", "", 4), FieldKind::DataLocArray);
        assert_eq!(classify_field("x", "__data_loc cpumask_t", "", 4), FieldKind::DataLocArray);
        assert_eq!(
            classify_field("syscalls", "const char *const *", "", 8),
            FieldKind::Pointer { user: true, to_char: false }
        );
        assert_eq!(classify_field("x", "void __seg_gs *", "", 8), FieldKind::Pointer { user: false, to_char: false });
        assert_eq!(classify_field("x", "char *", "", 8), FieldKind::Pointer { user: false, to_char: true });
        assert_eq!(classify_field("x", "unsigned char *", "", 8), FieldKind::Pointer { user: false, to_char: false });
        assert_eq!(classify_field("x", "enum migrate_mode", "", 4), FieldKind::Int);
        assert_eq!(classify_field("x", "struct foo", "", 8), FieldKind::Other);
    }

    #[test]
    fn wildcard_matching() {
        assert!(wildcard_match("sys_enter_open*", "sys_enter_openat"));
        assert!(wildcard_match("sys_enter_open*", "sys_enter_open"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("s?hed", "sched"));
        assert!(wildcard_match("*open*at*", "sys_enter_open_by_handle_at"));
        assert!(!wildcard_match("sys_enter_open*", "sys_exit_openat"));
        assert!(!wildcard_match("sched", "sched_switch"));
        assert!(!wildcard_match("a?c", "ac"));
    }

    #[test]
    fn finds_prefixed_strings() {
        let table = b"btf_trace_a\0int\0btf_trace_bb\0xbtf_trace_no\0btf_trace_\0btf_trace_c";
        let starts = find_prefixed_strings(table, b"btf_trace_");
        let names: Vec<&[u8]> = starts.iter().map(|&s| &table[s + 10..]).collect();
        assert_eq!(starts.len(), 4);
        assert!(names[0].starts_with(b"a\0"));
        assert!(names[1].starts_with(b"bb\0"));
        assert!(names[2].starts_with(b"\0"));
        assert_eq!(names[3], b"c");
    }

    #[test]
    fn suggestion_ranking() {
        let names = ["sys_enter_openat", "sys_enter_openat2", "sys_exit_openat", "sched_switch", "sys_enter_open"];
        let got = suggest("sys_enter_opnat", names);
        assert_eq!(got[0], "sys_enter_openat");
        assert!(got.len() <= 3);
        let by_substring = suggest("openat", names);
        assert!(by_substring.contains(&"sys_enter_openat".to_string()), "{by_substring:?}");
        assert_eq!(suggest("sched_swtich", names), vec!["sched_switch"]);
        assert!(suggest("zzzzzzzz", names).is_empty());
        // Only close names: a shared prefix alone is not close.
        let syscalls = ["sys_enter_mount", "sys_enter_dup", "sys_enter_acct", "sys_enter_openat"];
        assert!(suggest("sys_enter_nosuch", syscalls).is_empty(), "{:?}", suggest("sys_enter_nosuch", syscalls));
        assert_eq!(suggest("sys_enter_opnet", syscalls), vec!["sys_enter_openat"]);
        assert_eq!(suggest("sys_enter_mout", syscalls), vec!["sys_enter_mount"]);
        let full = ["syscalls:sys_enter_newstat", "syscalls:sys_enter_newfstat", "syscalls:sys_enter_newlstat"];
        assert!(suggest("syscalls:sys_enter_nosuch", full).is_empty());
        assert!(suggest("sys_enter_nosuch", ["sys_enter", "sys_exit"]).is_empty());
        assert_eq!(suggest("sched_swtch", ["sched_switch", "sched_swap_numa"]), vec!["sched_switch"]);
        assert_eq!(suggest("enter_openat_sys", ["sys_enter_openat", "sched_switch"]), vec!["sys_enter_openat"]);
    }

    #[test]
    fn unescapes_mount_paths() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/end\\"), "/end\\");
    }

    #[test]
    fn real_sys_enter_openat() {
        if !tracefs_available() {
            return;
        }
        let format = read_format("syscalls", "sys_enter_openat").unwrap();
        assert!(format.id > 0);
        let filename = format.field("filename").unwrap();
        assert_eq!(filename.kind, FieldKind::Pointer { user: true, to_char: true });
        assert_eq!(filename.size, 8);
        for name in ["flags", "mode"] {
            assert_eq!(format.field(name).unwrap().kind, FieldKind::Int, "{name}");
        }
        assert_eq!(format.fields.iter().filter(|f| f.common).count(), 4);
        for name in ["common_type", "common_flags", "common_preempt_count", "common_pid"] {
            assert!(format.field(name).unwrap().common, "{name}");
        }
    }

    #[test]
    fn real_sys_exit_read() {
        if !tracefs_available() {
            return;
        }
        let format = read_format("syscalls", "sys_exit_read").unwrap();
        let ret = format.field("ret").unwrap();
        assert_eq!((ret.kind.clone(), ret.size, ret.signed, ret.common), (FieldKind::Int, 8, true, false));
    }

    #[test]
    fn real_sched_switch() {
        if !tracefs_available() {
            return;
        }
        let format = read_format("sched", "sched_switch").unwrap();
        let comm = format.field("prev_comm").unwrap();
        assert_eq!((comm.kind.clone(), comm.size, comm.array_len()), (FieldKind::CharArray, 16, Some(16)));
        let pid = format.field("prev_pid").unwrap();
        assert_eq!((pid.kind.clone(), pid.size, pid.signed), (FieldKind::Int, 4, true));
        assert!(format.field("next_comm").is_some());
    }

    #[test]
    fn real_sched_process_exec() {
        if !tracefs_available() {
            return;
        }
        let format = read_format("sched", "sched_process_exec").unwrap();
        let filename = format.field("filename").unwrap();
        assert_eq!((filename.kind.clone(), filename.size), (FieldKind::DataLocString, 4));
        assert_eq!(filename.array_len(), None);
    }

    #[test]
    fn real_raw_syscalls_sys_enter() {
        if !tracefs_available() {
            return;
        }
        let format = read_format("raw_syscalls", "sys_enter").unwrap();
        let args = format.field("args").unwrap();
        assert_eq!((args.kind.clone(), args.size, args.array_len()), (FieldKind::Other, 48, Some(6)));
        assert_eq!(args.c_type, "unsigned long[6]");
    }

    #[test]
    fn unknown_format_is_one_line_with_suggestion() {
        if !tracefs_available() {
            return;
        }
        let err = read_format("syscalls", "sys_enter_opnat").unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("did you mean syscalls:sys_enter_openat"), "{err}");
        assert!(read_format("syscalls", "../sched").is_err());
    }

    #[test]
    fn every_format_on_this_machine_parses() {
        if !tracefs_available() {
            return;
        }
        let mut count = 0;
        for (category, name) in list_tracepoints().unwrap() {
            let format = read_format(&category, &name).unwrap_or_else(|e| panic!("{category}:{name}: {e:#}"));
            assert!(format.fields.iter().any(|f| f.common), "{category}:{name}");
            count += 1;
        }
        assert!(count > 100);
    }

    #[test]
    fn listing_and_wildcards() {
        if !tracefs_available() {
            return;
        }
        let all = list_tracepoints().unwrap();
        assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        assert!(all.contains(&("sched".into(), "sched_switch".into())));

        let open = expand_tracepoints("syscalls:sys_enter_open*").unwrap();
        let names: Vec<&str> = open.iter().map(|(_, n)| n.as_str()).collect();
        assert!(names.contains(&"sys_enter_openat"), "{names:?}");
        assert!(names.contains(&"sys_enter_open_by_handle_at"), "{names:?}");
        assert!(open.iter().all(|(c, n)| c == "syscalls" && n.starts_with("sys_enter_open")));

        assert!(!expand_tracepoints("sched:*").unwrap().is_empty());
        assert_eq!(
            expand_tracepoints("sched:sched_switch, syscalls:sys_enter_openat,sched:sched_switch").unwrap(),
            vec![
                ("sched".to_string(), "sched_switch".to_string()),
                ("syscalls".to_string(), "sys_enter_openat".to_string()),
            ]
        );
        assert!(expand_tracepoints("no_such_category:*").unwrap().is_empty());
        assert!(expand_tracepoints("no_such_category:sched_switch").unwrap().is_empty());
        assert!(expand_tracepoints("no_such_*:*").unwrap().is_empty());
        assert!(expand_tracepoints("sched:no_such_event").unwrap().is_empty());
        assert_eq!(expand_tracepoints("sched_switch").unwrap(), vec![("sched".into(), "sched_switch".into())]);
        let across = expand_tracepoints("*:sched_switch").unwrap();
        assert_eq!(across, vec![("sched".to_string(), "sched_switch".to_string())]);
        assert!(expand_tracepoints("a:b:c").is_err());

        let all_names = all.iter().map(|(_, n)| n.as_str());
        assert_eq!(suggest("sys_enter_opnat", all_names)[0], "sys_enter_openat");
        assert_eq!(suggest_tracepoints("sched:sys_enter_openat"), vec!["syscalls:sys_enter_openat"]);
    }

    #[test]
    fn raw_tracepoints() {
        if !tracefs_available() {
            return;
        }
        let raw = list_raw_tracepoints().unwrap();
        assert!(raw.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        for name in ["sys_enter", "sys_exit", "sched_switch"] {
            assert!(raw.iter().any(|r| r == name), "{name} missing");
        }
        assert!(!raw.iter().any(|r| r.starts_with("sys_enter_")), "syscalls:* are not raw tracepoints");
        assert_eq!(expand_raw_tracepoints("sched_switch").unwrap(), vec!["sched_switch"]);
        assert_eq!(expand_raw_tracepoints("sched:sched_switch").unwrap(), vec!["sched_switch"]);
        assert_eq!(expand_raw_tracepoints("sys_e*").unwrap(), vec!["sys_enter", "sys_exit"]);
        let both = expand_raw_tracepoints("sched_switch,sys_enter").unwrap();
        assert_eq!(both, vec!["sched_switch", "sys_enter"]);
        assert!(expand_raw_tracepoints("no_such_raw_tp").unwrap().is_empty());
    }

    #[test]
    fn btf_type_walk_matches_string_scan() {
        let Ok(file) = File::open(VMLINUX_BTF) else {
            eprintln!("skipping: no {VMLINUX_BTF}");
            return;
        };
        let mut btf = Vec::new();
        (&file).read_to_end(&mut btf).unwrap();
        let mut walked = btf_trace_typedef_names(&btf).expect("known BTF kinds");
        let mut scanned = Vec::new();
        collect_btf_trace_names(btf_string_section(&btf).unwrap(), &mut scanned);
        walked.sort_unstable();
        scanned.sort_unstable();
        assert!(walked.len() > 100);
        assert_eq!(walked, scanned);
    }

    #[test]
    fn listing_is_fast_once_cached() {
        if !tracefs_available() {
            return;
        }
        list_tracepoints().unwrap();
        let start = std::time::Instant::now();
        expand_tracepoints("sched:sched_switch").unwrap();
        expand_tracepoints("*:sched_sw*").unwrap();
        assert!(start.elapsed() < std::time::Duration::from_millis(50), "{:?}", start.elapsed());
    }
}
