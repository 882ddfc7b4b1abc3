//! Struct field access through BTF: `e.args.prev.pid`,
//! `e.curtask.real_parent.tgid`. A chain of member names becomes address
//! arithmetic on a kernel pointer and one `bpf_probe_read_kernel` per
//! pointer followed; the last member is read as its type says (integers,
//! bitfields, pointers, `char[N]` as a string). A member name that is not
//! a member but the name of a struct that begins with this one reads the
//! same address as that struct (`e.args.sk.tcp_sock.bytes_acked`).

use probes_ebpf::ir::{BinOp, Expr, Memory};

use crate::kernel::btf::{BtfTypes, Shape};

/// A value on the way down a member chain.
enum Place {
    /// A pointer value (to type `to`).
    Pointer { value: Expr, to: u32 },
    /// A non-pointer value of type `ty` (an integer argument).
    Scalar { value: Expr, ty: u32 },
    /// Memory holding a value of type `ty`; `bitfield` = (bit offset from
    /// `addr`, width) for bitfield members.
    Memory { addr: Expr, ty: u32, bitfield: Option<(u32, u32)> },
}

/// The result of a member chain.
pub struct Access {
    pub expr: Expr,
    /// The value is a `char *` (userspace statements get the string).
    pub char_pointer: bool,
    /// The value points to this struct or union (a `let` of it can be
    /// followed further: `let t = e.curtask; t.pid`).
    pub pointee: Option<u32>,
}

/// The struct or union a pointer to `to` leads to, if any.
pub fn composite(btf: &dyn BtfTypes, to: u32) -> Option<u32> {
    match btf.shape(to) {
        Shape::Composite { id } => Some(id),
        _ => None,
    }
}

/// A starting point, written `name` in the script: a value of BTF type
/// `ty`, or (`pointee` set) a pointer to type `ty` (`e.curtask`).
pub struct Base {
    pub value: Expr,
    pub ty: u32,
    pub pointee: bool,
    pub name: String,
}

/// Follow `members` from `base`. Errors are messages for the script position
/// of the member (index into `members`) that failed.
pub fn walk(btf: &dyn BtfTypes, base: Base, members: &[String]) -> Result<Access, (usize, String)> {
    let mut place = match btf.shape(base.ty) {
        _ if base.pointee => Place::Pointer { value: base.value, to: base.ty },
        Shape::Pointer { to } => Place::Pointer { value: base.value, to },
        _ => Place::Scalar { value: base.value, ty: base.ty },
    };
    let mut written = base.name;
    for (i, name) in members.iter().enumerate() {
        let (addr, composite) = match place {
            Place::Pointer { value, to } => match btf.shape(to) {
                Shape::Composite { id } => (value, id),
                _ => return Err((i, format!("`{written}` is `{} *`, not a pointer to a struct", btf.type_name(to)))),
            },
            Place::Memory { addr, ty, bitfield: None } => match btf.shape(ty) {
                Shape::Composite { id } => (addr, id),
                Shape::Pointer { to } => match btf.shape(to) {
                    Shape::Composite { id } => (read(addr, 8, false), id),
                    _ => return Err((i, format!("`{written}` is `{}`, not a pointer to a struct", btf.type_name(ty)))),
                },
                _ => return Err((i, format!("`{written}` is `{}`, which has no members", btf.type_name(ty)))),
            },
            Place::Memory { ty, .. } | Place::Scalar { ty, .. } => {
                return Err((i, format!("`{written}` is `{}`, which has no members", btf.type_name(ty))));
            }
        };
        let Some(m) = btf.member(composite, name) else {
            // A struct that begins with this one (`sk.tcp_sock`, the kernel's tcp_sk(sk)).
            if let Some(outer) = btf.struct_named(name).filter(|&o| btf.starts_with(o, composite)) {
                place = Place::Pointer { value: addr, to: outer };
                written = format!("{written}.{name}");
                continue;
            }
            let mut names = btf.member_names(composite);
            let close = crate::util::similar::suggest(name, names.iter().map(String::as_str));
            if !close.is_empty() {
                return Err((
                    i,
                    format!("{} has no member `{name}`; did you mean {}?", btf.type_name(composite), close.join(", ")),
                ));
            }
            let more = names.len().saturating_sub(16);
            names.truncate(16);
            let tail = if more > 0 { format!(", ... {more} more") } else { String::new() };
            return Err((
                i,
                format!("{} has no member `{name}` (members: {}{tail})", btf.type_name(composite), names.join(", ")),
            ));
        };
        let (byte, bitfield) = if m.bitfield_bits > 0 {
            // Read the bitfield's storage unit: the declared type's size,
            // aligned to that size.
            let unit = match btf.shape(m.ty) {
                Shape::Int { size, .. } => size.max(1) * 8,
                _ => 8,
            };
            let start = m.bit_offset / unit * unit;
            (start / 8, Some((m.bit_offset - start, m.bitfield_bits)))
        } else {
            (m.bit_offset / 8, None)
        };
        let addr =
            if byte == 0 { addr } else { Expr::Binary(BinOp::Add, Box::new(addr), Box::new(Expr::Int(byte as i64))) };
        place = Place::Memory { addr, ty: m.ty, bitfield };
        written = format!("{written}.{name}");
    }
    finish(btf, place, &written)
}

fn read(addr: Expr, size: u32, signed: bool) -> Expr {
    Expr::ReadMem { addr: Box::new(addr), size, signed, mem: Memory::Kernel }
}

fn finish(btf: &dyn BtfTypes, place: Place, written: &str) -> Result<Access, (usize, String)> {
    let last = usize::MAX;
    Ok(match place {
        Place::Pointer { value, to } => {
            Access { expr: value, char_pointer: btf.is_char(to), pointee: composite(btf, to) }
        }
        Place::Scalar { value, .. } => Access { expr: value, char_pointer: false, pointee: None },
        Place::Memory { addr, ty, bitfield } => {
            let c_type = btf.type_name(ty);
            match (btf.shape(ty), bitfield) {
                (Shape::Int { size, signed }, Some((shift, bits))) => {
                    let unit = read(addr, size, false);
                    let expr = if signed {
                        // Move the field to the top, then shift back arithmetically.
                        let up =
                            Expr::Binary(BinOp::Shl, Box::new(unit), Box::new(Expr::Int((64 - shift - bits) as i64)));
                        Expr::Binary(BinOp::Shr, Box::new(up), Box::new(Expr::Int((64 - bits) as i64)))
                    } else {
                        let down = if shift == 0 {
                            unit
                        } else {
                            Expr::Binary(BinOp::Shr, Box::new(unit), Box::new(Expr::Int(shift as i64)))
                        };
                        let mask = if bits >= 64 { -1 } else { ((1u64 << bits) - 1) as i64 };
                        Expr::Binary(BinOp::And, Box::new(down), Box::new(Expr::Int(mask)))
                    };
                    Access { expr, char_pointer: false, pointee: None }
                }
                (Shape::Int { size, signed }, None) if matches!(size, 1 | 2 | 4 | 8) => {
                    Access { expr: read(addr, size, signed), char_pointer: false, pointee: None }
                }
                (Shape::Pointer { to }, _) => {
                    Access { expr: read(addr, 8, false), char_pointer: btf.is_char(to), pointee: composite(btf, to) }
                }
                (Shape::CharArray { len }, _) if len > 0 => Access {
                    expr: Expr::ReadStr { ptr: Box::new(addr), max: len.min(256), mem: Memory::Kernel },
                    char_pointer: false,
                    pointee: None,
                },
                (Shape::Composite { id }, _) => {
                    let mut names = btf.member_names(id);
                    names.truncate(12);
                    return Err((
                        last,
                        format!("`{written}` is {c_type}: name one of its members (e.g. {})", names.join(", ")),
                    ));
                }
                _ => return Err((last, format!("`{written}` has type `{c_type}`, which probes can't read yet"))),
            }
        }
    })
}

/// `e`'s memory reads made from user memory instead: a struct reached
/// through a `__user` pointer (a system call's argument) lives there, and so
/// does what its pointers lead to.
pub fn in_user_memory(e: Expr) -> Expr {
    let up = |b: Box<Expr>| Box::new(in_user_memory(*b));
    match e {
        Expr::ReadMem { addr, size, signed, .. } => Expr::ReadMem { addr: up(addr), size, signed, mem: Memory::User },
        Expr::ReadStr { ptr, max, .. } => Expr::ReadStr { ptr: up(ptr), max, mem: Memory::User },
        Expr::Binary(op, a, b) => Expr::Binary(op, up(a), up(b)),
        Expr::Unary(op, a) => Expr::Unary(op, up(a)),
        other => other,
    }
}
