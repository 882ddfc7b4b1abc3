//! Kernel types from BTF (/sys/kernel/btf/vmlinux, parsed by libbpf): the
//! typed arguments of `tp_btf` and fentry probes, and struct member lookups
//! for field access through pointers (`e.args.prev.pid`,
//! `e.curtask.real_parent.tgid`). Loaded once, on first use.

use std::ffi::CString;
use std::sync::OnceLock;

use libbpf_rs::btf::types::{Array, Composite, Enum, Enum64, FuncProto, Int, IntEncoding, MemberAttr};
use libbpf_rs::btf::{BtfKind, BtfType, TypeId};
use libbpf_rs::{libbpf_sys, AsRawLibbpf, Btf, HasSize, ReferencesType};

/// The kernel's BTF.
pub struct KernelBtf {
    btf: Btf<'static>,
}

// SAFETY: after parsing, libbpf's `struct btf` is only read (type and name
// lookups); rtrace never adds types to it.
unsafe impl Send for KernelBtf {}
unsafe impl Sync for KernelBtf {}

/// The kernel's BTF, loaded on first use; `None` when the kernel has none.
pub fn kernel() -> Option<&'static KernelBtf> {
    static BTF: OnceLock<Option<KernelBtf>> = OnceLock::new();
    BTF.get_or_init(|| Btf::from_vmlinux().ok().map(|btf| KernelBtf { btf })).as_ref()
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
const BTF_KIND_TYPEDEF: u32 = 8;
const BTF_KIND_FUNC: u32 = 12;

impl KernelBtf {
    fn ty(&self, id: u32) -> Option<BtfType<'_>> {
        self.btf.type_by_id(TypeId::from(id))
    }

    fn find(&self, name: &str, kind: u32) -> Option<u32> {
        let c = CString::new(name).ok()?;
        let id = unsafe { libbpf_sys::btf__find_by_name_kind(self.btf.as_libbpf_object().as_ptr(), c.as_ptr(), kind) };
        (id > 0).then_some(id as u32)
    }

    /// Type id of `struct NAME`.
    pub fn struct_named(&self, name: &str) -> Option<u32> {
        self.find(name, BTF_KIND_STRUCT)
    }

    /// The BTF id a `tp_btf` program attaches by: the `btf_trace_EVENT` typedef.
    pub fn tracepoint_id(&self, event: &str) -> Option<u32> {
        self.find(&format!("btf_trace_{event}"), BTF_KIND_TYPEDEF)
    }

    /// The id of kernel function `name` (fentry/fexit attach by it).
    pub fn function_id(&self, name: &str) -> Option<u32> {
        self.find(name, BTF_KIND_FUNC)
    }

    /// Arguments of raw tracepoint `event` as the kernel passes them to BPF
    /// (the prototype's leading `void *__data` is not one of them).
    /// The prototype only has types; the names come from the kernel's
    /// `__probestub_EVENT` (or, on older kernels, `__bpf_trace_EVENT`)
    /// function, which has the same parameters.
    pub fn tracepoint_params(&self, event: &str) -> Option<Vec<Param>> {
        let typedef = self.ty(self.tracepoint_id(event)?)?;
        let ptr = typedef.next_type()?.skip_mods_and_typedefs();
        let proto = ptr.next_type()?.skip_mods_and_typedefs();
        let mut params = self.params(proto)?;
        let named = [format!("__probestub_{event}"), format!("__bpf_trace_{event}")]
            .iter()
            .filter_map(|f| self.function_params(f))
            .map(|(named, _)| named)
            .find(|named| named.len() == params.len());
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

    /// Arguments and return type of kernel function `name`.
    pub fn function_params(&self, name: &str) -> Option<(Vec<Param>, u32)> {
        let func = self.ty(self.function_id(name)?)?;
        let proto = func.next_type()?;
        let ret = FuncProto::try_from(proto).ok()?.referenced_type_id();
        Some((self.params(proto)?, u32::from(ret)))
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

    /// Names of every raw tracepoint with a BTF prototype (`tp_btf` targets), sorted.
    pub fn tracepoint_names(&self) -> Vec<String> {
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

    /// How a value of type `id` is read.
    pub fn shape(&self, id: u32) -> Shape {
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

    /// Whether `id` is C's `char` (what strings are made of; not `u8` or `bool`).
    pub fn is_char(&self, id: u32) -> bool {
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

    /// Member `name` of the struct or union `id`, looking inside anonymous
    /// struct/union members as C does.
    pub fn member(&self, id: u32, name: &str) -> Option<Member> {
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

    /// Member names of struct or union `id` (anonymous members flattened), for hints.
    pub fn member_names(&self, id: u32) -> Vec<String> {
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

    /// The C spelling of type `id` (`struct task_struct *`, `unsigned int`).
    pub fn type_name(&self, id: u32) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's BTF, or None (the test then says why it skips).
    fn btf() -> Option<&'static KernelBtf> {
        let k = kernel();
        if k.is_none() {
            eprintln!("skipped: no kernel BTF (/sys/kernel/btf/vmlinux)");
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
}
