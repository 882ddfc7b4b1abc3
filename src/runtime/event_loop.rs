//! The event loop: `BEGIN`, then records from the reader to their
//! userspace statements, control messages (exit, print, clear, zero from the
//! kernel), timers, SIGUSR1 map prints and loss reports, until the run ends;
//! then draining what is still queued.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::config::Config;
use crate::output::sink;
use crate::plan::Plan;
use crate::script::api::MapBackend;
use crate::script::Session;
use probes_ebpf::record::{CONTROL_ACTION, CONTROL_CLEAR, CONTROL_ERROR, CONTROL_EXIT, CONTROL_PRINT, CONTROL_ZERO};

use super::{continuation, dump, exporter, limits, reader, record, serve, signals, traced, Loaded};

/// Start the ring-buffer reader on the plan's rings; `layouts` are the
/// sites' record layouts, `tracker` follows process mappings for user stacks.
pub fn start_reader(
    layouts: &[record::SiteLayout],
    loaded: &Loaded,
    tracker: Option<crate::symbols::procmaps::Tracker>,
) -> Result<reader::Reader> {
    let dup = |m: &libbpf_rs::MapHandle| libbpf_rs::MapHandle::try_from(m).map_err(|e| anyhow!("ring buffer: {e}"));
    reader::Reader::start(
        dup(&loaded.data)?,
        dup(&loaded.control)?,
        dup(&loaded.wake)?,
        tracker,
        user_stack_offsets(layouts),
    )
}

/// Per site: the record offsets of its user-stack values (none at all
/// when no site has one).
fn user_stack_offsets(layouts: &[record::SiteLayout]) -> Vec<Vec<usize>> {
    let offsets: Vec<Vec<usize>> = layouts.iter().map(record::SiteLayout::user_stack_offsets).collect();
    if offsets.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    offsets
}

pub fn event_loop(
    session: &Session,
    plan: &Plan,
    loaded: &Loaded,
    reader: &reader::Reader,
    conts: &mut continuation::Continuations,
    opts: &Config,
    mut traced: Option<&mut traced::TracedProcess>,
) -> Result<()> {
    let start = Instant::now();
    let mut lost_checked = start;
    let deadline = opts.duration.map(|d| start + d);
    if let (Some(at), Some(d)) = (deadline, opts.duration) {
        signals::set_deadline(at, format!("-d {d:?} is over"));
    }
    for p in &plan.begin {
        session.call(&p.ast, &p.closure)?;
        if session.exit_requested() {
            return Ok(());
        }
    }
    if super::ends_after_begin(session, plan, opts, traced.is_some()) {
        return Ok(());
    }
    let exits = traced.as_deref().map_or_else(crossbeam_channel::never, |t| t.exits());
    let mut timers = super::timers::Timers::new(session.registry.lock().unwrap().timers.clone(), start);
    loop {
        limits::note_kernel_exit(session, reader, &loaded.stop);
        limits::check_output()?;
        if session.exit_requested() || signals::interrupted() || exporter::reload_requested() {
            return Ok(());
        }
        if let Some(t) = traced.as_deref_mut() {
            // --repeat: the next run, followed before it is released.
            if t.ended() {
                match t.next_run()? {
                    Some(pid) => {
                        loaded.follow(pid)?;
                        t.release();
                    }
                    None => return Ok(()),
                }
            }
        }
        // Timers due by now run in the order they fell due; with -d, only
        // those due before the end (so `-d 1s` runs every("100ms") 10 times).
        let now = Instant::now();
        let ended = deadline.is_some_and(|d| now >= d);
        timers.run_due(session, deadline.map_or(now, |d| now.min(d)))?;
        sink::flush();
        if ended || session.exit_requested() {
            return Ok(());
        }
        let mut wait = Duration::from_millis(50);
        for due in deadline.into_iter().chain(timers.next_due()) {
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
                    control(session, plan, loaded, conts, msg)?;
                }
            }
            recv(exits) -> _ => {}
            default(wait) => {}
        }
        for msg in reader.control.try_iter().take(limits::CONTROL_PER_TURN) {
            control(session, plan, loaded, conts, msg)?;
        }
        sink::flush();
        let now = Instant::now();
        if signals::take_print_request() {
            dump::print_all_maps(session, loaded, dump::Occasion::Signal);
        }
        if now.duration_since(lost_checked) >= Duration::from_secs(1) {
            lost_checked = now;
            dump::report_new_losses(plan, loaded);
            super::helper_errors::report_new(session, plan, loaded);
        }
    }
}

/// Handle what is still queued after detaching, until the reader has
/// finished. After exit(), Ctrl-C or an error the rest is only counted;
/// returns how many records were skipped that way.
pub fn drain(
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
            note(result, control(session, plan, loaded, conts, msg));
        }
        // Records queued when tracing stopped (Ctrl-C, -d, the -c command
        // ending, exit() from a probe) were made before the stop, so they
        // still run; after exit() from userspace or an error they are
        // counted and skipped.
        let stopped = session.exit_requested() && !session.registry.lock().unwrap().exit_from_kernel;
        if result.is_err() || stopped {
            skipped += count_records(&batch);
            continue;
        }
        if let Err(e) = run_batch(session, plan, conts, &batch) {
            *result = Err(e);
        }
    }
    while let Ok(msg) = reader.control.try_recv() {
        note(result, control(session, plan, loaded, conts, msg));
    }
    limits::note_kernel_exit(session, reader, &loaded.stop);
    skipped
}

/// Keep the first error.
fn note(result: &mut Result<()>, r: Result<()>) {
    if result.is_ok() {
        *result = r;
    }
}

/// The audit record of an action a probe took in the kernel.
fn action_record(session: &Session, plan: &Plan, msg: reader::Control) -> crate::output::audit::ActionRecord {
    use crate::output::audit::Outcome;
    use crate::util::{errno, signals};
    use probes_ebpf::ir::KernelAction;
    let (action, monitored, line, col) = probes_ebpf::record::decode_action(msg.arg);
    let (action, done) = match action {
        Some(KernelAction::Signal(sig)) => (format!("signal({})", signals::shown(sig as i32)), "sent"),
        Some(KernelAction::Deny(errno)) => (format!("deny({})", errno::name(errno as i32)), "denied"),
        Some(KernelAction::Override(value)) => (format!("override({value})"), "overridden"),
        None => ("an unknown action".to_string(), "?"),
    };
    crate::output::audit::ActionRecord {
        file: session.file_name.clone(),
        pos: Some(crate::diag::Pos { line, col }),
        probe: plan.probes.get(msg.probe as usize).cloned(),
        action,
        task: msg.task,
        outcome: if monitored { Outcome::NotDone } else { Outcome::Done },
        result: if monitored { "not done (--monitor)".to_string() } else { done.to_string() },
    }
}

fn count_records(batch: &[u8]) -> u64 {
    record::frames(batch).count() as u64
}

fn run_batch(session: &Session, plan: &Plan, conts: &mut continuation::Continuations, batch: &[u8]) -> Result<()> {
    let mut result = Ok(());
    for rec in record::frames(batch) {
        result = match rec {
            Ok(rec) => conts.run(session, plan, rec),
            Err(_) => {
                conts.malformed += 1;
                Ok(())
            }
        };
        if result.is_err() {
            break;
        }
    }
    serve::note_progress(conts.records, conts.errors);
    sink::flush();
    result
}

fn control(
    session: &Session,
    plan: &Plan,
    loaded: &Loaded,
    conts: &mut continuation::Continuations,
    msg: reader::Control,
) -> Result<()> {
    let (kind, probe, arg) = (msg.kind, msg.probe, msg.arg);
    match kind {
        CONTROL_ACTION => crate::output::sink::action(&action_record(session, plan, msg)),
        CONTROL_ERROR => {
            let (what, line, col) = probes_ebpf::record::decode_arith_error(arg);
            let name = plan.probes.get(probe as usize).map(String::as_str).unwrap_or("?");
            let at = crate::diag::Pos { line, col };
            return conts.error(crate::diag::Diagnostic::new(
                &session.file_name,
                Some(at),
                format!("{what} (in probe {name})"),
            ));
        }
        CONTROL_EXIT => {
            let mut reg = session.registry.lock().unwrap();
            if reg.exit_code.is_none() {
                reg.exit_code = Some(crate::script::api::exit_status(arg));
                reg.exit_from_kernel = true;
            }
        }
        CONTROL_PRINT | CONTROL_CLEAR | CONTROL_ZERO => {
            let Some(m) = loaded.maps.get(arg as usize) else { return Ok(()) };
            let r = match kind {
                CONTROL_PRINT => m.print(),
                CONTROL_CLEAR => m.clear(),
                _ => m.zero(),
            };
            if let Err(e) = r {
                crate::output::sink::warn(format!("map {}: {e}", m.name));
            }
            if kind == CONTROL_CLEAR {
                session.registry.lock().unwrap().maps[arg as usize].mark_handled();
            }
        }
        _ => {}
    }
    Ok(())
}
