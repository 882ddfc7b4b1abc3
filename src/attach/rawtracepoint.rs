//! `rawtracepoint:EVENT`: programs see the tracepoint's raw arguments
//! (`u64 args[]`, as `e.arg0..`, or by name and type as `e.args.NAME` where
//! the kernel has BTF) and attach with `BPF_RAW_TRACEPOINT_OPEN`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, bail, Result};
use libbpf_rs::libbpf_sys;
use probes_ebpf::ir::ContextKind;

use super::{tracefs, AttachPoint, Attachment, ProbeType, Target};
use crate::compile::spec::ProbeSpec;

pub struct RawTracepoint;

const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;

impl ProbeType for RawTracepoint {
    fn prog_type(&self) -> u32 {
        BPF_PROG_TYPE_RAW_TRACEPOINT
    }
    fn context(&self) -> ContextKind {
        ContextKind::RawTracepoint
    }
    fn expand(&self, spec: &ProbeSpec) -> Result<Vec<AttachPoint>> {
        // bpftrace accepts `rawtracepoint:CATEGORY:EVENT` too; the category is ignored.
        let pattern = spec.target.rsplit(':').next().unwrap_or(&spec.target);
        let found = tracefs::expand_raw_tracepoints(pattern)?;
        if found.is_empty() {
            let all = tracefs::list_raw_tracepoints().unwrap_or_default();
            let close = tracefs::suggest(pattern, all.iter().map(String::as_str));
            return Err(tracefs::no_match("raw tracepoint", pattern, close, " (see `rtrace -l 'rawtracepoint:*'`)"));
        }
        Ok(found
            .into_iter()
            .map(|event| AttachPoint {
                name: format!("rawtracepoint:{event}"),
                target: Target::RawTracepoint { event },
            })
            .collect())
    }
    fn btf_args(&self, point: &AttachPoint) -> Option<Vec<crate::btf::Param>> {
        let Target::RawTracepoint { event } = &point.target else { return None };
        crate::btf::kernel()?.tracepoint_params(event)
    }
    fn attach(&self, point: &AttachPoint, prog: BorrowedFd<'_>) -> Result<Attachment> {
        let Target::RawTracepoint { event } = &point.target else {
            bail!("not a raw tracepoint: {}", point.name);
        };
        let name = CString::new(event.as_str())?;
        let fd = unsafe { libbpf_sys::bpf_raw_tracepoint_open(name.as_ptr(), prog.as_raw_fd()) };
        if fd < 0 {
            return Err(anyhow!("cannot attach {}: {}", point.name, std::io::Error::from_raw_os_error(-fd)));
        }
        Ok(Attachment::new(vec![unsafe { OwnedFd::from_raw_fd(fd) }]))
    }
}
