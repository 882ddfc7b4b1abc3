//! Signal names and numbers, one table: `"KILL"`, `"SIGKILL"`, `"kill"` or
//! 9 are the same signal; numbers print as `SIGKILL`.

/// The signals scripts name, without their `SIG` prefix.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("SYS", libc::SIGSYS),
];

/// A signal number from 1 to 64.
pub fn from_number(n: i64) -> Option<i32> {
    (1..=64).contains(&n).then_some(n as i32)
}

/// A signal given as `"KILL"`, `"SIGKILL"`, `"kill"` or a number (1 to 64).
pub fn number(text: &str) -> Option<i32> {
    if let Ok(n) = text.trim().parse::<i64>() {
        return from_number(n);
    }
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == name).map(|(_, sig)| *sig)
}

/// `SIGSEGV` for 11 (None for a signal without a name here).
pub fn name(sig: i32) -> Option<String> {
    SIGNALS.iter().find(|(_, s)| *s == sig).map(|(n, _)| format!("SIG{n}"))
}

/// `SIGTERM` for 15; a signal without a name here as its number.
pub fn shown(sig: i32) -> String {
    name(sig).unwrap_or_else(|| sig.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(number("KILL"), Some(9));
        assert_eq!(number("sigterm"), Some(15));
        assert_eq!(number("SIGUSR1"), Some(libc::SIGUSR1));
        assert_eq!(number("9"), Some(9));
        assert_eq!(number("0"), None);
        assert_eq!(number("65"), None);
        assert_eq!(number("NOPE"), None);
        assert_eq!(name(libc::SIGSEGV).as_deref(), Some("SIGSEGV"));
        assert_eq!(name(40), None);
        assert_eq!((shown(15).as_str(), shown(40).as_str()), ("SIGTERM", "40"));
    }
}
