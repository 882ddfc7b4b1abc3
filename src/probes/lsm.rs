//! `lsm:HOOK`: a BPF LSM program on a security hook (`lsm:file_open`,
//! `lsm:bprm_check_security`, `lsm:socket_connect`). Its arguments are the
//! hook's, typed by BTF as for fentry (`e.args.file.f_path.dentry`); the
//! closure may `deny()` the operation (with `--unsafe`), which the kernel
//! then fails with `EPERM` (or the errno given). The program is a
//! BPF_PROG_TYPE_LSM program loaded against the kernel's `bpf_lsm_HOOK`
//! function, so each hook gets its own; it needs `bpf` among the kernel's
//! active LSMs.

use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::event::RawArgsEvent;
use super::listing::{field_decl, kernel_name, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, ProbeType, ProgramSpec, Verdict};
use crate::config::Trace;
use crate::kernel::btf::BtfTypes;
use crate::kernel::link::{Attachment, LoadAttrs};
use crate::kernel::sys::{self, BPF_LSM_MAC, BPF_PROG_TYPE_LSM};
use crate::kernel::{Kernel, LiveKernel};
use crate::probes::spec::ProbeSpec;
use crate::util::similar::{no_match, suggest};
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct Lsm;

/// The kernel function a hook's program attaches to.
const HOOK_PREFIX: &str = "bpf_lsm_";

/// The kernel function hook `hook`'s program attaches to.
fn hook_function(hook: &str) -> String {
    format!("{HOOK_PREFIX}{hook}")
}

impl ProbeType for Lsm {
    fn per_point(&self, _points: &[AttachPoint], _k: &dyn Kernel) -> bool {
        true
    }
    fn program(&self, point: &AttachPoint, _per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let AttachTarget::Lsm { hook } = &point.target else { bail!("not an LSM hook: {}", point.name) };
        let function = hook_function(hook);
        let (params, ret) = k.btf().and_then(|b| b.function_params(&function)).unzip();
        // The program's frame and its trampoline's are above the hook.
        let event = RawArgsEvent { params, retval: None, func: Some(hook.clone()), stack_skip: 2 };
        let mut spec = ProgramSpec::new(BPF_PROG_TYPE_LSM, ContextKind::RawTracepoint, event);
        // A hook returning an `int` fails its operation with the program's
        // return; one returning nothing (type 0, void) can't be failed.
        spec.verdict = if ret == Some(0) { Verdict::Void } else { Verdict::Errno };
        spec.load = k
            .btf()
            .and_then(|b| b.function_id(&function))
            .map(|id| LoadAttrs { expected_attach_type: BPF_LSM_MAC, attach_btf_id: id })
            .ok_or_else(|| format!("{} has no BTF entry {function}", point.name));
        Ok(spec)
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        let Some(kernel) = k.btf() else {
            bail!("lsm probes need kernel BTF (/sys/kernel/btf/vmlinux), which this kernel lacks");
        };
        let pattern = spec.target.rsplit(':').next().unwrap_or(&spec.target);
        let found = hooks(kernel, pattern);
        if found.is_empty() {
            let all = hooks(kernel, "*");
            if all.is_empty() {
                bail!("this kernel has no BPF LSM hooks (it was built without CONFIG_BPF_LSM)");
            }
            let close = suggest(pattern, all.iter().map(String::as_str));
            return Err(no_match("LSM hook", pattern, close, " (see `rtrace -l 'lsm:*'`)"));
        }
        if let Some(why) = k.bpf_lsm_refused() {
            bail!("cannot attach lsm:{}: {why}", found[0]);
        }
        Ok(found
            .into_iter()
            .map(|hook| AttachPoint { name: format!("lsm:{hook}"), target: AttachTarget::Lsm { hook } })
            .collect())
    }
    fn list(&self, q: &ListQuery, k: &dyn Kernel) -> Result<Listing> {
        let mut out = Listing::default();
        let (Some(name), Some(kernel)) = (kernel_name(q.rest), k.btf()) else { return Ok(out) };
        for hook in hooks(kernel, name) {
            // -lv: the hook's typed arguments.
            let details = match kernel.function_params(&hook_function(&hook)).filter(|_| q.verbose) {
                Some((params, _)) => params.iter().map(|p| field_decl(&p.name, &kernel.type_name(p.ty))).collect(),
                None => vec![],
            };
            out.add_with(format!("lsm:{hook}"), details);
        }
        if q.explicit && !out.probes.is_empty() {
            if let Some(why) = k.bpf_lsm_refused() {
                out.notes.push(why);
            }
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let fd = sys::raw_tracepoint_open(None, prog).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EINVAL) => LiveKernel.bpf_lsm_refused().unwrap_or_else(|| e.to_string()),
                _ => e.to_string(),
            };
            anyhow!("cannot attach {}: {why}", point.name)
        })?;
        Ok(Attachment::new(vec![fd]))
    }
}

/// The LSM hooks matching `pattern` (a name or a `*`/`?` wildcard), sorted.
fn hooks(kernel: &dyn BtfTypes, pattern: &str) -> Vec<String> {
    let all = kernel.function_names(HOOK_PREFIX);
    let names = all.iter().filter_map(|f| f.strip_prefix(HOOK_PREFIX));
    if has_wildcard(pattern) {
        names.filter(|n| wildcard_match(pattern, n)).map(str::to_string).collect()
    } else {
        names.filter(|n| *n == pattern).map(str::to_string).collect()
    }
}
