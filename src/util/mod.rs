//! Small helpers with no knowledge of tracing: wildcard patterns,
//! "did you mean" suggestions, signal names.

pub mod signals;
pub mod similar;
pub mod wildcard;
