//! Whether a probe spec can be attached on this kernel, asked before the
//! script's top level has finished (`probe_error(spec)` in scripts): the
//! spec parses, its targets exist, and kernel functions can be traced. Tools
//! use it to name the part of a user's specifier that is wrong, before any
//! probe is registered.

use super::kernel_function;
use super::spec::{self, ProbeKind};
use crate::config::Trace;
use crate::kernel::Kernel;

/// Why `text` can't be attached, as the one-line error a run would give;
/// `None` when it can as far as can be told without loading its program.
pub fn attach_problem(text: &str, trace: &Trace, k: &dyn Kernel) -> Option<String> {
    let specs = match spec::parse(text) {
        Ok(v) => v,
        Err(e) => return Some(e.to_string()),
    };
    for s in &specs {
        let points = match super::probe_type(s.kind).expand(s, trace, k) {
            Ok(p) => p,
            Err(e) => return Some(e.to_string()),
        };
        let trampoline_only = match s.kind {
            ProbeKind::Kprobe | ProbeKind::Kretprobe => false,
            ProbeKind::Fentry | ProbeKind::Fexit | ProbeKind::FmodRet => true,
            _ => continue,
        };
        if let Some(point) = points.first() {
            if let Err(e) = kernel_function::check_point(point, trampoline_only, k) {
                return Some(e);
            }
        }
    }
    None
}
