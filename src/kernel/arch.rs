//! The machine: x86-64's `struct pt_regs` as BPF programs see it at a
//! kprobe or uprobe. One table serves function arguments (`e.argN` in the
//! System V order), the return value, the stack pointer, the instruction
//! pointer and USDT operands (which name registers in assembly syntax).

/// The 64-bit registers and their offsets in `struct pt_regs`.
const PT_REGS: &[(&str, u32)] = &[
    ("r15", 0),
    ("r14", 8),
    ("r13", 16),
    ("r12", 24),
    ("rbp", 32),
    ("rbx", 40),
    ("r11", 48),
    ("r10", 56),
    ("r9", 64),
    ("r8", 72),
    ("rax", 80),
    ("rcx", 88),
    ("rdx", 96),
    ("rsi", 104),
    ("rdi", 112),
    ("rip", 128),
    ("rsp", 152),
];

/// Integer arguments passed in registers, in order (System V x86-64).
pub const ARGUMENTS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];
/// `pt_regs` offset of the return value register.
pub const RETURN_VALUE: u32 = 80;
/// `pt_regs` offset of the instruction pointer: at a uprobe, the probed
/// instruction's address.
pub const IP: u32 = 128;
/// `pt_regs` offset of the code segment: its low two bits are the
/// privilege level the registers were saved at (3: user mode).
pub const CS: u32 = 136;
/// `pt_regs` offset of the stack pointer.
pub const SP: u32 = 152;

/// `pt_regs` offset of integer argument `i` when it is passed in a
/// register (the first six), else None.
pub fn argument_offset(i: u32) -> Option<u32> {
    ARGUMENTS.get(i as usize).and_then(|r| register_offset(r)).map(|(off, _)| off)
}

/// Where argument `i` (7th and later) lies relative to the stack pointer
/// at function entry: above the return address, at sp + 8, sp + 16, ...
pub fn argument_stack_offset(i: u32) -> i64 {
    8 * (i as i64 - ARGUMENTS.len() as i64 + 1)
}

/// A register by its name in assembly (`rdi`, `edi`, `r8d`, `al`, `ah`...):
/// (offset in `struct pt_regs`, width in bytes). USDT operands name them.
pub fn register_offset(name: &str) -> Option<(u32, u32)> {
    let find = |n: &str| PT_REGS.iter().find(|r| r.0 == n).map(|r| r.1);
    if let Some(off) = find(name) {
        return Some((off, 8));
    }
    // r8..r15 with d/w/b (or l) suffixes.
    if let Some(rest) = name.strip_prefix('r') {
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if !digits.is_empty() {
            let suffix = &rest[digits.len()..];
            let off = find(&format!("r{digits}"))?;
            let width = match suffix {
                "d" => 4,
                "w" => 2,
                "b" | "l" => 1,
                _ => return None,
            };
            return Some((off, width));
        }
    }
    // Legacy registers: eax/ax/al/ah, esi/si/sil, ebp/bp/bpl, ...
    const LEGACY: &[(&str, &str)] = &[("a", "rax"), ("b", "rbx"), ("c", "rcx"), ("d", "rdx")];
    for (l, full) in LEGACY {
        let off = find(full)?;
        if name == format!("e{l}x") {
            return Some((off, 4));
        }
        if name == format!("{l}x") {
            return Some((off, 2));
        }
        if name == format!("{l}l") {
            return Some((off, 1));
        }
        if name == format!("{l}h") {
            return Some((off + 1, 1));
        }
    }
    const INDEX: &[(&str, &str)] = &[("si", "rsi"), ("di", "rdi"), ("bp", "rbp"), ("sp", "rsp"), ("ip", "rip")];
    for (l, full) in INDEX {
        let off = find(full)?;
        if name == format!("e{l}") {
            return Some((off, 4));
        }
        if name == *l {
            return Some((off, 2));
        }
        if name == format!("{l}l") {
            return Some((off, 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_registers_share_one_table() {
        let offsets: Vec<u32> = (0..6).map(|i| argument_offset(i).unwrap()).collect();
        assert_eq!(offsets, [112, 104, 96, 88, 72, 64]);
        assert_eq!(argument_offset(6), None);
        assert_eq!(argument_stack_offset(6), 8);
        assert_eq!(register_offset("rax"), Some((RETURN_VALUE, 8)));
        assert_eq!(register_offset("rsp"), Some((SP, 8)));
        assert_eq!(register_offset("rip"), Some((IP, 8)));
        assert_eq!(register_offset("edi"), Some((112, 4)));
        assert_eq!(register_offset("r8d"), Some((72, 4)));
        assert_eq!(register_offset("ah"), Some((81, 1)));
        assert_eq!(register_offset("xmm0"), None);
    }
}
