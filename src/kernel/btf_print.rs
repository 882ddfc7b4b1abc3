//! `-l 'struct task_*'` and `-lv 'struct task_struct'`: the kernel's named
//! structs, unions and enums, and their C definitions as bpftrace prints
//! them. The definitions come from libbpf's own C printer (`btf_dump`), the
//! one bpftrace uses: members one per line with their types, nested
//! anonymous structs and unions indented inside, bitfields (`: 3`), padding
//! (`long: 64;`) and enum values.

use std::ffi::{c_char, c_int, c_void, CStr};

use anyhow::{anyhow, bail, Result};
use libbpf_rs::libbpf_sys;

use crate::util::wildcard::{has_wildcard, wildcard_match};

const BTF_KIND_STRUCT: u32 = 4;
const BTF_KIND_UNION: u32 = 5;
const BTF_KIND_ENUM: u32 = 6;
const BTF_KIND_ENUM64: u32 = 19;

/// Whether a `-l` item names types: `struct NAME`, `union NAME`, `enum NAME`.
pub fn is_type_pattern(item: &str) -> bool {
    ["struct ", "union ", "enum "].iter().any(|p| item.starts_with(p))
}

/// The kernel's types that `pattern` (`struct task_*`, `enum pid_type`)
/// matches, sorted: their names, or with `verbose` their definitions.
pub fn list(pattern: &str, verbose: bool) -> Result<Vec<String>> {
    let btf = super::btf::kernel().ok_or_else(|| {
        anyhow!("-l '{pattern}': this kernel has no BTF ({}), so its types can't be listed", super::btf::VMLINUX_BTF)
    })?;
    // SAFETY: the kernel's BTF lives for the whole run and is only read.
    unsafe { list_in(btf.raw(), pattern, verbose) }
}

/// [`list`] over the BTF at `btf`.
///
/// # Safety
/// `btf` must point to a valid libbpf `struct btf` for the whole call.
pub unsafe fn list_in(btf: *const libbpf_sys::btf, pattern: &str, verbose: bool) -> Result<Vec<String>> {
    let pattern = pattern.split_whitespace().collect::<Vec<_>>().join(" ");
    let matches = |name: &str| if has_wildcard(&pattern) { wildcard_match(&pattern, name) } else { pattern == name };
    let mut found: Vec<(String, u32)> = named_types(btf).into_iter().filter(|(name, _)| matches(name)).collect();
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0);
    if !verbose {
        return Ok(found.into_iter().map(|(name, _)| name).collect());
    }
    let text = dump(btf, found.iter().map(|(_, id)| *id))?;
    Ok(found.iter().filter_map(|(name, _)| definition(&text, name)).collect())
}

/// Every named struct, union and enum: (`struct NAME`, its id), in id order.
unsafe fn named_types(btf: *const libbpf_sys::btf) -> Vec<(String, u32)> {
    let count = libbpf_sys::btf__type_cnt(btf);
    let mut out = Vec::new();
    for id in 1..count {
        let t = libbpf_sys::btf__type_by_id(btf, id);
        if t.is_null() {
            continue;
        }
        let (name_off, info) = ((*t).name_off, (*t).info);
        let kind = match (info >> 24) & 0x1f {
            BTF_KIND_STRUCT => "struct",
            BTF_KIND_UNION => "union",
            BTF_KIND_ENUM | BTF_KIND_ENUM64 => "enum",
            _ => continue,
        };
        if name_off == 0 {
            continue;
        }
        let name = libbpf_sys::btf__name_by_offset(btf, name_off);
        if name.is_null() {
            continue;
        }
        let name = CStr::from_ptr(name).to_string_lossy();
        if !name.is_empty() {
            out.push((format!("{kind} {name}"), id));
        }
    }
    out
}

unsafe extern "C" {
    fn vasprintf(out: *mut *mut c_char, fmt: *const c_char, args: *mut libbpf_sys::__va_list_tag) -> c_int;
}

/// libbpf's printer writes through this: each piece appended to the `String` at `ctx`.
unsafe extern "C" fn append(ctx: *mut c_void, fmt: *const c_char, args: *mut libbpf_sys::__va_list_tag) {
    let out = &mut *(ctx as *mut String);
    let mut piece: *mut c_char = std::ptr::null_mut();
    if vasprintf(&mut piece, fmt, args) >= 0 && !piece.is_null() {
        out.push_str(&CStr::from_ptr(piece).to_string_lossy());
        libc::free(piece as *mut c_void);
    }
}

/// libbpf's C for the types `ids`, with every type they need defined before
/// them (each once).
unsafe fn dump(btf: *const libbpf_sys::btf, ids: impl Iterator<Item = u32>) -> Result<String> {
    let mut text = String::new();
    let d = libbpf_sys::btf_dump__new(btf, Some(append), &mut text as *mut String as *mut c_void, std::ptr::null());
    if d.is_null() {
        bail!("cannot print BTF types: {}", std::io::Error::last_os_error());
    }
    let mut failed = None;
    for id in ids {
        let err = libbpf_sys::btf_dump__dump_type(d, id);
        if err < 0 {
            failed = Some((id, err));
            break;
        }
    }
    libbpf_sys::btf_dump__free(d);
    if let Some((id, err)) = failed {
        bail!("cannot print BTF type {id}: {}", std::io::Error::from_raw_os_error(-err));
    }
    Ok(text)
}

/// The definition of `name` (`struct task_struct`) in the printed `text`:
/// from its `NAME {` line to the `};` that closes it, and a blank line, as
/// bpftrace prints each one.
fn definition(text: &str, name: &str) -> Option<String> {
    let open = format!("{name} {{");
    let mut lines = text.lines().skip_while(|l| *l != open);
    let mut out = String::from(lines.next()?);
    out.push('\n');
    for l in lines {
        out.push_str(l);
        out.push('\n');
        // The closing line (`};`, or `} __attribute__((packed));`) is the
        // only one that starts at the left margin.
        if l.starts_with('}') {
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// A name for libbpf's builders.
    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    /// A small BTF built in memory: `struct demo` with an anonymous union
    /// (itself holding an anonymous struct), an array, a pointer, bitfields
    /// and an enum member; `struct dep`, which it embeds; `enum color`.
    unsafe fn demo_btf() -> *mut libbpf_sys::btf {
        let b = libbpf_sys::btf__new_empty();
        assert!(!b.is_null());
        let int = libbpf_sys::btf__add_int(b, c("int").as_ptr(), 4, 1);
        let ulong = libbpf_sys::btf__add_int(b, c("long unsigned int").as_ptr(), 8, 0);
        let uint = libbpf_sys::btf__add_int(b, c("unsigned int").as_ptr(), 4, 0);
        let chr = libbpf_sys::btf__add_int(b, c("char").as_ptr(), 1, 2);
        let color = libbpf_sys::btf__add_enum(b, c("color").as_ptr(), 4);
        libbpf_sys::btf__add_enum_value(b, c("RED").as_ptr(), 0);
        libbpf_sys::btf__add_enum_value(b, c("GREEN").as_ptr(), 1);
        let dep = libbpf_sys::btf__add_struct(b, c("dep").as_ptr(), 8);
        libbpf_sys::btf__add_field(b, c("d").as_ptr(), ulong, 0, 0);
        let pair = libbpf_sys::btf__add_struct(b, std::ptr::null(), 8);
        libbpf_sys::btf__add_field(b, c("lo").as_ptr(), int, 0, 0);
        libbpf_sys::btf__add_field(b, c("hi").as_ptr(), int, 32, 0);
        let anon = libbpf_sys::btf__add_union(b, std::ptr::null(), 8);
        libbpf_sys::btf__add_field(b, c("x").as_ptr(), ulong, 0, 0);
        libbpf_sys::btf__add_field(b, std::ptr::null(), pair, 0, 0);
        let name = libbpf_sys::btf__add_array(b, int, chr, 16);
        let ptr = libbpf_sys::btf__add_ptr(b, dep);
        let demo = libbpf_sys::btf__add_struct(b, c("demo").as_ptr(), 56);
        libbpf_sys::btf__add_field(b, c("a").as_ptr(), int, 0, 0);
        libbpf_sys::btf__add_field(b, std::ptr::null(), anon, 64, 0);
        libbpf_sys::btf__add_field(b, c("name").as_ptr(), name, 128, 0);
        libbpf_sys::btf__add_field(b, c("next").as_ptr(), ptr, 256, 0);
        libbpf_sys::btf__add_field(b, c("inline_dep").as_ptr(), dep, 320, 0);
        libbpf_sys::btf__add_field(b, c("hot").as_ptr(), uint, 384, 1);
        libbpf_sys::btf__add_field(b, c("mode").as_ptr(), uint, 385, 3);
        libbpf_sys::btf__add_field(b, c("shade").as_ptr(), color, 416, 0);
        assert!(demo > 0 && color > 0);
        b
    }

    #[test]
    fn names_and_definitions() {
        unsafe {
            let b = demo_btf();
            assert_eq!(list_in(b, "struct *", false).unwrap(), vec!["struct demo", "struct dep"]);
            assert_eq!(list_in(b, "enum  col*", false).unwrap(), vec!["enum color"]);
            assert!(list_in(b, "union *", false).unwrap().is_empty(), "anonymous unions have no name");
            assert!(list_in(b, "struct dem", false).unwrap().is_empty(), "no wildcard: the exact name");
            let defs = list_in(b, "struct de*", true).unwrap();
            assert_eq!(
                defs[0],
                "struct demo {\n\
                 \tint a;\n\
                 \tunion {\n\
                 \t\tlong unsigned int x;\n\
                 \t\tstruct {\n\
                 \t\t\tint lo;\n\
                 \t\t\tint hi;\n\
                 \t\t};\n\
                 \t};\n\
                 \tchar name[16];\n\
                 \tstruct dep *next;\n\
                 \tstruct dep inline_dep;\n\
                 \tunsigned int hot: 1;\n\
                 \tunsigned int mode: 3;\n\
                 \tenum color shade;\n\
                 };\n"
            );
            assert_eq!(defs[1], "struct dep {\n\tlong unsigned int d;\n};\n");
            assert_eq!(list_in(b, "enum color", true).unwrap(), vec!["enum color {\n\tRED = 0,\n\tGREEN = 1,\n};\n"]);
            libbpf_sys::btf__free(b);
        }
    }
}
