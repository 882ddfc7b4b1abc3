//! Parsing tracepoint `format` files (`events/<category>/<name>/format`):
//! each field's C type, offset, size and sign, and what kind of value it is.

use anyhow::{bail, Context, Result};

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

/// Width and signedness of a plain C integer type name (a format field's
/// `int` may be stored in 8 bytes: syscall arguments are).
pub fn c_int_width(c_type: &str) -> Option<(u32, bool)> {
    Some(match c_type.trim() {
        "int" | "signed int" | "s32" | "pid_t" | "__s32" => (4, true),
        "unsigned int" | "u32" | "__u32" | "uid_t" | "gid_t" | "umode_t" => (4, false),
        "long" | "long int" | "s64" | "ssize_t" | "loff_t" | "__s64" | "off_t" => (8, true),
        "short" | "s16" => (2, true),
        "unsigned short" | "u16" => (2, false),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
