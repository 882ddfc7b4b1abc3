//! `--exporter` (with `--serve`): rtrace as a long-running metrics service.
//! Nothing is written to the terminal unless the script prints (no
//! `Attaching` line, no map dump at exit), and SIGHUP reloads the script:
//! the old probes are detached, the file is read and compiled again, the
//! new probes attached, and the endpoint keeps its port throughout. A
//! script that no longer compiles or loads is reported on stderr and the
//! last good one runs again.

use anyhow::{anyhow, Result};

use crate::compile::{self, Plan};
use crate::config::Config;
use crate::diag::Diagnostic;
use crate::kernel::LiveKernel;
use crate::runtime::exporter::{install, take_reload};
use crate::runtime::{self, traced::TracedProcess};
use crate::script::Session;

/// The script as given on the command line, for reading it again.
pub struct Script {
    pub file_name: String,
    /// The file to read again on reload; `None` for `-e` (the same source runs again).
    pub path: Option<String>,
    pub source: String,
    pub args: Vec<String>,
    pub allow_unsafe: bool,
}

/// Run the top level and compile, as for the first run.
fn build(script: &Script, source: &str, opts: &Config) -> Result<(Session, Plan)> {
    let mut session = Session::new(&script.file_name, source, &script.args)?;
    super::tools::install_probe_check(&session);
    // The same checks as the first run, before the new top level runs: the
    // static system() check, and loops that end on Ctrl-C/SIGTERM.
    if !script.allow_unsafe {
        if let Some((pos, why)) = crate::script::system::find_action_call(&session.ast) {
            return Err(Diagnostic::at(&script.file_name, pos, why).into());
        }
    }
    session.engine.on_progress(crate::runtime::signals::progress_hook);
    session.run_top_level()?;
    if session.exit_requested() {
        let msg = "the script calls exit() at its top level, so it has nothing to serve";
        return Err(Diagnostic::new(&script.file_name, None, msg).into());
    }
    let plan = compile::compile(&session, opts, &LiveKernel)?;
    Ok((session, plan))
}

/// Run `first` until the end, reloading the script on SIGHUP.
pub fn run(
    script: &Script,
    first: (Session, Plan),
    opts: &Config,
    mut traced: Option<&mut TracedProcess>,
) -> Result<i32> {
    install();
    let (mut session, mut plan) = first;
    let mut good = script.source.clone();
    let mut current = script.source.clone();
    loop {
        let result = runtime::run(&session, &plan, opts, traced.as_deref_mut());
        let reload = take_reload();
        let next = match result {
            Ok(code) if !reload => return Ok(code),
            Ok(_) => {
                good = current.clone();
                let text = match &script.path {
                    Some(p) => std::fs::read_to_string(p).map_err(|e| anyhow!("cannot read {p}: {e}")),
                    None => Ok(script.source.clone()),
                };
                text.and_then(|t| {
                    let built = build(script, &t, opts)?;
                    current = t;
                    Ok(built)
                })
            }
            // The reloaded script failed to load or attach: back to the last good one.
            Err(e) if current != good => Err(e),
            Err(e) => return Err(e),
        };
        (session, plan) = match next {
            Ok(built) => {
                crate::output::sink::report(&Diagnostic::tool(format!("reloaded {}", script.file_name)).note());
                built
            }
            Err(e) => {
                let d = super::diagnostic_of(&e);
                let why = format!("reload failed, running the previous script again: {d}");
                crate::output::sink::report(&Diagnostic::tool(why).warning());
                current = good.clone();
                build(script, &good, opts)?
            }
        };
    }
}
