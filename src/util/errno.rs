//! Errno names and numbers, one table: for `deny(ERRNO)`, `errno_name()`,
//! `strerror()` and system errors in messages. `"EACCES"`, `"eacces"` or
//! 13 are the same error; numbers print as `EACCES`.

/// Linux's errno names (x86-64 numbers), then the kernel's own codes that
/// kernel functions return but system calls don't (`ERESTARTSYS`). One
/// name per number: the one numbers print as.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("ENOEXEC", 8),
    ("EBADF", 9),
    ("ECHILD", 10),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("ENOTBLK", 15),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("EXDEV", 18),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOTTY", 25),
    ("ETXTBSY", 26),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("ESPIPE", 29),
    ("EROFS", 30),
    ("EMLINK", 31),
    ("EPIPE", 32),
    ("EDOM", 33),
    ("ERANGE", 34),
    ("EDEADLK", 35),
    ("ENAMETOOLONG", 36),
    ("ENOLCK", 37),
    ("ENOSYS", 38),
    ("ENOTEMPTY", 39),
    ("ELOOP", 40),
    ("ENOMSG", 42),
    ("EIDRM", 43),
    ("ECHRNG", 44),
    ("EL2NSYNC", 45),
    ("EL3HLT", 46),
    ("EL3RST", 47),
    ("ELNRNG", 48),
    ("EUNATCH", 49),
    ("ENOCSI", 50),
    ("EL2HLT", 51),
    ("EBADE", 52),
    ("EBADR", 53),
    ("EXFULL", 54),
    ("ENOANO", 55),
    ("EBADRQC", 56),
    ("EBADSLT", 57),
    ("EBFONT", 59),
    ("ENOSTR", 60),
    ("ENODATA", 61),
    ("ETIME", 62),
    ("ENOSR", 63),
    ("ENONET", 64),
    ("ENOPKG", 65),
    ("EREMOTE", 66),
    ("ENOLINK", 67),
    ("EADV", 68),
    ("ESRMNT", 69),
    ("ECOMM", 70),
    ("EPROTO", 71),
    ("EMULTIHOP", 72),
    ("EDOTDOT", 73),
    ("EBADMSG", 74),
    ("EOVERFLOW", 75),
    ("ENOTUNIQ", 76),
    ("EBADFD", 77),
    ("EREMCHG", 78),
    ("ELIBACC", 79),
    ("ELIBBAD", 80),
    ("ELIBSCN", 81),
    ("ELIBMAX", 82),
    ("ELIBEXEC", 83),
    ("EILSEQ", 84),
    ("ERESTART", 85),
    ("ESTRPIPE", 86),
    ("EUSERS", 87),
    ("ENOTSOCK", 88),
    ("EDESTADDRREQ", 89),
    ("EMSGSIZE", 90),
    ("EPROTOTYPE", 91),
    ("ENOPROTOOPT", 92),
    ("EPROTONOSUPPORT", 93),
    ("ESOCKTNOSUPPORT", 94),
    ("EOPNOTSUPP", 95),
    ("EPFNOSUPPORT", 96),
    ("EAFNOSUPPORT", 97),
    ("EADDRINUSE", 98),
    ("EADDRNOTAVAIL", 99),
    ("ENETDOWN", 100),
    ("ENETUNREACH", 101),
    ("ENETRESET", 102),
    ("ECONNABORTED", 103),
    ("ECONNRESET", 104),
    ("ENOBUFS", 105),
    ("EISCONN", 106),
    ("ENOTCONN", 107),
    ("ESHUTDOWN", 108),
    ("ETOOMANYREFS", 109),
    ("ETIMEDOUT", 110),
    ("ECONNREFUSED", 111),
    ("EHOSTDOWN", 112),
    ("EHOSTUNREACH", 113),
    ("EALREADY", 114),
    ("EINPROGRESS", 115),
    ("ESTALE", 116),
    ("EUCLEAN", 117),
    ("ENOTNAM", 118),
    ("ENAVAIL", 119),
    ("EISNAM", 120),
    ("EREMOTEIO", 121),
    ("EDQUOT", 122),
    ("ENOMEDIUM", 123),
    ("EMEDIUMTYPE", 124),
    ("ECANCELED", 125),
    ("ENOKEY", 126),
    ("EKEYEXPIRED", 127),
    ("EKEYREVOKED", 128),
    ("EKEYREJECTED", 129),
    ("EOWNERDEAD", 130),
    ("ENOTRECOVERABLE", 131),
    ("ERFKILL", 132),
    ("EHWPOISON", 133),
    ("ERESTARTSYS", 512),
    ("ERESTARTNOINTR", 513),
    ("ERESTARTNOHAND", 514),
    ("ENOIOCTLCMD", 515),
    ("ERESTART_RESTARTBLOCK", 516),
    ("EPROBE_DEFER", 517),
    ("EOPENSTALE", 518),
    ("ENOPARAM", 519),
    ("EBADHANDLE", 521),
    ("ENOTSYNC", 522),
    ("EBADCOOKIE", 523),
    ("ENOTSUPP", 524),
    ("ETOOSMALL", 525),
    ("ESERVERFAULT", 526),
    ("EBADTYPE", 527),
    ("EJUKEBOX", 528),
    ("EIOCBQUEUED", 529),
    ("ERECALLCONFLICT", 530),
];

/// Other names of numbers above, accepted where an errno is given by name.
const ALIASES: &[(&str, i32)] = &[("ENOTSUP", 95), ("EWOULDBLOCK", 11), ("EDEADLOCK", 35)];

/// The largest errno a kernel hook can return.
pub const MAX: i64 = 4095;

/// An errno given as `"EACCES"` (any case) or a number from 1 to [`MAX`].
pub fn number(text: &str) -> Option<i32> {
    let upper = text.trim().to_ascii_uppercase();
    ERRNOS.iter().chain(ALIASES).find(|(n, _)| *n == upper).map(|(_, e)| *e)
}

/// An errno number from 1 to [`MAX`].
pub fn from_number(n: i64) -> Option<i32> {
    (1..=MAX).contains(&n).then_some(n as i32)
}

/// `EACCES` for 13; a number without a name here as itself.
pub fn name(errno: i32) -> String {
    known_name(errno as i64).map_or_else(|| errno.to_string(), str::to_string)
}

/// The name of errno `n`, if it has one.
pub fn known_name(n: i64) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, e)| *e as i64 == n).map(|(name, _)| *name)
}

/// Every errno number with a name, in order.
pub fn numbers() -> impl Iterator<Item = i64> {
    ERRNOS.iter().map(|(_, e)| *e as i64)
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

    #[test]
    fn errno_numbers_are_the_c_library_s() {
        for (name, n, c) in
            [("EAGAIN", 11, libc::EAGAIN), ("ENOTSUP", 95, libc::EOPNOTSUPP), ("ETIMEDOUT", 110, libc::ETIMEDOUT)]
        {
            assert_eq!(number(name), Some(c), "{name}");
            assert_eq!(n, c, "{name}");
        }
        assert_eq!(known_name(libc::EHWPOISON as i64), Some("EHWPOISON"));
    }
}
