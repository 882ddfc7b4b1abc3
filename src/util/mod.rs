//! Small helpers with no knowledge of tracing: wildcard patterns,
//! "did you mean" suggestions, signal and errno names.

pub mod errno;
pub mod signals;
pub mod similar;
pub mod wildcard;
