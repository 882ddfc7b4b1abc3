//! Shared helpers for the code generator's tests: IR builders, a static
//! register/stack/jump check of generated code, and an rbpf harness with
//! stubbed BPF helpers (maps, ring buffers, task info, memory reads).

#![allow(dead_code)]

use std::cell::RefCell;

use probes_ebpf::helpers as h;
use probes_ebpf::insn::*;
use probes_ebpf::ir::*;
use probes_ebpf::{disasm, generate, Generated};

// ---------------------------------------------------------------------------
// IR builders

pub fn sp(line: u32, col: u32) -> Span {
    Span { line, col }
}

pub fn at(line: u32, col: u32, kind: StmtKind) -> Stmt {
    Stmt { kind, span: sp(line, col) }
}

/// A statement at 1:1.
pub fn st(kind: StmtKind) -> Stmt {
    at(1, 1, kind)
}

pub fn int(v: i64) -> Expr {
    Expr::Int(v)
}

/// A string literal, NUL-terminated (`len` = bytes + 1).
pub fn lit(s: &str) -> Expr {
    Expr::Str { bytes: s.as_bytes().to_vec(), len: s.len() as u32 + 1 }
}

pub fn local(id: LocalId) -> Expr {
    Expr::Local(id)
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary(op, Box::new(a), Box::new(b))
}

pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

pub fn un(op: UnOp, a: Expr) -> Expr {
    Expr::Unary(op, Box::new(a))
}

pub fn and(a: Expr, b: Expr) -> Expr {
    Expr::LogicalAnd(Box::new(a), Box::new(b))
}

pub fn or(a: Expr, b: Expr) -> Expr {
    Expr::LogicalOr(Box::new(a), Box::new(b))
}

pub fn cond(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::Cond(Box::new(c), Box::new(a), Box::new(b))
}

pub fn str_eq(a: Expr, b: Expr) -> Expr {
    Expr::StrEq(Box::new(a), Box::new(b))
}

pub fn ctx_int(offset: u32, size: u32, signed: bool) -> Expr {
    Expr::CtxInt { offset, size, signed }
}

/// A signed 64-bit context field.
pub fn ctx_i64(offset: u32) -> Expr {
    ctx_int(offset, 8, true)
}

pub fn map_get(map: MapId, key: Vec<Expr>) -> Expr {
    Expr::MapGet { map, key }
}

pub fn map_contains(map: MapId, key: Vec<Expr>) -> Expr {
    Expr::MapContains { map, key }
}

pub fn set_local(id: LocalId, e: Expr) -> StmtKind {
    StmtKind::SetLocal(id, e)
}

pub fn store(map: MapId, key: Vec<Expr>, value: Expr) -> StmtKind {
    StmtKind::MapStore { map, key, value }
}

pub fn update(map: MapId, key: Vec<Expr>, op: BinOp, value: Expr) -> StmtKind {
    StmtKind::MapUpdate { map, key, op, value }
}

pub fn agg(map: MapId, key: Vec<Expr>, op: AggOp, value: Option<Expr>) -> StmtKind {
    StmtKind::Aggregate { map, key, op, value }
}

pub fn if_(c: Expr, then: Vec<Stmt>, otherwise: Vec<Stmt>) -> StmtKind {
    StmtKind::If { cond: c, then, otherwise }
}

pub fn value_map(key: Vec<Ty>, value: Ty) -> MapLayout {
    MapLayout { key, value: ValueKind::Value(value) }
}

pub fn agg_map(key: Vec<Ty>, kind: AggKind) -> MapLayout {
    MapLayout { key, value: ValueKind::Agg(kind) }
}

pub fn ringbuf_map() -> MapLayout {
    MapLayout { key: vec![], value: ValueKind::RingBuf }
}

/// A tracepoint program.
pub fn program(locals: Vec<Ty>, maps: Vec<MapLayout>, body: Vec<Stmt>) -> Program {
    Program {
        name: "test".into(),
        context: ContextKind::Tracepoint,
        locals,
        maps,
        body,
        possible_cpus: 2,
        helper_checks: None,
        arith_errors: None,
    }
}

// ---------------------------------------------------------------------------
// Key / value encodings

/// An `Int` key or value part.
pub fn ik(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A `Bytes(n)` key or value part: NUL-padded to its 8-aligned slot.
pub fn sk(s: &str, n: u32) -> Vec<u8> {
    let slot = Ty::Bytes(n).slot_size() as usize;
    assert!(s.len() <= slot);
    let mut v = s.as_bytes().to_vec();
    v.resize(slot, 0);
    v
}

/// Concatenated key parts.
pub fn key(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

pub fn i64_at(bytes: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(bytes[off..off + 8].try_into().unwrap())
}

/// A string value's bytes up to the first NUL.
pub fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

// ---------------------------------------------------------------------------
// Disassembly and static checks

pub fn listing(g: &Generated) -> String {
    let mut out = String::new();
    for (i, text) in disasm::disassemble(&g.insns) {
        out.push_str(&format!("{i:4}: {text}\n"));
    }
    out
}

fn reg_bit(r: Reg) -> u16 {
    1 << r
}

/// Registers a helper reads (its arguments).
fn helper_args(id: u32) -> u8 {
    match id {
        h::MAP_LOOKUP_ELEM | h::MAP_DELETE_ELEM | h::GET_CURRENT_COMM | h::RINGBUF_SUBMIT | h::RINGBUF_QUERY => 2,
        h::MAP_UPDATE_ELEM | h::RINGBUF_OUTPUT => 4,
        h::MAP_LOOKUP_PERCPU_ELEM => 3,
        h::PROBE_READ
        | h::PROBE_READ_STR
        | h::PROBE_READ_KERNEL
        | h::PROBE_READ_KERNEL_STR
        | h::PROBE_READ_USER
        | h::PROBE_READ_USER_STR
        | h::RINGBUF_RESERVE => 3,
        _ => 0,
    }
}

/// What the kernel verifier would check first, without a kernel: every jump
/// goes forward to an instruction boundary inside the program, no register is
/// read before it is written on every path to it (helper calls clobber r1-r5),
/// frame-pointer accesses stay within the reported stack size, map
/// relocations point at map loads, and spans cover every instruction.
pub fn check_static(g: &Generated) -> Result<(), String> {
    let insns = &g.insns;
    let n = insns.len();
    if g.spans.len() != n {
        return Err(format!("{} spans for {} instructions", g.spans.len(), n));
    }
    if g.stack_size > 512 {
        return Err(format!("stack size {} > 512", g.stack_size));
    }
    // Instruction boundaries (the second slot of ld_imm64 is not one).
    let mut boundary = vec![true; n];
    let mut i = 0;
    while i < n {
        if insns[i].is_ld_imm64() {
            if i + 1 >= n || insns[i + 1].code != 0 {
                return Err(format!("insn {i}: incomplete ld_imm64"));
            }
            boundary[i + 1] = false;
            i += 2;
        } else {
            i += 1;
        }
    }
    for &(at, map) in &g.map_relocs {
        let insn = insns.get(at).ok_or_else(|| format!("map reloc at {at} out of range"))?;
        if !insn.is_ld_imm64() || insn.src != BPF_PSEUDO_MAP_FD || insn.imm as u32 != map {
            return Err(format!("map reloc at {at} for map {map} does not point at its map load"));
        }
    }
    let relocs =
        insns.iter().enumerate().filter(|(i, x)| boundary[*i] && x.is_ld_imm64() && x.src == BPF_PSEUDO_MAP_FD).count();
    if relocs != g.map_relocs.len() {
        return Err(format!("{relocs} map loads but {} relocations", g.map_relocs.len()));
    }
    match insns.last() {
        Some(x) if x.code == BPF_JMP | BPF_EXIT => {}
        _ => return Err("program does not end with exit".into()),
    }

    // Must-be-initialized registers at each instruction (forward dataflow;
    // all jumps are forward, so one pass in order reaches a fixpoint).
    let mut state: Vec<Option<u16>> = vec![None; n];
    state[0] = Some(reg_bit(R1) | reg_bit(FP));
    let scratch: u16 = (1..=5).map(reg_bit).fold(0, |a, b| a | b);
    for i in 0..n {
        if !boundary[i] {
            continue;
        }
        let Some(init) = state[i] else { continue }; // unreachable
        let x = insns[i];
        let need = |r: Reg, what: &str| -> Result<(), String> {
            if r > 10 {
                return Err(format!("insn {i}: bad register r{r}"));
            }
            if init & reg_bit(r) == 0 {
                Err(format!("insn {i}: {what} reads r{r} before it is written"))
            } else {
                Ok(())
            }
        };
        let mut out = init;
        let mut succ: Vec<usize> = Vec::new();
        let mut falls = true;
        match x.class() {
            BPF_ALU | BPF_ALU64 => {
                let op = x.code & 0xf0;
                if x.dst == FP {
                    return Err(format!("insn {i}: writes r10"));
                }
                if x.code & BPF_X != 0 {
                    need(x.src, "alu")?;
                }
                if op != Alu::Mov as u8 {
                    need(x.dst, "alu")?;
                }
                out |= reg_bit(x.dst);
            }
            BPF_LDX => {
                need(x.src, "load")?;
                if x.dst == FP {
                    return Err(format!("insn {i}: writes r10"));
                }
                check_fp(g, i, x.src, x.off, x.code)?;
                out |= reg_bit(x.dst);
            }
            BPF_STX => {
                need(x.dst, "store")?;
                need(x.src, "store")?;
                check_fp(g, i, x.dst, x.off, x.code)?;
            }
            BPF_ST => {
                need(x.dst, "store")?;
                check_fp(g, i, x.dst, x.off, x.code)?;
            }
            BPF_LD if x.is_ld_imm64() => {
                out |= reg_bit(x.dst);
                succ.push(i + 2);
                falls = false;
            }
            BPF_JMP | BPF_JMP32 => {
                let op = x.code & 0xf0;
                if op == BPF_CALL {
                    for r in 1..=helper_args(x.imm as u32) {
                        need(r, "helper call")?;
                    }
                    out = (out & !scratch) | reg_bit(R0);
                } else if op == BPF_EXIT {
                    need(R0, "exit")?;
                    falls = false;
                } else {
                    if op != 0 {
                        need(x.dst, "jump")?;
                        if x.code & BPF_X != 0 {
                            need(x.src, "jump")?;
                        }
                    }
                    if x.off < 0 {
                        return Err(format!("insn {i}: backward jump"));
                    }
                    let t = i + 1 + x.off as usize;
                    if t >= n || !boundary[t] {
                        return Err(format!("insn {i}: jump to {t} is not an instruction"));
                    }
                    succ.push(t);
                    if op == 0 {
                        falls = false;
                    }
                }
            }
            _ => return Err(format!("insn {i}: unexpected opcode {:#x}", x.code)),
        }
        if falls {
            succ.push(i + 1);
        }
        for t in succ {
            if t >= n {
                return Err(format!("insn {i}: falls off the end"));
            }
            state[t] = Some(match state[t] {
                Some(s) => s & out,
                None => out,
            });
        }
    }
    Ok(())
}

fn check_fp(g: &Generated, i: usize, base: Reg, off: i16, code: u8) -> Result<(), String> {
    if base != FP {
        return Ok(());
    }
    let size = match code & 0x18 {
        BPF_B => 1,
        BPF_H => 2,
        BPF_W => 4,
        _ => 8,
    };
    let lo = off as i32;
    if lo < -(g.stack_size as i32) || lo + size > 0 {
        return Err(format!("insn {i}: stack access at fp{lo} (size {size}) outside the {}-byte frame", g.stack_size));
    }
    Ok(())
}

/// Generate code and run the static checks; panics with the listing on failure.
pub fn gen_checked(prog: &Program) -> Generated {
    let g = generate(prog).unwrap_or_else(|e| panic!("codegen failed: {e}"));
    if let Err(e) = check_static(&g) {
        panic!("static check failed: {e}\n{}", listing(&g));
    }
    g
}

// ---------------------------------------------------------------------------
// The stub kernel

pub const TGID: u64 = 4242;
pub const TID: u64 = 4250;
pub const UID: u64 = 1000;
pub const GID: u64 = 100;
pub const CPU: u64 = 3;
pub const NSECS: u64 = 123_456_789_012;
pub const CGROUP: u64 = 0x1234;
pub const RAND: u64 = 0xdead_beef;
pub const TASK: u64 = 0xffff_8880_1234_5678;
pub const COMM: &str = "bash";

const ARENA_SIZE: usize = 1 << 18;
const EEXIST: i64 = -17;
const ENOENT: i64 = -2;
const EINVAL: i64 = -22;
const E2BIG: i64 = -7;
pub const EFAULT: i64 = -14;

struct StubMap {
    layout: MapLayout,
    key_size: usize,
    value_size: usize,
    /// Key bytes and the arena offset of the value, in insertion order.
    entries: Vec<(Vec<u8>, usize)>,
    /// Per-CPU maps: the values of a second CPU (CPU 1; `entries` is CPU 0).
    cpu1: Vec<(Vec<u8>, usize)>,
    lookups: u64,
}

/// One ring buffer record (submitted or output), with the flags passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub map: u32,
    pub bytes: Vec<u8>,
    pub flags: u64,
}

struct Kernel {
    arena: *mut u8,
    next: usize,
    maps: Vec<StubMap>,
    pending: Vec<(u64, u32, usize)>,
    records: Vec<Record>,
    comm: [u8; 16],
    errors: Vec<String>,
    /// What `ringbuf_query(BPF_RB_AVAIL_DATA)` answers.
    ring_avail: u64,
    /// Whether `ringbuf_output` fails (ring full).
    ring_full: bool,
}

impl Kernel {
    fn alloc(&mut self, size: usize) -> usize {
        let size = (size.max(1) + 7) & !7;
        assert!(self.next + size <= ARENA_SIZE, "stub arena exhausted");
        let at = self.next;
        self.next += size;
        at
    }
}

thread_local! {
    static KERNEL: RefCell<Option<Kernel>> = const { RefCell::new(None) };
}

fn with_kernel<T>(f: impl FnOnce(&mut Kernel) -> T) -> T {
    KERNEL.with(|k| f(k.borrow_mut().as_mut().expect("no harness on this thread")))
}

unsafe fn read_bytes(ptr: u64, len: usize) -> Vec<u8> {
    std::slice::from_raw_parts(ptr as *const u8, len).to_vec()
}

fn map_of(k: &mut Kernel, map: u64, what: &str) -> Option<usize> {
    if (map as usize) < k.maps.len() {
        Some(map as usize)
    } else {
        k.errors.push(format!("{what}: no map {map}"));
        None
    }
}

fn stub_lookup(map: u64, key: u64, _: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(m) = map_of(k, map, "map_lookup_elem") else { return 0 };
        let base = k.arena as u64;
        let m = &mut k.maps[m];
        m.lookups += 1;
        let key = unsafe { read_bytes(key, m.key_size) };
        match m.entries.iter().find(|(kb, _)| *kb == key) {
            Some(&(_, off)) => base + off as u64,
            None => 0,
        }
    })
}

/// `map_lookup_percpu_elem`: CPU 0 is the map's own entries, CPU 1 the
/// values put with [`Harness::put_cpu1`]; the stub kernel has two CPUs.
fn stub_lookup_percpu(map: u64, key: u64, cpu: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(m) = map_of(k, map, "map_lookup_percpu_elem") else { return 0 };
        let base = k.arena as u64;
        let m = &mut k.maps[m];
        if !m.layout.is_percpu() {
            k.errors.push("map_lookup_percpu_elem on a map that is not per-CPU".into());
            return 0;
        }
        m.lookups += 1;
        let key = unsafe { read_bytes(key, m.key_size) };
        let slots = match cpu {
            0 => &m.entries,
            1 => &m.cpu1,
            _ => return 0,
        };
        match slots.iter().find(|(kb, _)| *kb == key) {
            Some(&(_, off)) => base + off as u64,
            None => 0,
        }
    })
}

fn stub_update(map: u64, key: u64, value: u64, flags: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(mi) = map_of(k, map, "map_update_elem") else { return EINVAL as u64 };
        if flags > 2 {
            k.errors.push(format!("map_update_elem: bad flags {flags}"));
            return EINVAL as u64;
        }
        let (ks, vs) = (k.maps[mi].key_size, k.maps[mi].value_size);
        if matches!(k.maps[mi].layout.value, ValueKind::RingBuf) {
            k.errors.push("map_update_elem on a ring buffer".into());
            return EINVAL as u64;
        }
        let kb = unsafe { read_bytes(key, ks) };
        let vb = unsafe { read_bytes(value, vs) };
        let is_array = k.maps[mi].layout.is_array();
        let existing = k.maps[mi].entries.iter().find(|(e, _)| *e == kb).map(|&(_, o)| o);
        if is_array && existing.is_none() {
            return E2BIG as u64;
        }
        let off = match (existing, flags) {
            (Some(_), 1) => return EEXIST as u64,
            (None, 2) => return ENOENT as u64,
            (Some(o), _) => o,
            (None, _) => {
                let o = k.alloc(vs);
                k.maps[mi].entries.push((kb, o));
                o
            }
        };
        unsafe { std::ptr::copy_nonoverlapping(vb.as_ptr(), k.arena.add(off), vs) };
        0
    })
}

fn stub_delete(map: u64, key: u64, _: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(mi) = map_of(k, map, "map_delete_elem") else { return EINVAL as u64 };
        let m = &mut k.maps[mi];
        if m.layout.is_array() {
            return EINVAL as u64;
        }
        let kb = unsafe { read_bytes(key, m.key_size) };
        match m.entries.iter().position(|(e, _)| *e == kb) {
            Some(p) => {
                m.entries.remove(p);
                0
            }
            None => ENOENT as u64,
        }
    })
}

/// Reads from the first page fail as the kernel's do: the buffer zeroed, -EFAULT.
fn unreadable(dst: u64, size: u64, src: u64) -> bool {
    if src >= 4096 {
        return false;
    }
    unsafe { std::ptr::write_bytes(dst as *mut u8, 0, size as usize) };
    true
}

fn stub_probe_read(dst: u64, size: u64, src: u64, _: u64, _: u64) -> u64 {
    if unreadable(dst, size, src) {
        return EFAULT as u64;
    }
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size as usize) };
    0
}

fn stub_probe_read_str(dst: u64, size: u64, src: u64, _: u64, _: u64) -> u64 {
    if size == 0 {
        return EINVAL as u64;
    }
    if unreadable(dst, size, src) {
        return EFAULT as u64;
    }
    let (dst, src) = (dst as *mut u8, src as *const u8);
    let mut n = 0usize;
    unsafe {
        while n + 1 < size as usize {
            let c = *src.add(n);
            if c == 0 {
                break;
            }
            *dst.add(n) = c;
            n += 1;
        }
        *dst.add(n) = 0;
    }
    (n + 1) as u64
}

fn stub_ktime(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    NSECS
}

fn stub_pid_tgid(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    TGID << 32 | TID
}

fn stub_uid_gid(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    GID << 32 | UID
}

fn stub_cpu(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    CPU
}

fn stub_cgroup(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    CGROUP
}

fn stub_rand(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    RAND
}

fn stub_task(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    TASK
}

fn stub_comm(buf: u64, size: u64, _: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        if size == 0 {
            return EINVAL as u64;
        }
        // strscpy_pad: at most size-1 characters, then NUL padding.
        let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, size as usize) };
        out.fill(0);
        let n = k.comm.iter().position(|&c| c == 0).unwrap_or(16).min(size as usize - 1);
        out[..n].copy_from_slice(&k.comm[..n]);
        0
    })
}

fn stub_ringbuf_reserve(map: u64, size: u64, flags: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(mi) = map_of(k, map, "ringbuf_reserve") else { return 0 };
        if k.maps[mi].layout.value != ValueKind::RingBuf || flags != 0 {
            k.errors.push(format!("ringbuf_reserve on map {map} with flags {flags}"));
            return 0;
        }
        let off = k.alloc(size as usize);
        let ptr = k.arena as u64 + off as u64;
        k.pending.push((ptr, map as u32, size as usize));
        ptr
    })
}

fn stub_ringbuf_submit(ptr: u64, flags: u64, _: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        match k.pending.iter().position(|&(p, _, _)| p == ptr) {
            Some(i) => {
                let (p, map, size) = k.pending.remove(i);
                let bytes = unsafe { read_bytes(p, size) };
                k.records.push(Record { map, bytes, flags });
            }
            None => k.errors.push(format!("ringbuf_submit of unknown pointer {ptr:#x}")),
        }
        0
    })
}

/// The program as rbpf should run it. rbpf 0.4 zero-extends the immediate of
/// the unsigned 64-bit conditional jumps where the kernel sign-extends it, so
/// `if rX == -1` is rewritten into the equivalent pair of signed jumps, and
/// every jump offset is relocated. Other unsigned jumps with a negative
/// immediate are not emitted by the code generator and are refused here.
pub fn for_rbpf(insns: &[Insn]) -> Vec<Insn> {
    let is_jmp_k = |x: &Insn, c: Cond| x.code == BPF_JMP | c as u8 | BPF_K;
    let expands = |x: &Insn| x.imm < 0 && (is_jmp_k(x, Cond::Eq) || is_jmp_k(x, Cond::Ne));
    let mut new_index = Vec::with_capacity(insns.len() + 1);
    let mut n = 0usize;
    for x in insns {
        new_index.push(n);
        n += if expands(x) { 2 } else { 1 };
    }
    new_index.push(n);
    let mut out: Vec<Insn> = Vec::with_capacity(n);
    let retarget = |old_at: usize, x: &Insn, new_at: usize| -> i16 {
        let target = (old_at as i64 + 1 + x.off as i64) as usize;
        (new_index[target] as i64 - new_at as i64 - 1) as i16
    };
    for (i, x) in insns.iter().enumerate() {
        let unsigned_k = [Cond::Gt, Cond::Ge, Cond::Lt, Cond::Le, Cond::Set].iter().any(|&c| is_jmp_k(x, c));
        assert!(!(unsigned_k && x.imm < 0), "insn {i}: unsigned jump with a negative immediate");
        if expands(x) {
            let at = out.len();
            if is_jmp_k(x, Cond::Eq) {
                // == imm  <=>  !(dst s< imm) && dst s<= imm
                out.push(Insn::jmp_imm(Cond::Slt, x.dst, x.imm, 1));
                out.push(Insn::jmp_imm(Cond::Sle, x.dst, x.imm, retarget(i, x, at + 1)));
            } else {
                // != imm  <=>  dst s< imm || dst s> imm
                out.push(Insn::jmp_imm(Cond::Slt, x.dst, x.imm, retarget(i, x, at)));
                out.push(Insn::jmp_imm(Cond::Sgt, x.dst, x.imm, retarget(i, x, at + 1)));
            }
        } else if x.is_jump() {
            let at = out.len();
            let mut y = *x;
            y.off = retarget(i, x, at);
            out.push(y);
        } else {
            out.push(*x);
        }
    }
    out
}

fn stub_ringbuf_output(map: u64, data: u64, size: u64, flags: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(mi) = map_of(k, map, "ringbuf_output") else { return EINVAL as u64 };
        if k.maps[mi].layout.value != ValueKind::RingBuf || flags > 3 {
            k.errors.push(format!("ringbuf_output on map {map} with flags {flags}"));
            return EINVAL as u64;
        }
        if k.ring_full {
            return -11i64 as u64; // EAGAIN
        }
        let bytes = unsafe { read_bytes(data, size as usize) };
        k.records.push(Record { map: map as u32, bytes, flags });
        0
    })
}

fn stub_ringbuf_query(map: u64, flags: u64, _: u64, _: u64, _: u64) -> u64 {
    with_kernel(|k| {
        let Some(mi) = map_of(k, map, "ringbuf_query") else { return 0 };
        if k.maps[mi].layout.value != ValueKind::RingBuf || flags != 0 {
            k.errors.push(format!("ringbuf_query on map {map} with flags {flags}"));
        }
        k.ring_avail
    })
}

/// Generated code loaded into rbpf against a fresh stub kernel. State (maps,
/// records) persists across [`Harness::run`] calls, as it does across events.
pub struct Harness {
    pub gen: Generated,
    bytes: Vec<u8>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        KERNEL.with(|k| {
            if let Some(kernel) = k.borrow_mut().take() {
                unsafe {
                    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(kernel.arena, ARENA_SIZE)));
                }
            }
        });
    }
}

impl Harness {
    pub fn new(prog: &Program) -> Harness {
        let gen = gen_checked(prog);
        let bytes = to_bytes(&for_rbpf(&gen.insns));
        let arena = Box::into_raw(vec![0u8; ARENA_SIZE].into_boxed_slice()) as *mut u8;
        let mut kernel = Kernel {
            arena,
            next: 0,
            maps: Vec::new(),
            pending: Vec::new(),
            records: Vec::new(),
            comm: [0; 16],
            errors: Vec::new(),
            ring_avail: 0,
            ring_full: false,
        };
        kernel.comm[..COMM.len()].copy_from_slice(COMM.as_bytes());
        for layout in &prog.maps {
            let mut m = StubMap {
                layout: layout.clone(),
                key_size: layout.key_size() as usize,
                value_size: layout.value_size() as usize,
                entries: Vec::new(),
                cpu1: Vec::new(),
                lookups: 0,
            };
            if layout.is_array() {
                assert_eq!(m.key_size, 4);
                let off = kernel.alloc(m.value_size);
                m.entries.push((vec![0; 4], off));
            }
            kernel.maps.push(m);
        }
        KERNEL.with(|k| {
            let old = k.borrow_mut().replace(kernel);
            assert!(old.is_none(), "one harness at a time per thread");
        });
        Harness { gen, bytes }
    }

    pub fn set_comm(&self, comm: &str) {
        with_kernel(|k| {
            k.comm = [0; 16];
            k.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        });
    }

    /// Set what `ringbuf_query` reports as pending and whether `ringbuf_output` fails.
    pub fn set_ring(&self, avail: u64, full: bool) {
        with_kernel(|k| {
            k.ring_avail = avail;
            k.ring_full = full;
        });
    }

    /// Run the program once over `ctx`; returns r0.
    pub fn run(&self, ctx: &mut [u8]) -> u64 {
        assert!(!ctx.is_empty(), "rbpf passes r1 = 0 for an empty context");
        let mut vm = rbpf::EbpfVmRaw::new(Some(&self.bytes))
            .unwrap_or_else(|e| panic!("rbpf rejected the program: {e}\n{}", listing(&self.gen)));
        type Helper = fn(u64, u64, u64, u64, u64) -> u64;
        let helpers: [(u32, Helper); 20] = [
            (h::MAP_LOOKUP_ELEM, stub_lookup),
            (h::MAP_LOOKUP_PERCPU_ELEM, stub_lookup_percpu),
            (h::MAP_UPDATE_ELEM, stub_update),
            (h::MAP_DELETE_ELEM, stub_delete),
            (h::KTIME_GET_NS, stub_ktime),
            (h::GET_CURRENT_PID_TGID, stub_pid_tgid),
            (h::GET_CURRENT_UID_GID, stub_uid_gid),
            (h::GET_CURRENT_COMM, stub_comm),
            (h::GET_SMP_PROCESSOR_ID, stub_cpu),
            (h::GET_CURRENT_CGROUP_ID, stub_cgroup),
            (h::GET_PRANDOM_U32, stub_rand),
            (h::GET_CURRENT_TASK, stub_task),
            (h::PROBE_READ_KERNEL, stub_probe_read),
            (h::PROBE_READ_USER, stub_probe_read),
            (h::PROBE_READ_KERNEL_STR, stub_probe_read_str),
            (h::PROBE_READ_USER_STR, stub_probe_read_str),
            (h::RINGBUF_RESERVE, stub_ringbuf_reserve),
            (h::RINGBUF_SUBMIT, stub_ringbuf_submit),
            (h::RINGBUF_OUTPUT, stub_ringbuf_output),
            (h::RINGBUF_QUERY, stub_ringbuf_query),
        ];
        for (id, f) in helpers {
            vm.register_helper(id, f).unwrap();
        }
        let arena = with_kernel(|k| k.arena as u64);
        vm.register_allowed_memory(arena..arena + ARENA_SIZE as u64);
        let r0 = vm.execute_program(ctx).unwrap_or_else(|e| panic!("execution failed: {e}\n{}", listing(&self.gen)));
        let errors = with_kernel(|k| std::mem::take(&mut k.errors));
        assert!(errors.is_empty(), "helper misuse: {errors:?}\n{}", listing(&self.gen));
        r0
    }

    /// Run once with a zeroed 64-byte context.
    pub fn run0(&self) -> u64 {
        self.run(&mut [0u8; 64])
    }

    /// The map's entries: key bytes and value bytes, in insertion order.
    pub fn entries(&self, map: MapId) -> Vec<(Vec<u8>, Vec<u8>)> {
        with_kernel(|k| {
            let m = &k.maps[map as usize];
            m.entries
                .iter()
                .map(|(kb, off)| (kb.clone(), unsafe { read_bytes(k.arena as u64 + *off as u64, m.value_size) }))
                .collect()
        })
    }

    /// The value bytes stored under `key`, if present.
    pub fn value(&self, map: MapId, key: &[u8]) -> Option<Vec<u8>> {
        self.entries(map).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The first i64 of the value under `key`; panics when missing.
    pub fn int(&self, map: MapId, key: &[u8]) -> i64 {
        let v = self
            .value(map, key)
            .unwrap_or_else(|| panic!("map {map} has no key {key:?}; entries {:?}", self.entries(map)));
        i64_at(&v, 0)
    }

    /// `int` for a single-`Int` key.
    pub fn at(&self, map: MapId, k: i64) -> i64 {
        self.int(map, &ik(k))
    }

    /// Lookups done on `map` so far.
    pub fn lookups(&self, map: MapId) -> u64 {
        with_kernel(|k| k.maps[map as usize].lookups)
    }

    pub fn records(&self) -> Vec<Record> {
        with_kernel(|k| k.records.clone())
    }

    /// Set the value a per-CPU map holds for `key` on the second CPU.
    pub fn put_cpu1(&self, map: MapId, key: &[u8], value: &[u8]) {
        with_kernel(|k| {
            let vs = k.maps[map as usize].value_size;
            assert_eq!(vs, value.len());
            let o = k.alloc(vs);
            k.maps[map as usize].cpu1.retain(|(e, _)| e != key);
            k.maps[map as usize].cpu1.push((key.to_vec(), o));
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), k.arena.add(o), vs) };
        });
    }

    /// Insert an entry directly (as userspace would).
    pub fn put(&self, map: MapId, key: &[u8], value: &[u8]) {
        with_kernel(|k| {
            let vs = k.maps[map as usize].value_size;
            assert_eq!(k.maps[map as usize].key_size, key.len());
            assert_eq!(vs, value.len());
            let off = match k.maps[map as usize].entries.iter().find(|(e, _)| e == key) {
                Some(&(_, o)) => o,
                None => {
                    let o = k.alloc(vs);
                    k.maps[map as usize].entries.push((key.to_vec(), o));
                    o
                }
            };
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), k.arena.add(off), vs) };
        });
    }
}

/// A context buffer with little-endian fields written at given offsets.
pub struct Ctx(pub Vec<u8>);

impl Ctx {
    pub fn new(size: usize) -> Ctx {
        Ctx(vec![0; size])
    }
    pub fn i64(mut self, off: usize, v: i64) -> Ctx {
        self.0[off..off + 8].copy_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, off: usize, b: &[u8]) -> Ctx {
        self.0[off..off + b.len()].copy_from_slice(b);
        self
    }
    pub fn u32(mut self, off: usize, v: u32) -> Ctx {
        self.0[off..off + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
}
