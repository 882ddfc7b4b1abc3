//! The wire format between generated programs and rtrace's reader, shared
//! by the code that writes records (`codegen`, through the IR's `Emit` and
//! `Control` statements) and the runtime that reads them.
//!
//! A data record is a header (`u32` site id, `u32` zero) and then each
//! field in its own 8-aligned slot ([`field_offsets`]). Control messages
//! travel on their own ring, [`CONTROL_SIZE`] bytes each: a `u32` kind
//! (below), the `u32` probe index, then the kind's `i64` payload (an exit
//! code, or a map id).

use crate::ir::Ty;

/// Bytes before the first field of a data record: the `u32` site id and a
/// `u32` zero.
pub const RECORD_HEADER: u32 = 8;

/// Where each field of a data record with fields of types `fields` starts,
/// and the record's size.
pub fn field_offsets(fields: impl IntoIterator<Item = Ty>) -> (Vec<u32>, u32) {
    let mut at = RECORD_HEADER;
    let offsets = fields
        .into_iter()
        .map(|ty| {
            let off = at;
            at += ty.slot_size();
            off
        })
        .collect();
    (offsets, at)
}

/// The site id a data record is for.
pub fn record_site(rec: &[u8]) -> Option<u32> {
    rec.get(0..4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
}

/// Bytes of a control message.
pub const CONTROL_SIZE: u32 = 16;
/// Offsets in a control message of the `u32` kind, the `u32` probe index
/// and the `i64` payload.
pub const CONTROL_KIND_AT: i16 = 0;
pub const CONTROL_PROBE_AT: i16 = 4;
pub const CONTROL_ARG_AT: i16 = 8;

/// A control message as `(kind, probe, payload)`; None when too short.
pub fn decode_control(rec: &[u8]) -> Option<(u32, u32, i64)> {
    let word =
        |at: i16| rec.get(at as usize..at as usize + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
    let arg = rec.get(CONTROL_ARG_AT as usize..CONTROL_SIZE as usize)?;
    Some((word(CONTROL_KIND_AT)?, word(CONTROL_PROBE_AT)?, i64::from_le_bytes(arg.try_into().ok()?)))
}

/// Slot of the stack-loss counters counting stack-id hash collisions.
pub const STACK_LOST_COLLISION: u32 = 0;
/// Slot of the stack-loss counters counting captures into a full stack map.
pub const STACK_LOST_FULL: u32 = 1;

/// Bytes of one slot of the failed-helper counters (`-k`): a `u64` count
/// at [`HELPER_ERROR_COUNT_AT`] and the last error (a negative errno) at
/// [`HELPER_ERROR_CODE_AT`], per CPU.
pub const HELPER_ERROR_SIZE: u32 = 16;
pub const HELPER_ERROR_COUNT_AT: i16 = 0;
pub const HELPER_ERROR_CODE_AT: i16 = 8;

/// A failed-helper slot as `(count, last error)`, over the per-CPU values
/// of one slot: the counts summed, the error of a CPU that saw one.
pub fn decode_helper_errors<'a>(per_cpu: impl IntoIterator<Item = &'a [u8]>) -> (u64, i64) {
    let at = |b: &[u8], off: i16| {
        b.get(off as usize..off as usize + 8).map_or(0, |s| i64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    };
    per_cpu.into_iter().fold((0, 0), |(count, code), b| {
        let n = at(b, HELPER_ERROR_COUNT_AT) as u64;
        (count + n, if n > 0 { at(b, HELPER_ERROR_CODE_AT) } else { code })
    })
}

/// `exit()` from a probe: the payload is the exit code.
pub const CONTROL_EXIT: u32 = 1;
/// `print(m)` from a probe: the payload is the map id.
pub const CONTROL_PRINT: u32 = 2;
/// `m.clear()` from a probe.
pub const CONTROL_CLEAR: u32 = 3;
/// `m.zero()` from a probe.
pub const CONTROL_ZERO: u32 = 4;
/// A runtime error in a kernel statement: the argument is
/// [`arith_error_code`]'s `(what, line, column)`.
pub const CONTROL_ERROR: u32 = 5;

/// What went wrong, as Rhai says it (the operands aren't known).
pub const ARITH_ERRORS: &[&str] = &[
    "",
    "Addition overflow",
    "Subtraction overflow",
    "Multiplication overflow",
    "Division by zero",
    "Division overflow",
    "Modulo division by zero or overflow",
    "Negation overflow",
];

/// The argument of a [`CONTROL_ERROR`] message.
pub fn arith_error_code(what: u8, line: u32, col: u32) -> i64 {
    ((what as i64) << 56) | ((line as i64 & 0xff_ffff) << 24) | (col as i64 & 0xff_ffff)
}

/// `(what, line, column)` of a [`CONTROL_ERROR`] argument.
pub fn decode_arith_error(code: i64) -> (&'static str, u32, u32) {
    let what = ARITH_ERRORS.get((code >> 56) as usize & 0xff).copied().unwrap_or("Arithmetic error");
    (what, ((code >> 24) & 0xff_ffff) as u32, (code & 0xff_ffff) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_take_aligned_slots_after_the_header() {
        let (at, size) = field_offsets([Ty::Int, Ty::Bytes(5), Ty::Int]);
        assert_eq!(at, [8, 16, 24]);
        assert_eq!(size, 32);
        assert_eq!(field_offsets([]), (vec![], RECORD_HEADER));
    }

    #[test]
    fn control_messages_decode() {
        let mut m = vec![0u8; CONTROL_SIZE as usize];
        m[0..4].copy_from_slice(&CONTROL_EXIT.to_le_bytes());
        m[4..8].copy_from_slice(&3u32.to_le_bytes());
        m[8..16].copy_from_slice(&(-2i64).to_le_bytes());
        assert_eq!(decode_control(&m), Some((CONTROL_EXIT, 3, -2)));
        assert_eq!(decode_control(&m[..15]), None);
        assert_eq!(record_site(&m), Some(CONTROL_EXIT));
    }

    #[test]
    fn helper_error_slots_sum_the_cpus() {
        let slot = |count: i64, code: i64| [count.to_le_bytes(), code.to_le_bytes()].concat();
        let cpus = [slot(2, -14), slot(0, 0), slot(1, -14)];
        assert_eq!(decode_helper_errors(cpus.iter().map(Vec::as_slice)), (3, -14));
        assert_eq!(decode_helper_errors([slot(0, 0).as_slice()]), (0, 0));
    }
}
