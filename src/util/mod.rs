//! Small helpers with no knowledge of tracing: wildcard patterns,
//! "did you mean" suggestions, signal and errno names.

/// `eprintln!` that never panics: a closed stderr (`2>&1 | head`) is
/// ignored rather than ending rtrace with Rust's panic status.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `eprint!` that never panics (see [`errln!`]).
macro_rules! errtext {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

pub(crate) use {errln, errtext};

/// Text on stdout outside the script output's sink (`--info`,
/// `--list-tools`): the exit status, 1 when stdout is closed, never a panic.
pub fn print_out(text: &str) -> i32 {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

pub mod errno;
pub mod names;
pub mod signals;
pub mod similar;
pub mod syscalls;
pub mod wildcard;
