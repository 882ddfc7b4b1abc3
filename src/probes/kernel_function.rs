//! `kprobe:FN` / `kretprobe:FN` (`k:`/`kr:`) and `fentry:FN` / `fexit:FN`
//! (`f:`/`fr:`). Kernel functions come from /proc/kallsyms. A kprobe prefers
//! an fentry/fexit trampoline when the kernel allows one (cheaper), else uses
//! the kprobe PMU. When neither is possible the error says why and names the
//! tracepoint that covers the same event, where one exists.

use std::ffi::CString;
use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::{btf_slot, PtRegsEvent, RawArgsEvent};
use super::listing::{field_decl, kernel_name, matches, or_star, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::{Attachment, LoadAttrs};
use crate::kernel::sys::{
    self, probe_trampoline, BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT, KPROBE_PMU,
};
use crate::kernel::{Kernel, LiveKernel};
use crate::probes::spec::ProbeSpec;
use crate::util::similar::{no_match, suggest};
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct KernelFunctionProbe {
    pub ret: bool,
    /// Spelled fentry/fexit: only trampolines will do.
    pub trampoline_only: bool,
}

pub static KPROBE: KernelFunctionProbe = KernelFunctionProbe { ret: false, trampoline_only: false };
pub static KRETPROBE: KernelFunctionProbe = KernelFunctionProbe { ret: true, trampoline_only: false };
pub static FENTRY: KernelFunctionProbe = KernelFunctionProbe { ret: false, trampoline_only: true };
pub static FEXIT: KernelFunctionProbe = KernelFunctionProbe { ret: true, trampoline_only: true };

/// Whether this kernel can attach BPF to kernel functions, and if not, why.
fn availability(function: &str, trampoline_only: bool, k: &dyn Kernel) -> Result<(), String> {
    let kprobes = k.kprobes_available();
    if kprobes && !trampoline_only {
        return Ok(());
    }
    // fentry/fexit need BPF trampolines: BPF_PROG_TYPE_TRACING programs
    // attached by BTF id. Try loading a minimal one to find out.
    let why_fentry = match probe_trampoline(function) {
        Ok(()) => return Ok(()),
        Err(e) => format!("fentry/fexit programs are refused by this kernel ({e})"),
    };
    if trampoline_only {
        return Err(why_fentry);
    }
    Err(format!("this kernel has no kprobes (CONFIG_KPROBES is off: no {KPROBE_PMU}) and {why_fentry}"))
}

/// Whether the program for `point` (a kernel function) can attach here: the
/// error a run would give, with the tracepoint to use instead where one exists.
pub fn check_point(point: &AttachPoint, trampoline_only: bool, k: &dyn Kernel) -> Result<(), String> {
    let AttachTarget::KernelFunction { function, ret } = &point.target else { return Ok(()) };
    availability(function, trampoline_only, k).map_err(|why| {
        let hint = alternative(function, *ret, k).map(|t| format!("; use {t} instead")).unwrap_or_default();
        format!("cannot attach {}: {why}{hint}", point.name)
    })
}

/// A tracepoint covering the same event as kernel function `func`, if any.
pub fn alternative(func: &str, ret: bool, k: &dyn Kernel) -> Option<String> {
    let base = ["__x64_sys_", "__ia32_sys_", "__se_sys_", "__do_sys_", "ksys_", "do_sys_", "vfs_", "do_"]
        .iter()
        .find_map(|p| func.strip_prefix(p))
        .unwrap_or(func);
    let base = match base {
        "openat2" | "open" => "openat",
        other => other,
    };
    let wanted = format!("syscalls:sys_{}_{base}", if ret { "exit" } else { "enter" });
    super::tracepoint::expand_tracepoints(&wanted, k)
        .ok()
        .filter(|v| !v.is_empty())
        .map(|_| format!("tracepoint:{wanted}"))
}

impl KernelFunctionProbe {
    fn name(&self) -> &'static str {
        match (self.trampoline_only, self.ret) {
            (false, false) => "kprobe",
            (false, true) => "kretprobe",
            (true, false) => "fentry",
            (true, true) => "fexit",
        }
    }

    /// The program at `point` is an fentry/fexit trampoline (spelled so, or
    /// a kprobe on a function with BTF on a kernel that loads trampolines,
    /// since they are cheaper) rather than a kprobe.
    fn trampoline(&self, point: &AttachPoint, k: &dyn Kernel) -> bool {
        let AttachTarget::KernelFunction { function, .. } = &point.target else { return false };
        self.trampoline_only || (k.fentry_available() && k.btf().is_some_and(|b| b.function_id(function).is_some()))
    }

    /// The BTF attach target of a trampoline at `point`.
    fn load_attrs(&self, point: &AttachPoint, k: &dyn Kernel) -> Result<LoadAttrs> {
        if !self.trampoline(point, k) {
            return Ok(LoadAttrs::default());
        }
        let AttachTarget::KernelFunction { function, ret } = &point.target else {
            bail!("not a kernel function probe: {}", point.name);
        };
        if let Err(why) = availability(function, true, k) {
            let hint = alternative(function, *ret, k).map(|t| format!("; use {t} instead")).unwrap_or_default();
            bail!("cannot attach {}: {why}{hint}", point.name);
        }
        let id = k
            .btf()
            .and_then(|b| b.function_id(function))
            .ok_or_else(|| anyhow!("cannot attach {}: {function} has no BTF entry", point.name))?;
        Ok(LoadAttrs { expected_attach_type: if *ret { BPF_TRACE_FEXIT } else { BPF_TRACE_FENTRY }, attach_btf_id: id })
    }
}

impl ProbeType for KernelFunctionProbe {
    fn per_point(&self, _points: &[AttachPoint], k: &dyn Kernel) -> bool {
        self.trampoline_only || k.fentry_available()
    }
    fn program(&self, point: &AttachPoint, per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let AttachTarget::KernelFunction { function, ret } = &point.target else {
            bail!("not a kernel function probe: {}", point.name);
        };
        let func = per_point.then(|| function.clone());
        if !self.trampoline(point, k) {
            return Ok(ProgramSpec::new(BPF_PROG_TYPE_KPROBE, ContextKind::PtRegs, PtRegsEvent { func, user: false }));
        }
        // Trampolines see the arguments as `u64 args[]` (return value last).
        let btf = k.btf();
        let (params, retval) = match btf.and_then(|b| b.function_params(function).map(|p| (b, p))) {
            Some((b, (params, retval))) if per_point => {
                let retval = ret.then(|| btf_slot(b, params.len() as u32, retval));
                (Some(params), retval)
            }
            _ => (None, None),
        };
        // The program's frame and its trampoline's are above the function.
        let event = RawArgsEvent { params, retval, func, stack_skip: 2 };
        let mut spec = ProgramSpec::new(BPF_PROG_TYPE_TRACING, ContextKind::RawTracepoint, event);
        spec.load = self.load_attrs(point, k).map_err(|e| e.to_string());
        Ok(spec)
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        let pattern = spec.target.rsplit(':').next().unwrap_or(&spec.target);
        let funcs = k.kernel_functions();
        let found: Vec<&String> = if has_wildcard(pattern) {
            funcs.iter().filter(|f| wildcard_match(pattern, f)).collect()
        } else {
            funcs.binary_search_by(|f| f.as_str().cmp(pattern)).map(|i| vec![&funcs[i]]).unwrap_or_default()
        };
        if found.is_empty() {
            let close = suggest(pattern, funcs.iter().map(String::as_str));
            return Err(no_match("kernel function", pattern, close, ""));
        }
        Ok(found
            .into_iter()
            .map(|f| AttachPoint {
                name: format!("{}:{f}", spec.kind.name()),
                target: AttachTarget::KernelFunction { function: f.clone(), ret: self.ret },
            })
            .collect())
    }
    fn list(&self, q: &ListQuery, k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let kind = self.name();
        // `kprobe:vmlinux:FN` / `kprobe:FN+OFF`: the function name part.
        let Some(func) = kernel_name(q.rest) else { return Ok(out) };
        let func = or_star(func.split('+').next().unwrap_or(""));
        let available = if self.trampoline_only { k.fentry_available() } else { k.kprobes_available() };
        if !available {
            if q.explicit {
                let why = if self.trampoline_only {
                    "this kernel refuses fentry/fexit programs, so there are no fentry probes to list"
                } else {
                    "this kernel has no kprobes (CONFIG_KPROBES is off), so there are no kprobe probes to list"
                };
                let instead = if has_wildcard(func) { None } else { alternative(func, self.ret, k) };
                let hint = match instead {
                    Some(tp) => format!("; {tp} covers {func}"),
                    None => "; see rtrace -l 'tracepoint:*'".to_string(),
                };
                out.notes.push(format!("{why}{hint}"));
            }
            return Ok(out);
        }
        let btf = if q.verbose { k.btf() } else { None };
        for f in k.kernel_functions().iter().filter(|f| matches(func, f)) {
            // -lv: the BTF signature (`struct file * file`, ..., `ssize_t retval`).
            let details = match btf.and_then(|b| b.function_params(f).map(|p| (b, p))) {
                Some((b, (params, ret))) => {
                    let mut d: Vec<String> = params.iter().map(|p| field_decl(&p.name, &b.type_name(p.ty))).collect();
                    if self.ret {
                        d.push(field_decl("retval", &b.type_name(ret)));
                    }
                    d
                }
                None => vec![],
            };
            out.add_with(format!("{kind}:{f}"), details);
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::KernelFunction { function, ret } = &point.target else {
            bail!("not a kernel function probe: {}", point.name);
        };
        if self.trampoline(point, &LiveKernel) {
            return super::tp_btf::attach_by_btf_id(point, prog);
        }
        if let Err(why) = availability(function, self.trampoline_only, &LiveKernel) {
            let hint =
                alternative(function, *ret, &LiveKernel).map(|t| format!("; use {t} instead")).unwrap_or_default();
            bail!("cannot attach {}: {why}{hint}", point.name);
        }
        let pmu: u32 = std::fs::read_to_string(KPROBE_PMU)?.trim().parse()?;
        let name = CString::new(function.as_str())?;
        // The kprobe PMU's retprobe flag is config bit 0.
        let fd = sys::open_probe(pmu, *ret as u64, name.as_ptr() as u64, 0, -1, 0)
            .map_err(|e| anyhow!("cannot attach {}: {e}", point.name))?;
        sys::attach_bpf(vec![fd], prog)
    }
}
