//! Errno names and numbers, for `deny(ERRNO)`: `"EACCES"`, `"eacces"` or
//! 13 are the same error; numbers print as `EACCES`.

/// The errors an operation is commonly refused with.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("ENOEXEC", libc::ENOEXEC),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTSUP", libc::ENOTSUP),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("EADDRNOTAVAIL", libc::EADDRNOTAVAIL),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("ECONNRESET", libc::ECONNRESET),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("EDQUOT", libc::EDQUOT),
];

/// The largest errno a kernel hook can return.
pub const MAX: i64 = 4095;

/// An errno given as `"EACCES"` (any case) or a number from 1 to [`MAX`].
pub fn number(text: &str) -> Option<i32> {
    let upper = text.trim().to_ascii_uppercase();
    ERRNOS.iter().find(|(n, _)| *n == upper).map(|(_, e)| *e)
}

/// An errno number from 1 to [`MAX`].
pub fn from_number(n: i64) -> Option<i32> {
    (1..=MAX).contains(&n).then_some(n as i32)
}

/// `EACCES` for 13; a number without a name here as itself.
pub fn name(errno: i32) -> String {
    ERRNOS.iter().find(|(_, e)| *e == errno).map_or_else(|| errno.to_string(), |(n, _)| n.to_string())
}

/// A system error as a line shows it: `No such file or directory (ENOENT)`,
/// not Rust's `(os error 2)`.
pub fn describe(e: &std::io::Error) -> String {
    replace_os_errors(&e.to_string(), |n| format!(" ({})", name(n)))
}

/// `line` with each ` (os error N)` that std's errors append replaced by
/// `with(N)` (`""` drops the number; see [`describe`] for the name).
pub fn replace_os_errors(line: &str, with: impl Fn(i32) -> String) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " (os error ".len()..];
        match tail.find(')').and_then(|close| Some((close, tail[..close].parse::<i32>().ok()?))) {
            Some((close, n)) => {
                out.push_str(&with(n));
                rest = &tail[close + 1..];
            }
            None => {
                out.push_str(" (os error ");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_errors_by_name() {
        assert_eq!(describe(&std::io::Error::from_raw_os_error(2)), "No such file or directory (ENOENT)");
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(number("EACCES"), Some(libc::EACCES));
        assert_eq!(number("eperm"), Some(1));
        assert_eq!(number("NOPE"), None);
        assert_eq!(from_number(13), Some(13));
        assert_eq!(from_number(0), None);
        assert_eq!(from_number(4096), None);
        assert_eq!(name(libc::EROFS), "EROFS");
        assert_eq!(name(4000), "4000");
        for (n, e) in ERRNOS {
            assert_eq!(number(n), Some(*e));
            assert_eq!(name(*e), *n);
        }
    }
}
