//! Small helpers with no knowledge of tracing: wildcard patterns and
//! "did you mean" suggestions.

pub mod similar;
pub mod wildcard;
