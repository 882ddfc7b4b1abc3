//! A disassembler printing instructions in the kernel verifier's C-like
//! syntax (`r1 = *(u64 *)(r10 -8)`, `if r1 == 0x0 goto pc+3`), so `--explain`
//! output and verifier logs read the same.

use crate::helpers;
use crate::insn::*;

fn size_name(code: u8) -> &'static str {
    match code & 0x18 {
        BPF_B => "u8",
        BPF_H => "u16",
        BPF_W => "u32",
        _ => "u64",
    }
}

fn alu_sym(op: u8) -> &'static str {
    match op {
        0x00 => "+=",
        0x10 => "-=",
        0x20 => "*=",
        0x30 => "/=",
        0x40 => "|=",
        0x50 => "&=",
        0x60 => "<<=",
        0x70 => ">>=",
        0x90 => "%=",
        0xa0 => "^=",
        0xb0 => "=",
        0xc0 => "s>>=",
        _ => "?=",
    }
}

fn jmp_sym(op: u8) -> &'static str {
    match op {
        0x10 => "==",
        0x20 => ">",
        0x30 => ">=",
        0x40 => "&",
        0x50 => "!=",
        0x60 => "s>",
        0x70 => "s>=",
        0xa0 => "<",
        0xb0 => "<=",
        0xc0 => "s<",
        0xd0 => "s<=",
        _ => "?",
    }
}

fn off(o: i16) -> String {
    if o < 0 {
        format!("{o}")
    } else {
        format!("+{o}")
    }
}

/// One instruction as text. `next` is the following slot (for `ld_imm64`).
pub fn format_insn(insn: &Insn, next: Option<&Insn>) -> String {
    let (dst, src) = (insn.dst, insn.src);
    let op = insn.code & 0xf0;
    match insn.class() {
        BPF_ALU64 | BPF_ALU => {
            let w = if insn.class() == BPF_ALU { "w" } else { "r" };
            if op == Alu::Neg as u8 {
                return format!("{w}{dst} = -{w}{dst}");
            }
            let rhs = if insn.code & BPF_X != 0 { format!("{w}{src}") } else { format!("{}", insn.imm) };
            format!("{w}{dst} {} {rhs}", alu_sym(op))
        }
        BPF_LDX => format!("r{dst} = *({} *)(r{src} {})", size_name(insn.code), off(insn.off)),
        BPF_STX if insn.code & 0xe0 == BPF_ATOMIC => {
            format!("lock *({} *)(r{dst} {}) += r{src}", size_name(insn.code), off(insn.off))
        }
        BPF_STX => format!("*({} *)(r{dst} {}) = r{src}", size_name(insn.code), off(insn.off)),
        BPF_ST => format!("*({} *)(r{dst} {}) = {}", size_name(insn.code), off(insn.off), insn.imm),
        BPF_LD if insn.is_ld_imm64() => {
            if src == BPF_PSEUDO_MAP_FD {
                format!("r{dst} = map[{}]", insn.imm)
            } else {
                let hi = next.map(|n| n.imm as u32 as u64).unwrap_or(0);
                format!("r{dst} = 0x{:x} ll", (hi << 32) | insn.imm as u32 as u64)
            }
        }
        BPF_JMP | BPF_JMP32 => match op {
            BPF_CALL => format!("call {}#{}", helpers::name(insn.imm as u32), insn.imm),
            BPF_EXIT => "exit".to_string(),
            0x00 => format!("goto pc{}", off(insn.off)),
            _ => {
                let rhs = if insn.code & BPF_X != 0 { format!("r{src}") } else { format!("0x{:x}", insn.imm) };
                format!("if r{dst} {} {rhs} goto pc{}", jmp_sym(op), off(insn.off))
            }
        },
        _ => format!("(unknown opcode 0x{:02x})", insn.code),
    }
}

/// The whole program, one `INDEX: TEXT` line per instruction (the second
/// slot of `ld_imm64` is skipped, as the verifier does).
pub fn disassemble(insns: &[Insn]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < insns.len() {
        out.push((i, format_insn(&insns[i], insns.get(i + 1))));
        i += if insns[i].is_ld_imm64() { 2 } else { 1 };
    }
    out
}
