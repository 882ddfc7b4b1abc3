//! Running a compiled plan: create maps, load and attach programs, run
//! `BEGIN`, feed records to userspace statements until the end (Ctrl-C,
//! `exit()`, `-d`, a control message), detach, run `END`, print maps and
//! report lost events.

pub mod continuation;
pub mod dump;
pub mod exporter;
pub mod kmaps;
pub mod limits;
pub mod probe_stats;
pub mod reader;
pub mod serve;
pub mod signals;
pub mod stacks;
pub mod target;
pub mod verbose;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags};
use probes_ebpf::insn::Insn;

use crate::config::Config;
use crate::diag::{Diagnostic, Pos};
use crate::kernel::link::{self, Attachment};
use crate::kernel::{sys, verifier};
use crate::output::{self, sink};
use crate::plan::{CompiledProgram, Plan};
use crate::script::api::MapBackend;
use crate::script::{position_text, Session};
use probes_ebpf::record::{CONTROL_CLEAR, CONTROL_EXIT, CONTROL_PRINT, CONTROL_ZERO};

/// Programs loaded into the kernel, with the maps they use.
pub struct Loaded {
    pub maps: Vec<Arc<kmaps::KernelMap>>,
    pub control: libbpf_rs::MapHandle,
    pub data: libbpf_rs::MapHandle,
    pub lost: libbpf_rs::MapHandle,
    pub programs: Vec<OwnedFd>,
    /// `-c`: the followed pids (kept open while programs use it).
    _follow: Option<libbpf_rs::MapHandle>,
    /// Every program's stop flag.
    pub stop: libbpf_rs::MapHandle,
    /// The reader's "about to sleep" flag.
    pub wake: libbpf_rs::MapHandle,
}

/// Create the maps and load every program through the verifier.
pub fn load_all(session: &Session, plan: &Plan, opts: &Config) -> Result<Loaded> {
    let handles = session.registry.lock().unwrap().maps.clone();
    let mut maps = Vec::new();
    for (handle, shape) in handles.iter().zip(&plan.shapes) {
        let km = kmaps::create(handle, shape)?;
        handle.attach_backend(km.clone());
        maps.push(km);
    }
    let control = kmaps::create_ring("rtrace_control", 64 * 1024)?;
    let data = kmaps::create_ring("rtrace_data", opts.ring_size)?;
    let lost = kmaps::create_lost_counters(plan.probes.len().max(1) as u32)?;
    // Map fds by the map ids the programs were generated with; the stop
    // flag has the last id. Unused ids (a script map no probe uses in the
    // kernel keeps its id) stay -1.
    let mut fds: Vec<i32> = vec![-1; plan.stop_map as usize + 1];
    for (i, m) in maps.iter().enumerate() {
        fds[i] = m.map.as_fd().as_raw_fd();
    }
    fds[plan.control_ring as usize] = control.as_fd().as_raw_fd();
    fds[plan.data_ring as usize] = data.as_fd().as_raw_fd();
    fds[plan.lost_map as usize] = lost.as_fd().as_raw_fd();
    let wake = kmaps::create_wake_flag()?;
    fds[plan.wake_map as usize] = wake.as_fd().as_raw_fd();
    if !plan.stack_maps.is_empty() {
        let m = kmaps::create_stack_lost_counters()?;
        fds[plan.stack_lost as usize] = m.as_fd().as_raw_fd();
        stacks::register_lost_counters(m);
    }
    let entries = opts.stack_entries;
    for (id, depth, _) in &plan.stack_maps {
        let m = kmaps::create_stack_map(*depth, entries.unwrap_or_else(|| kmaps::default_stack_entries(*depth)))?;
        fds[*id as usize] = m.as_fd().as_raw_fd();
        stacks::register(*id, m);
    }
    let follow = match plan.follow_map {
        Some(id) => {
            let m = kmaps::create_follow_map(opts.trace.pid.unwrap_or(0))?;
            fds[id as usize] = m.as_fd().as_raw_fd();
            Some(m)
        }
        None => None,
    };
    let stop = kmaps::create_stop_flag()?;
    fds[plan.stop_map as usize] = stop.as_fd().as_raw_fd();
    let mut programs = Vec::new();
    for prog in &plan.programs {
        let insns = patch_maps(prog, &fds);
        let attrs = prog
            .load
            .clone()
            .map_err(|e| Diagnostic::at_text(&session.file_name, &probe_position(session, plan, prog), e))?;
        match sys::prog_load(prog.prog_type, attrs, &prog.name, &insns) {
            Ok(fd) => programs.push(fd),
            Err(e) => return Err(verifier_error(session, plan, prog, &e, opts.verifier_log)),
        }
    }
    Ok(Loaded { maps, control, data, lost, programs, stop, wake, _follow: follow })
}

fn patch_maps(prog: &CompiledProgram, fds: &[i32]) -> Vec<Insn> {
    let mut insns = prog.code.insns.clone();
    for &(at, map) in &prog.code.map_relocs {
        insns[at].imm = fds[map as usize];
    }
    insns
}

/// `line:col` of the `probe(...)` call a program comes from.
fn probe_position(session: &Session, plan: &Plan, prog: &CompiledProgram) -> String {
    let reg = session.registry.lock().unwrap();
    reg.probes
        .iter()
        .find(|p| p.spec == plan.probes[prog.probe])
        .map(|p| position_text(p.pos))
        .unwrap_or_else(|| "?".into())
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
        None => Pos::parse(&probe_position(session, plan, prog)),
    };
    if full_log {
        eprintln!("{}", e.log);
    }
    let msg = format!(
        "the kernel verifier rejected the code for this statement in {}: {reason} (set RTRACE_VERIFIER_LOG=1 for the full log)",
        prog.name
    );
    Diagnostic::new(file, at, msg).into()
}

/// Run the plan until it ends; returns the exit status.
pub fn run(session: &Session, plan: &Plan, opts: &Config, traced: Option<&mut target::TracedProcess>) -> Result<i32> {
    let mut traced = traced;
    let loaded = load_all(session, plan, opts)?;
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
    let stats = (opts.verbose || opts.serve.is_some()).then(probe_stats::enable);
    let _serving = match &opts.serve {
        Some(addr) => {
            Some(serve::start(addr, &opts.metrics_prefix, matches!(stats, Some(Ok(_))), session, plan, &loaded)?)
        }
        None => None,
    };
    signals::install();
    // Follow processes' mappings from now on, so user stacks of processes
    // that exit before their stacks print still resolve.
    let tracker = if plan.stack_maps.iter().any(|(_, _, user)| *user) {
        match crate::symbols::procmaps::Tracker::start() {
            Ok(t) => Some(t),
            Err(e) => {
                if opts.debug_symbols {
                    eprintln!("rtrace: cannot follow process mappings: {e}");
                }
                None
            }
        }
    } else {
        None
    };
    let mut attachments: Vec<Attachment> = Vec::new();
    for (i, point) in plan.attach_order() {
        let (prog, fd) = (&plan.programs[i], &loaded.programs[i]);
        match prog.probe_type.attach(point, fd.as_fd()) {
            Ok(a) => attachments.push(a),
            Err(e) => {
                link::detach_all(attachments);
                // Name the probe() call the refused attach point comes from.
                let text = format!("{e:#}");
                if text.contains(": error:") {
                    return Err(e);
                }
                let at = probe_position(session, plan, prog);
                return Err(anyhow!("{}:{at}: error: {text}", session.file_name));
            }
        }
    }
    if opts.verbose {
        verbose::print(plan, &loaded);
    }
    let dup = |m: &libbpf_rs::MapHandle| libbpf_rs::MapHandle::try_from(m).map_err(|e| anyhow!("ring buffer: {e}"));
    let mut reader = reader::Reader::start(
        dup(&loaded.data)?,
        dup(&loaded.control)?,
        dup(&loaded.wake)?,
        tracker,
        user_stack_offsets(plan),
    )?;
    if !opts.quiet {
        match sink::format() {
            sink::Format::Text => sink::raw(&output::format_attached_text(plan.attach_count())),
            sink::Format::Json => sink::raw(&output::format_attached_json(plan.attach_count())),
        }
    }
    sink::flush();

    let mut conts = continuation::Continuations::new(plan, opts.keep_going);
    if let Some(t) = traced.as_deref_mut() {
        t.release();
    }
    let result = event_loop(session, plan, &loaded, &reader, &mut conts, opts, traced.as_deref_mut());
    if let Some(t) = traced.as_deref_mut() {
        t.stop();
    }
    signals::shutting_down();

    // Stop every probe first so nothing changes while END runs and maps
    // print. Programs check the stop flag first; detaching (slow in the
    // kernel: tens of ms per tracepoint) waits until the output is out.
    let mut attachments = attachments;
    if let Err(e) = kmaps::set_stop_flag(&loaded.stop) {
        eprintln!("rtrace: {e}; detaching now");
        link::detach_all(std::mem::take(&mut attachments));
    }
    reader.stop();
    let mut result = result;
    let skipped = drain(session, plan, &loaded, &reader, &mut conts, &mut result) + conts.skipped;
    reader.join();
    if skipped > 0 {
        sink::warn(&format!("rtrace: {skipped} queued event(s) were not processed because tracing stopped"));
    }
    let reloading = opts.exporter && exporter::reload_requested();
    if result.is_ok() && !reloading {
        for p in &plan.end {
            if let Err(e) = session.call(&p.ast, &p.closure) {
                result = Err(e);
                break;
            }
        }
    }
    if !opts.exporter {
        dump::print_all_maps(session, &loaded, dump::Occasion::Exit);
    }
    dump::report_new_losses(plan, &loaded);
    limits::report_lost_controls(&reader);
    sink::flush();
    if let (true, Some(stats)) = (opts.verbose, &stats) {
        probe_stats::report(plan, &loaded.programs, stats);
    }
    stacks::report();
    if conts.errors > 0 && conts.keep_going {
        eprintln!("rtrace: {} userspace error(s) in probe statements (the first is shown above)", conts.errors);
    }
    crate::script::system::finish();
    sink::flush();
    link::detach_all(attachments);
    result?;
    limits::check_output()?;
    let reg = session.registry.lock().unwrap();
    if let Some(msg) = &reg.failure {
        eprintln!("rtrace: fail: {msg}");
    }
    // The script's own decision wins; with -c, the command's status otherwise.
    let command_status = traced.and_then(|t| t.command_status());
    let errors = (conts.errors > 0).then_some(1);
    Ok(crate::script::checks::script_decision(&reg).or(errors).or(command_status).unwrap_or(0))
}

/// Per site: the record offsets of its user-stack values.
fn user_stack_offsets(plan: &Plan) -> Vec<Vec<usize>> {
    let offsets: Vec<Vec<usize>> = plan
        .sites
        .iter()
        .map(|sp| {
            let mut off = 8usize;
            let mut out = Vec::new();
            for (i, (_, ty)) in sp.site.fields.iter().enumerate() {
                if matches!(sp.site.sems.get(i), Some(crate::plan::site::Sem::Stack { user: true, .. })) {
                    out.push(off);
                }
                off += ty.slot_size() as usize;
            }
            out
        })
        .collect();
    if offsets.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    offsets
}

fn exit_requested(session: &Session) -> bool {
    session.registry.lock().unwrap().exit_code.is_some()
}

fn event_loop(
    session: &Session,
    plan: &Plan,
    loaded: &Loaded,
    reader: &reader::Reader,
    conts: &mut continuation::Continuations,
    opts: &Config,
    mut traced: Option<&mut target::TracedProcess>,
) -> Result<()> {
    let start = Instant::now();
    let mut lost_checked = start;
    let deadline = opts.duration.map(|d| start + d);
    for p in &plan.begin {
        session.call(&p.ast, &p.closure)?;
        if exit_requested(session) {
            return Ok(());
        }
    }
    let timers = session.registry.lock().unwrap().timers.clone();
    let mut next_due: Vec<Option<Instant>> = timers.iter().map(|t| Some(start + t.period)).collect();
    loop {
        limits::note_kernel_exit(session, reader, &loaded.stop);
        limits::check_output()?;
        if exit_requested(session) || signals::interrupted() || exporter::reload_requested() {
            return Ok(());
        }
        if traced.as_deref_mut().is_some_and(|t| t.ended()) {
            return Ok(());
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(());
        }
        let mut wait = Duration::from_millis(50);
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        for due in next_due.iter().flatten() {
            wait = wait.min(due.saturating_duration_since(now));
        }
        crossbeam_channel::select! {
            recv(reader.data) -> batch => {
                if let Ok(batch) = batch {
                    run_batch(session, plan, conts, &batch)?;
                }
            }
            recv(reader.control) -> msg => {
                if let Ok(msg) = msg {
                    control(session, loaded, msg);
                }
            }
            default(wait) => {}
        }
        for msg in reader.control.try_iter().take(limits::CONTROL_PER_TURN) {
            control(session, loaded, msg);
        }
        sink::flush();
        let now = Instant::now();
        if signals::take_print_request() {
            dump::print_all_maps(session, loaded, dump::Occasion::Signal);
        }
        if now.duration_since(lost_checked) >= Duration::from_secs(1) {
            lost_checked = now;
            dump::report_new_losses(plan, loaded);
        }
        for (i, t) in timers.iter().enumerate() {
            if next_due[i].is_some_and(|d| now >= d) {
                next_due[i] = if t.repeat { Some(now + t.period) } else { None };
                session.call(&session.ast, &t.closure)?;
            }
        }
    }
}

/// Handle what is still queued after detaching, until the reader has
/// finished. After exit(), Ctrl-C or an error the rest is only counted;
/// returns how many records were skipped that way.
fn drain(
    session: &Session,
    plan: &Plan,
    loaded: &Loaded,
    reader: &reader::Reader,
    conts: &mut continuation::Continuations,
    result: &mut Result<()>,
) -> u64 {
    let mut skipped = 0u64;
    limits::note_kernel_exit(session, reader, &loaded.stop);
    for batch in reader.data.iter() {
        limits::note_kernel_exit(session, reader, &loaded.stop);
        while let Ok(msg) = reader.control.try_recv() {
            control(session, loaded, msg);
        }
        // Records queued when tracing stopped (Ctrl-C, -d, the -c command
        // ending, exit() from a probe) were made before the stop, so they
        // still run; after exit() from userspace or an error they are
        // counted and skipped.
        let stopped = exit_requested(session) && !session.registry.lock().unwrap().exit_from_kernel;
        if result.is_err() || stopped {
            skipped += count_records(&batch);
            continue;
        }
        if let Err(e) = run_batch(session, plan, conts, &batch) {
            *result = Err(e);
        }
    }
    while let Ok(msg) = reader.control.try_recv() {
        control(session, loaded, msg);
    }
    limits::note_kernel_exit(session, reader, &loaded.stop);
    skipped
}

fn count_records(batch: &[u8]) -> u64 {
    let (mut off, mut n) = (0usize, 0u64);
    while off + 4 <= batch.len() {
        off += 4 + u32::from_le_bytes(batch[off..off + 4].try_into().unwrap_or([0; 4])) as usize;
        n += 1;
    }
    n
}

fn run_batch(session: &Session, plan: &Plan, conts: &mut continuation::Continuations, batch: &[u8]) -> Result<()> {
    let mut off = 0usize;
    let mut result = Ok(());
    while off + 4 <= batch.len() {
        let len = u32::from_le_bytes(batch[off..off + 4].try_into().unwrap_or([0; 4])) as usize;
        let rec = &batch[off + 4..(off + 4 + len).min(batch.len())];
        result = conts.run(session, plan, rec);
        if result.is_err() {
            break;
        }
        off += 4 + len;
    }
    serve::note_progress(conts.records, conts.errors);
    sink::flush();
    result
}

fn control(session: &Session, loaded: &Loaded, (kind, _probe, arg): reader::Control) {
    match kind {
        CONTROL_EXIT => {
            let mut reg = session.registry.lock().unwrap();
            if reg.exit_code.is_none() {
                reg.exit_code = Some(crate::script::api::exit_status(arg));
                reg.exit_from_kernel = true;
            }
        }
        CONTROL_PRINT | CONTROL_CLEAR | CONTROL_ZERO => {
            let Some(m) = loaded.maps.get(arg as usize) else { return };
            let r = match kind {
                CONTROL_PRINT => m.print(),
                CONTROL_CLEAR => m.clear(),
                _ => m.zero(),
            };
            if let Err(e) = r {
                eprintln!("rtrace: map {}: {e}", m.name);
            }
            if kind == CONTROL_CLEAR {
                session.registry.lock().unwrap().maps[arg as usize].mark_handled();
            }
        }
        _ => {}
    }
}

/// Records the kernel could not put on the ring, per probe.
pub fn lost_counts(plan: &Plan, loaded: &Loaded) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (i, name) in plan.probes.iter().enumerate() {
        let key = (i as u32).to_le_bytes();
        let lost: u64 = loaded
            .lost
            .lookup_percpu(&key, MapFlags::ANY)
            .ok()
            .flatten()
            .map(|slots| slots.iter().map(|s| u64::from_le_bytes(s[..8].try_into().unwrap_or([0; 8]))).sum())
            .unwrap_or(0);
        if lost > 0 {
            out.push((name.clone(), lost));
        }
    }
    out
}
