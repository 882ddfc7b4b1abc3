//! Usage errors (a wrong option value, a missing script): a
//! [`Diagnostic`] marked as one, so rtrace exits 2, as clap's own and
//! bpftrace's; every other error exits 1.

use crate::diag::Diagnostic;

/// A usage error with this message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Diagnostic::usage(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_others_1() {
        let d = super::super::diagnostic_of(&usage("-d x: not a duration"));
        assert!(d.usage);
        assert_eq!(d.to_string(), "rtrace: error: -d x: not a duration");
        assert!(!super::super::diagnostic_of(&anyhow::anyhow!("cannot attach")).usage);
    }
}
