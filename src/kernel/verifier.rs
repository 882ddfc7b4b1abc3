//! A program the verifier refused: the failing instruction and the
//! verifier's own reason, read from its log (the load is `sys::prog_load`).

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
