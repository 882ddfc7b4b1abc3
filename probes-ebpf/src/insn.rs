//! The eBPF instruction model: one `Insn` per 8-byte slot, constructors for the
//! instruction classes rtrace emits, and encoding to the kernel's wire format.

/// A register, r0..r10.
pub type Reg = u8;

pub const R0: Reg = 0;
pub const R1: Reg = 1;
pub const R2: Reg = 2;
pub const R3: Reg = 3;
pub const R4: Reg = 4;
pub const R5: Reg = 5;
pub const R6: Reg = 6;
pub const R7: Reg = 7;
pub const R8: Reg = 8;
pub const R9: Reg = 9;
/// The read-only frame pointer.
pub const FP: Reg = 10;

// Instruction classes.
pub const BPF_LD: u8 = 0x00;
pub const BPF_LDX: u8 = 0x01;
pub const BPF_ST: u8 = 0x02;
pub const BPF_STX: u8 = 0x03;
pub const BPF_ALU: u8 = 0x04;
pub const BPF_JMP: u8 = 0x05;
pub const BPF_JMP32: u8 = 0x06;
pub const BPF_ALU64: u8 = 0x07;

// Sizes.
pub const BPF_W: u8 = 0x00;
pub const BPF_H: u8 = 0x08;
pub const BPF_B: u8 = 0x10;
pub const BPF_DW: u8 = 0x18;

// Modes.
pub const BPF_IMM: u8 = 0x00;
pub const BPF_MEM: u8 = 0x60;
pub const BPF_ATOMIC: u8 = 0xc0;

// Operand source.
pub const BPF_K: u8 = 0x00;
pub const BPF_X: u8 = 0x08;

/// `src` of a `BPF_LD_IMM64` whose immediate is a map file descriptor.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;

/// ALU operations (upper nibble of the opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Neg = 0x80,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
    Arsh = 0xc0,
}

/// Jump conditions (upper nibble of the opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cond {
    Always = 0x00,
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Set = 0x40,
    Ne = 0x50,
    Sgt = 0x60,
    Sge = 0x70,
    Lt = 0xa0,
    Le = 0xb0,
    Slt = 0xc0,
    Sle = 0xd0,
}

pub const BPF_CALL: u8 = 0x80;
pub const BPF_EXIT: u8 = 0x90;

/// Memory access width in bytes (1, 2, 4, 8) to the size bits.
pub fn size_bits(bytes: u32) -> u8 {
    match bytes {
        1 => BPF_B,
        2 => BPF_H,
        4 => BPF_W,
        _ => BPF_DW,
    }
}

/// One eBPF instruction slot. `BPF_LD_IMM64` takes two slots; the second has
/// opcode 0 and carries the upper 32 bits in `imm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: Reg,
    pub src: Reg,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub const fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn { code, dst, src, off, imm }
    }
    /// `dst = dst OP imm` (64-bit).
    pub fn alu_imm(op: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(BPF_ALU64 | op as u8 | BPF_K, dst, 0, 0, imm)
    }
    /// `dst = dst OP src` (64-bit).
    pub fn alu_reg(op: Alu, dst: Reg, src: Reg) -> Insn {
        Insn::new(BPF_ALU64 | op as u8 | BPF_X, dst, src, 0, 0)
    }
    /// `dst = dst OP imm` (32-bit, zero-extends).
    pub fn alu32_imm(op: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(BPF_ALU | op as u8 | BPF_K, dst, 0, 0, imm)
    }
    pub fn mov_imm(dst: Reg, imm: i32) -> Insn {
        Insn::alu_imm(Alu::Mov, dst, imm)
    }
    pub fn mov_reg(dst: Reg, src: Reg) -> Insn {
        Insn::alu_reg(Alu::Mov, dst, src)
    }
    /// `dst = (u32)src`.
    pub fn mov32_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(BPF_ALU | Alu::Mov as u8 | BPF_X, dst, src, 0, 0)
    }
    /// The two slots of `dst = imm64`.
    pub fn ld_imm64(dst: Reg, imm: i64) -> [Insn; 2] {
        [Insn::new(BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, imm as i32), Insn::new(0, 0, 0, 0, (imm >> 32) as i32)]
    }
    /// The two slots of `dst = map` (the loader patches `imm` with the map's fd).
    pub fn ld_map(dst: Reg, map_index: u32) -> [Insn; 2] {
        [Insn::new(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_index as i32), Insn::new(0, 0, 0, 0, 0)]
    }
    /// `dst = *(size *)(src + off)`.
    pub fn load(size: u32, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_LDX | BPF_MEM | size_bits(size), dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = src`.
    pub fn store(size: u32, dst: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(BPF_STX | BPF_MEM | size_bits(size), dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(size: u32, dst: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(BPF_ST | BPF_MEM | size_bits(size), dst, 0, off, imm)
    }
    /// `lock *(u64 *)(dst + off) += src`.
    pub fn atomic_add64(dst: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(BPF_STX | BPF_ATOMIC | BPF_DW, dst, src, off, Alu::Add as i32)
    }
    /// `src = atomic_fetch_add((u64 *)(dst + off), src)`: adds and gives back the old value.
    pub fn atomic_fetch_add64(dst: Reg, off: i16, src: Reg) -> Insn {
        const BPF_FETCH: i32 = 0x01;
        Insn::new(BPF_STX | BPF_ATOMIC | BPF_DW, dst, src, off, Alu::Add as i32 | BPF_FETCH)
    }
    /// `if dst COND imm goto +off`.
    pub fn jmp_imm(cond: Cond, dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(BPF_JMP | cond as u8 | BPF_K, dst, 0, off, imm)
    }
    /// `if dst COND src goto +off`.
    pub fn jmp_reg(cond: Cond, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(BPF_JMP | cond as u8 | BPF_X, dst, src, off, 0)
    }
    pub fn ja(off: i16) -> Insn {
        Insn::new(BPF_JMP | Cond::Always as u8, 0, 0, off, 0)
    }
    pub fn call(helper: u32) -> Insn {
        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, helper as i32)
    }
    pub fn exit() -> Insn {
        Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
    }

    pub fn class(&self) -> u8 {
        self.code & 0x07
    }
    pub fn is_jump(&self) -> bool {
        matches!(self.class(), BPF_JMP | BPF_JMP32) && self.code & 0xf0 != BPF_CALL && self.code & 0xf0 != BPF_EXIT
    }
    pub fn is_ld_imm64(&self) -> bool {
        self.code == BPF_LD | BPF_DW | BPF_IMM
    }

    /// The kernel's `struct bpf_insn` encoding.
    pub fn encode(&self) -> u64 {
        let regs = (self.dst & 0x0f) | ((self.src & 0x0f) << 4);
        (self.code as u64) | ((regs as u64) << 8) | ((self.off as u16 as u64) << 16) | ((self.imm as u32 as u64) << 32)
    }
}

/// The program as the bytes `bpf_prog_load` takes (little-endian hosts).
pub fn to_bytes(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.encode().to_le_bytes()).collect()
}
