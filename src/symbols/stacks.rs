//! Symbolizing stacks and addresses with blazesym: kernel addresses from
//! kallsyms, user addresses per process (ELF symbols, DWARF where present,
//! demangled names). The symbolizer is not `Send`, so it lives on the thread
//! that runs Rhai; results are cached so a repeated stack costs a lookup.

use std::cell::RefCell;
use std::collections::HashMap;

use blazesym::symbolize::cache::{Cache, Process as ProcessCache};
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;

/// How a stack prints (bpftrace's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackMode {
    /// `func+off`, one per line, indented.
    Bpftrace,
    /// `\tADDR func+off (module)`, as perf prints.
    Perf,
    /// Addresses only.
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

struct State {
    symbolizer: Symbolizer,
    kernel: HashMap<u64, Frame>,
    user: HashMap<(u32, u64), Frame>,
    cached_pids: HashMap<u32, bool>,
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
            cached_pids: HashMap::new(),
        });
        f(state)
    })
}

fn frame_of(addr: u64, sym: &Symbolized<'_>, default_module: &str) -> Frame {
    match sym {
        Symbolized::Sym(s) => Frame {
            addr,
            text: format!("{}+{}", s.name, s.offset),
            module: s.module.as_ref().map(|m| m.to_string_lossy().into_owned()).unwrap_or_else(|| default_module.into()),
        },
        Symbolized::Unknown(_) => Frame { addr, text: format!("0x{addr:x}"), module: "unknown".into() },
    }
}

/// Kernel addresses, symbolized (unknown ones as hex).
pub fn kernel_frames(addrs: &[u64]) -> Vec<Frame> {
    with_state(|st| {
        let missing: Vec<u64> = addrs.iter().copied().filter(|a| !st.kernel.contains_key(a)).collect();
        if !missing.is_empty() {
            let mut kernel = Kernel::default();
            kernel.vmlinux = blazesym::MaybeDefault::None;
            let src = Source::Kernel(kernel);
            let syms = st.symbolizer.symbolize(&src, Input::AbsAddr(&missing)).unwrap_or_default();
            let frames: Vec<Frame> = missing
                .iter()
                .enumerate()
                .map(|(i, &a)| match syms.get(i) {
                    Some(s) => frame_of(a, s, "kernel.kallsyms"),
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

/// Remember a process's memory map now, so its addresses still resolve
/// after it exits.
pub fn remember_process(pid: u32) {
    with_state(|st| {
        if st.cached_pids.contains_key(&pid) {
            return;
        }
        let mut cache = ProcessCache::new(Pid::from(pid));
        cache.cache_vmas = true;
        let ok = st.symbolizer.cache(&Cache::Process(cache)).is_ok();
        st.cached_pids.insert(pid, ok);
    })
}

/// User addresses of process `pid`, symbolized (unknown ones as hex).
pub fn user_frames(pid: u32, addrs: &[u64]) -> Vec<Frame> {
    remember_process(pid);
    with_state(|st| {
        let missing: Vec<u64> = addrs.iter().copied().filter(|a| !st.user.contains_key(&(pid, *a))).collect();
        if !missing.is_empty() {
            let mut process = Process::new(Pid::from(pid));
            process.perf_map = false;
            let src = Source::Process(process);
            let syms = match st.symbolizer.symbolize(&src, Input::AbsAddr(&missing)) {
                Ok(s) => s,
                Err(e) => {
                    if std::env::var_os("RTRACE_DEBUG_SYMBOLS").is_some() {
                        eprintln!("rtrace: symbolizing pid {pid}: {e:#}");
                    }
                    Vec::new()
                }
            };
            if std::env::var_os("RTRACE_DEBUG_SYMBOLS").is_some() {
                eprintln!("rtrace: pid {pid}: {syms:?}");
            }
            for (i, &a) in missing.iter().enumerate() {
                let f = match syms.get(i) {
                    Some(s) => frame_of(a, s, "unknown"),
                    None => Frame { addr: a, text: format!("0x{a:x}"), module: "unknown".into() },
                };
                st.user.insert((pid, a), f);
            }
        }
        addrs.iter().map(|a| st.user[&(pid, *a)].clone()).collect()
    })
}

/// A stack as bpftrace prints it: a leading newline, then one frame per line.
pub fn format_stack(frames: &[Frame], mode: StackMode) -> String {
    let mut out = String::from("\n");
    for f in frames {
        match mode {
            StackMode::Bpftrace => out.push_str(&format!("        {}\n", f.text)),
            StackMode::Perf => out.push_str(&format!("\t{:x} {} ({})\n", f.addr, f.text, f.module)),
            StackMode::Raw => out.push_str(&format!("        {:x}\n", f.addr)),
        }
    }
    out
}

/// Function name of a frame (`func` of `func+off`).
pub fn frame_function(f: &Frame) -> &str {
    f.text.rsplit_once('+').map(|(name, _)| name).unwrap_or(&f.text)
}
