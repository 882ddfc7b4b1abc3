//! Running a compiled plan: create maps, load and attach programs, run
//! `BEGIN`, wait for the end (Ctrl-C, `exit()`, `-d`, a control message),
//! detach, run `END`, print maps.

pub mod kmaps;
pub mod signals;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use probes_ebpf::insn::Insn;

use crate::attach::{load, Attachment};
use crate::compile::lower::{CONTROL_CLEAR, CONTROL_EXIT, CONTROL_PRINT, CONTROL_ZERO};
use crate::compile::{CompiledProgram, Plan};
use crate::output::{self, sink};
use crate::script::{position_text, Session};

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub duration: Option<Duration>,
    pub quiet: bool,
    pub dry_run: bool,
}

/// Programs loaded into the kernel, with the maps they use.
pub struct Loaded {
    pub maps: Vec<Arc<kmaps::KernelMap>>,
    pub control: libbpf_rs::MapHandle,
    pub programs: Vec<OwnedFd>,
}

/// Create the maps and load every program through the verifier.
pub fn load_all(session: &Session, plan: &Plan) -> Result<Loaded> {
    let handles = session.registry.lock().unwrap().maps.clone();
    let mut maps = Vec::new();
    for (handle, shape) in handles.iter().zip(&plan.shapes) {
        let km = kmaps::create(handle, shape)?;
        handle.attach_backend(km.clone());
        maps.push(km);
    }
    let control = kmaps::create_ring("rtrace_control", 64 * 1024)?;
    let mut fds: Vec<i32> = maps.iter().map(|m| m.map.as_fd().as_raw_fd_compat()).collect();
    fds.push(control.as_fd().as_raw_fd_compat());
    let mut programs = Vec::new();
    for prog in &plan.programs {
        let insns = patch_maps(prog, &fds);
        match load::load_program(prog.probe_type.prog_type(), &prog.name, &insns) {
            Ok(fd) => programs.push(fd),
            Err(e) => return Err(verifier_error(session, plan, prog, &e)),
        }
    }
    Ok(Loaded { maps, control, programs })
}

trait RawFdCompat {
    fn as_raw_fd_compat(&self) -> i32;
}

impl RawFdCompat for std::os::fd::BorrowedFd<'_> {
    fn as_raw_fd_compat(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.as_raw_fd()
    }
}

fn patch_maps(prog: &CompiledProgram, fds: &[i32]) -> Vec<Insn> {
    let mut insns = prog.code.insns.clone();
    for &(at, map) in &prog.code.map_relocs {
        insns[at].imm = fds[map as usize];
    }
    insns
}

/// A verifier rejection, pointed at the script statement that caused it.
fn verifier_error(session: &Session, plan: &Plan, prog: &CompiledProgram, e: &load::LoadError) -> anyhow::Error {
    let file = &session.file_name;
    let reason = e.reason();
    if e.errno == libc::EPERM && e.log.is_empty() {
        return anyhow!(
            "{file}: error: the kernel refused to load BPF programs (EPERM): run as root or with CAP_BPF and CAP_PERFMON"
        );
    }
    let span = e.failing_insn().and_then(|i| prog.code.spans.get(i)).filter(|s| s.line > 0);
    let at = match span {
        Some(s) => format!("{}:{}", s.line, s.col),
        None => {
            let reg = session.registry.lock().unwrap();
            reg.probes
                .iter()
                .find(|p| p.spec == plan.probes[prog.probe])
                .map(|p| position_text(p.pos))
                .unwrap_or_else(|| "?".into())
        }
    };
    if std::env::var_os("RTRACE_VERIFIER_LOG").is_some() {
        eprintln!("{}", e.log);
    }
    anyhow!(
        "{file}:{at}: error: the kernel verifier rejected the code for this statement in {}: {reason} (set RTRACE_VERIFIER_LOG=1 for the full log)",
        prog.name
    )
}

/// Run the plan until it ends; returns the exit status.
pub fn run(session: &Session, plan: &Plan, opts: &RunOptions) -> Result<i32> {
    let loaded = load_all(session, plan)?;
    if opts.dry_run {
        if !opts.quiet {
            eprintln!(
                "{} program(s) passed the verifier for {} probe(s); nothing attached (--dry-run)",
                loaded.programs.len(),
                plan.attach_count()
            );
        }
        return Ok(0);
    }
    signals::install();
    let mut attachments: Vec<Attachment> = Vec::new();
    for (prog, fd) in plan.programs.iter().zip(&loaded.programs) {
        for point in &prog.points {
            attachments.push(prog.probe_type.attach(point, fd.as_fd())?);
        }
    }
    if !opts.quiet {
        match sink::format() {
            sink::Format::Text => sink::raw(&output::format_attached_text(plan.attach_count())),
            sink::Format::Json => sink::raw(&output::format_attached_json(plan.attach_count())),
        }
    }

    let start = Instant::now();
    let deadline = opts.duration.map(|d| start + d);
    // BEGIN probes.
    for p in &plan.begin {
        session.call(&p.ast, &p.closure)?;
        if session.registry.lock().unwrap().exit_code.is_some() {
            break;
        }
    }

    // Control messages from the kernel side.
    let pending: Arc<Mutex<Vec<(u32, u32, i64)>>> = Arc::default();
    let sink_for_ring = pending.clone();
    let mut builder = libbpf_rs::RingBufferBuilder::new();
    builder
        .add(&loaded.control, move |data: &[u8]| {
            if data.len() >= 16 {
                let kind = u32::from_le_bytes(data[0..4].try_into().unwrap_or([0; 4]));
                let probe = u32::from_le_bytes(data[4..8].try_into().unwrap_or([0; 4]));
                let arg = i64::from_le_bytes(data[8..16].try_into().unwrap_or([0; 8]));
                sink_for_ring.lock().unwrap().push((kind, probe, arg));
            }
            0
        })
        .map_err(|e| anyhow!("cannot read the control ring: {e}"))?;
    let ring = builder.build().map_err(|e| anyhow!("cannot read the control ring: {e}"))?;

    let timers = session.registry.lock().unwrap().timers.clone();
    let mut next_due: Vec<Option<Instant>> = timers.iter().map(|t| Some(start + t.period)).collect();
    let mut kernel_exit: Option<i32> = None;

    while session.registry.lock().unwrap().exit_code.is_none() && kernel_exit.is_none() && !signals::interrupted() {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        let mut wait = Duration::from_millis(100);
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        for due in next_due.iter().flatten() {
            wait = wait.min(due.saturating_duration_since(now));
        }
        let _ = ring.poll(wait);
        for (kind, _probe, arg) in std::mem::take(&mut *pending.lock().unwrap()) {
            match kind {
                CONTROL_EXIT => kernel_exit = kernel_exit.or(Some(arg as i32)),
                CONTROL_PRINT | CONTROL_CLEAR | CONTROL_ZERO => {
                    if let Some(m) = loaded.maps.get(arg as usize) {
                        use crate::script::api::MapBackend;
                        let r = match kind {
                            CONTROL_PRINT => m.print(),
                            CONTROL_CLEAR => m.clear(),
                            _ => m.zero(),
                        };
                        if let Err(e) = r {
                            eprintln!("rtrace: map {}: {e}", m.name);
                        }
                        if kind != CONTROL_ZERO {
                            session.registry.lock().unwrap().maps[arg as usize].mark_handled();
                        }
                    }
                }
                _ => {}
            }
        }
        let now = Instant::now();
        for (i, t) in timers.iter().enumerate() {
            if next_due[i].is_some_and(|d| now >= d) {
                next_due[i] = if t.repeat { Some(now + t.period) } else { None };
                session.call(&session.ast, &t.closure)?;
            }
        }
    }

    // Detach before END so the maps stop changing.
    drop(attachments);
    for p in &plan.end {
        session.call(&p.ast, &p.closure)?;
    }
    print_remaining_maps(session, &loaded);

    let reg = session.registry.lock().unwrap();
    if let Some(msg) = &reg.failure {
        eprintln!("rtrace: fail: {msg}");
    }
    Ok(reg.exit_code.or(kernel_exit).unwrap_or(0))
}

/// Print, by name, every non-empty map the script didn't print or clear itself.
fn print_remaining_maps(session: &Session, loaded: &Loaded) {
    let handles = session.registry.lock().unwrap().maps.clone();
    let mut dumps: Vec<output::MapDump> = handles
        .iter()
        .zip(&loaded.maps)
        .filter(|(h, _)| !h.handled_by_script())
        .filter_map(|(_, m)| m.dump().ok())
        .filter(|d| !d.entries.is_empty())
        .collect();
    if dumps.is_empty() {
        return;
    }
    dumps.sort_by(|a, b| a.name.cmp(&b.name));
    if sink::format() == sink::Format::Text {
        sink::raw("\n\n");
    }
    for d in &dumps {
        sink::map(d);
    }
}
