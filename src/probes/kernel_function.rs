//! `kprobe:FN` / `kretprobe:FN` (`k:`/`kr:`) and `fentry:FN` / `fexit:FN`
//! (`f:`/`fr:`); also `kprobe:MODULE:FN` and `kprobe:FN+OFFSET`; and
//! `fmod_ret:FN`, a trampoline program whose `override(VALUE)` makes FN
//! return VALUE without running (FN a `security_*` function or one marked
//! for error injection: the kernel allows no other). Kernel
//! functions are the kernel's traceable ones (`kernel::functions`). A kprobe
//! is decided per function: an fentry/fexit trampoline where one loads for
//! that function (cheaper), else the kprobe PMU (functions with more
//! arguments than a trampoline takes, module functions, offsets). When
//! neither is possible the error says why and names the tracepoint that
//! covers the same event, where one exists.

use std::ffi::CString;
use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::{btf_slot, IntSignature, PtRegsEvent, RawArgsEvent};
use super::listing::{field_decl, kernel_name, matches, or_star, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec, Verdict};
use crate::config::Trace;
use crate::kernel::functions::KernelFunction;
use crate::kernel::link::{Attachment, LoadAttrs};
use crate::kernel::sys::{
    self, probe_trampoline, BPF_MODIFY_RETURN, BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY,
    BPF_TRACE_FEXIT, KPROBE_PMU,
};
use crate::kernel::{Kernel, LiveKernel};
use crate::probes::spec::ProbeSpec;
use crate::util::similar::{no_match, suggest};
use crate::util::wildcard::has_wildcard;

pub struct KernelFunctionProbe {
    pub ret: bool,
    /// Spelled fentry/fexit/fmod_ret: only trampolines will do.
    pub trampoline_only: bool,
    /// fmod_ret: the program's return value can replace the function's.
    pub modify_return: bool,
}

const fn probe(ret: bool, trampoline_only: bool) -> KernelFunctionProbe {
    KernelFunctionProbe { ret, trampoline_only, modify_return: false }
}

pub static KPROBE: KernelFunctionProbe = probe(false, false);
pub static KRETPROBE: KernelFunctionProbe = probe(true, false);
pub static FENTRY: KernelFunctionProbe = probe(false, true);
pub static FEXIT: KernelFunctionProbe = probe(true, true);
pub static FMOD_RET: KernelFunctionProbe =
    KernelFunctionProbe { ret: false, trampoline_only: true, modify_return: true };

/// Where the kernel lists the functions marked for error injection (debugfs;
/// only with CONFIG_FUNCTION_ERROR_INJECTION).
const ERROR_INJECTION_LIST: &str = "/sys/kernel/debug/error_injection/list";

/// Whether an fmod_ret program may change `function`'s return value: the
/// kernel allows it on `security_*` functions and on those marked for
/// error injection; the error says why not.
fn modifiable(function: &str) -> Result<(), String> {
    if function.starts_with("security_") {
        return Ok(());
    }
    static LIST: std::sync::OnceLock<Option<std::collections::HashSet<String>>> = std::sync::OnceLock::new();
    let listed = LIST.get_or_init(|| {
        let text = std::fs::read_to_string(ERROR_INJECTION_LIST).ok()?;
        Some(text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect())
    });
    if listed.as_ref().is_some_and(|l| l.contains(function)) {
        return Ok(());
    }
    let why = match listed {
        Some(_) => "it is not in the kernel's error-injection list".to_string(),
        None => format!(
            "this kernel has no error-injection list ({ERROR_INJECTION_LIST}: CONFIG_FUNCTION_ERROR_INJECTION is off \
             or debugfs is not mounted)"
        ),
    };
    Err(format!(
        "fmod_ret:{function}: the kernel lets BPF change the return value only of security_* functions and of \
         functions marked for error injection, and {why}"
    ))
}

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
    let AttachTarget::KernelFunction { function, ret, .. } = &point.target else { return Ok(()) };
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
            _ if self.modify_return => "fmod_ret",
            (false, false) => "kprobe",
            (false, true) => "kretprobe",
            (true, false) => "fentry",
            (true, true) => "fexit",
        }
    }

    /// The program at `point` is an fentry/fexit trampoline (spelled so, or
    /// a kprobe on a function a trampoline program loads for, since they are
    /// cheaper) rather than a kprobe.
    fn trampoline(&self, point: &AttachPoint, k: &dyn Kernel) -> bool {
        let AttachTarget::KernelFunction { function, offset, .. } = &point.target else { return false };
        self.trampoline_only
            || (*offset == 0
                && k.fentry_available()
                && k.btf().is_some_and(|b| b.function_params(function).is_some_and(|(p, _)| trampoline_fits(b, &p)))
                && k.trampoline_loads(function))
    }

    /// The BTF attach target of a trampoline at `point`.
    fn load_attrs(&self, point: &AttachPoint, k: &dyn Kernel) -> Result<LoadAttrs> {
        if !self.trampoline(point, k) {
            return Ok(LoadAttrs::default());
        }
        let AttachTarget::KernelFunction { function, ret, .. } = &point.target else {
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
        let expected_attach_type = match (self.modify_return, *ret) {
            (true, _) => BPF_MODIFY_RETURN,
            (false, true) => BPF_TRACE_FEXIT,
            (false, false) => BPF_TRACE_FENTRY,
        };
        Ok(LoadAttrs { expected_attach_type, attach_btf_id: id })
    }
}

impl ProbeType for KernelFunctionProbe {
    /// A single function is a program of its own too (its BTF types then
    /// say how wide and signed the arguments and return value are).
    fn per_point(&self, points: &[AttachPoint], k: &dyn Kernel) -> bool {
        self.trampoline_only || k.fentry_available() || points.len() == 1
    }
    fn program(&self, point: &AttachPoint, per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let AttachTarget::KernelFunction { function, ret, .. } = &point.target else {
            bail!("not a kernel function probe: {}", point.name);
        };
        let func = per_point.then(|| function.clone());
        if !self.trampoline(point, k) {
            // One function per program: its BTF types say how wide and signed each value is.
            let ints = k
                .btf()
                .filter(|_| per_point)
                .and_then(|b| b.function_params(function).map(|(p, r)| IntSignature::from_btf(b, &p, r)));
            let event = PtRegsEvent { func, user: false, ints };
            return Ok(ProgramSpec::new(BPF_PROG_TYPE_KPROBE, ContextKind::PtRegs, event));
        }
        // Trampolines see the arguments as `u64 args[]` (return value last).
        let btf = k.btf();
        let (params, retval) = match btf.and_then(|b| b.function_params(function).map(|p| (b, p))) {
            Some((b, (params, retval))) if per_point => {
                // fmod_ret: the slot holds what earlier fmod_ret programs returned.
                let retval = (*ret || self.modify_return).then(|| btf_slot(b, params.len() as u32, retval));
                (Some(params), retval)
            }
            _ => (None, None),
        };
        // The program's frame and its trampoline's are above the function.
        let event = RawArgsEvent { params, retval, func, stack_skip: 2 };
        let mut spec = ProgramSpec::new(BPF_PROG_TYPE_TRACING, ContextKind::RawTracepoint, event);
        spec.load = self.load_attrs(point, k).map_err(|e| e.to_string());
        if self.modify_return {
            spec.verdict = Verdict::Return;
        }
        Ok(spec)
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        let target = FunctionSpec::parse(&spec.target)?;
        if target.offset.is_some() && (self.ret || self.trampoline_only) {
            bail!("{}: only a kprobe can take an offset (kprobe:FN+OFFSET)", spec.target);
        }
        if target.offset.is_some() && has_wildcard(target.name) {
            bail!("{}: a wildcard can't take an offset", spec.target);
        }
        let funcs = k.kernel_functions();
        let found: Vec<&KernelFunction> =
            funcs.iter().filter(|f| target.module_matches(f) && matches(target.name, &f.name)).collect();
        if found.is_empty() {
            let close = suggest(target.name, funcs.iter().map(|f| f.name.as_str()));
            let hint = match target.module {
                Some(m) if m != "vmlinux" => format!(" in module {m}"),
                _ => String::new(),
            };
            return Err(no_match("kernel function", &format!("{}{hint}", target.name), close, ""));
        }
        if self.modify_return {
            for f in &found {
                modifiable(&f.name).map_err(|e| anyhow!(e))?;
            }
        }
        let offset = target.offset.unwrap_or(0);
        let suffix = target.offset.map(|o| format!("+{o}")).unwrap_or_default();
        let mut names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|f| AttachPoint {
                name: format!("{}:{f}{suffix}", spec.kind.name()),
                target: AttachTarget::KernelFunction { function: f.to_string(), ret: self.ret, offset },
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
        let module = q.rest.split_once(':').map(|(m, _)| m).filter(|m| !m.is_empty());
        let target = FunctionSpec { module, name: func, offset: None };
        let btf_needed = self.trampoline_only.then(|| k.btf()).flatten();
        let mut last: Option<&str> = None;
        for f in k.kernel_functions().iter().filter(|f| target.module_matches(f) && matches(func, &f.name)) {
            // Each name once; fentry/fexit only where the function has BTF.
            if last == Some(f.name.as_str()) || (self.trampoline_only && f.module.is_some()) {
                continue;
            }
            last = Some(f.name.as_str());
            if btf_needed.is_some_and(|b| b.function_id(&f.name).is_none()) {
                continue;
            }
            if self.modify_return && modifiable(&f.name).is_err() {
                continue;
            }
            let f = &f.name;
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
        let AttachTarget::KernelFunction { function, ret, offset } = &point.target else {
            bail!("not a kernel function probe: {}", point.name);
        };
        if self.trampoline(point, &LiveKernel) {
            let fd = sys::raw_tracepoint_open(None, prog)
                .map_err(|e| anyhow!("cannot attach {}: {}", point.name, trampoline_error(&e)))?;
            return Ok(Attachment::new(vec![fd]));
        }
        if let Err(why) = availability(function, self.trampoline_only, &LiveKernel) {
            let hint =
                alternative(function, *ret, &LiveKernel).map(|t| format!("; use {t} instead")).unwrap_or_default();
            bail!("cannot attach {}: {why}{hint}", point.name);
        }
        let pmu: u32 = std::fs::read_to_string(KPROBE_PMU)?.trim().parse()?;
        let name = CString::new(function.as_str())?;
        // The kprobe PMU's retprobe flag is config bit 0; config2 is the offset.
        let fd = sys::open_probe(pmu, *ret as u64, name.as_ptr() as u64, *offset, -1, 0)
            .map_err(|e| anyhow!("cannot attach {}: {}", point.name, kprobe_error(&e, *offset)))?;
        sys::attach_bpf(vec![fd], prog)
    }
}

/// Arguments every trampoline takes: x86-64 trampolines pass up to six
/// register arguments (newer kernels take more on the stack, older ones
/// refuse them only at attach time), and no struct passed by value.
fn trampoline_fits(btf: &dyn crate::kernel::btf::BtfTypes, params: &[crate::kernel::btf::Param]) -> bool {
    const REGISTER_ARGS: usize = 6;
    params.len() <= REGISTER_ARGS
        && params.iter().all(|p| !matches!(btf.shape(p.ty), crate::kernel::btf::Shape::Composite { .. }))
}

/// A kernel-function spec's target: `FN`, `MODULE:FN` (`vmlinux:FN` for the
/// kernel itself), `FN+OFFSET` (decimal or 0x hex).
struct FunctionSpec<'a> {
    module: Option<&'a str>,
    name: &'a str,
    offset: Option<u64>,
}

impl<'a> FunctionSpec<'a> {
    fn parse(target: &'a str) -> Result<FunctionSpec<'a>> {
        let (module, rest) = match target.split_once(':') {
            Some((m, f)) => (Some(m).filter(|m| !m.is_empty()), f),
            None => (None, target),
        };
        let (name, offset) = match rest.split_once('+') {
            Some((f, off)) => {
                let parsed = match off.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => off.parse(),
                };
                let off = parsed.map_err(|_| anyhow!("{target}: the offset `{off}` is not a number"))?;
                (f, Some(off))
            }
            None => (rest, None),
        };
        Ok(FunctionSpec { module, name: or_star(name), offset })
    }

    fn module_matches(&self, f: &KernelFunction) -> bool {
        match (self.module, f.module.as_deref()) {
            (None, _) => true,
            (Some("vmlinux"), m) => m.is_none(),
            (Some(want), Some(m)) => matches(want, m),
            (Some(_), None) => false,
        }
    }
}

/// Why the kernel refused to attach a trampoline, in words.
fn trampoline_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EBUSY) => "the function's trampoline is busy (another BPF tracer or ftrace user holds it)".into(),
        Some(524) => "the kernel can't put a trampoline on this function (not supported)".into(),
        Some(libc::ENOENT) => "the kernel has no traceable address for this function".into(),
        _ => e.to_string(),
    }
}

/// Why the kprobe PMU refused `FN[+OFFSET]`, in words.
fn kprobe_error(e: &std::io::Error, offset: u64) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "no such function in the running kernel".into(),
        Some(libc::EILSEQ) | Some(libc::EINVAL) if offset > 0 => {
            format!("offset {offset} is not the start of an instruction in the function")
        }
        Some(libc::EINVAL) => "the kernel does not allow probing this function (kprobe blacklist or notrace)".into(),
        Some(libc::EBUSY) => "another kprobe or ftrace user holds this address".into(),
        Some(libc::EMFILE) => "too many open files (raise the open-file limit: ulimit -n)".into(),
        _ => e.to_string(),
    }
}
