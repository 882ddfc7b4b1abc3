//! Symbolizing stacks and addresses with blazesym: kernel addresses from
//! kallsyms, user addresses per process (ELF symbols, DWARF where present,
//! demangled names) through the mappings `procmaps` keeps, so a process
//! that has exited still resolves. The symbolizer is not `Send`, so it lives
//! on the thread that runs Rhai; results are cached (bounded) so a repeated
//! stack costs a lookup.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;

use crate::symbols::procmaps::{self, Range};

/// How a stack prints (bpftrace's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackMode {
    /// `func+off`, one per line, indented.
    Bpftrace,
    /// `\tADDR func+off (module)`, as perf prints.
    Perf,
    /// Addresses only, one per line, not indented.
    Raw,
}

impl StackMode {
    pub fn parse(s: &str) -> Option<StackMode> {
        match s {
            "bpftrace" => Some(StackMode::Bpftrace),
            "perf" => Some(StackMode::Perf),
            "raw" => Some(StackMode::Raw),
            _ => None,
        }
    }
}

/// One symbolized frame.
#[derive(Clone, Debug)]
pub struct Frame {
    pub addr: u64,
    /// `func+off`, or the address in hex when unknown.
    pub text: String,
    pub module: String,
}

/// Symbolized frames kept (per kind) before the cache starts over.
const MAX_CACHED_FRAMES: usize = 200_000;

struct State {
    symbolizer: Symbolizer,
    kernel: HashMap<u64, Frame>,
    /// By (pid, generation of its kept mappings, address).
    user: HashMap<(u32, u64, u64), Frame>,
    /// Whether a mapped (path, inode) is still that file.
    files: HashMap<(Arc<str>, u64), bool>,
}

/// `RTRACE_DEBUG_SYMBOLS`: report why addresses stay unresolved (set once,
/// from the run's `Config`).
static DEBUG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turn the reports of unresolved addresses on or off.
pub fn set_debug(on: bool) {
    DEBUG.store(on, std::sync::atomic::Ordering::Relaxed);
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with_state<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let state = s.get_or_insert_with(|| State {
            symbolizer: Symbolizer::new(),
            kernel: HashMap::new(),
            user: HashMap::new(),
            files: HashMap::new(),
        });
        f(state)
    })
}

fn frame_of(addr: u64, sym: &Symbolized<'_>, default_module: &str) -> Frame {
    match sym {
        Symbolized::Sym(s) => Frame {
            addr,
            text: format!("{}+{}", s.name, s.offset),
            module: s
                .module
                .as_ref()
                .map(|m| m.to_string_lossy().into_owned())
                .unwrap_or_else(|| default_module.into()),
        },
        Symbolized::Unknown(_) => Frame { addr, text: format!("0x{addr:x}"), module: "unknown".into() },
    }
}

/// Kernel addresses, symbolized (unknown ones as hex).
pub fn kernel_frames(addrs: &[u64]) -> Vec<Frame> {
    with_state(|st| {
        if st.kernel.len() > MAX_CACHED_FRAMES {
            st.kernel.clear();
        }
        let missing: Vec<u64> = addrs.iter().copied().filter(|a| !st.kernel.contains_key(a)).collect();
        if !missing.is_empty() {
            let kernel = Kernel { vmlinux: blazesym::MaybeDefault::None, ..Default::default() };
            let src = Source::Kernel(kernel);
            let syms = st.symbolizer.symbolize(&src, Input::AbsAddr(&missing)).unwrap_or_default();
            let frames: Vec<Frame> = missing
                .iter()
                .enumerate()
                .map(|(i, &a)| match syms.get(i) {
                    Some(s) => perf_alias(frame_of(a, s, "kernel.kallsyms")),
                    None => Frame { addr: a, text: format!("0x{a:x}"), module: "unknown".into() },
                })
                .collect();
            for f in frames {
                st.kernel.insert(f.addr, f);
            }
        }
        addrs.iter().map(|a| st.kernel[a].clone()).collect()
    })
}

/// The file behind `range`, if it is still the one that was mapped (same
/// inode); checked once per path and inode.
fn mapped_file(st: &mut State, range: &Range) -> Option<Arc<str>> {
    let key = (range.path.clone(), range.ino);
    if let Some(ok) = st.files.get(&key) {
        return ok.then(|| range.path.clone());
    }
    let ok = match std::fs::metadata(&*range.path) {
        Ok(m) => range.ino == 0 || m.ino() == range.ino,
        Err(_) => false,
    };
    st.files.insert(key, ok);
    ok.then(|| range.path.clone())
}

/// User addresses of process `pid`, symbolized (unknown ones as hex): from
/// the process's kept mappings (which outlive it, see `procmaps`), then,
/// for what they don't cover, from the live process.
pub fn user_frames(pid: u32, addrs: &[u64]) -> Vec<Frame> {
    procmaps::ensure(pid);
    let generation = procmaps::generation(pid);
    let debug = DEBUG.load(std::sync::atomic::Ordering::Relaxed);
    with_state(|st| {
        if st.user.len() > MAX_CACHED_FRAMES {
            st.user.clear();
            st.files.clear();
        }
        let mut missing: Vec<u64> =
            addrs.iter().copied().filter(|a| !st.user.contains_key(&(pid, generation, *a))).collect();
        missing.sort_unstable();
        missing.dedup();
        // By file: file offsets of the addresses each mapping covers.
        let mut by_file: HashMap<Arc<str>, Vec<(u64, u64)>> = HashMap::new();
        let mut rest = Vec::new();
        for &a in &missing {
            match procmaps::lookup(pid, a).and_then(|(r, _)| mapped_file(st, &r).map(|f| (f, a - r.start + r.pgoff))) {
                Some((file, off)) => by_file.entry(file).or_default().push((a, off)),
                None => rest.push(a),
            }
        }
        for (file, list) in by_file {
            let offsets: Vec<u64> = list.iter().map(|&(_, off)| off).collect();
            let src = Source::Elf(Elf::new(&*file));
            let syms = st.symbolizer.symbolize(&src, Input::FileOffset(&offsets)).unwrap_or_default();
            for (i, &(a, _)) in list.iter().enumerate() {
                match syms.get(i) {
                    Some(s @ Symbolized::Sym(_)) => {
                        let f = frame_of(a, s, &file);
                        st.user.insert((pid, generation, a), f);
                    }
                    _ => rest.push(a),
                }
            }
        }
        if !rest.is_empty() {
            // Not covered by the kept mappings: ask the live process, if any.
            let mut process = Process::new(Pid::from(pid));
            process.perf_map = false;
            let src = Source::Process(process);
            let syms = match st.symbolizer.symbolize(&src, Input::AbsAddr(&rest)) {
                Ok(s) => s,
                Err(e) => {
                    if debug {
                        crate::util::errln!("rtrace: symbolizing pid {pid}: {e:#}");
                    }
                    Vec::new()
                }
            };
            for (i, &a) in rest.iter().enumerate() {
                let f = match syms.get(i) {
                    Some(s) => frame_of(a, s, "unknown"),
                    None => Frame { addr: a, text: format!("0x{a:x}"), module: "unknown".into() },
                };
                st.user.insert((pid, generation, a), f);
            }
        }
        addrs
            .iter()
            .map(|a| match st.user.get(&(pid, generation, *a)) {
                Some(f) => f.clone(),
                None => Frame { addr: *a, text: format!("0x{a:x}"), module: "unknown".into() },
            })
            .collect()
    })
}

/// A kernel frame named as perf names it where kallsyms has several names
/// for the function (`__x64_sys_getppid`, not `__do_sys_getppid`).
fn perf_alias(mut f: Frame) -> Frame {
    if let Some((name, off)) = f.text.rsplit_once('+') {
        if let Ok(off) = off.parse::<u64>() {
            if let Some(best) = super::kalias::preferred(f.addr.wrapping_sub(off)) {
                if best != name {
                    f.text = format!("{best}+{off}");
                }
            }
        }
    }
    f
}

/// A stack as bpftrace prints it: a leading newline, then one frame per line
/// (8 spaces in), as `printf("%s", kstack)` shows it. In perf mode the frames
/// are `perf script`'s (`\t ffffffff8142d130 func+0x1a ([kernel.kallsyms])`)
/// and the last has no newline, so a header line, `kstack`, `ustack` and a
/// final empty line make one sample that `inferno-collapse-perf` and
/// `stackcollapse-perf.pl` read.
pub fn format_stack(frames: &[Frame], mode: StackMode) -> String {
    let mut out = String::from("\n");
    for (i, f) in frames.iter().enumerate() {
        match mode {
            StackMode::Bpftrace => out.push_str(&format!("        {}\n", f.text)),
            StackMode::Perf => {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(&perf_frame(f));
            }
            // Raw addresses are not indented (bpftrace).
            StackMode::Raw => out.push_str(&format!("{:x}\n", f.addr)),
        }
    }
    out
}

/// The same stack as a map key prints it: 4 spaces in (bpftrace 0.17), raw
/// addresses unindented, perf frames with a tab, each frame on its own line.
pub fn format_stack_key(frames: &[Frame], mode: StackMode) -> String {
    let mut out = String::from("\n");
    for f in frames {
        match mode {
            StackMode::Bpftrace => out.push_str(&format!("    {}\n", f.text)),
            StackMode::Perf => {
                out.push_str(&perf_frame(f));
                out.push('\n');
            }
            // Raw addresses are not indented, in keys too (bpftrace).
            StackMode::Raw => out.push_str(&format!("{:x}\n", f.addr)),
        }
    }
    out
}

/// `\t ADDR func+0xOFF (module)` as `perf script` prints a frame: the
/// address right-aligned in 16 columns, a hex offset, `[kernel.kallsyms]`
/// (or `[module]`) for the kernel, the file for user code, `[unknown]`.
fn perf_frame(f: &Frame) -> String {
    let sym = match f.text.rsplit_once('+') {
        Some((name, off)) if off.parse::<u64>().is_ok() => format!("{name}+0x{:x}", off.parse::<u64>().unwrap_or(0)),
        _ if f.text.starts_with("0x") => "[unknown]".to_string(),
        _ => f.text.clone(),
    };
    let module = if f.module.starts_with('/') || f.module.starts_with('[') {
        f.module.clone()
    } else {
        format!("[{}]", f.module)
    };
    format!("\t{:>16x} {sym} ({module})", f.addr)
}

/// Function name of a frame (`func` of `func+off`).
pub fn frame_function(f: &Frame) -> &str {
    f.text.rsplit_once('+').map(|(name, _)| name).unwrap_or(&f.text)
}

/// A kernel address as its function name (bpftrace's `ksym()`), hex if unknown.
pub fn ksym_name(addr: u64) -> String {
    let frames = kernel_frames(&[addr]);
    frames.first().map(|f| frame_function(f).to_string()).unwrap_or_else(|| format!("0x{addr:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame { addr: 0xffffffff8142d130, text: "do_sys_openat2+26".into(), module: "kernel.kallsyms".into() },
            Frame { addr: 0x7f0011, text: "main+5".into(), module: "/usr/bin/true".into() },
            Frame { addr: 0x7f0022, text: "0x7f0022".into(), module: "unknown".into() },
        ]
    }

    #[test]
    fn perf_frames_are_perf_script_frames() {
        let text = format_stack(&frames(), StackMode::Perf);
        assert_eq!(
            text,
            "\n\tffffffff8142d130 do_sys_openat2+0x1a ([kernel.kallsyms])\n\t          7f0011 main+0x5 (/usr/bin/true)\n\t          7f0022 [unknown] ([unknown])"
        );
    }

    #[test]
    fn map_keys_indent_four_spaces_and_printf_eight() {
        let f = &frames()[..1];
        assert_eq!(format_stack_key(f, StackMode::Bpftrace), "\n    do_sys_openat2+26\n");
        assert_eq!(format_stack(f, StackMode::Bpftrace), "\n        do_sys_openat2+26\n");
        assert_eq!(format_stack_key(f, StackMode::Raw), "\nffffffff8142d130\n");
        assert_eq!(
            format_stack_key(f, StackMode::Perf),
            "\n\tffffffff8142d130 do_sys_openat2+0x1a ([kernel.kallsyms])\n"
        );
    }

    /// A sample as a script prints it (header, kstack, ustack, empty line)
    /// read the way inferno-collapse-perf and stackcollapse-perf.pl read
    /// `perf script`: a header line, frame lines (`ADDR SYM (MODULE)`) up
    /// to an empty line.
    #[test]
    fn perf_sample_collapses() {
        let k = format_stack(&frames()[..1], StackMode::Perf);
        let u = format_stack(&frames()[1..2], StackMode::Perf);
        // print(`true 42 0.0: cpu-clock:${k}${u}\n`): print adds one more newline.
        let sample = format!("true 42 0.0: cpu-clock:{k}{u}\n\n");
        let lines: Vec<&str> = sample.lines().collect();
        assert_eq!(lines[0], "true 42 0.0: cpu-clock:");
        let frames: Vec<&str> = lines[1..].iter().take_while(|l| !l.is_empty()).copied().collect();
        assert_eq!(frames.len(), 2, "{sample:?}");
        let mut funcs = Vec::new();
        for l in &frames {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 3, "{l:?}");
            assert!(u64::from_str_radix(w[0], 16).is_ok(), "{l:?}");
            let (func, off) = w[1].rsplit_once('+').unwrap();
            assert!(off.starts_with("0x"), "{l:?}");
            assert!(w[2].starts_with('(') && w[2].ends_with(')'), "{l:?}");
            funcs.push(func);
        }
        assert_eq!(lines.len(), 4, "no blank line inside the sample: {sample:?}");
        assert_eq!(lines[3], "", "the sample ends with an empty line: {sample:?}");
        funcs.reverse();
        assert_eq!(funcs.join(";"), "main;do_sys_openat2");
    }
}
