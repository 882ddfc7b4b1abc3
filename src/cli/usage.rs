//! Usage errors (a wrong option value, a missing script): exit status 2, as
//! clap's own and bpftrace's; every other error exits 1.

use std::fmt;

#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error with this message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The exit status for an error: 2 for usage errors, else 1.
pub fn exit_status(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_others_1() {
        assert_eq!(exit_status(&usage("-d x: not a duration")), 2);
        assert_eq!(exit_status(&anyhow::anyhow!("cannot attach")), 1);
    }
}
