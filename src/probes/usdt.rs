//! `usdt:BIN:[PROVIDER:]NAME` (`U:`): statically defined probes from a
//! binary's `.note.stapsdt` notes (SystemTap's `<sys/sdt.h>`), attached as
//! uprobes. Semaphores are kept counted by the kernel (`ref_ctr_offset`)
//! while attached. Arguments (`e.arg0..`) come from the notes' x86-64
//! operand specs, turned into IR by [`arg_expr`].

use std::os::fd::BorrowedFd;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::{BinOp, ContextKind, Expr, Memory};

use super::listing::{binaries, matches, or_star, ListQuery, Listing};
use super::{uprobe, AttachPoint, AttachTarget, EventContext, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::arch;
use crate::kernel::link::Attachment;
use crate::kernel::sys;
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::symbols::{self, elf::ElfFile};
use crate::util::similar::suggest;
use crate::util::wildcard::has_wildcard;

pub struct Usdt;

/// Where a USDT argument's value lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgLocation {
    /// `$5`: a constant.
    Const(i64),
    /// `%edi`: a register, at `offset` in `struct pt_regs`, `width` bytes wide
    /// (`%ah`-style high bytes: offset + 1, width 1).
    Reg { offset: u32, width: u32 },
    /// `-16(%rbp)`, `8(%rax,%rdx,4)`: user memory at base + index * scale + disp
    /// (registers as pt_regs offsets).
    Mem { base: u32, index: Option<(u32, u8)>, disp: i64 },
    /// `counter(%rip)`, `table+8(%rip)`: a global variable of the binary, by
    /// symbol, as the note writes it.
    Global { symbol: String, addend: i64 },
    /// A global resolved against the probe site: user memory at the probe's
    /// runtime address (`pt_regs.ip`) + `delta`, so it works wherever the
    /// binary is loaded.
    IpRelative { delta: i64 },
    /// An operand form that can't be read (e.g. `%xmm0`), as written.
    Unsupported(String),
}

/// One argument of a USDT probe: `SIZE@OPERAND` (negative size = signed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtArg {
    pub size: u32,
    pub signed: bool,
    pub location: ArgLocation,
}

/// One probe site found in a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtProbe {
    pub provider: String,
    pub name: String,
    /// File offset of the probe's instruction.
    pub offset: u64,
    /// File offset of its semaphore (0: none).
    pub semaphore: u64,
    pub args: Vec<UsdtArg>,
    /// The operand specs as the note writes them (`-4@%edi 8@%rax`), for `-lv`.
    pub arg_text: String,
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn reg_operand(s: &str) -> Option<(u32, u32)> {
    arch::register_offset(s.trim().strip_prefix('%')?)
}

/// Parse one operand spec (`-4@%edi`, `8@-16(%rbp)`, `-4@$5`, `%rax`).
pub fn parse_arg(spec: &str) -> UsdtArg {
    let (size, signed, operand) = match spec.split_once('@') {
        Some((sz, op)) => match sz.parse::<i32>() {
            Ok(n) if matches!(n.unsigned_abs(), 1 | 2 | 4 | 8) => (n.unsigned_abs(), n < 0, op),
            _ => return UsdtArg { size: 8, signed: false, location: ArgLocation::Unsupported(spec.to_string()) },
        },
        None => (8, false, spec),
    };
    let unsupported = || ArgLocation::Unsupported(spec.to_string());
    let location = if let Some(c) = operand.strip_prefix('$') {
        parse_int(c).map(ArgLocation::Const).unwrap_or_else(unsupported)
    } else if operand.starts_with('%') {
        match reg_operand(operand) {
            Some((offset, width)) if offset != 128 => ArgLocation::Reg { offset, width },
            _ => unsupported(),
        }
    } else if let (Some(open), true) = (operand.find('('), operand.ends_with(')')) {
        let disp_text = &operand[..open];
        let disp = if disp_text.is_empty() { Some(0) } else { parse_int(disp_text) };
        let inner: Vec<&str> = operand[open + 1..operand.len() - 1].split(',').map(str::trim).collect();
        let base = inner.first().and_then(|b| reg_operand(b));
        let index = match inner.len() {
            1 => Some(None),
            2 | 3 => {
                let scale = if inner.len() == 3 { inner[2].parse::<u8>().ok() } else { Some(1) };
                match (reg_operand(inner[1]), scale) {
                    (Some((r, 8)), Some(s)) if matches!(s, 1 | 2 | 4 | 8) => Some(Some((r, s))),
                    _ => None,
                }
            }
            _ => None,
        };
        match (disp, base, index) {
            (Some(disp), Some((base, 8)), Some(index)) if base != 128 => ArgLocation::Mem { base, index, disp },
            // `sym(%rip)`, `sym+8(%rip)`: the address of a global.
            (None, Some((128, 8)), Some(None)) => match global_operand(disp_text) {
                Some((symbol, addend)) => ArgLocation::Global { symbol, addend },
                None => unsupported(),
            },
            _ => unsupported(),
        }
    } else {
        unsupported()
    };
    UsdtArg { size, signed, location }
}

/// `sym`, `sym+8`, `sym-4` → (sym, addend).
fn global_operand(text: &str) -> Option<(String, i64)> {
    let split = text.find(['+', '-']).unwrap_or(text.len());
    let (symbol, rest) = text.split_at(split);
    let valid = !symbol.is_empty() && symbol.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'));
    if !valid || symbol.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let addend = if rest.is_empty() { 0 } else { parse_int(rest)? };
    Some((symbol.to_string(), addend))
}

/// Parse a note's whole argument string (space separated).
pub fn parse_args(text: &str) -> Vec<UsdtArg> {
    text.split_whitespace().map(parse_arg).collect()
}

/// A USDT site: `e.argN` reads its operands (registers, memory, constants).
pub struct UsdtEvent {
    pub args: Vec<UsdtArg>,
}

impl EventContext for UsdtEvent {
    fn arg(&self, i: u32, probe: &str) -> Option<Result<Expr, String>> {
        Some(match self.args.get(i as usize) {
            Some(a) => arg_expr(a),
            None => Err(format!("`arg{i}`: {probe} has {} argument(s)", self.args.len())),
        })
    }
    fn retval(&self) -> Option<Expr> {
        Some(Expr::CtxInt { offset: arch::RETURN_VALUE, size: 8, signed: true })
    }
    fn user_memory(&self) -> bool {
        true
    }
}

/// The IR reading `arg` in a probe on `ContextKind::PtRegs`; an error
/// message for operand forms that can't be read.
pub fn arg_expr(arg: &UsdtArg) -> Result<Expr, String> {
    let reg = |offset: u32| Expr::CtxInt { offset, size: 8, signed: false };
    Ok(match &arg.location {
        ArgLocation::Const(v) => {
            let v = match (arg.size, arg.signed) {
                (8, _) => *v,
                (n, true) => (*v << (64 - n * 8)) >> (64 - n * 8),
                (n, false) => *v & ((1i64 << (n * 8)) - 1),
            };
            Expr::Int(v)
        }
        ArgLocation::Reg { offset, width } => {
            Expr::CtxInt { offset: *offset, size: arg.size.min(*width), signed: arg.signed }
        }
        ArgLocation::Mem { base, index, disp } => {
            let mut addr = reg(*base);
            if let Some((i, scale)) = index {
                let scaled = Expr::Binary(BinOp::Mul, Box::new(reg(*i)), Box::new(Expr::Int(*scale as i64)));
                addr = Expr::Binary(BinOp::Add, Box::new(addr), Box::new(scaled));
            }
            if *disp != 0 {
                addr = Expr::Binary(BinOp::Add, Box::new(addr), Box::new(Expr::Int(*disp)));
            }
            Expr::ReadMem { addr: Box::new(addr), size: arg.size, signed: arg.signed, mem: Memory::User }
        }
        ArgLocation::IpRelative { delta } => {
            let addr = Expr::Binary(BinOp::Add, Box::new(reg(arch::IP)), Box::new(Expr::Int(*delta)));
            Expr::ReadMem { addr: Box::new(addr), size: arg.size, signed: arg.signed, mem: Memory::User }
        }
        ArgLocation::Global { symbol, .. } => {
            return Err(format!("USDT argument reads global `{symbol}`, which is not in the binary's symbol table"));
        }
        ArgLocation::Unsupported(spec) => return Err(format!("USDT argument `{spec}` has a form rtrace can't read")),
    })
}

/// The argument specs of a USDT attach point (None for other targets).
pub fn args_of(point: &AttachPoint) -> Option<&[UsdtArg]> {
    match &point.target {
        AttachTarget::Usdt { args, .. } => Some(args),
        _ => None,
    }
}

/// The USDT probes of the ELF file at `path`, in note order.
pub fn probes_in(path: &Path) -> Result<Vec<UsdtProbe>> {
    let elf = ElfFile::open(path)?;
    read_probes(&elf)
}

fn read_probes(elf: &ElfFile) -> Result<Vec<UsdtProbe>> {
    let notes = elf.notes(".note.stapsdt")?;
    // Link-time address of .stapsdt.base; notes record the one they were
    // written with, prelinking may have moved it since.
    let base_now = elf.section_addr(".stapsdt.base");
    let mut out = Vec::new();
    for note in notes {
        if note.name != b"stapsdt" || note.n_type != 3 || note.desc.len() < 24 {
            continue;
        }
        let word = |i: usize| u64::from_le_bytes(note.desc[i * 8..i * 8 + 8].try_into().unwrap());
        let (mut pc, note_base, mut sema) = (word(0), word(1), word(2));
        if let (Some(now), true) = (base_now, note_base != 0) {
            pc = pc.wrapping_add(now).wrapping_sub(note_base);
            if sema != 0 {
                sema = sema.wrapping_add(now).wrapping_sub(note_base);
            }
        }
        let mut strings = note.desc[24..].split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
        let provider = strings.next().unwrap_or_default();
        let name = strings.next().unwrap_or_default();
        let args = strings.next().unwrap_or_default();
        let Some(offset) = elf.code_addr_to_offset(pc) else { continue };
        let semaphore = if sema != 0 { elf.addr_to_offset(sema).unwrap_or(0) } else { 0 };
        let arg_text = args;
        let mut args = parse_args(&arg_text);
        for a in &mut args {
            // Globals: their distance from the probe site is fixed at link time.
            if let ArgLocation::Global { symbol, addend } = &a.location {
                if let Some(addr) = elf.symbol_addr(symbol) {
                    a.location =
                        ArgLocation::IpRelative { delta: (addr as i64).wrapping_add(*addend).wrapping_sub(pc as i64) };
                }
            }
        }
        out.push(UsdtProbe { provider, name, offset, semaphore, args, arg_text });
    }
    Ok(out)
}

/// `BIN:NS:NAME` or `BIN:NAME` → (BIN, NS or None, NAME). BIN is None for
/// every file the traced process (`pid`) has mapped: an empty BIN or `*`
/// (`usdt::NS:NAME`, `usdt:*:NAME`), or `usdt:NAME` alone, as bpftrace
/// reads them under `-p`.
fn parse_target(target: &str, pid: Option<i32>, follow: bool) -> Result<(Option<String>, Option<String>, String)> {
    let needs_pid = || {
        let how = if follow { "a running process (-p PID); with -c CMD, name the binary" } else { "-p PID" };
        anyhow!(
            "usdt '{target}' names no binary: probes of every file a process has mapped need {how}; or name it, e.g. usdt:/usr/bin/python3:python:function__entry"
        )
    };
    let bin_of = |bin: &str| -> Result<Option<String>> {
        match bin {
            "" | "*" if pid.is_some() => Ok(None),
            "" | "*" => Err(needs_pid()),
            _ => Ok(Some(bin.to_string())),
        }
    };
    let parts: Vec<&str> = target.split(':').collect();
    match parts.as_slice() {
        [name] if !name.is_empty() && !name.contains('/') => {
            if pid.is_none() {
                return Err(needs_pid());
            }
            Ok((None, None, name.to_string()))
        }
        [bin, name] if !name.is_empty() => Ok((bin_of(bin)?, None, name.to_string())),
        // `usdt:BIN::NAME`: an empty provider is any provider (bpftrace).
        [bin, ns, name] if !name.is_empty() => {
            Ok((bin_of(bin)?, (!ns.is_empty()).then(|| ns.to_string()), name.to_string()))
        }
        _ => bail!("usdt '{target}' needs BINARY:[PROVIDER:]NAME, e.g. usdt:/usr/bin/python3:python:function__entry"),
    }
}

impl ProbeType for Usdt {
    fn newest_runs_first(&self) -> bool {
        true
    }
    fn per_point(&self, points: &[AttachPoint], _k: &dyn Kernel) -> bool {
        // One USDT name can have sites with different argument specs.
        points.iter().any(|p| args_of(p) != args_of(&points[0]))
    }
    fn program(&self, point: &AttachPoint, _per_point: bool, _k: &dyn Kernel) -> Result<ProgramSpec> {
        let args = args_of(point).unwrap_or_default().to_vec();
        Ok(ProgramSpec::new(sys::BPF_PROG_TYPE_KPROBE, ContextKind::PtRegs, UsdtEvent { args }))
    }
    fn expand(&self, spec: &ProbeSpec, trace: &Trace, _k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        // `-p PID`'s process, not a `-c` command's (held before it runs its program).
        let pid = if trace.follow_children { None } else { trace.pid };
        let (bin, ns, name) = parse_target(&spec.target, pid, trace.follow_children)?;
        let in_spec = |e: anyhow::Error| anyhow!("usdt:{}: {e}", spec.target);
        let (binaries, bin) = match (bin, pid) {
            (Some(bin), _) => (symbols::resolve_binaries(&bin, trace.pid).map_err(in_spec)?, bin),
            (None, Some(pid)) => {
                (symbols::mapped_objects(pid).map_err(in_spec)?, format!("the files process {pid} has mapped"))
            }
            (None, None) => unreachable!("no binary is only parsed with a pid"),
        };
        if let [one] = binaries.as_slice() {
            return expand_in(one, ns.as_deref(), &name);
        }
        // `usdt:./bin/prog*:NAME`, `usdt:*:NAME -p PID`: every matching file that has the probe.
        let mut points = Vec::new();
        for path in &binaries {
            if let Ok(found) = expand_in(path, ns.as_deref(), &name) {
                points.extend(found);
            }
        }
        if points.is_empty() {
            bail!("usdt:{}: none of the {} files matching {bin} has that USDT probe", spec.target, binaries.len());
        }
        Ok(points)
    }
    fn list(&self, q: &ListQuery, _k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let parts: Vec<&str> = q.rest.split(':').collect();
        let (bin, provider, name) = match parts.as_slice() {
            // `-l 'usdt:NAME' -p PID`: NAME in every file the process has mapped.
            [name] if q.pid.is_some() && q.explicit && !name.contains('/') => ("*", "*", or_star(name)),
            [bin] => (*bin, "*", "*"),
            [bin, name] => (*bin, "*", or_star(name)),
            [bin, provider, name] => (*bin, or_star(provider), or_star(name)),
            _ if !q.explicit => return Ok(out),
            _ => bail!("-l: 'usdt:{}' has too many parts; write usdt:BINARY[:[PROVIDER:]NAME]", q.rest),
        };
        let Some(paths) = binaries("usdt", bin, q)? else { return Ok(out) };
        let several = paths.len() > 1;
        for path in paths {
            let probes = match probes_in(&path) {
                Ok(p) => p,
                Err(_) if several => continue,
                Err(e) => bail!("usdt:{}: {e:#}", q.rest),
            };
            let shown = path.to_string_lossy();
            for p in probes.iter().filter(|p| matches(provider, &p.provider) && matches(name, &p.name)) {
                let key = format!("usdt:{shown}:{}:{}", p.provider, p.name);
                // One name may have several sites; the first one's arguments are shown.
                if out.probes.contains_key(&key) {
                    continue;
                }
                let details = if q.verbose {
                    p.arg_text.split_whitespace().enumerate().map(|(i, a)| format!("arg{i}: {a}")).collect()
                } else {
                    vec![]
                };
                out.add_with(key, details);
            }
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::Usdt { path, offset, semaphore, provider, name, .. } = &point.target else {
            bail!("not a USDT probe: {}", point.name);
        };
        // One name may have several sites; say which one failed.
        let site = format!("USDT probe {provider}:{name} at offset {offset:#x} of {path}");
        // Every process, as for uprobes: -p/-c filter in the kernel.
        let fd = uprobe::open_uprobe(path, *offset, false, *semaphore, None)
            .map_err(|e| anyhow!("cannot attach {site}: {e}"))?;
        sys::attach_bpf(vec![fd], prog).map_err(|e| anyhow!("{site}: {e}"))
    }
}

/// The sites of `[ns:]name` (wildcards allowed) in one binary.
fn expand_in(path_buf: &Path, ns: Option<&str>, name: &str) -> Result<Vec<AttachPoint>> {
    let name = name.to_string();
    let ns = ns.map(str::to_string);
    let path = path_buf.to_string_lossy().into_owned();
    let probes = probes_in(path_buf)?;
    if probes.is_empty() {
        bail!("{path} has no USDT probes (no .note.stapsdt section)");
    }
    let points: Vec<AttachPoint> = probes
        .iter()
        .filter(|p| matches(&name, &p.name) && ns.as_deref().is_none_or(|ns| matches(ns, &p.provider)))
        .map(|p| AttachPoint {
            name: format!("usdt:{path}:{}:{}", p.provider, p.name),
            target: AttachTarget::Usdt {
                path: path.clone(),
                offset: p.offset,
                provider: p.provider.clone(),
                name: p.name.clone(),
                args: p.args.clone(),
                semaphore: p.semaphore,
            },
        })
        .collect();
    if points.is_empty() {
        let wanted = match &ns {
            Some(ns) => format!("{ns}:{name}"),
            None => name.clone(),
        };
        let mut all: Vec<String> = probes.iter().map(|p| format!("{}:{}", p.provider, p.name)).collect();
        all.dedup();
        let mut hint = suggest(&wanted, all.iter().map(String::as_str));
        if hint.is_empty() && ns.is_some() {
            hint = suggest(&name, probes.iter().map(|p| p.name.as_str()));
        }
        if has_wildcard(&wanted) || hint.is_empty() {
            bail!("no USDT probe in {path} matches '{wanted}' (it has {})", summarize(&all));
        }
        bail!("no USDT probe '{wanted}' in {path}; did you mean {}?", hint.join(", "));
    }
    Ok(points)
}

fn summarize(names: &[String]) -> String {
    const SHOWN: usize = 8;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!("{}, ... ({} in all)", names[..SHOWN].join(", "), names.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(offset: u32, width: u32) -> ArgLocation {
        ArgLocation::Reg { offset, width }
    }

    #[test]
    fn operand_specs() {
        assert_eq!(parse_arg("-4@%edi"), UsdtArg { size: 4, signed: true, location: reg(112, 4) });
        assert_eq!(parse_arg("8@%rax"), UsdtArg { size: 8, signed: false, location: reg(80, 8) });
        assert_eq!(parse_arg("-4@$5"), UsdtArg { size: 4, signed: true, location: ArgLocation::Const(5) });
        assert_eq!(parse_arg("-4@$-9").location, ArgLocation::Const(-9));
        assert_eq!(
            parse_arg("8@-16(%rbp)"),
            UsdtArg { size: 8, signed: false, location: ArgLocation::Mem { base: 32, index: None, disp: -16 } }
        );
        assert_eq!(parse_arg("4@8(%rsp)").location, ArgLocation::Mem { base: 152, index: None, disp: 8 });
        assert_eq!(parse_arg("4@(%rsi)").location, ArgLocation::Mem { base: 104, index: None, disp: 0 });
        assert_eq!(
            parse_arg("-8@0x10(%rax,%rdx,8)").location,
            ArgLocation::Mem { base: 80, index: Some((96, 8)), disp: 16 }
        );
        assert_eq!(parse_arg("-4@%r12d").location, reg(24, 4));
        assert_eq!(parse_arg("2@%r9w").location, reg(64, 2));
        assert_eq!(parse_arg("1@%r8b").location, reg(72, 1));
        assert_eq!(parse_arg("1@%al").location, reg(80, 1));
        assert_eq!(parse_arg("1@%ah").location, reg(81, 1));
        assert_eq!(parse_arg("-2@%si").location, reg(104, 2));
        assert_eq!(parse_arg("1@%dil").location, reg(112, 1));
        assert_eq!(parse_arg("4@%ebp").location, reg(32, 4));
        assert_eq!(parse_arg("%rcx"), UsdtArg { size: 8, signed: false, location: reg(88, 8) });
        assert_eq!(parse_arg("-4@counter(%rip)").location, ArgLocation::Global { symbol: "counter".into(), addend: 0 });
        assert_eq!(parse_arg("8@tab+16(%rip)").location, ArgLocation::Global { symbol: "tab".into(), addend: 16 });
        assert!(matches!(parse_arg("4@16(%rip)").location, ArgLocation::Unsupported(_)));
        assert!(matches!(parse_arg("4@%xmm0").location, ArgLocation::Unsupported(_)));
        assert_eq!(parse_args("-4@%edi 8@%rax").len(), 2);
    }

    #[test]
    fn expressions() {
        let e = arg_expr(&parse_arg("-4@%edi")).unwrap();
        assert_eq!(e, Expr::CtxInt { offset: 112, size: 4, signed: true });
        assert_eq!(arg_expr(&parse_arg("-1@$255")).unwrap(), Expr::Int(-1));
        assert_eq!(arg_expr(&parse_arg("1@$511")).unwrap(), Expr::Int(255));
        let m = arg_expr(&parse_arg("8@-16(%rbp)")).unwrap();
        assert_eq!(
            m,
            Expr::ReadMem {
                addr: Box::new(Expr::Binary(
                    BinOp::Add,
                    Box::new(Expr::CtxInt { offset: 32, size: 8, signed: false }),
                    Box::new(Expr::Int(-16))
                )),
                size: 8,
                signed: false,
                mem: Memory::User
            }
        );
        assert!(arg_expr(&parse_arg("4@x(%rip)")).unwrap_err().contains("global `x`"));
        assert!(arg_expr(&parse_arg("4@%xmm1")).unwrap_err().contains("%xmm1"));
    }

    #[test]
    fn targets() {
        let parse = |t: &str| parse_target(t, None, false);
        let bin = |b: &str| Some(b.to_string());
        assert_eq!(parse("/bin/x:prov:name").unwrap(), (bin("/bin/x"), Some("prov".into()), "name".into()));
        assert_eq!(parse("libc:setjmp").unwrap(), (bin("libc"), None, "setjmp".into()));
        assert_eq!(parse("/bin/x::name").unwrap(), (bin("/bin/x"), None, "name".into()));
        assert!(parse("/bin/x").unwrap_err().to_string().contains("BINARY:[PROVIDER:]NAME"));
    }

    #[test]
    fn targets_of_a_traced_process() {
        let with_pid = |t: &str| parse_target(t, Some(7), false).unwrap();
        assert!(parse_target("a:b:c:d", Some(7), false).is_err(), "three parts at most");
        assert_eq!(with_pid(":prov:name"), (None, Some("prov".into()), "name".into()));
        assert_eq!(with_pid("*:prov:name"), (None, Some("prov".into()), "name".into()));
        assert_eq!(with_pid("*:name"), (None, None, "name".into()));
        assert_eq!(with_pid("name"), (None, None, "name".into()));
        assert_eq!(with_pid("/bin/x:name"), (Some("/bin/x".into()), None, "name".into()));
        for t in [":prov:name", "*:name", "name"] {
            let e = parse_target(t, None, false).unwrap_err().to_string();
            assert!(e.contains("need -p PID"), "{t}: {e}");
            let e = parse_target(t, None, true).unwrap_err().to_string();
            assert!(e.contains("with -c CMD, name the binary"), "{t}: {e}");
        }
    }
}
