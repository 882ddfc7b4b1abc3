//! Loading a compiled plan: create the maps its ids name (mapset.rs), patch their fds
//! into the programs, load each program through the verifier (a rejection
//! becomes a Diagnostic at the statement whose code was refused); attach.rs
//! attaches them.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use anyhow::Result;
use probes_ebpf::insn::Insn;

use crate::config::Config;
use crate::diag::{Diagnostic, Pos};
use crate::kernel::{sys, verifier};
use crate::plan::{CompiledProgram, Plan};
use crate::script::Session;

use super::{kmaps, stacks};

/// Programs loaded into the kernel, with the maps they use.
pub struct Loaded {
    pub maps: Vec<Arc<kmaps::KernelMap>>,
    pub control: libbpf_rs::MapHandle,
    pub data: libbpf_rs::MapHandle,
    pub lost: libbpf_rs::MapHandle,
    pub programs: Vec<OwnedFd>,
    /// `-c`: the followed pids (kept open while programs use it).
    follow: Option<libbpf_rs::MapHandle>,
    /// Every program's stop flag.
    pub stop: libbpf_rs::MapHandle,
    /// The reader's "about to sleep" flag.
    pub wake: libbpf_rs::MapHandle,
    pub stacks: Arc<stacks::StackMaps>,
    /// `-k`: the failed-helper counters.
    pub helper_errors: Option<libbpf_rs::MapHandle>,
}

impl Loaded {
    /// `-c --repeat`: follow the next run of the command (`pid`) too.
    pub fn follow(&self, pid: i32) -> Result<()> {
        if let Some(map) = &self.follow {
            use libbpf_rs::MapCore;
            map.update(&(pid as i64).to_ne_bytes(), &1i64.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .map_err(|e| anyhow::anyhow!("--repeat: cannot follow the next run of the command: {e}"))?;
        }
        Ok(())
    }
}

/// Create the maps and load every program through the verifier.
pub fn load_all(session: &Session, plan: &Plan, opts: &Config) -> Result<Loaded> {
    let m = super::mapset::create(session, plan, opts)?;
    let fds = &m.fds;
    let mut programs = Vec::new();
    for prog in &plan.programs {
        let insns = patch_maps(prog, fds);
        let attrs = prog.load.clone().map_err(|e| Diagnostic::at(&session.file_name, probe_position(plan, prog), e))?;
        match sys::prog_load(prog.prog_type, attrs, &prog.name, &insns) {
            Ok(fd) => programs.push(fd),
            Err(e) => return Err(verifier_error(session, plan, prog, &e, opts.verifier_log)),
        }
    }
    Ok(Loaded {
        maps: m.script,
        control: m.control,
        data: m.data,
        lost: m.lost,
        programs,
        stop: m.stop,
        wake: m.wake,
        stacks: m.stacks,
        follow: m.follow,
        helper_errors: m.helper_errors,
    })
}

fn patch_maps(prog: &CompiledProgram, fds: &[i32]) -> Vec<Insn> {
    let mut insns = prog.code.insns.clone();
    for &(at, map) in &prog.code.map_relocs {
        insns[at].imm = fds[map as usize];
    }
    insns
}

/// `line:col` of the `probe(...)` call a program comes from.
pub(super) fn probe_position(plan: &Plan, prog: &CompiledProgram) -> rhai::Position {
    plan.probe_at.get(prog.probe).copied().unwrap_or(rhai::Position::NONE)
}

/// A verifier rejection, pointed at the script statement that caused it.
fn verifier_error(
    session: &Session,
    plan: &Plan,
    prog: &CompiledProgram,
    e: &verifier::LoadError,
    full_log: bool,
) -> anyhow::Error {
    let file = &session.file_name;
    let reason = e.reason();
    if prog.internal {
        let msg =
            format!("-c: the kernel refused the program that follows the command's children ({}): {reason}", prog.name);
        return Diagnostic::new(file, None, msg).into();
    }
    if e.errno == libc::EPERM && e.log.is_empty() {
        let msg = "the kernel refused to load BPF programs (EPERM): run as root or with CAP_BPF and CAP_PERFMON";
        return Diagnostic::new(file, None, msg).into();
    }
    let span = e.failing_insn().and_then(|i| prog.code.spans.get(i)).filter(|s| s.line > 0);
    let at = match span {
        Some(s) => Pos::of_span(*s),
        None => Pos::of(probe_position(plan, prog)),
    };
    if full_log {
        crate::util::errln!("{}", e.log);
    }
    let msg = format!(
        "the kernel verifier rejected the code for this statement in {}: {reason} (set RTRACE_VERIFIER_LOG=1 for the full log)",
        prog.name
    );
    Diagnostic::new(file, at, msg).into()
}
