//! Checks that keep a run safe before anything is attached: the script is
//! read with a size cap and without hanging on devices or FIFOs, `system()`
//! is rejected early when the script names it without `--unsafe` (and the
//! capability is set to refuse, skip or run before the top level runs),
//! userspace code is made interruptible, and a script without probes is an
//! error instead of a run that waits forever.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use anyhow::{anyhow, bail, Result};

use super::Cli;
use crate::diag::{Diagnostic, Pos};
use crate::script::system::{self, Mode};
use crate::script::Session;

/// The largest script rtrace reads.
pub const MAX_SCRIPT: u64 = 4 << 20;

/// Read a script file (`-` is stdin): at most [`MAX_SCRIPT`] bytes, UTF-8,
/// a regular file, a pipe or a FIFO (not a device such as /dev/zero).
pub fn read_script(path: &str) -> Result<String> {
    let cannot = |e: std::io::Error| anyhow!("cannot read {path}: {e}");
    let bytes = if path == "-" {
        read_capped(std::io::stdin().lock(), path)?
    } else {
        // Non-blocking open: a FIFO with no writer doesn't block the open.
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(cannot)?;
        let ty = file.metadata().map_err(cannot)?.file_type();
        if ty.is_dir() {
            bail!("cannot read {path}: it is a directory; give a script file");
        }
        if ty.is_char_device() || ty.is_block_device() || ty.is_socket() {
            bail!("cannot read {path}: not a script file (a device or socket)");
        }
        // Blocking reads from here; a FIFO without a writer reads as empty.
        unsafe {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
        read_capped(file, path)?
    };
    String::from_utf8(bytes).map_err(|e| {
        anyhow!("cannot read {path}: byte {} is not UTF-8 text; scripts are UTF-8", e.utf8_error().valid_up_to())
    })
}

fn read_capped(r: impl Read, path: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    r.take(MAX_SCRIPT + 1).read_to_end(&mut bytes).map_err(|e| anyhow!("cannot read {path}: {e}"))?;
    if bytes.len() as u64 > MAX_SCRIPT {
        bail!("cannot read {path}: the script is over {} MiB", MAX_SCRIPT >> 20);
    }
    Ok(bytes)
}

/// Reject what Rhai would echo back raw: NUL bytes.
pub fn check_text(file: &str, source: &str) -> Result<()> {
    if let Some(at) = source.find('\0') {
        let line = source[..at].matches('\n').count() + 1;
        let col = at - source[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
        let at = Pos { line: line as u32, col: col as u32 };
        return Err(Diagnostic::new(file, Some(at), "the script contains a NUL byte").hint("remove it").into());
    }
    // Rhai counts lines in 16 bits: past this one every error would name it.
    const MAX_LINES: usize = u16::MAX as usize;
    let lines = source.lines().count();
    if lines > MAX_LINES {
        let msg = format!("the script has {lines} lines; rtrace reads scripts of at most {MAX_LINES} lines");
        let hint = "split it into modules (`import \"part\" as part;`), or generate data as a file the script reads";
        return Err(Diagnostic::new(file, None, msg).hint(hint).into());
    }
    Ok(())
}

/// Before the top level runs: the static `system()` check, the capability's
/// mode, and the interrupt hook on the engine.
pub fn prepare(session: &mut Session, cli: &Cli) -> Result<()> {
    // --monitor: the actions are audited, never taken, so they need no --unsafe.
    if !cli.allow_unsafe && !cli.monitor {
        if let Some((pos, why)) = system::find_action_call(&session.ast) {
            let hint = "or give --monitor to see what it would do without doing it";
            return Err(Diagnostic::at(&session.file_name, pos, why).hint(hint).into());
        }
    }
    system::set_mode(match (cli.allow_unsafe || cli.monitor, cli.explain || cli.dry_run, cli.monitor) {
        (false, _, _) => Mode::Refuse,
        (true, true, _) => Mode::Skip,
        (true, false, true) => Mode::Monitor,
        (true, false, false) => Mode::Run,
    });
    crate::output::audit::set_script(&session.file_name);
    crate::script::commands::set_limits(command_limits(cli)?);
    // Loops in BEGIN, timers and userspace statements end on Ctrl-C/SIGTERM.
    session.engine.on_progress(crate::runtime::signals::progress_hook);
    Ok(())
}

/// `--command-rate` and `--command-timeout`, checked.
fn command_limits(cli: &Cli) -> Result<crate::script::commands::Limits> {
    let mut limits = crate::script::commands::Limits::default();
    if let Some(rate) = cli.command_rate {
        if !(rate.is_finite() && rate > 0.0) {
            bail!("--command-rate {rate}: give the commands a second each call site may start, a number above 0");
        }
        limits.rate = Some(rate);
    }
    if let Some(text) = &cli.command_timeout {
        let Some(t) = crate::script::parse_duration(text) else {
            bail!("--command-timeout {text}: give a duration such as 30s, 500ms or 5m (0: no limit)");
        };
        limits.timeout = (!t.is_zero()).then_some(t);
    }
    Ok(limits)
}

/// A script that registered no probe and no timer would wait forever.
pub fn require_probes(session: &Session) -> Result<()> {
    let reg = session.registry.lock().unwrap_or_else(|e| e.into_inner());
    if reg.probes.is_empty() && reg.timers.is_empty() {
        let hint = "register one with probe(SPEC, |e| { ... }) (or BEGIN, every())";
        return Err(Diagnostic::new(&session.file_name, None, "No probes to attach").hint(hint).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_bytes_are_reported_with_their_position() {
        assert!(check_text("s.rhai", "let a = 1;\n").is_ok());
        let e = check_text("s.rhai", "let a = 1;\nlet b\0 = 2;").unwrap_err().to_string();
        assert_eq!(e, "s.rhai:2:6: error: the script contains a NUL byte; remove it");
    }

    #[test]
    fn devices_and_huge_inputs_are_refused_without_hanging() {
        let e = read_script("/dev/zero").unwrap_err().to_string();
        assert!(e.contains("not a script file"), "{e}");
        let dir = std::env::temp_dir().join(format!("rtrace-safety-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.rhai");
        std::fs::write(&big, vec![b' '; (MAX_SCRIPT + 1) as usize]).unwrap();
        let e = read_script(big.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("over 4 MiB"), "{e}");
        // A FIFO nobody writes to reads as an empty script, at once.
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_script(fifo.to_str().unwrap()).unwrap(), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
