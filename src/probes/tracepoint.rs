//! `tracepoint:CATEGORY:EVENT`: programs see the event's raw record (fields as
//! in its tracefs format file) and attach through a perf event.

use std::os::fd::BorrowedFd;

use anyhow::{anyhow, bail, Result};
use probes_ebpf::ir::ContextKind;

use super::listing::{field_decl, or_star, ListQuery, Listing};
use super::{AttachPoint, AttachTarget, EventContext, ProbeType, ProgramSpec};
use crate::config::Trace;
use crate::kernel::link::Attachment;
use crate::kernel::sys::{self, BPF_PROG_TYPE_TRACEPOINT};
use crate::kernel::tracefs;
use crate::kernel::tracepoint_format::TracepointFormat;
use crate::kernel::Kernel;
use crate::probes::spec::ProbeSpec;
use crate::util::similar::no_match;
use crate::util::wildcard::{has_wildcard, wildcard_match};

pub struct Tracepoint;

/// A tracepoint's raw record: `e.args.NAME` reads the fields its format
/// file lists (known when the program serves one tracepoint).
pub struct TracepointEvent {
    pub format: Option<TracepointFormat>,
}

impl EventContext for TracepointEvent {
    fn format(&self) -> Option<&TracepointFormat> {
        self.format.as_ref()
    }
}

impl ProbeType for Tracepoint {
    fn program(&self, point: &AttachPoint, per_point: bool, k: &dyn Kernel) -> Result<ProgramSpec> {
        let format = match &point.target {
            AttachTarget::Tracepoint { category, event } if per_point => Some(k.tracepoint_format(category, event)?),
            _ => None,
        };
        const IRQ_CATEGORIES: &[&str] = &["irq", "irq_vectors", "timer", "ipi", "nmi", "irq_matrix"];
        let mut spec = ProgramSpec::new(BPF_PROG_TYPE_TRACEPOINT, ContextKind::Tracepoint, TracepointEvent { format });
        spec.irqs_off = matches!(&point.target, AttachTarget::Tracepoint { category, .. } if IRQ_CATEGORIES.contains(&category.as_str()));
        Ok(spec)
    }
    fn expand(&self, spec: &ProbeSpec, _trace: &Trace, k: &dyn Kernel) -> Result<Vec<AttachPoint>> {
        if !spec.target.contains(':') {
            bail!("tracepoint '{}' needs CATEGORY:EVENT, e.g. tracepoint:syscalls:sys_enter_openat", spec.target);
        }
        let found = expand_tracepoints(&spec.target, k)?;
        if found.is_empty() {
            let close = tracefs::suggest_tracepoints_in(k.tracepoints().unwrap_or(&[]), &spec.target);
            return Err(no_match("tracepoint", &spec.target, close, " (see `rtrace -l 'tracepoint:*'`)"));
        }
        Ok(found
            .into_iter()
            .map(|(category, event)| AttachPoint {
                name: format!("tracepoint:{category}:{event}"),
                target: AttachTarget::Tracepoint { category, event },
            })
            .collect())
    }
    fn list(&self, q: &ListQuery, k: &dyn Kernel) -> Result<Listing> {
        let parts: Vec<&str> = q.rest.split(':').collect();
        let patterns: Vec<String> = match parts.as_slice() {
            [""] | ["*"] => vec!["*:*".into()],
            // One part: a category (`t:syscalls`) or an event name in any category.
            [one] => vec![format!("{one}:*"), format!("*:{one}")],
            [cat, name] => vec![format!("{}:{}", or_star(cat), or_star(name))],
            _ if !q.explicit => vec![],
            _ => bail!("-l: 'tracepoint:{}' has too many parts; write tracepoint:CATEGORY:NAME", q.rest),
        };
        let mut out = Listing::default();
        for p in patterns {
            for (cat, name) in expand_tracepoints(&p, k)? {
                let key = format!("tracepoint:{cat}:{name}");
                if q.verbose && !out.probes.contains_key(&key) {
                    let details = match k.tracepoint_format(&cat, &name) {
                        Ok(f) => f.event_fields().map(|f| field_decl(&f.name, &f.c_type)).collect(),
                        Err(e) => vec![format!("(cannot read the format: {e:#})")],
                    };
                    out.add_with(key, details);
                } else {
                    out.add(key);
                }
            }
        }
        Ok(out)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let AttachTarget::Tracepoint { category, event } = &point.target else {
            bail!("not a tracepoint: {}", point.name);
        };
        let id = tracefs::tracepoint_id(category, event)?;
        let fd = sys::open(sys::PERF_TYPE_TRACEPOINT, id as u64, 1, -1, 0)
            .map_err(|e| anyhow!("cannot open {}: {e}", point.name))?;
        sys::attach_bpf(vec![fd], prog).map_err(|e| anyhow!("{}: {e}", point.name))
    }
}

/// Expand a bpftrace-style pattern `category:name`, where either part may
/// contain `*` and `?`, or a comma list `a:b,c:d`. A part without `:` matches
/// that name in any category. Results are sorted and deduplicated; an unknown
/// category or name simply yields nothing.
pub fn expand_tracepoints(pattern: &str, k: &dyn Kernel) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for item in pattern.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let (category_pattern, name_pattern) = match item.split_once(':') {
            Some((category, name)) => (category, name),
            None => ("*", item),
        };
        if name_pattern.contains(':') || category_pattern.is_empty() || name_pattern.is_empty() {
            bail!("invalid tracepoint pattern '{item}' (expected category:name)");
        }
        expand_one_tracepoint(category_pattern, name_pattern, k, &mut found)?;
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

fn expand_one_tracepoint(
    category_pattern: &str,
    name_pattern: &str,
    k: &dyn Kernel,
    found: &mut Vec<(String, String)>,
) -> Result<()> {
    let category_is_literal = !has_wildcard(category_pattern);
    let name_is_literal = !has_wildcard(name_pattern);
    if category_is_literal && (category_pattern.contains('/') || category_pattern.starts_with('.')) {
        return Ok(());
    }
    if category_is_literal && name_is_literal {
        if name_pattern.contains('/') || name_pattern.starts_with('.') {
            return Ok(());
        }
        if k.tracepoint_exists(category_pattern, name_pattern)? {
            found.push((category_pattern.to_string(), name_pattern.to_string()));
        }
    } else if category_is_literal {
        for name in k.category_events(category_pattern)? {
            if wildcard_match(name_pattern, &name) {
                found.push((category_pattern.to_string(), name));
            }
        }
    } else {
        for (category, name) in k.tracepoints()? {
            if wildcard_match(category_pattern, category) && wildcard_match(name_pattern, name) {
                found.push((category.clone(), name.clone()));
            }
        }
    }
    Ok(())
}

/// The direction (`enter`, `exit`) and syscall number of a
/// `syscalls:sys_{enter,exit}_NAME` point; None for any other point, or a
/// syscall whose number rtrace doesn't know.
pub fn syscall_of(p: &AttachPoint) -> Option<(&'static str, i64)> {
    let AttachTarget::Tracepoint { category, event } = &p.target else { return None };
    if category != "syscalls" {
        return None;
    }
    let (dir, name) = match (event.strip_prefix("sys_enter_"), event.strip_prefix("sys_exit_")) {
        (Some(name), _) => ("enter", name),
        (None, Some(name)) => ("exit", name),
        _ => return None,
    };
    Some((dir, crate::kernel::syscalls::number(name)?))
}

/// `tracepoint:raw_syscalls:sys_{dir}`, the point every syscall of a
/// direction passes, when this kernel has it.
pub fn raw_syscalls(dir: &str, k: &dyn Kernel) -> Option<AttachPoint> {
    let event = format!("sys_{dir}");
    k.tracepoint_exists("raw_syscalls", &event).unwrap_or(false).then(|| AttachPoint {
        name: format!("tracepoint:raw_syscalls:{event}"),
        target: AttachTarget::Tracepoint { category: "raw_syscalls".into(), event },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::tracefs::tracefs_available;
    use crate::kernel::LiveKernel;
    use crate::util::similar::suggest;

    #[test]
    fn listing_and_wildcards() {
        if !tracefs_available() {
            return;
        }
        let all = tracefs::tracepoints().unwrap();
        assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        assert!(all.contains(&("sched".into(), "sched_switch".into())));

        let open = expand_tracepoints("syscalls:sys_enter_open*", &LiveKernel).unwrap();
        let names: Vec<&str> = open.iter().map(|(_, n)| n.as_str()).collect();
        assert!(names.contains(&"sys_enter_openat"), "{names:?}");
        assert!(names.contains(&"sys_enter_open_by_handle_at"), "{names:?}");
        assert!(open.iter().all(|(c, n)| c == "syscalls" && n.starts_with("sys_enter_open")));

        assert!(!expand_tracepoints("sched:*", &LiveKernel).unwrap().is_empty());
        assert_eq!(
            expand_tracepoints("sched:sched_switch, syscalls:sys_enter_openat,sched:sched_switch", &LiveKernel)
                .unwrap(),
            vec![
                ("sched".to_string(), "sched_switch".to_string()),
                ("syscalls".to_string(), "sys_enter_openat".to_string()),
            ]
        );
        assert!(expand_tracepoints("no_such_category:*", &LiveKernel).unwrap().is_empty());
        assert!(expand_tracepoints("no_such_category:sched_switch", &LiveKernel).unwrap().is_empty());
        assert!(expand_tracepoints("no_such_*:*", &LiveKernel).unwrap().is_empty());
        assert!(expand_tracepoints("sched:no_such_event", &LiveKernel).unwrap().is_empty());
        assert_eq!(
            expand_tracepoints("sched_switch", &LiveKernel).unwrap(),
            vec![("sched".into(), "sched_switch".into())]
        );
        let across = expand_tracepoints("*:sched_switch", &LiveKernel).unwrap();
        assert_eq!(across, vec![("sched".to_string(), "sched_switch".to_string())]);
        assert!(expand_tracepoints("a:b:c", &LiveKernel).is_err());

        let all_names = all.iter().map(|(_, n)| n.as_str());
        assert_eq!(suggest("sys_enter_opnat", all_names)[0], "sys_enter_openat");
        assert_eq!(tracefs::suggest_tracepoints("sched:sys_enter_openat"), vec!["syscalls:sys_enter_openat"]);
    }

    #[test]
    fn listing_is_fast_once_cached() {
        if !tracefs_available() {
            return;
        }
        tracefs::tracepoints().unwrap();
        let start = std::time::Instant::now();
        expand_tracepoints("sched:sched_switch", &LiveKernel).unwrap();
        expand_tracepoints("*:sched_sw*", &LiveKernel).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_millis(50), "{:?}", start.elapsed());
    }
}
