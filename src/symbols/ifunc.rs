//! Indirect functions (`STT_GNU_IFUNC`: glibc's `strlen`, `memcpy`,
//! `strcmp` ...): the symbol's address is a resolver that picks one of
//! several implementations (`__strlen_avx2`, `__strlen_evex` ...) for this
//! CPU when the library is loaded. A uprobe on the symbol itself would only
//! fire when the resolver runs, so the probe goes on the implementation the
//! resolver picks here: the library is opened with the dynamic linker
//! (`dlopen`, a no-op for a library rtrace has loaded already, such as libc)
//! and `dlsym` runs the resolver and returns the chosen implementation's
//! address, which `/proc/self/maps` turns back into an offset in the file.

use std::ffi::{CStr, CString};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{anyhow, bail, Result};

/// The file offset in `path` of the implementation the resolver of the
/// indirect function `name` selects on this machine.
pub fn implementation_offset(path: &Path, name: &str) -> Result<u64> {
    let shown = path.display();
    let cpath = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| anyhow!("bad path {shown}"))?;
    let cname = CString::new(name).map_err(|_| anyhow!("bad function name {name:?}"))?;
    let meta = std::fs::metadata(path).map_err(|e| anyhow!("cannot read {shown}: {e}"))?;
    // SAFETY: plain calls into the dynamic linker with NUL-terminated
    // strings; the handle is closed before returning.
    let addr = unsafe {
        let mut handle = libc::dlopen(cpath.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL | libc::RTLD_NOLOAD);
        if handle.is_null() {
            handle = libc::dlopen(cpath.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        }
        if handle.is_null() {
            bail!(
                "cannot find the implementation of indirect function '{name}' in {shown}: the dynamic linker can't load it ({})",
                dl_error()
            );
        }
        libc::dlerror();
        let sym = libc::dlsym(handle, cname.as_ptr());
        let addr = sym as u64;
        let err = if sym.is_null() { Some(dl_error()) } else { None };
        let found = if addr != 0 { offset_in_self(addr, path, meta.dev(), meta.ino()) } else { None };
        libc::dlclose(handle);
        if let Some(e) = err {
            bail!("cannot find the implementation of indirect function '{name}' in {shown}: {e}");
        }
        found
    };
    addr.ok_or_else(|| {
        anyhow!("cannot find the implementation of indirect function '{name}' in {shown}: its resolver chose code outside that file")
    })
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".to_string();
    }
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// The offset in the file `path` (device `dev`, inode `ino`) of address
/// `addr` of this process, if a mapping of that file holds it. The file is
/// known by its device and inode, or by its real path: on an overlay file
/// system maps shows the lower file's device and inode, not stat's.
fn offset_in_self(addr: u64, path: &Path, dev: u64, ino: u64) -> Option<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let real = std::fs::canonicalize(path).ok();
    maps.lines().find_map(|line| {
        let m = super::procmaps::parse_line(line)?;
        let same_device = m.dev == (libc::major(dev) as u64, libc::minor(dev) as u64);
        let same_path = real.as_deref().is_some_and(|r| r == Path::new(m.path));
        let same_file = (m.ino == ino && same_device) || same_path;
        (same_file && m.start <= addr && addr < m.end).then(|| addr - m.start + m.pgoff)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libc's strlen is an indirect function on x86-64 glibc: its
    /// implementation is found, in an executable part of the file, and it
    /// is not the resolver.
    #[test]
    fn strlen_in_libc() {
        let Ok(libc_path) = crate::symbols::resolve_binary("libc", None) else { return };
        let elf = crate::symbols::elf::ElfFile::open(&libc_path).unwrap();
        let funcs = elf.functions().unwrap();
        let Some(strlen) = funcs.iter().find(|f| f.name == "strlen" && f.ifunc) else { return };
        let off = implementation_offset(&libc_path, "strlen").unwrap();
        let addr = elf.code_offset_to_addr(off).expect("in executable code");
        assert_ne!(addr, strlen.addr, "the implementation, not the resolver");
    }
}
