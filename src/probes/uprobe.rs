//! `uprobe:BIN:FN` / `uretprobe:BIN:FN`: programs of type BPF_PROG_TYPE_KPROBE
//! attached to user functions through perf events of the `uprobe` PMU.
//! `FN` may be a name with `*` wildcards, `FN+OFFSET`, or an address.

use std::ffi::CString;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::PtRegsEvent;
use super::listing::{binaries, matches, or_star, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::Attachment;
use crate::kernel::sys::{self, BPF_PROG_TYPE_KPROBE};
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::symbols::{self, elf::ElfFile};
use crate::util::similar::suggest;
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct UprobeProbe {
    pub retprobe: bool,
}

pub static UPROBE: UprobeProbe = UprobeProbe { retprobe: false };
pub static URETPROBE: UprobeProbe = UprobeProbe { retprobe: true };

/// What follows `BIN:` in a uprobe spec.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Location {
    /// A function name (maybe with wildcards) and an offset into it.
    Function { name: String, offset: u64 },
    /// A virtual address in the binary.
    Address(u64),
}

fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The binary a uprobe spec names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Binary {
    /// A path, library or program name (maybe a path with wildcards).
    Named(String),
    /// No binary (`uprobe:FN`), with `-p PID`: the program that process runs.
    ProcessProgram,
    /// `*`, with `-p PID`: every file that process has mapped.
    AllMapped,
}

/// What a `-p`-only form says without `-p` (or with `-c`, whose command
/// is not running yet when probes are placed).
fn needs_pid(kind: &str, target: &str, what: &str, follow: bool) -> anyhow::Error {
    if follow {
        return anyhow!("{kind} '{target}': {what} needs a running process (-p PID); with -c CMD, name the binary");
    }
    anyhow!(
        "{kind} '{target}': {what} needs -p PID; or name the binary, e.g. {kind}:/bin/bash:readline or {kind}:libc:malloc"
    )
}

/// `FN`, `FN+OFF` or `ADDRESS` → its location.
fn parse_location(kind: &str, target: &str, rest: &str) -> Result<Location> {
    if rest.is_empty() {
        bail!("{kind} '{target}' names no function");
    }
    if rest.starts_with(|c: char| c.is_ascii_digit()) {
        let addr = parse_number(rest).ok_or_else(|| anyhow!("{kind} '{target}': bad address '{rest}'"))?;
        return Ok(Location::Address(addr));
    }
    if let Some((name, off)) = rest.split_once('+') {
        let offset = parse_number(off).ok_or_else(|| anyhow!("{kind} '{target}': bad offset '{off}'"))?;
        if has_wildcard(name) {
            bail!("{kind} '{target}': an offset can't follow a wildcard");
        }
        return Ok(Location::Function { name: name.to_string(), offset });
    }
    Ok(Location::Function { name: rest.to_string(), offset: 0 })
}

/// `BIN:FN`, `BIN:FN+OFF`, `BIN:ADDRESS` → (BIN, location); with a traced
/// process (`pid`), `FN` alone (its program) and `*:FN` (every file it
/// has mapped) too, as bpftrace reads them under `-p`.
fn parse_target(kind: &str, target: &str, pid: Option<i32>, follow: bool) -> Result<(Binary, Location)> {
    let Some((bin, rest)) = target.split_once(':') else {
        if pid.is_some() && !target.contains('/') {
            return Ok((Binary::ProcessProgram, parse_location(kind, target, target)?));
        }
        if target.contains('/') {
            bail!("{kind} '{target}' needs BINARY:FUNCTION, e.g. {kind}:/bin/bash:readline or {kind}:libc:malloc");
        }
        return Err(needs_pid(kind, target, "a function without a binary", follow));
    };
    let location = parse_location(kind, target, rest)?;
    match bin {
        "" if pid.is_some() => Ok((Binary::ProcessProgram, location)),
        "" => Err(needs_pid(kind, target, "an empty binary (the traced process's program)", follow)),
        "*" if pid.is_some() => Ok((Binary::AllMapped, location)),
        "*" => Err(needs_pid(kind, target, "'*' as the binary (every file a process has mapped)", follow)),
        _ => Ok((Binary::Named(bin.to_string()), location)),
    }
}

/// The traced process whose files `-p` forms name: `-p PID`'s, not a `-c`
/// command's (held before it runs its program).
fn traced_pid(trace: &Trace) -> Option<i32> {
    if trace.follow_children {
        None
    } else {
        trace.pid
    }
}

impl UprobeProbe {
    fn kind(&self) -> &'static str {
        if self.retprobe {
            "uretprobe"
        } else {
            "uprobe"
        }
    }

    /// The points `location` names in one binary.
    fn expand_in(&self, path_buf: &Path, location: &Location) -> Result<Vec<AttachPoint>> {
        let kind = self.kind();
        let path = path_buf.to_string_lossy().into_owned();
        let elf = ElfFile::open(path_buf)?;
        let functions = elf.functions()?;
        let to_offset = |addr: u64| -> Result<u64> {
            elf.code_addr_to_offset(addr)
                .ok_or_else(|| anyhow!("address {addr:#x} is not in an executable segment of {path}"))
        };
        match location.clone() {
            Location::Address(addr) => {
                let offset = to_offset(addr)?;
                let symbol = match symbols::elf::function_at(&functions, addr) {
                    Some(f) if f.addr == addr => f.name.clone(),
                    Some(f) => format!("{}+{}", f.name, addr - f.addr),
                    None => format!("{addr:#x}"),
                };
                Ok(vec![self.point(&path, format!("{addr:#x}"), offset, symbol)])
            }
            Location::Function { name, offset } if has_wildcard(&name) => {
                let mut seen = std::collections::HashSet::new();
                let mut points = Vec::new();
                for f in functions.iter().filter(|f| wildcard_match(&name, &f.name)) {
                    // An indirect function whose implementation can't be found is passed over.
                    let start = match f.ifunc {
                        true => match implementation(&elf, &functions, path_buf, f) {
                            Ok((start, _)) => start,
                            Err(_) => continue,
                        },
                        false => f.addr,
                    };
                    let Some(off) = elf.code_addr_to_offset(start + offset) else { continue };
                    // Aliases of one function attach once.
                    if seen.insert(off) {
                        points.push(self.point(&path, f.name.clone(), off, f.name.clone()));
                    }
                }
                if points.is_empty() {
                    bail!(
                        "no function in {path} matches '{name}'{}",
                        if functions.is_empty() { " (it has no symbols)" } else { "" }
                    );
                }
                Ok(points)
            }
            Location::Function { name, offset } => {
                let Some(f) = functions.iter().find(|f| f.name == name) else {
                    if functions.is_empty() {
                        bail!("{path} has no function symbols (stripped?); use an address: {kind}:{path}:0xADDR");
                    }
                    let hint = suggest(&name, functions.iter().map(|f| f.name.as_str()));
                    if hint.is_empty() {
                        bail!("no function '{name}' in {path}");
                    }
                    bail!("no function '{name}' in {path}; did you mean {}?", hint.join(", "));
                };
                let (start, size) =
                    if f.ifunc { implementation(&elf, &functions, path_buf, f)? } else { (f.addr, f.size) };
                if offset > 0 && size > 0 && offset >= size {
                    bail!("offset {offset} is past the end of {name} ({size} bytes) in {path}");
                }
                let file_offset = to_offset(start + offset)?;
                let label = if offset > 0 { format!("{name}+{offset}") } else { name.clone() };
                Ok(vec![self.point(&path, label.clone(), file_offset, label)])
            }
        }
    }

    fn point(&self, path: &str, label: String, offset: u64, symbol: String) -> AttachPoint {
        AttachPoint {
            name: format!("{}:{path}:{label}", self.kind()),
            target: AttachTarget::Uprobe { path: path.to_string(), offset, retprobe: self.retprobe, symbol },
        }
    }
}

impl ProbeType for UprobeProbe {
    fn newest_runs_first(&self) -> bool {
        true
    }
    fn program(&self, point: &AttachPoint, per_point: bool, _k: &dyn Kernel) -> Result<ProgramSpec> {
        let func = match &point.target {
            AttachTarget::Uprobe { symbol, .. } if per_point => Some(symbol.clone()),
            _ => None,
        };
        Ok(ProgramSpec::new(BPF_PROG_TYPE_KPROBE, ContextKind::PtRegs, PtRegsEvent { func, user: true, ints: None }))
    }
    fn expand(&self, spec: &ProbeSpec, trace: &Trace, _k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        let kind = self.kind();
        let pid = traced_pid(trace);
        let (bin, location) = parse_target(kind, &spec.target, pid, trace.follow_children)?;
        let in_process = |e: anyhow::Error| anyhow!("{kind}:{}: {e}", spec.target);
        let (binaries, bin) = match (bin, pid) {
            (Binary::Named(bin), _) => (symbols::resolve_binaries(&bin, trace.pid).map_err(in_process)?, bin),
            (Binary::ProcessProgram, Some(pid)) => {
                return self.expand_in(&symbols::process_exe(pid).map_err(in_process)?, &location);
            }
            (Binary::AllMapped, Some(pid)) => {
                (symbols::mapped_objects(pid).map_err(in_process)?, format!("process {pid}'s mapped files"))
            }
            _ => unreachable!("-p forms are only parsed with a pid"),
        };
        if let [one] = binaries.as_slice() {
            return self.expand_in(one, &location);
        }
        // `uprobe:./bin/prog*:FN`, `uprobe:*:FN -p PID`: every matching file
        // that has FN (files that are no ELF or lack it are passed over).
        let mut points = Vec::new();
        for path in &binaries {
            if let Ok(found) = self.expand_in(path, &location) {
                points.extend(found);
            }
        }
        if points.is_empty() {
            bail!("{kind}:{}: none of the {} files matching {bin} has it", spec.target, binaries.len());
        }
        Ok(points)
    }
    fn list(&self, q: &ListQuery, _k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let kind = self.kind();
        let (bin, func) = match q.rest.split_once(':') {
            Some(parts) => parts,
            // `-l 'uprobe:FN' -p PID`: FN in every file the process has mapped.
            None if q.pid.is_some() && q.explicit && !q.rest.contains('/') => ("*", q.rest),
            None => (q.rest, ""),
        };
        let func = or_star(func.split('+').next().unwrap_or(""));
        let Some(paths) = binaries(kind, bin, q)? else { return Ok(out) };
        let several = paths.len() > 1;
        for path in paths {
            let functions = match ElfFile::open(&path).and_then(|elf| elf.functions()) {
                Ok(f) => f,
                // A wildcard matches other files too: only ELF files are listed.
                Err(_) if several => continue,
                Err(e) => bail!("{kind}:{}: {e:#}", q.rest),
            };
            if functions.is_empty() && q.explicit && !several {
                out.notes.push(format!("{} has no function symbols (stripped?)", path.display()));
            }
            let shown = path.to_string_lossy();
            for f in functions.iter().filter(|f| matches(func, &f.name)) {
                out.add(format!("{kind}:{shown}:{}", f.name));
            }
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::Uprobe { path, offset, retprobe, .. } = &point.target else {
            bail!("not a uprobe: {}", point.name);
        };
        // Every process: -p/-c filter in the kernel, so processes a wrapped
        // command starts (a shell, make, cargo) are seen too.
        let fd =
            open_uprobe(path, *offset, *retprobe, 0, None).map_err(|e| anyhow!("cannot attach {}: {e}", point.name))?;
        sys::attach_bpf(vec![fd], prog).map_err(|e| anyhow!("{}: {e}", point.name))
    }
}

/// Where the code of indirect function `f` starts (its link-time address)
/// and how long it is (0: unknown): the implementation its resolver picks
/// on this machine.
fn implementation(
    elf: &ElfFile,
    functions: &[symbols::elf::Function],
    path: &Path,
    f: &symbols::elf::Function,
) -> Result<(u64, u64)> {
    let offset = symbols::ifunc::implementation_offset(path, &f.name)?;
    let addr = elf.code_offset_to_addr(offset).ok_or_else(|| {
        anyhow!(
            "cannot find the implementation of indirect function '{}' in {}: offset {offset:#x} is not code",
            f.name,
            path.display()
        )
    })?;
    let size = symbols::elf::function_at(functions, addr).filter(|g| g.addr == addr && !g.ifunc).map_or(0, |g| g.size);
    Ok((addr, size))
}

const PMU_DIR: &str = "/sys/bus/event_source/devices/uprobe";

/// The bit of `config` a `format/NAME` file names (`config:0`, `config:32-63`).
fn format_shift(name: &str) -> Result<u32> {
    let text = std::fs::read_to_string(format!("{PMU_DIR}/format/{name}"))
        .map_err(|e| anyhow!("cannot read {PMU_DIR}/format/{name}: {e}"))?;
    let spec = text.trim().strip_prefix("config:").ok_or_else(|| anyhow!("unexpected uprobe format {name}: {text}"))?;
    let first = spec.split('-').next().unwrap_or("");
    first.parse().map_err(|_| anyhow!("unexpected uprobe format {name}: {text}"))
}

/// Open a perf event of the `uprobe` PMU at `offset` in file `path`
/// (`ref_ctr_offset`: file offset of a USDT semaphore the kernel keeps
/// counted while attached, 0 for none), for process `pid` or every process.
pub fn open_uprobe(path: &str, offset: u64, retprobe: bool, ref_ctr_offset: u64, pid: Option<i32>) -> Result<OwnedFd> {
    let type_: u32 = std::fs::read_to_string(format!("{PMU_DIR}/type"))
        .map_err(|e| anyhow!("this kernel has no uprobe support ({PMU_DIR}/type: {e})"))?
        .trim()
        .parse()
        .map_err(|_| anyhow!("bad {PMU_DIR}/type"))?;
    let mut config = 0u64;
    if retprobe {
        config |= 1u64 << format_shift("retprobe")?;
    }
    if ref_ctr_offset != 0 {
        let shift = format_shift("ref_ctr_offset").map_err(|e| anyhow!("USDT semaphores need kernel support: {e}"))?;
        config |= ref_ctr_offset << shift;
    }
    if !Path::new(path).exists() {
        bail!("{path} does not exist");
    }
    let cpath = CString::new(path).map_err(|_| anyhow!("bad path {path:?}"))?;
    // One process on any CPU, or (pid -1) every process: the kernel wants a CPU then.
    let (pid, cpu) = match pid {
        Some(p) => (p, -1),
        None => (-1, 0),
    };
    sys::open_probe(type_, config, cpath.as_ptr() as u64, offset, pid, cpu)
        .map_err(|err| anyhow!("perf_event_open(uprobe {path} offset {offset:#x}): {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let named = |b: &str| Binary::Named(b.to_string());
        let parse = |t: &str| parse_target("uprobe", t, None, false);
        assert_eq!(
            parse("/bin/bash:readline").unwrap(),
            (named("/bin/bash"), Location::Function { name: "readline".into(), offset: 0 })
        );
        assert_eq!(
            parse("libc:malloc+0x10").unwrap(),
            (named("libc"), Location::Function { name: "malloc".into(), offset: 16 })
        );
        assert_eq!(parse("/bin/x:0x1234").unwrap(), (named("/bin/x"), Location::Address(0x1234)));
        assert_eq!(parse("/bin/x:4660").unwrap(), (named("/bin/x"), Location::Address(4660)));
        assert!(parse("/bin/x").unwrap_err().to_string().contains("BINARY:FUNCTION"));
        assert!(parse("/bin/x:").is_err());
        assert!(parse("/bin/x:a*+4").is_err());
    }

    #[test]
    fn targets_of_a_traced_process() {
        let with_pid = |t: &str| parse_target("uprobe", t, Some(42), false);
        let f = |n: &str| Location::Function { name: n.into(), offset: 0 };
        assert_eq!(with_pid("main").unwrap(), (Binary::ProcessProgram, f("main")));
        assert_eq!(with_pid(":main").unwrap(), (Binary::ProcessProgram, f("main")));
        assert_eq!(with_pid("*:malloc").unwrap(), (Binary::AllMapped, f("malloc")));
        assert_eq!(with_pid("libc:malloc").unwrap(), (Binary::Named("libc".into()), f("malloc")));
        for t in ["main", ":main", "*:malloc"] {
            let e = parse_target("uprobe", t, None, false).unwrap_err().to_string();
            assert!(e.contains("needs -p PID"), "{t}: {e}");
            let e = parse_target("uprobe", t, None, true).unwrap_err().to_string();
            assert!(e.contains("with -c CMD, name the binary"), "{t}: {e}");
        }
    }
}
