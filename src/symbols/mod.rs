//! User binaries: finding them by path, library name or program name, and
//! reading their symbols (`elf`); processes' executable mappings
//! (`procmaps`); symbolizing stacks (`stacks`).

pub mod elf;
pub mod ifunc;
pub mod kalias;
pub mod procmaps;
pub mod stacks;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// Where the binary named `bin` in a probe spec lives: a path (kept as
/// given, made absolute), a library name as the dynamic linker resolves it
/// (`libc` → `/lib/x86_64-linux-gnu/libc.so.6`; with `pid`, the library
/// that process has mapped comes first), or a program on PATH.
/// The binaries `bin` names: one, as [`resolve_binary`] finds it, or, for a
/// path with wildcards (`./bin/prog*`), every file it matches (sorted).
pub fn resolve_binaries(bin: &str, pid: Option<i32>) -> Result<Vec<PathBuf>> {
    if !crate::util::wildcard::has_wildcard(bin) {
        return Ok(vec![resolve_binary(bin, pid)?]);
    }
    if !bin.contains('/') {
        bail!("a wildcard binary must be a path ('./{bin}' or '/usr/bin/{bin}'), not a name searched on PATH");
    }
    let found = crate::util::wildcard::glob_files(bin);
    if found.is_empty() {
        bail!("no file matches {bin}");
    }
    found.iter().map(|p| resolve_binary(&p.to_string_lossy(), pid)).collect()
}

pub fn resolve_binary(bin: &str, pid: Option<i32>) -> Result<PathBuf> {
    if bin.is_empty() {
        bail!("no binary given");
    }
    if bin.contains('/') {
        let p = Path::new(bin);
        if !p.exists() {
            bail!("binary {bin} does not exist");
        }
        if p.is_dir() {
            bail!("{bin} is a directory, not a binary");
        }
        return Ok(absolute(p));
    }
    if let Some(pid) = pid {
        if let Some(p) = mapped_library(pid, bin) {
            return Ok(p);
        }
    }
    if let Some(p) = find_in_path(bin) {
        return Ok(p);
    }
    if let Some(p) = find_library(bin) {
        return Ok(p);
    }
    bail!("cannot find '{bin}': not a path, not a program on PATH and not a library the dynamic linker knows")
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => {
            let joined = cwd.join(p);
            // Drop `./` components for a tidy probe name.
            joined.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect()
        }
        Err(_) => p.to_path_buf(),
    }
}

/// An executable file named `name` in a PATH directory.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false))
}

/// Whether the file name `file` is the library called `name`: `libc` or `c`
/// match `libc.so` and `libc.so.6`; a full soname matches itself.
pub fn library_matches(name: &str, file: &str) -> bool {
    if file == name {
        return true;
    }
    let base = if name.starts_with("lib") { name.to_string() } else { format!("lib{name}") };
    let base = base.strip_suffix(".so").unwrap_or(&base);
    match file.strip_prefix(base) {
        Some(rest) => rest == ".so" || rest.starts_with(".so."),
        None => false,
    }
}

/// A library as the dynamic linker would find it: /etc/ld.so.cache (or
/// `ldconfig -p`), then the standard directories.
pub fn find_library(name: &str) -> Option<PathBuf> {
    let entries = ld_cache_entries();
    if let Some((_, p)) = entries.iter().find(|(soname, p)| library_matches(name, soname) && Path::new(p).exists()) {
        return Some(PathBuf::from(p));
    }
    const DIRS: &[&str] = &[
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
        "/usr/local/lib",
    ];
    for dir in DIRS {
        let Ok(rd) = std::fs::read_dir(dir) else { continue };
        let mut hits: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .filter(|e| library_matches(name, &e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect();
        // `libfoo.so.1` (what programs load) before the development link `libfoo.so`.
        hits.sort_by_key(|p| (p.extension().is_some_and(|e| e == "so"), p.clone()));
        if let Some(p) = hits.into_iter().next() {
            return Some(p);
        }
    }
    None
}

/// The library named `name` mapped into process `pid`.
fn mapped_library(pid: i32, name: &str) -> Option<PathBuf> {
    mapped_objects(pid)
        .ok()?
        .into_iter()
        .find(|p| p.file_name().is_some_and(|f| library_matches(name, &f.to_string_lossy())))
}

/// The ELF files process `pid` has mapped executable (its program, the
/// libraries it loaded), each once, in address order: what `uprobe:*:FN`
/// and `usdt:*:NAME` search with `-p PID`.
pub fn mapped_objects(pid: i32) -> Result<Vec<PathBuf>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| no_process(pid, "mappings", &e))?;
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        let Some(m) = procmaps::parse_line(line) else { continue };
        // `(deleted)`: replaced on disk since, so not what the process runs.
        if !m.exec || !m.path.starts_with('/') || m.path.ends_with(" (deleted)") {
            continue;
        }
        let path = in_process_root(pid, Path::new(m.path));
        if !out.contains(&path) {
            out.push(path);
        }
    }
    if out.is_empty() {
        bail!("process {pid} has no executable file mapped");
    }
    Ok(out)
}

/// The program process `pid` runs (`/proc/PID/exe`).
pub fn process_exe(pid: i32) -> Result<PathBuf> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| no_process(pid, "program", &e))?;
    Ok(in_process_root(pid, &exe))
}

/// Why `/proc/PID/WHAT` can't be read.
fn no_process(pid: i32, what: &str, e: &std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        return anyhow::anyhow!("process {pid} does not exist");
    }
    anyhow::anyhow!("cannot read the {what} of process {pid}: {}", crate::util::errno::describe(e))
}

/// `path` as process `pid` sees it: the same path, or through
/// `/proc/PID/root` when the process lives in another mount namespace (a
/// container), where the same path may name another file.
fn in_process_root(pid: i32, path: &Path) -> PathBuf {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    match (ns("self"), ns(&pid.to_string())) {
        (Some(a), Some(b)) if a != b => {
            Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path))
        }
        _ => path.to_path_buf(),
    }
}

/// (soname, path) pairs of the dynamic linker's cache, in its order of
/// preference, x86-64 entries only.
pub fn ld_cache_entries() -> Vec<(String, String)> {
    if let Ok(data) = std::fs::read("/etc/ld.so.cache") {
        let v = parse_ld_cache(&data);
        if !v.is_empty() {
            return v;
        }
    }
    ldconfig_p()
}

/// Parse the `glibc-ld.so.cache1.1` format (alone or after the old format).
pub fn parse_ld_cache(data: &[u8]) -> Vec<(String, String)> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    let Some(start) = data.windows(MAGIC.len()).position(|w| w == MAGIC) else { return Vec::new() };
    let d = &data[start..];
    let u32_at = |off: usize| -> Option<u32> { d.get(off..off + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap())) };
    let Some(nlibs) = u32_at(20) else { return Vec::new() };
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    let cstr = |off: u32| -> Option<String> {
        let s = d.get(off as usize..)?;
        let end = s.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let mut out = Vec::new();
    let mut other_arch = Vec::new();
    for i in 0..nlibs as usize {
        let e = HEADER + i * ENTRY;
        let (Some(flags), Some(key), Some(value)) = (u32_at(e), u32_at(e + 4), u32_at(e + 8)) else { break };
        let (Some(k), Some(v)) = (cstr(key), cstr(value)) else { continue };
        // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
        if flags & 0xff == 0x03 && flags & 0xff00 == 0x0300 {
            out.push((k, v));
        } else {
            other_arch.push((k, v));
        }
    }
    if out.is_empty() {
        other_arch
    } else {
        out
    }
}

/// `ldconfig -p`: lines like `\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6`.
fn ldconfig_p() -> Vec<(String, String)> {
    let out = ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"]
        .iter()
        .find_map(|cmd| std::process::Command::new(cmd).arg("-p").output().ok());
    let Some(out) = out else { return Vec::new() };
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.starts_with('\t') && l.contains("x86-64"))
        .filter_map(|l| {
            let (left, path) = l.split_once(" => ")?;
            let soname = left.split_whitespace().next()?;
            Some((soname.to_string(), path.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        assert!(library_matches("libc", "libc.so.6"));
        assert!(library_matches("c", "libc.so.6"));
        assert!(library_matches("libc.so.6", "libc.so.6"));
        assert!(!library_matches("libc", "libcrypt.so.1"));
        assert!(!library_matches("libc", "libc_malloc_debug.so.0"));
        assert!(library_matches("libpthread", "libpthread.so.0"));
    }

    #[test]
    fn resolves_libc_and_path_programs() {
        let cache = ld_cache_entries();
        if cache.is_empty() {
            return;
        }
        let libc = resolve_binary("libc", None).unwrap();
        assert!(libc.to_string_lossy().contains("libc.so"), "{}", libc.display());
        let sh = resolve_binary("sh", None).unwrap();
        assert!(sh.is_absolute() && sh.exists());
        assert!(resolve_binary("no_such_thing_xyz", None).is_err());
        assert_eq!(resolve_binary("/bin/sh", None).unwrap(), PathBuf::from("/bin/sh"));
    }
}
