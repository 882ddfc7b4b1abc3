//! `bpf_prog_load` on raw instructions, with the verifier log kept for errors.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use probes_ebpf::insn::{to_bytes, Insn};

use super::LoadAttrs;

/// A program the kernel refused.
#[derive(Debug)]
pub struct LoadError {
    /// errno of the load.
    pub errno: i32,
    /// The verifier's log (may be empty).
    pub log: String,
}

impl LoadError {
    /// Index of the instruction the verifier complained about: the last
    /// `N: (..)` line of the log.
    pub fn failing_insn(&self) -> Option<usize> {
        self.log
            .lines()
            .rev()
            .filter_map(|l| {
                let (num, rest) = l.split_once(": (")?;
                let _ = rest;
                num.trim().parse::<usize>().ok()
            })
            .next()
    }

    /// The verifier's own reason: the last log line that isn't an instruction
    /// trace or statistics.
    pub fn reason(&self) -> String {
        let reason = self
            .log
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| {
                !l.is_empty()
                    && !l.starts_with("processed ")
                    && !l.contains(": (")
                    && !l.starts_with("verification time")
                    && !l.starts_with("stack depth")
                    && !is_register_state(l)
            })
            .map(str::to_string)
            .unwrap_or_else(|| std::io::Error::from_raw_os_error(self.errno).to_string());
        if reason.contains("on pointer prohibited") || reason.contains("pointer arithmetic") {
            return format!(
                "{reason} (this value is a kernel pointer here: compare it, add to it or read members through it)"
            );
        }
        reason
    }
}

/// A verifier line dumping register/stack state (`3: R1=ctx() R6=...`,
/// `R1_w=scalar()`), as opposed to a message about a register
/// (`R6 bitwise operator &= on pointer prohibited`).
fn is_register_state(line: &str) -> bool {
    let rest = match line.split_once(": ") {
        Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => line,
    };
    let Some(after_r) = rest.strip_prefix('R') else { return false };
    let after_digits = after_r.trim_start_matches(|c: char| c.is_ascii_digit());
    after_digits.len() < after_r.len() && (after_digits.starts_with('=') || after_digits.starts_with('_'))
}

/// Load `insns` (map fds already patched in) as a program of `prog_type`.
pub fn load_program(prog_type: u32, attrs: LoadAttrs, name: &str, insns: &[Insn]) -> Result<OwnedFd, LoadError> {
    let bytes = to_bytes(insns);
    let name = CString::new(sanitize_name(name)).unwrap_or_default();
    let license = c"GPL";
    // First try without a log (fast path); on failure, retry with one.
    let fd = unsafe { load_raw(prog_type, attrs, &name, license, &bytes, None) };
    if fd >= 0 {
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let mut log = vec![0u8; 4 << 20];
    let fd = unsafe { load_raw(prog_type, attrs, &name, license, &bytes, Some(&mut log)) };
    if fd >= 0 {
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Err(LoadError { errno, log: String::from_utf8_lossy(&log[..end]).into_owned() })
}

unsafe fn load_raw(
    prog_type: u32,
    attrs: LoadAttrs,
    name: &CString,
    license: &std::ffi::CStr,
    bytes: &[u8],
    log: Option<&mut Vec<u8>>,
) -> i32 {
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attrs.expected_attach_type,
        attach_btf_id: attrs.attach_btf_id,
        ..Default::default()
    };
    if let Some(buf) = log {
        opts.log_level = 1;
        opts.log_size = buf.len() as u32;
        opts.log_buf = buf.as_mut_ptr() as *mut _;
    }
    libbpf_sys::bpf_prog_load(
        prog_type,
        name.as_ptr(),
        license.as_ptr(),
        bytes.as_ptr() as *const libbpf_sys::bpf_insn,
        (bytes.len() / 8) as _,
        &mut opts,
    )
}

/// Kernel program names: at most 15 chars of `[A-Za-z0-9_.]`.
fn sanitize_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(15).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verifier log as the kernel writes it for an out-of-bounds context read.
    const LOG: &str = "0: R1=ctx() R10=fp0\n\
0: (7b) *(u64 *)(r10 -8) = r1          ; R1=ctx() R10=fp0 fp-8_w=ctx()\n\
1: (79) r1 = *(u64 *)(r10 -8)          ; R1_w=ctx() R10=fp0 fp-8_w=ctx()\n\
2: (79) r6 = *(u64 *)(r1 +4096)\n\
invalid bpf_context access off=4096 size=8\n\
processed 3 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 1\n";

    #[test]
    fn finds_the_rejected_instruction_and_the_reason() {
        let e = LoadError { errno: libc::EACCES, log: LOG.to_string() };
        assert_eq!(e.failing_insn(), Some(2));
        assert_eq!(e.reason(), "invalid bpf_context access off=4096 size=8");
    }

    #[test]
    fn register_messages_are_reasons_register_states_are_not() {
        let log = "2: (79) r6 = *(u64 *)(r1 +8)\n\
3: R1=ctx() R6=trusted_ptr_task_struct()\n\
3: (57) r6 &= 4095\n\
R6 bitwise operator &= on pointer prohibited\n\
processed 4 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n";
        let e = LoadError { errno: libc::EACCES, log: log.to_string() };
        assert_eq!(e.failing_insn(), Some(3));
        assert!(
            e.reason().starts_with("R6 bitwise operator &= on pointer prohibited (this value is a kernel pointer"),
            "{}",
            e.reason()
        );
        assert!(is_register_state("R1_w=scalar()"));
        assert!(!is_register_state("R6 invalid mem access 'scalar'"));
    }

    #[test]
    fn an_empty_log_falls_back_to_the_errno() {
        let e = LoadError { errno: libc::EPERM, log: String::new() };
        assert_eq!(e.failing_insn(), None);
        assert!(e.reason().contains("not permitted"), "{}", e.reason());
    }
}
