//! The wire format between generated programs and rtrace's reader, shared
//! by the code that writes records (`codegen`, through the IR's `Emit` and
//! `Control` statements) and the runtime that reads them.
//!
//! Control messages travel on their own ring: a `u32` kind (below), then
//! the kind's payload (an exit code, or a map id).

/// `exit()` from a probe: the payload is the exit code.
pub const CONTROL_EXIT: u32 = 1;
/// `print(m)` from a probe: the payload is the map id.
pub const CONTROL_PRINT: u32 = 2;
/// `m.clear()` from a probe.
pub const CONTROL_CLEAR: u32 = 3;
/// `m.zero()` from a probe.
pub const CONTROL_ZERO: u32 = 4;
