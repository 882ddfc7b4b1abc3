//! Command line: parse options, load the script, compile, then explain,
//! dry-run or run it. Errors come back as one line; the exit status follows
//! design.md §1.

mod args;
pub mod explain;
pub mod exporter;
#[cfg(test)]
mod fuzz;
mod info;
pub mod list;
mod safety;
mod source;
pub mod tools;
mod usage;

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Parser;
use usage::usage;

use crate::compile;
use crate::config::{Config, ProcessEnv, Trace};
use crate::diag::Diagnostic;
use crate::output::ci_report::CiSystem;
use crate::output::sink;
use crate::runtime;
use crate::runtime::traced::TracedProcess;
use crate::script::{parse_duration, Session};

pub use args::Cli;

/// Run the command line; returns the process exit status.
pub fn main() -> i32 {
    runtime::signals::defer_print_requests();
    let argv: Vec<String> = std::env::args().collect();
    let parsed = match tools::classify(&argv) {
        tools::Invocation::List => return tools::print_list(),
        tools::Invocation::Tool { rtrace_args, name, args } => {
            Cli::try_parse_from(rtrace_args).map(|cli| (cli, Some((name, args))))
        }
        tools::Invocation::Normal => Cli::try_parse().map(|cli| (cli, None)),
    };
    let (cli, tool) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return usage_error(e),
    };
    let result = run(cli, tool);
    crate::output::sink::flush_all();
    // Output that could not be written is an error, whatever else happened.
    let result = result.and_then(|code| crate::runtime::limits::check_output().map(|()| code));
    let error = result.as_ref().err().map(diagnostic_of);
    let code = match (&result, &error) {
        (_, Some(d)) if d.usage => 2,
        (Err(_), _) => 1,
        (Ok(code), _) => *code,
    };
    let failure = error.as_ref().map(|d| {
        let line = match d.place {
            crate::diag::Place::At(p) => Some(p.line as usize),
            _ => None,
        };
        (d.to_string(), line)
    });
    let saved = crate::script::regression::save().map_err(Diagnostic::tool);
    let report = crate::script::checks::write_reports(failure, code).and(saved);
    for d in error.iter().chain(report.as_ref().err()).filter(|d| !d.shown) {
        crate::output::sink::report(d);
    }
    crate::output::sink::flush_all();
    if report.is_err() && code == 0 {
        1
    } else {
        code
    }
}

/// A usage error as one line (clap's own text for --help and --version).
fn usage_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) || !e.use_stderr() {
        e.exit();
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("").trim_start_matches("error: ");
    // clap's "did you mean": `tip: a similar argument exists: '--help'`.
    let tips: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("tip: ")).collect();
    let d = Diagnostic::usage(format!("{first} (see rtrace --help)"));
    let d = if tips.is_empty() { d } else { d.hint(tips.join("; ")) };
    crate::output::sink::report(&d);
    2
}

/// The error a run ended with, as the one diagnostic the user sees.
pub(crate) fn diagnostic_of(e: &anyhow::Error) -> Diagnostic {
    Diagnostic::of_error(e)
}

fn run(cli: Cli, tool: Option<(String, Vec<String>)>) -> Result<i32> {
    sink::set_no_warnings(cli.no_warnings);
    crate::kernel::sys::raise_open_file_limit();
    if cli.info {
        return info::run();
    }
    if cli.list && cli.source.is_some() {
        bail!("-l lists probes and runs no script: drop -e, or drop -l");
    }
    if cli.list {
        return list::run(cli.rest.first().map(String::as_str), cli.verbose, cli.pid);
    }
    if cli.list_tools {
        return Ok(tools::print_list());
    }
    let (file_name, source, args) = match (&cli.source, tool) {
        (_, Some((name, args))) => {
            let source = crate::script::tools::find(&name).unwrap_or_default();
            (format!("tools/{name}.rhai"), source.to_string(), args)
        }
        (Some(src), None) => {
            // `rtrace t.rhai -e '...'`: two scripts, not a script and its argument.
            if let Some(file) = cli.rest.first().filter(|f| f.ends_with(".rhai")) {
                return Err(usage(format!(
                    "both a script file ({file}) and -e given: run `rtrace {file}` or `rtrace -e 'SOURCE'` (arguments after the script are ARGS)"
                )));
            }
            ("-e".to_string(), src.clone(), cli.rest.clone())
        }
        (None, None) => {
            let Some(path) = cli.rest.first() else {
                return Err(usage(
                    "no script given: run `rtrace SCRIPT.rhai`, `rtrace -e 'SOURCE'` or `rtrace -` (see --help)",
                ));
            };
            if path != "-" {
                if let Err(e) = std::fs::metadata(path) {
                    bail!("{}", tools::missing_script(path, &e));
                }
            }
            let text = source::without_shebang(safety::read_script(path)?);
            (path.clone(), text, cli.rest[1..].to_vec())
        }
    };
    let format = match cli.format.as_str() {
        "text" => sink::Format::Text,
        "json" => sink::Format::Json,
        other => return Err(usage(format!("unknown output format '{other}' (use text or json)"))),
    };
    sink::set_buffering(match cli.buffering.as_deref() {
        Some("none") => sink::Buffering::None,
        Some("line") => sink::Buffering::Line,
        Some("full") => sink::Buffering::Full,
        _ => sink::Buffering::Batch,
    });
    sink::init(format, cli.output.as_deref()).map_err(|e| anyhow!("cannot open output: {e}"))?;
    let duration: Option<Duration> = match &cli.duration {
        Some(d) => {
            Some(parse_duration(d).ok_or_else(|| usage(format!("-d {d}: not a duration; write e.g. 5s or 100ms")))?)
        }
        None => None,
    };
    if cli.pid.is_some() && cli.command.is_some() {
        return Err(usage("-p and -c can't be used together"));
    }
    if cli.repeat.is_some() && cli.command.is_none() {
        return Err(usage("--repeat N runs the -c command N times: give the command with -c CMD"));
    }
    if let Some(text) = &cli.ring_size {
        crate::config::ring_size(text).map_err(|e| usage(e.to_string()))?;
    }

    safety::check_text(&file_name, &source)?;
    let ci = CiSystem::chosen(&cli.ci_report, |k| std::env::var(k).ok()).map_err(usage)?;
    crate::script::checks::set_reports(&file_name, cli.junit.as_deref(), ci, cli.summary.as_deref());
    crate::script::regression::set(cli.baseline.as_deref(), cli.save_baseline.as_deref()).map_err(|e| anyhow!(e))?;
    let mut session = Session::new(&file_name, &source, &args)?;
    tools::install_probe_check(&session);
    session.registry.lock().unwrap().traced_pid = cli.pid;
    safety::prepare(&mut session, &cli)?;
    session.run_top_level()?;
    if let Some(code) = session.registry.lock().unwrap().exit_code {
        // exit() at the top level: nothing gets attached.
        return Ok(code);
    }
    safety::require_probes(&session)?;
    if cli.exporter && (cli.serve.is_none() || cli.command.is_some()) {
        bail!("--exporter runs a metrics service: it needs --serve ADDR:PORT and can't be used with -c");
    }
    let mut config = Config::from_env(&ProcessEnv, cli.ring_size.as_deref())?;
    {
        let reg = session.registry.lock().unwrap();
        if let Some(bytes) = reg.ring_size {
            if cli.ring_size.is_none() && std::env::var_os("RTRACE_RING_SIZE").is_none() {
                config.ring_size = bytes;
            }
        }
        if reg.stack_entries.is_some() && config.stack_entries.is_none() {
            config.stack_entries = reg.stack_entries;
        }
    }
    let mut traced = match (&cli.pid, &cli.command) {
        (Some(pid), _) => Some(TracedProcess::existing(*pid)?),
        (_, Some(cmd)) if !cli.explain && !cli.dry_run => {
            // Records on stdout (-f json, folded stacks) stay parseable: the command's own stdout goes to stderr.
            let records = cli.format == "json" || session.registry.lock().unwrap().command_stdout_to_stderr;
            Some(TracedProcess::spawn_held(cmd, records && cli.output.is_none())?)
        }
        _ => None,
    };
    if let (Some(t), Some(n)) = (traced.as_mut(), cli.repeat) {
        t.repeat(n);
    }
    if let Some(t) = &traced {
        config.trace = Trace { pid: Some(t.pid), follow_children: cli.command.is_some() };
    }
    config.duration = duration;
    config.quiet = cli.quiet || cli.exporter;
    config.dry_run = cli.dry_run;
    config.keep_going = cli.keep_going;
    config.no_split |= cli.no_split;
    config.allow_unsafe = cli.allow_unsafe;
    config.monitor = cli.monitor;
    config.serve = cli.serve.clone();
    config.metrics_prefix = cli.metrics_prefix.clone();
    config.verbose = cli.verbose;
    config.check_helpers = cli.check_helpers.min(2);
    config.exporter = cli.exporter;
    if let Some(mode) = cli.missing_probes.as_deref().and_then(crate::config::MissingProbes::parse) {
        config.missing_probes = mode;
    }
    crate::symbols::stacks::set_debug(config.debug_symbols);
    let plan = compile::compile(&session, &config, &crate::kernel::LiveKernel)?;
    if cli.explain {
        explain::print(&session, &plan, &source);
        return Ok(0);
    }
    check_privileges()?;
    if cli.exporter && !cli.dry_run {
        let script = exporter::Script {
            path: cli.source.is_none().then(|| file_name.clone()),
            file_name,
            source,
            args,
            allow_unsafe: cli.allow_unsafe,
        };
        return exporter::run(&script, (session, plan), &config, traced.as_mut());
    }
    let result = runtime::run(&session, &plan, &config, traced.as_mut());
    if let Some(t) = traced.as_mut() {
        t.stop();
    }
    crate::script::checks::finish(&session.registry);
    let code = result?;
    Ok(code)
}

/// Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN).
fn check_privileges() -> Result<()> {
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("tracing needs root, or the CAP_BPF and CAP_PERFMON capabilities: run with sudo")
}
