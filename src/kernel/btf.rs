//! Kernel types from BTF (/sys/kernel/btf/vmlinux, parsed by libbpf): the
//! typed arguments of `tp_btf` and fentry probes, and struct member lookups
//! for field access through pointers (`e.args.prev.pid`,
//! `e.curtask.real_parent.tgid`). Loaded once, on first use. Also the one
//! scan of BTF names: the `btf_trace_*` typedefs that name raw tracepoints.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use libbpf_rs::btf::types::{Array, Composite, Enum, Enum64, FuncProto, Int, IntEncoding, MemberAttr};
use libbpf_rs::btf::{BtfKind, BtfType, TypeId};
use libbpf_rs::{libbpf_sys, AsRawLibbpf, Btf, HasSize, ReferencesType};

/// The kernel's BTF.
pub struct KernelBtf {
    btf: Btf<'static>,
    /// Function name → BTF id, built on the first function lookup: libbpf
    /// finds a name by scanning every type, and a kernel-function wildcard
    /// or `-l` asks for tens of thousands of functions.
    function_ids: OnceLock<std::collections::HashMap<String, u32>>,
}

// SAFETY: after parsing, libbpf's `struct btf` is only read (type and name
// lookups); rtrace never adds types to it.
unsafe impl Send for KernelBtf {}
unsafe impl Sync for KernelBtf {}

/// The kernel's BTF, loaded on first use; `None` when the kernel has none.
pub fn kernel() -> Option<&'static KernelBtf> {
    static BTF: OnceLock<Option<KernelBtf>> = OnceLock::new();
    BTF.get_or_init(|| Btf::from_vmlinux().ok().map(|btf| KernelBtf { btf, function_ids: OnceLock::new() })).as_ref()
}

/// A named, typed argument of a traced kernel function or tracepoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: u32,
}

/// What a type is, once typedefs and qualifiers are stripped, as far as
/// reading it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Integers, enums and bools of `size` bytes.
    Int { size: u32, signed: bool },
    /// A pointer to type `to` (0 for `void *`).
    Pointer { to: u32 },
    /// `char name[len]`.
    CharArray { len: u32 },
    /// A struct or union (its type id after typedefs).
    Composite { id: u32 },
    /// Anything else (arrays, floats, functions, void): not readable as a value.
    Other,
}

/// A member found in a struct: where it is and what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// Offset from the start of the outer struct, in bits.
    pub bit_offset: u32,
    /// Width of a bitfield; 0 for a plain member.
    pub bitfield_bits: u32,
    pub ty: u32,
}

const BTF_KIND_STRUCT: u32 = 4;
const BTF_KIND_UNION: u32 = 5;
const BTF_KIND_TYPEDEF: u32 = 8;

/// The kernel's types, as compile and the probe types ask about them:
/// named structs, the prototypes of kernel functions and BTF-typed
/// tracepoints, and what a type id is. [`KernelBtf`] answers from the
/// running kernel's BTF; tests answer from a small fixture table
/// (`kernel::fake_btf`), so member chains compile the same on every machine.
pub trait BtfTypes: Sync {
    /// Type id of `struct NAME`.
    fn struct_named(&self, name: &str) -> Option<u32>;
    /// The id of `union NAME`.
    fn union_named(&self, name: &str) -> Option<u32>;
    /// The BTF id a `tp_btf` program attaches by: the `btf_trace_EVENT` typedef.
    fn tracepoint_id(&self, event: &str) -> Option<u32>;
    /// The id of kernel function `name` (fentry/fexit attach by it).
    fn function_id(&self, name: &str) -> Option<u32>;
    /// Arguments of raw tracepoint `event` as the kernel passes them to BPF
    /// (without the prototype's leading `void *__data`).
    fn tracepoint_params(&self, event: &str) -> Option<Vec<Param>>;
    /// Arguments and return type of kernel function `name`.
    fn function_params(&self, name: &str) -> Option<(Vec<Param>, u32)>;
    /// Names of every raw tracepoint with a BTF prototype (`tp_btf` targets), sorted.
    fn tracepoint_names(&self) -> Vec<String>;
    /// Names of the kernel functions starting with `prefix`, sorted.
    fn function_names(&self, prefix: &str) -> Vec<String>;
    /// How a value of type `id` is read.
    fn shape(&self, id: u32) -> Shape;
    /// Whether `id` is C's `char` (what strings are made of; not `u8` or `bool`).
    fn is_char(&self, id: u32) -> bool;
    /// Member `name` of the struct or union `id`, looking inside anonymous
    /// struct/union members as C does.
    fn member(&self, id: u32, name: &str) -> Option<Member>;
    /// Member names of struct or union `id` (anonymous members flattened), for hints.
    fn member_names(&self, id: u32) -> Vec<String>;
    /// Struct `outer` begins with struct `inner` (its first member, or that
    /// member's first member, ... at offset 0), as `struct tcp_sock` begins
    /// with `struct sock`: a pointer to `inner` then also points to `outer`.
    fn starts_with(&self, outer: u32, inner: u32) -> bool;
    /// The C spelling of type `id` (`struct task_struct *`, `unsigned int`).
    fn type_name(&self, id: u32) -> String;
}

impl KernelBtf {
    /// libbpf's handle, for printing type definitions (`btf_print`).
    pub(super) fn raw(&self) -> *const libbpf_sys::btf {
        self.btf.as_libbpf_object().as_ptr()
    }

    fn ty(&self, id: u32) -> Option<BtfType<'_>> {
        self.btf.type_by_id(TypeId::from(id))
    }

    /// The named parameters of an event's class function, on kernels
    /// without `__probestub_EVENT` (before 6.4): an event of a class
    /// (`sched_wakeup` of `sched_wakeup_template`) only has
    /// `__bpf_trace_CLASS`. Of the class functions with exactly these
    /// parameter types, the one whose name shares the longest start with
    /// the event's.
    fn class_params(&self, event: &str, params: &[Param]) -> Option<Vec<Param>> {
        let types: Vec<u32> = params.iter().map(|p| p.ty).collect();
        let shared = |class: &str| class.bytes().zip(event.bytes()).take_while(|(a, b)| a == b).count();
        let (_, class, named) = self
            .function_ids()
            .keys()
            .filter_map(|f| Some((f.strip_prefix("__bpf_trace_")?, f)))
            .filter_map(|(class, f)| {
                let (named, _) = self.function_params(f)?;
                named.iter().map(|p| p.ty).eq(types.iter().copied()).then(|| (shared(class), class, named))
            })
            // The longest shared start; of equals, the first name (the map's order is not fixed).
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))?;
        (shared(class) > 0).then_some(named)
    }

    /// Function name → BTF id (the first of a name, as libbpf's lookup by
    /// name finds it), built on first use.
    fn function_ids(&self) -> &std::collections::HashMap<String, u32> {
        self.function_ids.get_or_init(|| {
            let mut ids = std::collections::HashMap::new();
            for id in 1..self.btf.len() as u32 {
                let Some(t) = self.ty(id).filter(|t| t.kind() == BtfKind::Func) else { continue };
                if let Some(name) = t.name().and_then(|n| n.to_str()) {
                    ids.entry(name.to_string()).or_insert(id);
                }
            }
            ids
        })
    }

    fn find(&self, name: &str, kind: u32) -> Option<u32> {
        let c = CString::new(name).ok()?;
        let id = unsafe { libbpf_sys::btf__find_by_name_kind(self.btf.as_libbpf_object().as_ptr(), c.as_ptr(), kind) };
        (id > 0).then_some(id as u32)
    }

    fn params(&self, proto: BtfType<'_>) -> Option<Vec<Param>> {
        let proto = FuncProto::try_from(proto).ok()?;
        Some(
            proto
                .iter()
                .enumerate()
                .map(|(i, p)| Param {
                    name: p
                        .name
                        .map(|n| n.to_string_lossy().into_owned())
                        .filter(|n| !n.is_empty())
                        .unwrap_or(format!("arg{i}")),
                    ty: u32::from(p.ty),
                })
                .collect(),
        )
    }
}

impl BtfTypes for KernelBtf {
    fn struct_named(&self, name: &str) -> Option<u32> {
        self.find(name, BTF_KIND_STRUCT)
    }

    fn union_named(&self, name: &str) -> Option<u32> {
        self.find(name, BTF_KIND_UNION)
    }

    fn tracepoint_id(&self, event: &str) -> Option<u32> {
        self.find(&format!("btf_trace_{event}"), BTF_KIND_TYPEDEF)
    }

    fn function_id(&self, name: &str) -> Option<u32> {
        self.function_ids().get(name).copied()
    }

    fn tracepoint_params(&self, event: &str) -> Option<Vec<Param>> {
        // The prototype only has types; the names come from the kernel's
        // `__probestub_EVENT` (or, on older kernels, `__bpf_trace_EVENT`)
        // function, which has the same parameters.
        let typedef = self.ty(self.tracepoint_id(event)?)?;
        let ptr = typedef.next_type()?.skip_mods_and_typedefs();
        let proto = ptr.next_type()?.skip_mods_and_typedefs();
        let mut params = self.params(proto)?;
        let named = [format!("__probestub_{event}"), format!("__bpf_trace_{event}")]
            .iter()
            .filter_map(|f| self.function_params(f))
            .map(|(named, _)| named)
            .find(|named| named.len() == params.len())
            .or_else(|| self.class_params(event, &params));
        if let Some(named) = named {
            for (p, n) in params.iter_mut().zip(named) {
                p.name = n.name;
            }
        }
        // Unnamed parameters were called argN counting `__data`; count without it.
        Some(
            params
                .into_iter()
                .skip(1)
                .enumerate()
                .map(|(i, p)| Param {
                    name: if p.name == format!("arg{}", i + 1) { format!("arg{i}") } else { p.name },
                    ty: p.ty,
                })
                .collect(),
        )
    }

    fn function_params(&self, name: &str) -> Option<(Vec<Param>, u32)> {
        let func = self.ty(self.function_id(name)?)?;
        let proto = func.next_type()?;
        let ret = FuncProto::try_from(proto).ok()?.referenced_type_id();
        Some((self.params(proto)?, u32::from(ret)))
    }

    fn function_names(&self, prefix: &str) -> Vec<String> {
        let mut v: Vec<String> = self.function_ids().keys().filter(|n| n.starts_with(prefix)).cloned().collect();
        v.sort();
        v
    }

    fn tracepoint_names(&self) -> Vec<String> {
        let mut v: Vec<String> = (1..self.btf.len() as u32)
            .filter_map(|id| {
                let t = self.ty(id)?;
                if t.kind() != BtfKind::Typedef {
                    return None;
                }
                t.name()?.to_str()?.strip_prefix("btf_trace_").map(str::to_string)
            })
            .collect();
        v.sort();
        v
    }

    fn shape(&self, id: u32) -> Shape {
        let Some(t) = self.ty(id) else { return Shape::Other };
        let t = t.skip_mods_and_typedefs();
        match t.kind() {
            BtfKind::Int => match Int::try_from(t) {
                Ok(i) => Shape::Int { size: i.size() as u32, signed: matches!(i.encoding, IntEncoding::Signed) },
                Err(_) => Shape::Other,
            },
            BtfKind::Enum => match Enum::try_from(t) {
                Ok(e) => Shape::Int { size: e.size() as u32, signed: e.is_signed() },
                Err(_) => Shape::Other,
            },
            BtfKind::Enum64 => match Enum64::try_from(t) {
                Ok(e) => Shape::Int { size: e.size() as u32, signed: e.is_signed() },
                Err(_) => Shape::Other,
            },
            BtfKind::Ptr => Shape::Pointer { to: t.next_type().map(|n| u32::from(n.type_id())).unwrap_or(0) },
            BtfKind::Array => match Array::try_from(t) {
                Ok(a) if self.is_char(u32::from(a.ty())) => Shape::CharArray { len: a.capacity() as u32 },
                _ => Shape::Other,
            },
            BtfKind::Struct | BtfKind::Union => Shape::Composite { id: u32::from(t.type_id()) },
            _ => Shape::Other,
        }
    }

    fn is_char(&self, id: u32) -> bool {
        let Some(t) = self.ty(id) else { return false };
        let t = t.skip_mods_and_typedefs();
        match Int::try_from(t) {
            Ok(i) => {
                i.size() == 1
                    && (matches!(i.encoding, IntEncoding::Char) || t.name().and_then(|n| n.to_str()) == Some("char"))
            }
            Err(_) => false,
        }
    }

    fn member(&self, id: u32, name: &str) -> Option<Member> {
        let comp = Composite::try_from(self.ty(id)?.skip_mods_and_typedefs()).ok()?;
        for m in comp.iter() {
            let (bit_offset, bitfield_bits) = match m.attr {
                MemberAttr::Normal { offset } => (offset, 0),
                MemberAttr::BitField { size, offset } => (offset, size as u32),
            };
            let ty = u32::from(m.ty);
            match m.name.and_then(|n| n.to_str()).filter(|n| !n.is_empty()) {
                Some(n) if n == name => return Some(Member { bit_offset, bitfield_bits, ty }),
                Some(_) => {}
                None => {
                    if let Some(inner) = self.member(ty, name) {
                        return Some(Member { bit_offset: bit_offset + inner.bit_offset, ..inner });
                    }
                }
            }
        }
        None
    }

    /// Struct `outer` begins with struct `inner` (its first member, or that
    /// member's first member, ... at offset 0), as `struct tcp_sock` begins
    /// with `struct sock`: a pointer to `inner` then also points to `outer`.
    fn starts_with(&self, outer: u32, inner: u32) -> bool {
        let mut id = outer;
        for _ in 0..8 {
            let Shape::Composite { id: c } = self.shape(id) else { return false };
            if c == inner {
                return true;
            }
            let Some(comp) = self.ty(c).and_then(|t| Composite::try_from(t.skip_mods_and_typedefs()).ok()) else {
                return false;
            };
            let Some(first) = comp.iter().next() else { return false };
            if !matches!(first.attr, MemberAttr::Normal { offset: 0 }) {
                return false;
            }
            id = u32::from(first.ty);
        }
        false
    }

    fn member_names(&self, id: u32) -> Vec<String> {
        let Some(comp) = self.ty(id).and_then(|t| Composite::try_from(t.skip_mods_and_typedefs()).ok()) else {
            return vec![];
        };
        let mut out = Vec::new();
        for m in comp.iter() {
            match m.name.and_then(|n| n.to_str()).filter(|n| !n.is_empty()) {
                Some(n) => out.push(n.to_string()),
                None => out.extend(self.member_names(u32::from(m.ty))),
            }
        }
        out
    }

    fn type_name(&self, id: u32) -> String {
        let Some(t) = self.ty(id) else { return "void".into() };
        let name = || t.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match t.kind() {
            BtfKind::Void => "void".into(),
            BtfKind::Ptr => {
                let to = t.next_type().map(|n| u32::from(n.type_id())).unwrap_or(0);
                let inner = self.type_name(to);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            BtfKind::Const => {
                format!("const {}", self.type_name(t.next_type().map(|n| u32::from(n.type_id())).unwrap_or(0)))
            }
            BtfKind::Volatile | BtfKind::Restrict | BtfKind::TypeTag => {
                self.type_name(t.next_type().map(|n| u32::from(n.type_id())).unwrap_or(0))
            }
            BtfKind::Struct => format!("struct {}", name()),
            BtfKind::Union => format!("union {}", name()),
            BtfKind::Enum | BtfKind::Enum64 => format!("enum {}", name()),
            BtfKind::Array => match Array::try_from(t) {
                Ok(a) => format!("{}[{}]", self.type_name(u32::from(a.ty())), a.capacity()),
                Err(_) => "?".into(),
            },
            BtfKind::FuncProto => "function".into(),
            _ => name(),
        }
    }
}

pub(super) const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
const BTF_DIR: &str = "/sys/kernel/btf";
const BTF_MAGIC: u16 = 0xeb9f;
const BTF_TRACE_PREFIX: &[u8] = b"btf_trace_";

/// Raw tracepoint names from the `btf_trace_<name>` typedefs of vmlinux and
/// module BTF (the one BTF name scan: `-l rawtracepoint`, `tp_btf` and
/// raw tracepoint expansion all use it), sorted and deduplicated.
pub fn raw_tracepoint_names() -> Result<Vec<String>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The running kernel's BTF, or None (the test then says why it skips).
    fn btf() -> Option<&'static KernelBtf> {
        let k = kernel();
        if k.is_none() {
            crate::util::errln!("skipped: no kernel BTF (/sys/kernel/btf/vmlinux)");
        }
        k
    }

    #[test]
    fn tracepoint_arguments_have_names_and_types() {
        let Some(b) = btf() else { return };
        let params = b.tracepoint_params("sched_switch").expect("sched_switch has a BTF prototype");
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["preempt", "prev", "next", "prev_state"]);
        assert_eq!(b.type_name(params[1].ty), "struct task_struct *");
        assert!(matches!(b.shape(params[0].ty), Shape::Int { size: 1, .. }));
        assert!(matches!(b.shape(params[3].ty), Shape::Int { size: 4, signed: false }));
    }

    #[test]
    fn members_are_found_through_anonymous_members() {
        let Some(b) = btf() else { return };
        let task = b.struct_named("task_struct").expect("struct task_struct");
        let pid = b.member(task, "pid").expect("task_struct.pid");
        assert_eq!(pid.bitfield_bits, 0);
        assert_eq!(b.shape(pid.ty), Shape::Int { size: 4, signed: true });
        let comm = b.member(task, "comm").expect("task_struct.comm");
        assert_eq!(b.shape(comm.ty), Shape::CharArray { len: 16 });
        // `struct sk_buff` keeps `len` inside anonymous unions/structs.
        if let Some(skb) = b.struct_named("sk_buff") {
            assert!(b.member(skb, "len").is_some(), "sk_buff.len through anonymous members");
            assert!(b.member_names(skb).iter().any(|n| n == "len"));
        }
        assert!(b.member(task, "no_such_member").is_none());
    }

    #[test]
    fn only_char_makes_strings() {
        let Some(b) = btf() else { return };
        let (params, _) = b.function_params("vfs_read").expect("vfs_read has BTF");
        let buf = params.iter().find(|p| p.name == "buf").expect("vfs_read(buf)");
        let Shape::Pointer { to } = b.shape(buf.ty) else { panic!("buf is a pointer") };
        assert!(b.is_char(to), "char *buf");
        let u8_id = b.find("u8", BTF_KIND_TYPEDEF).expect("typedef u8");
        assert!(!b.is_char(u8_id), "u8 is not char");
        assert!(matches!(b.shape(u8_id), Shape::Int { size: 1, signed: false }));
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
    fn btf_type_walk_matches_string_scan() {
        let Ok(file) = File::open(VMLINUX_BTF) else {
            crate::util::errln!("skipping: no {VMLINUX_BTF}");
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
}
