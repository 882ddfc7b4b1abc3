//! Running a compiled plan: load (load.rs), attach, run `BEGIN` and feed
//! records to userspace statements until the end (event_loop.rs: Ctrl-C,
//! `exit()`, `-d`, a control message), detach, run `END`, print maps and
//! report lost events.

mod attach;
pub mod continuation;
pub mod dump;
mod event_loop;
pub mod exporter;
pub mod helper_errors;
pub mod kmaps;
pub mod limits;
mod load;
pub mod mapset;
pub mod probe_stats;
pub mod reader;
pub mod record;
pub mod serve;
pub mod signals;
pub mod stacks;
mod timers;
pub mod traced;
pub mod verbose;

use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};

use crate::config::Config;
use crate::kernel::link::{self, Attachment};
use crate::output::{self, sink};
use crate::plan::Plan;
use crate::script::Session;

pub use load::Loaded;

/// Run the plan until it ends; returns the exit status.
pub fn run(session: &Session, plan: &Plan, opts: &Config, traced: Option<&mut traced::TracedProcess>) -> Result<i32> {
    let mut traced = traced;
    let loaded = load::load_all(session, plan, opts)?;
    if opts.dry_run {
        attach::check_without_attaching(session, plan, opts)?;
        if !opts.quiet {
            crate::util::errln!(
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
    let tracker = mapping_tracker(plan, opts);
    let attach::Attached { attachments, interrupted } = attach::attach_all(session, plan, &loaded, opts)?;
    if opts.verbose && !interrupted {
        verbose::print(plan, &loaded);
    }
    let mut conts = continuation::Continuations::new(plan, opts.keep_going, loaded.stacks.clone());
    conts.errors_shown = opts.errors_shown;
    let mut reader = event_loop::start_reader(conts.layouts(), &loaded, tracker)?;
    if !opts.quiet && !interrupted {
        match sink::format() {
            sink::Format::Text => sink::raw(&output::format_attached_text(plan.attach_count())),
            sink::Format::Json => sink::raw(&output::format_attached_json(plan.attach_count())),
        }
    }
    sink::flush();

    // Ctrl-C while attaching: no BEGIN, no command; the run ends as after
    // Ctrl-C (END runs, maps print), and what was attached is detached.
    let result = match interrupted {
        true => Ok(()),
        false => {
            if let Some(t) = traced.as_deref_mut() {
                t.release();
            }
            event_loop::event_loop(session, plan, &loaded, &reader, &mut conts, opts, traced.as_deref_mut())
        }
    };
    if let Some(t) = traced.as_deref_mut() {
        t.stop();
    }
    signals::shutting_down();

    // Stop every probe first so nothing changes while END runs and maps
    // print. Programs check the stop flag first; detaching (slow in the
    // kernel: tens of ms per tracepoint) waits until the output is out.
    let mut attachments = attachments;
    if let Err(e) = kmaps::set_stop_flag(&loaded.stop) {
        sink::warn(format!("{e}; detaching now"));
        link::detach_all(std::mem::take(&mut attachments));
    }
    reader.stop();
    let mut result = result;
    let skipped = event_loop::drain(session, plan, &loaded, &reader, &mut conts, &mut result) + conts.skipped;
    reader.join();
    // The run's error first, then what it left behind (queued events,
    // losses, the maps); the exit path then doesn't write it again.
    let mut result = result.map_err(|e| {
        let mut d = crate::diag::Diagnostic::of_error(&e);
        sink::report(&d);
        d.shown = true;
        anyhow::Error::new(d)
    });
    if skipped > 0 {
        sink::warn(format!("{skipped} queued event(s) were not processed because tracing stopped"));
    }
    if conts.malformed > 0 {
        sink::warn(format!("{} record(s) could not be decoded and were skipped", conts.malformed));
    }
    let reloading = opts.exporter && exporter::reload_requested();
    if result.is_ok() && !reloading {
        result = run_end(session, plan);
    }
    if !opts.exporter {
        dump::print_all_maps(session, &loaded, dump::Occasion::Exit);
    }
    dump::report_new_losses(plan, &loaded);
    helper_errors::report_new(session, plan, &loaded);
    limits::report_lost_controls(&plan.probes, &loaded.lost, &reader);
    sink::flush();
    if let (true, Some(stats)) = (opts.verbose, &stats) {
        probe_stats::report(plan, &loaded.programs, stats);
    }
    loaded.stacks.report();
    if conts.errors > 0 && conts.keep_going {
        let shown = match opts.errors_shown {
            1 => "is".to_string(),
            n => format!("{} are", n.min(conts.errors)),
        };
        let msg = format!("{} runtime error(s) in probe statements (the first {shown} shown above)", conts.errors);
        sink::report(&crate::diag::Diagnostic::tool(msg).note());
    }
    crate::script::commands::finish(&session.file_name);
    sink::flush();
    finish(session, attachments, traced, conts.errors, result)
}

/// Follow processes' mappings from now on (when a script uses user
/// stacks), so user stacks of processes that exit before their stacks
/// print still resolve.
fn mapping_tracker(plan: &Plan, opts: &Config) -> Option<crate::symbols::procmaps::Tracker> {
    if !plan.maps.has_user_stacks() {
        return None;
    }
    match crate::symbols::procmaps::Tracker::start() {
        Ok(t) => Some(t),
        Err(e) => {
            if opts.debug_symbols {
                crate::util::errln!("rtrace: cannot follow process mappings: {e}");
            }
            None
        }
    }
}

/// A script whose probes are only `BEGIN` and `END`, with no timer, no
/// `-p`/`-c` process and no `--serve` endpoint, ends once `BEGIN` has run,
/// as bpftrace's does (0.24): nothing is left that could happen.
fn ends_after_begin(session: &Session, plan: &Plan, opts: &Config, traced: bool) -> bool {
    plan.programs.iter().all(|p| p.internal)
        && !traced
        && opts.serve.is_none()
        && !opts.exporter
        && session.registry.lock().unwrap().timers.is_empty()
}

/// The `END` probes, in order, until one fails.
fn run_end(session: &Session, plan: &Plan) -> Result<()> {
    for p in &plan.end {
        session.call(&p.ast, &p.closure)?;
    }
    Ok(())
}

/// Detach, then the exit status: the script's own decision wins; then
/// userspace errors; with -c, the command's status otherwise.
fn finish(
    session: &Session,
    attachments: Vec<Attachment>,
    traced: Option<&mut traced::TracedProcess>,
    errors: u64,
    result: Result<()>,
) -> Result<i32> {
    link::detach_all(attachments);
    result?;
    limits::check_output()?;
    let reg = session.registry.lock().unwrap();
    if let Some(msg) = &reg.failure {
        crate::util::errln!("rtrace: fail: {msg}");
    }
    let command_status = traced.and_then(|t| t.command_status());
    let errors = (errors > 0).then_some(1);
    Ok(crate::script::checks::script_decision(&reg).or(errors).or(command_status).unwrap_or(0))
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
