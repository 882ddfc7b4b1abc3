//! tracefs access: locating (and when needed mounting) tracefs, the event
//! ids and `format` texts of tracepoints, and the tracepoint and raw
//! tracepoint lists (from `available_events`, else the `events/` tree).
//!
//! Everything here reads as little as possible: the tracefs root and the full
//! tracepoint / raw tracepoint lists are computed once per process and cached,
//! and a literal `category:name` is checked with a single `stat`.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::tracepoint_format::{parse_format, TracepointFormat};
use crate::util::similar::suggest;

/// Where tracefs is mounted on current kernels, and where this module mounts it.
const TRACEFS_MOUNT_POINT: &str = "/sys/kernel/tracing";
/// Legacy location, automounted by the kernel when debugfs is mounted.
const DEBUGFS_TRACING_DIR: &str = "/sys/kernel/debug/tracing";
const DEBUGFS_MOUNT_POINT: &str = "/sys/kernel/debug";

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

fn check_path_component(part: &str, what: &str) -> Result<()> {
    if part.is_empty() || part == "." || part == ".." || part.contains('/') || part.contains('\0') {
        bail!("invalid {what} '{part}'");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// listing and wildcard expansion
// ---------------------------------------------------------------------------

/// All tracepoints as sorted (category, name) pairs, from `available_events`
/// (falling back to walking `events/`). Cached for the process lifetime.
pub fn tracepoints() -> Result<&'static Vec<(String, String)>> {
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
    let categories = subdirectories(&events).with_context(|| format!("cannot list {}", events.display()))?;
    let mut list = Vec::new();
    for category in categories {
        for name in category_event_names(root, &category) {
            list.push((category.clone(), name));
        }
    }
    list.sort_unstable();
    Ok(list)
}

/// Event directory names inside one category; empty when it does not exist.
fn category_event_names(root: &Path, category: &str) -> Vec<String> {
    subdirectories(&root.join("events").join(category)).unwrap_or_default()
}

/// Names of the directories in `dir`.
fn subdirectories(dir: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .filter(|entry| entry.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect())
}

/// Whether an event directory `events/<category>/<name>` exists (one `stat`).
pub fn event_exists(root: &Path, category: &str, name: &str) -> bool {
    root.join("events").join(category).join(name).join("format").exists()
}

/// Event names of one category (empty when it does not exist), for a
/// wildcard within a literal category.
pub fn events_in_category(root: &Path, category: &str) -> Vec<String> {
    if category == FTRACE_INTERNAL_CATEGORY {
        return Vec::new();
    }
    category_event_names(root, category)
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
pub fn raw_tracepoints() -> Result<&'static Vec<String>> {
    if let Some(list) = RAW_TRACEPOINT_LIST.get() {
        return Ok(list);
    }
    let list = match super::btf::raw_tracepoint_names() {
        Ok(list) if !list.is_empty() => list,
        _ => raw_tracepoints_from_tracefs()?,
    };
    Ok(RAW_TRACEPOINT_LIST.get_or_init(|| list))
}

fn raw_tracepoints_from_tracefs() -> Result<Vec<String>> {
    let mut names: Vec<String> = tracepoints()?
        .iter()
        .filter(|(category, _)| !NON_RAW_CATEGORIES.contains(&category.as_str()))
        .map(|(_, name)| name.clone())
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// Up to 3 known tracepoints (`category:name`) close to `wanted`, which may
/// be `category:name` or a bare name.
#[cfg(test)]
pub fn suggest_tracepoints(wanted: &str) -> Vec<String> {
    let Ok(list) = tracepoints() else {
        return Vec::new();
    };
    suggest_tracepoints_in(list, wanted)
}

/// Up to 3 tracepoints of `list` close to `wanted`.
pub fn suggest_tracepoints_in(list: &[(String, String)], wanted: &str) -> Vec<String> {
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
    unknown_tracepoint_message_in(tracepoints().map(Vec::as_slice).unwrap_or(&[]), category, name)
}

/// "unknown tracepoint C:N", with close names from `list`.
pub fn unknown_tracepoint_message_in(list: &[(String, String)], category: &str, name: &str) -> String {
    let suggestions = suggest_tracepoints_in(list, &format!("{category}:{name}"));
    if suggestions.is_empty() {
        format!("unknown tracepoint {category}:{name}")
    } else {
        format!("unknown tracepoint {category}:{name}, did you mean {}?", suggestions.join(", "))
    }
}

/// Tests that read this machine's tracefs skip (with a note) when it is
/// not reachable, e.g. when not running as root.
#[cfg(test)]
pub fn tracefs_available() -> bool {
    match tracefs_root() {
        Ok(_) => true,
        Err(e) => {
            crate::util::errln!("skipping: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::tracepoint_format::FieldKind;

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
        for (category, name) in tracepoints().unwrap() {
            let format = read_format(category, name).unwrap_or_else(|e| panic!("{category}:{name}: {e:#}"));
            assert!(format.fields.iter().any(|f| f.common), "{category}:{name}");
            count += 1;
        }
        assert!(count > 100);
    }
}
