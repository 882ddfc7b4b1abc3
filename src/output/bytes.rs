//! How a `buf(ptr, len)` value prints: as bpftrace prints a buffer, each
//! byte outside printable ASCII as `\xNN`, the others as they are; `%rx`
//! shows every byte as `\xNN`, `%rh` as space-separated two-digit hex.
//!
//! In userspace a buf is a [`Buf`] (its bytes), so printf can show it in
//! any of those forms; printed or interpolated it is its escaped text.

use rhai::Dynamic;

/// A `buf()` value in userspace: the bytes read in the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buf(pub Vec<u8>);

impl Buf {
    /// The bytes of a `buf()` record field or map key: its little-endian u64
    /// length, then the bytes (the length is clamped to what the field holds).
    pub fn from_field(field: &[u8]) -> Buf {
        let Some((len, bytes)) = field.split_first_chunk::<8>() else { return Buf(Vec::new()) };
        let n = (u64::from_le_bytes(*len) as usize).min(bytes.len());
        Buf(bytes[..n].to_vec())
    }

    /// As `%r` and `print` show it.
    pub fn escaped(&self) -> String {
        escape(&self.0)
    }
}

impl std::fmt::Display for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.escaped())
    }
}

/// How a `%r` conversion shows the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufForm {
    /// `%r`: printable ASCII as is, other bytes `\xNN`.
    Escaped,
    /// `%rx`: every byte `\xNN`.
    Escapes,
    /// `%rh`: every byte as two hex digits, separated by spaces.
    Hex,
}

/// `bytes` in `form`.
pub fn show(bytes: &[u8], form: BufForm) -> String {
    match form {
        BufForm::Escaped => escape(bytes),
        BufForm::Escapes => bytes.iter().map(|b| format!("\\x{b:02x}")).collect(),
        BufForm::Hex => bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "),
    }
}

/// The text of a `buf()` record field (see [`Buf::from_field`]), escaped.
pub fn escape_buf(field: &[u8]) -> String {
    Buf::from_field(field).escaped()
}

/// A userspace value as text: a [`Buf`] escaped, anything else as Rhai shows it.
pub fn text_of(value: &Dynamic) -> String {
    match value.read_lock::<Buf>() {
        Some(b) => b.escaped(),
        None => value.to_string(),
    }
}

/// The bytes `text` shows as [`escape`]d text: each `\xNN` one byte, the
/// rest as it is (so a key printed as `ab\x01` is found as `m["ab\\x01"]`).
pub fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 2..i + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], b.get(i + 1), hex) {
            (b'\\', Some(b'x'), Some(v)) => {
                out.push(v);
                i += 4;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Printable ASCII (space to `~`) as is, every other byte as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4);
    for &b in bytes {
        if (0x20..=0x7e).contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped() {
        assert_eq!(escape(&[1, 2, b'a', 0, 0xff]), "\\x01\\x02a\\x00\\xff");
        let mut field = 3u64.to_le_bytes().to_vec();
        field.extend_from_slice(&[b'h', b'i', 0, 9, 9]);
        assert_eq!(escape_buf(&field), "hi\\x00");
        assert_eq!(escape_buf(&[]), "");
        assert_eq!(Buf::from_field(&field), Buf(vec![b'h', b'i', 0]));
    }

    #[test]
    fn forms() {
        let b = [b'h', b'i', 0, 0xff, b' '];
        assert_eq!(show(&b, BufForm::Escaped), "hi\\x00\\xff ");
        assert_eq!(show(&b, BufForm::Escapes), "\\x68\\x69\\x00\\xff\\x20");
        assert_eq!(show(&b, BufForm::Hex), "68 69 00 ff 20");
        assert_eq!(show(&[], BufForm::Hex), "");
        assert_eq!(show(&[7], BufForm::Hex), "07");
    }

    #[test]
    fn unescape_inverts_escape() {
        let b = [b'h', b'i', 0, 0xff, b' ', b'\\', 0x7f];
        assert_eq!(unescape(&escape(&b)), b);
        assert_eq!(unescape("plain"), b"plain");
        assert_eq!(unescape(r"\x4"), br"\x4");
        assert_eq!(unescape(r"\xzz\x41"), br"\xzzA");
        assert_eq!(unescape(r"\x+f"), br"\x+f");
    }

    #[test]
    fn text_of_values() {
        assert_eq!(text_of(&Dynamic::from(Buf(vec![b'a', 1]))), "a\\x01");
        assert_eq!(text_of(&Dynamic::from("x")), "x");
        assert_eq!(text_of(&Dynamic::from(3i64)), "3");
    }
}
