//! How a `buf(ptr, len)` value prints: as bpftrace prints a buffer, each
//! byte outside printable ASCII as `\xNN`, the others as they are.

/// The text of a `buf()` record field: its little-endian u64 length, then
/// the bytes (the length is clamped to what the field holds).
pub fn escape_buf(field: &[u8]) -> String {
    let Some((len, bytes)) = field.split_first_chunk::<8>() else { return String::new() };
    let n = (u64::from_le_bytes(*len) as usize).min(bytes.len());
    escape(&bytes[..n])
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
    }
}
