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
        match self {
            NameTable::Syscall => super::syscalls::number(text),
            NameTable::Signal => (1..=64).find(|n| signal_name(*n).as_deref() == Some(text)),
            NameTable::Errno => super::errno::numbers().find(|n| errno_name(*n) == Some(text)),
            NameTable::Strerror => match text.strip_prefix("Unknown error ") {
                Some(n) => n.parse().ok(),
                None => super::errno::numbers().find(|n| strerror(*n) == text),
            },
        }
    }
}

/// `ENOENT` for 2 and for -2 (a failed call's return value).
pub fn errno_name(n: i64) -> Option<&'static str> {
    super::errno::known_name(n.checked_abs()?)
}

/// The C library's message for errno `n` (or `-n`).
pub fn strerror(n: i64) -> String {
    let n = n.checked_abs().unwrap_or(i64::MAX);
    match i32::try_from(n) {
        Ok(e) => super::errno::replace_os_errors(&std::io::Error::from_raw_os_error(e).to_string(), |_| String::new()),
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
        for n in crate::util::errno::numbers() {
            assert_eq!(errno_name(n).map(crate::util::errno::number), Some(Some(n as i32)), "name of {n}");
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
