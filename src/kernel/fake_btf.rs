//! Kernel types for tests: a [`BtfTypes`] answered from a small text table
//! (`tests/fixtures/kernel/btf.txt`, whose header gives the syntax) instead
//! of the running kernel's BTF, so compiled member chains (`e.curtask.pid`,
//! `e.args.prev.comm`, fexit return values) are the same on every machine.

use std::collections::BTreeMap;

use super::btf::{BtfTypes, Member, Param, Shape};

/// The integer types the table may name: (spelling, size, signed).
const INTS: &[(&str, u32, bool)] = &[
    ("char", 1, true),
    ("unsigned char", 1, false),
    ("bool", 1, false),
    ("u8", 1, false),
    ("s8", 1, true),
    ("short", 2, true),
    ("unsigned short", 2, false),
    ("u16", 2, false),
    ("s16", 2, true),
    ("umode_t", 2, false),
    ("int", 4, true),
    ("unsigned int", 4, false),
    ("u32", 4, false),
    ("s32", 4, true),
    ("pid_t", 4, true),
    ("gfp_t", 4, false),
    ("long", 8, true),
    ("unsigned long", 8, false),
    ("long long", 8, true),
    ("unsigned long long", 8, false),
    ("u64", 8, false),
    ("s64", 8, true),
    ("size_t", 8, false),
    ("ssize_t", 8, true),
    ("loff_t", 8, true),
];

enum Ty {
    Void,
    Int {
        name: String,
        size: u32,
        signed: bool,
    },
    Pointer(u32),
    Array {
        elem: u32,
        len: u32,
    },
    Composite {
        name: String,
        union: bool,
        members: Vec<(String, Member)>,
    },
    /// The id of a function or a tracepoint prototype.
    Proto,
}

/// A table of kernel types, functions and BTF-typed tracepoints.
pub struct FakeBtf {
    types: Vec<Ty>,
    /// Type ids by canonical spelling (`struct task_struct`, `char *`).
    ids: BTreeMap<String, u32>,
    functions: BTreeMap<String, (u32, Vec<Param>, u32)>,
    tracepoints: BTreeMap<String, (u32, Vec<Param>)>,
}

impl FakeBtf {
    /// The table in `text`; a line it cannot read panics with its number
    /// (the table is a test fixture).
    pub fn parse(text: &str) -> FakeBtf {
        let mut t = FakeBtf {
            types: vec![Ty::Void],
            ids: BTreeMap::new(),
            functions: Default::default(),
            tracepoints: Default::default(),
        };
        let mut open: Option<(u32, Vec<(String, Member)>)> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            let fail = |why: &str| -> ! { panic!("btf fixture line {}: {why}: {raw}", n + 1) };
            if line.is_empty() {
                continue;
            }
            if let Some((id, members)) = open.as_mut() {
                if line == "}" {
                    let id = *id;
                    let done = open.take().map(|(_, m)| m).unwrap_or_default();
                    if let Ty::Composite { members, .. } = &mut t.types[id as usize] {
                        *members = done;
                    }
                    continue;
                }
                let (decl, at) = line.rsplit_once('@').unwrap_or_else(|| fail("a member needs `@OFFSET`"));
                let (name, ty) = t.declaration(decl).unwrap_or_else(|| fail("not `TYPE NAME`"));
                let (byte, bits) = at.trim().split_once('+').map_or((at.trim(), None), |(b, r)| (b, Some(r)));
                let byte: u32 = byte.parse().unwrap_or_else(|_| fail("bad offset"));
                let (bit, width) = match bits {
                    Some(r) => {
                        let (b, w) = r.split_once(':').unwrap_or_else(|| fail("a bitfield is `@BYTE+BIT:WIDTH`"));
                        (b.parse().unwrap_or_else(|_| fail("bad bit")), w.parse().unwrap_or_else(|_| fail("bad width")))
                    }
                    None => (0, 0),
                };
                members.push((name, Member { bit_offset: byte * 8 + bit, bitfield_bits: width, ty }));
            } else if let Some(head) = line.strip_suffix('{') {
                let head = head.trim();
                if !head.starts_with("struct ") && !head.starts_with("union ") {
                    fail("expected `struct NAME {` or `union NAME {`");
                }
                open = Some((t.intern(head).unwrap_or_else(|| fail("bad struct")), Vec::new()));
            } else if let Some(rest) = line.strip_prefix("func ") {
                let (name, params, ret) = t.prototype(rest).unwrap_or_else(|| fail("not `func NAME(...) -> TYPE`"));
                let ret = ret.unwrap_or_else(|| fail("a function needs `-> TYPE`"));
                let id = t.push(Ty::Proto);
                t.functions.insert(name, (id, params, ret));
            } else if let Some(rest) = line.strip_prefix("tracepoint ") {
                let (name, params, _) = t.prototype(rest).unwrap_or_else(|| fail("not `tracepoint NAME(...)`"));
                let id = t.push(Ty::Proto);
                t.tracepoints.insert(name, (id, params));
            } else {
                fail("expected a struct, union, func or tracepoint");
            }
        }
        assert!(open.is_none(), "btf fixture: a struct is not closed");
        t
    }

    fn push(&mut self, ty: Ty) -> u32 {
        self.types.push(ty);
        self.types.len() as u32 - 1
    }

    /// The id of the type spelled `spelled`, added on first use (a struct
    /// named before it is defined starts with no members).
    fn intern(&mut self, spelled: &str) -> Option<u32> {
        let words: Vec<&str> =
            spelled.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "__user")).collect();
        let key = words.join(" ").replace(" *", "*").replace('*', " *").replace(" [", "[");
        let key = key.trim().to_string();
        if let Some(id) = self.ids.get(&key) {
            return Some(*id);
        }
        let ty = if key == "void" {
            return Some(0);
        } else if let Some(inner) = key.strip_suffix('*') {
            Ty::Pointer(self.intern(inner)?)
        } else if let Some((elem, len)) = key.strip_suffix(']').and_then(|k| k.rsplit_once('[')) {
            Ty::Array { elem: self.intern(elem)?, len: len.parse().ok()? }
        } else if let Some((kind, name)) = key.split_once(' ').filter(|(k, _)| matches!(*k, "struct" | "union")) {
            Ty::Composite { name: name.to_string(), union: kind == "union", members: Vec::new() }
        } else {
            let (name, size, signed) = INTS.iter().find(|(n, _, _)| *n == key)?;
            Ty::Int { name: name.to_string(), size: *size, signed: *signed }
        };
        let id = self.push(ty);
        self.ids.insert(key, id);
        Some(id)
    }

    /// `TYPE NAME` or `TYPE NAME[N]`: the name and the type's id.
    fn declaration(&mut self, decl: &str) -> Option<(String, u32)> {
        let decl = decl.trim();
        let (decl, array) = match decl.strip_suffix(']').and_then(|d| d.rsplit_once('[')) {
            Some((d, len)) => (d, format!("[{len}]")),
            None => (decl, String::new()),
        };
        let start = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_'))? + 1;
        let (ty, name) = decl.split_at(start);
        if name.is_empty() || ty.trim().is_empty() {
            return None;
        }
        Some((name.to_string(), self.intern(&format!("{}{array}", ty.trim()))?))
    }

    /// `NAME(TYPE NAME, ...)` with an optional `-> TYPE`.
    fn prototype(&mut self, text: &str) -> Option<(String, Vec<Param>, Option<u32>)> {
        let (name, rest) = text.split_once('(')?;
        let (params, ret) = rest.split_once(')')?;
        let params = params
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| self.declaration(p).map(|(name, ty)| Param { name, ty }))
            .collect::<Option<Vec<_>>>()?;
        let ret = match ret.trim().strip_prefix("->") {
            Some(r) => Some(self.intern(r)?),
            None => None,
        };
        Some((name.trim().to_string(), params, ret))
    }

    fn ty(&self, id: u32) -> Option<&Ty> {
        self.types.get(id as usize)
    }
}

impl BtfTypes for FakeBtf {
    fn struct_named(&self, name: &str) -> Option<u32> {
        let id = *self.ids.get(&format!("struct {name}"))?;
        matches!(self.ty(id), Some(Ty::Composite { .. })).then_some(id)
    }
    fn union_named(&self, name: &str) -> Option<u32> {
        let id = *self.ids.get(&format!("union {name}"))?;
        matches!(self.ty(id), Some(Ty::Composite { .. })).then_some(id)
    }
    fn tracepoint_id(&self, event: &str) -> Option<u32> {
        self.tracepoints.get(event).map(|t| t.0)
    }
    fn function_id(&self, name: &str) -> Option<u32> {
        self.functions.get(name).map(|f| f.0)
    }
    fn tracepoint_params(&self, event: &str) -> Option<Vec<Param>> {
        self.tracepoints.get(event).map(|t| t.1.clone())
    }
    fn function_params(&self, name: &str) -> Option<(Vec<Param>, u32)> {
        self.functions.get(name).map(|f| (f.1.clone(), f.2))
    }
    fn tracepoint_names(&self) -> Vec<String> {
        self.tracepoints.keys().cloned().collect()
    }
    fn function_names(&self, prefix: &str) -> Vec<String> {
        self.functions.keys().filter(|n| n.starts_with(prefix)).cloned().collect()
    }
    fn shape(&self, id: u32) -> Shape {
        match self.ty(id) {
            Some(Ty::Int { size, signed, .. }) => Shape::Int { size: *size, signed: *signed },
            Some(Ty::Pointer(to)) => Shape::Pointer { to: *to },
            Some(Ty::Array { elem, len }) if self.is_char(*elem) => Shape::CharArray { len: *len },
            Some(Ty::Composite { .. }) => Shape::Composite { id },
            _ => Shape::Other,
        }
    }
    fn is_char(&self, id: u32) -> bool {
        matches!(self.ty(id), Some(Ty::Int { name, .. }) if name == "char")
    }
    fn member(&self, id: u32, name: &str) -> Option<Member> {
        let Some(Ty::Composite { members, .. }) = self.ty(id) else { return None };
        for (n, m) in members {
            if n == name {
                return Some(m.clone());
            }
            if n == "_" {
                if let Some(inner) = self.member(m.ty, name) {
                    return Some(Member { bit_offset: m.bit_offset + inner.bit_offset, ..inner });
                }
            }
        }
        None
    }
    fn member_names(&self, id: u32) -> Vec<String> {
        let Some(Ty::Composite { members, .. }) = self.ty(id) else { return vec![] };
        members.iter().flat_map(|(n, m)| if n == "_" { self.member_names(m.ty) } else { vec![n.clone()] }).collect()
    }
    fn starts_with(&self, outer: u32, inner: u32) -> bool {
        let mut id = outer;
        for _ in 0..8 {
            if id == inner {
                return true;
            }
            let Some(Ty::Composite { members, .. }) = self.ty(id) else { return false };
            match members.first() {
                Some((_, m)) if m.bit_offset == 0 => id = m.ty,
                _ => return false,
            }
        }
        false
    }
    fn type_name(&self, id: u32) -> String {
        match self.ty(id) {
            None | Some(Ty::Void) => "void".into(),
            Some(Ty::Int { name, .. }) => name.clone(),
            Some(Ty::Pointer(to)) => {
                let inner = self.type_name(*to);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            Some(Ty::Array { elem, len }) => format!("{}[{len}]", self.type_name(*elem)),
            Some(Ty::Composite { name, union, .. }) => format!("{} {name}", if *union { "union" } else { "struct" }),
            Some(Ty::Proto) => "function".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> FakeBtf {
        FakeBtf::parse(
            "struct a {\n  int x @0\n  union u _ @8\n  char name[16] @16\n  unsigned int f @32+3:2\n  struct a *next @40\n}\n\
             union u {\n  long y @0\n}\n\
             func f(struct a *p, const char *s) -> long\n\
             tracepoint t(bool b, struct a *q)\n",
        )
    }

    #[test]
    fn members_offsets_and_shapes() {
        let b = table();
        let a = b.struct_named("a").expect("struct a");
        let y = b.member(a, "y").expect("y through the anonymous union");
        assert_eq!(y.bit_offset, 64);
        assert_eq!(b.shape(y.ty), Shape::Int { size: 8, signed: true });
        let f = b.member(a, "f").expect("bitfield");
        assert_eq!((f.bit_offset, f.bitfield_bits), (32 * 8 + 3, 2));
        assert_eq!(b.shape(b.member(a, "name").expect("name").ty), Shape::CharArray { len: 16 });
        assert_eq!(b.member_names(a), ["x", "y", "name", "f", "next"]);
        assert_eq!(b.type_name(b.member(a, "next").expect("next").ty), "struct a *");
        assert!(b.member(a, "z").is_none());
        assert!(b.struct_named("u").is_none(), "u is a union");
    }

    #[test]
    fn prototypes() {
        let b = table();
        let (params, ret) = b.function_params("f").expect("f");
        assert_eq!(params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["p", "s"]);
        let Shape::Pointer { to } = b.shape(params[1].ty) else { panic!("s is a pointer") };
        assert!(b.is_char(to));
        assert_eq!(b.type_name(ret), "long");
        assert!(b.function_id("f").is_some() && b.function_id("g").is_none());
        assert_eq!(b.tracepoint_names(), ["t"]);
        assert_eq!(b.tracepoint_params("t").expect("t").len(), 2);
    }
}
