//! The values a script turns into names: syscall numbers (`syscall_name`),
//! signals (`signal_name`), errno values (`errno_name`, `strerror`); and the
//! integer casts (`i8(x)` ... `u64(x)`) and `ncpus()`. The kernel keeps the
//! integer and prints it through [`NameTable::render`]; userspace calls the
//! same function, so a value reads alike wherever its statement runs.

/// Which names an integer prints as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameTable {
    /// `syscall_name(n)`: `openat` for 257 (x86-64 numbers).
    Syscall,
    /// `signal_name(n)`: `SIGKILL` for 9.
    Signal,
    /// `errno_name(n)`: `ENOENT` for 2 or -2.
    Errno,
    /// `strerror(n)`: `No such file or directory` for 2 or -2.
    Strerror,
}

impl NameTable {
    /// The text of `n`: its name, or the number itself where there is none
    /// (`strerror` says `Unknown error N`, as the C library does).
    pub fn render(self, n: i64) -> String {
        match self {
            NameTable::Syscall => super::syscalls::name(n).map_or_else(|| n.to_string(), str::to_string),
            NameTable::Signal => signal_name(n).unwrap_or_else(|| n.to_string()),
            NameTable::Errno => errno_name(n).map_or_else(|| n.to_string(), str::to_string),
            NameTable::Strerror => strerror(n),
        }
    }

    /// The number a text of [`NameTable::render`] stands for: a userspace
    /// name used as the key of a map whose kernel side holds the number.
    /// Errno names and messages give the positive number.
    pub fn number(self, text: &str) -> Option<i64> {
        if let Ok(n) = text.parse::<i64>() {
            return Some(n);
        }
        let errnos = || ERRNO_NAMES.iter().map(|(_, n)| *n);
        match self {
            NameTable::Syscall => super::syscalls::number(text),
            NameTable::Signal => (1..=64).find(|n| signal_name(*n).as_deref() == Some(text)),
            NameTable::Errno => ERRNO_NAMES.iter().find(|(name, _)| *name == text).map(|(_, n)| *n),
            NameTable::Strerror => match text.strip_prefix("Unknown error ") {
                Some(n) => n.parse().ok(),
                None => errnos().find(|n| strerror(*n) == text),
            },
        }
    }
}

/// Linux's errno names (x86-64 numbers), then the kernel's own codes that
/// kernel functions return but system calls don't (`ERESTARTSYS`).
const ERRNO_NAMES: &[(&str, i64)] = &[
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

/// `ENOENT` for 2 and for -2 (a failed call's return value).
pub fn errno_name(n: i64) -> Option<&'static str> {
    let n = n.checked_abs()?;
    ERRNO_NAMES.iter().find(|(_, v)| *v == n).map(|(name, _)| *name)
}

/// The C library's message for errno `n` (or `-n`).
pub fn strerror(n: i64) -> String {
    let n = n.checked_abs().unwrap_or(i64::MAX);
    match i32::try_from(n) {
        Ok(e) => {
            let text = std::io::Error::from_raw_os_error(e).to_string();
            match text.rfind(" (os error ") {
                Some(i) => text[..i].to_string(),
                None => text,
            }
        }
        Err(_) => format!("Unknown error {n}"),
    }
}

/// `SIGKILL` for 9; the real-time signals as the kernel numbers them
/// (`SIGRTMIN` is 32, `SIGRTMIN+3` 35, up to `SIGRTMAX`, 64).
pub fn signal_name(n: i64) -> Option<String> {
    let sig = super::signals::from_number(n)?;
    if let Some(name) = super::signals::name(sig) {
        return Some(name);
    }
    Some(match n {
        16 => "SIGSTKFLT".to_string(),
        29 => "SIGIO".to_string(),
        30 => "SIGPWR".to_string(),
        32 => "SIGRTMIN".to_string(),
        64 => "SIGRTMAX".to_string(),
        33..=63 => format!("SIGRTMIN+{}", n - 32),
        _ => return None,
    })
}

/// `x` cut to its low `bits` bits, then sign-extended (`signed`) or
/// zero-extended back to 64: `i32(4294967295)` is -1, `u8(-1)` is 255.
pub fn cast(x: i64, bits: u8, signed: bool) -> i64 {
    match (bits, signed) {
        (8, true) => x as i8 as i64,
        (16, true) => x as i16 as i64,
        (32, true) => x as i32 as i64,
        (8, false) => x as u8 as i64,
        (16, false) => x as u16 as i64,
        (32, false) => x as u32 as i64,
        _ => x,
    }
}

/// `ncpus()`: the number of possible CPUs (what per-CPU maps are sized by).
pub fn possible_cpus() -> i64 {
    libbpf_rs::num_possible_cpus().map_or(1, |n| n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_numbers() {
        assert_eq!(NameTable::Syscall.render(libc::SYS_openat), "openat");
        assert_eq!(NameTable::Syscall.render(99999), "99999");
        assert_eq!(NameTable::Signal.render(9), "SIGKILL");
        assert_eq!(NameTable::Signal.render(35), "SIGRTMIN+3");
        assert_eq!(NameTable::Signal.render(0), "0");
        assert_eq!(NameTable::Errno.render(1), "EPERM");
        assert_eq!(NameTable::Errno.render(-2), "ENOENT");
        assert_eq!(NameTable::Errno.render(512), "ERESTARTSYS");
        assert_eq!(NameTable::Errno.render(0), "0");
        assert_eq!(NameTable::Errno.render(i64::MIN), i64::MIN.to_string());
        assert_eq!(NameTable::Strerror.render(2), "No such file or directory");
        assert_eq!(NameTable::Strerror.render(-1), "Operation not permitted");
        assert!(NameTable::Strerror.render(600).starts_with("Unknown error"));
        for (name, n) in ERRNO_NAMES {
            assert_eq!(errno_name(*n), Some(*name), "first name of {n}");
        }
        // Back from the text to the number.
        for t in [NameTable::Syscall, NameTable::Signal, NameTable::Errno, NameTable::Strerror] {
            for n in [1, 2, 9, 13, 35, 64, 99999] {
                assert_eq!(t.number(&t.render(n)), Some(n), "{t:?} {n}");
            }
        }
        assert_eq!(NameTable::Errno.number("EBADF"), Some(9));
        assert_eq!(NameTable::Syscall.number("newfstat"), Some(5));
        assert_eq!(NameTable::Signal.number("SIGNOPE"), None);
    }

    #[test]
    fn errno_numbers_are_the_c_library_s() {
        for (name, n, c) in
            [("EAGAIN", 11, libc::EAGAIN), ("ENOTSUP", 95, libc::EOPNOTSUPP), ("ETIMEDOUT", 110, libc::ETIMEDOUT)]
        {
            assert_eq!(n, c as i64, "{name}");
        }
        assert_eq!(errno_name(libc::EHWPOISON as i64), Some("EHWPOISON"));
    }

    #[test]
    fn casts_cut_and_extend() {
        assert_eq!(cast(4294967295, 32, true), -1);
        assert_eq!(cast(-1, 32, false), 4294967295);
        assert_eq!(cast(255, 8, true), -1);
        assert_eq!(cast(-1, 8, false), 255);
        assert_eq!(cast(0x1_8000, 16, true), -32768);
        assert_eq!(cast(i64::MIN, 64, false), i64::MIN);
        assert_eq!(cast(-5, 64, true), -5);
    }
}
