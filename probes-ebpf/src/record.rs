//! The wire format between generated programs and rtrace's reader, shared
//! by the code that writes records (`codegen`, through the IR's `Emit` and
//! `Control` statements) and the runtime that reads them.
//!
//! A data record is a header (`u32` site id, `u32` zero) and then each
//! field in its own 8-aligned slot ([`field_offsets`]). Control messages
//! travel on their own ring, [`CONTROL_SIZE`] bytes each: a `u32` kind
//! (below), the `u32` probe index, then the kind's `i64` payload (an exit
//! code, or a map id).

use crate::ir::{KernelAction, Ty};

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

/// An action's message ([`CONTROL_ACTION`]) is longer: after the payload,
/// the `u64` pid_tgid and the 16-byte comm of the task the action hit.
pub const CONTROL_ACTION_SIZE: u32 = 40;
pub const CONTROL_PID_TGID_AT: i16 = 16;
pub const CONTROL_COMM_AT: i16 = 24;

/// A control message from a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlMsg {
    pub kind: u32,
    pub probe: u32,
    pub arg: i64,
    /// For an action: the task it hit, as `(pid, tid, comm)`.
    pub task: Option<(u32, u32, String)>,
}

/// A control message; None when too short.
pub fn decode_control(rec: &[u8]) -> Option<ControlMsg> {
    let word =
        |at: i16| rec.get(at as usize..at as usize + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
    let arg = rec.get(CONTROL_ARG_AT as usize..CONTROL_SIZE as usize)?;
    let kind = word(CONTROL_KIND_AT)?;
    let task = match kind {
        CONTROL_ACTION => {
            let comm = rec.get(CONTROL_COMM_AT as usize..CONTROL_ACTION_SIZE as usize)?;
            let comm = comm.split(|&b| b == 0).next().unwrap_or_default();
            Some((
                word(CONTROL_PID_TGID_AT + 4)?,
                word(CONTROL_PID_TGID_AT)?,
                String::from_utf8_lossy(comm).into_owned(),
            ))
        }
        _ => None,
    };
    Some(ControlMsg { kind, probe: word(CONTROL_PROBE_AT)?, arg: i64::from_le_bytes(arg.try_into().ok()?), task })
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

/// An action a probe took in the kernel (`signal()`, `deny()`), for the
/// audit: the argument is [`action_code`]'s.
pub const CONTROL_ACTION: u32 = 6;

/// The argument of a [`CONTROL_ACTION`] message: the action (its kind and
/// value), whether it was only reported (`--monitor`) and where in the
/// script it is (line and column, 16 bits each).
pub fn action_code(action: KernelAction, monitored: bool, line: u32, col: u32) -> i64 {
    let (kind, value) = match action {
        KernelAction::Signal(sig) => (1, sig),
        KernelAction::Deny(errno) => (2, errno),
        KernelAction::Override(value) => (3, value as u16 as u32),
    };
    (kind << 56)
        | ((monitored as i64) << 55)
        | ((value as i64 & 0xffff) << 32)
        | ((line as i64 & 0xffff) << 16)
        | (col as i64 & 0xffff)
}

/// `(action, monitored, line, column)` of a [`CONTROL_ACTION`] argument.
pub fn decode_action(code: i64) -> (Option<KernelAction>, bool, u32, u32) {
    let value = ((code >> 32) & 0xffff) as u32;
    let action = match (code >> 56) & 0x7f {
        1 => Some(KernelAction::Signal(value)),
        2 => Some(KernelAction::Deny(value)),
        3 => Some(KernelAction::Override(value as u16 as i16)),
        _ => None,
    };
    (action, (code >> 55) & 1 == 1, ((code >> 16) & 0xffff) as u32, (code & 0xffff) as u32)
}

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
        assert_eq!(decode_control(&m), Some(ControlMsg { kind: CONTROL_EXIT, probe: 3, arg: -2, task: None }));
        assert_eq!(decode_control(&m[..15]), None);
        assert_eq!(record_site(&m), Some(CONTROL_EXIT));
    }

    #[test]
    fn action_messages_carry_the_task_and_the_place() {
        let mut m = vec![0u8; CONTROL_ACTION_SIZE as usize];
        m[0..4].copy_from_slice(&CONTROL_ACTION.to_le_bytes());
        m[8..16].copy_from_slice(&action_code(KernelAction::Deny(13), false, 70_000, 9).to_le_bytes());
        m[16..24].copy_from_slice(&((1234u64 << 32) | 1240).to_le_bytes());
        m[24..27].copy_from_slice(b"cat");
        let msg = decode_control(&m).unwrap();
        assert_eq!(msg.task, Some((1234, 1240, "cat".to_string())));
        // Lines past 65535 wrap (the audit names the probe too).
        assert_eq!(decode_action(msg.arg), (Some(KernelAction::Deny(13)), false, 70_000 & 0xffff, 9));
        let code = action_code(KernelAction::Override(-13), false, 7, 8);
        assert_eq!(decode_action(code), (Some(KernelAction::Override(-13)), false, 7, 8));
        let code = action_code(KernelAction::Signal(9), true, 3, 5);
        assert_eq!(decode_action(code), (Some(KernelAction::Signal(9)), true, 3, 5));
        assert_eq!(decode_control(&m[..39]).and_then(|m| m.task), None, "a short action message has no task");
    }

    #[test]
    fn helper_error_slots_sum_the_cpus() {
        let slot = |count: i64, code: i64| [count.to_le_bytes(), code.to_le_bytes()].concat();
        let cpus = [slot(2, -14), slot(0, 0), slot(1, -14)];
        assert_eq!(decode_helper_errors(cpus.iter().map(Vec::as_slice)), (3, -14));
        assert_eq!(decode_helper_errors([slot(0, 0).as_slice()]), (0, 0));
    }
}
