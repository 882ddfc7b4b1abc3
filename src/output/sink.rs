//! Where output goes: stdout or `-o FILE`, as text or NDJSON. One process-wide
//! sink so map prints, script prints and loss reports keep their order.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::diag::{Diagnostic, Severity};

use super::{format_map_json, format_map_text, format_printf_json, MapDump};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

struct Sink {
    format: Format,
    out: Box<dyn Write + Send>,
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);
/// Where output goes, for the error message: `stdout` or `-o FILE`.
static TARGET: Mutex<Option<String>> = Mutex::new(None);
/// The first write error (a full disk, `/dev/full`, a closed pipe): the
/// runtime ends the run with it.
static WRITE_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn note(r: std::io::Result<()>) {
    if let Err(e) = r {
        let target = TARGET.lock().map(|t| t.clone()).ok().flatten().unwrap_or_else(|| "stdout".into());
        WRITE_ERROR.get_or_init(|| format!("cannot write the output to {target}: {e}"));
    }
}

/// The script's own text on stderr (`eprint()`, `debug()`): after the
/// output waiting in the buffer; a write error (stderr closed: `2>&1 |
/// head`) ends the run as one on stdout does.
pub fn script_stderr(text: &str) {
    flush();
    if let Err(e) = std::io::stderr().write_all(text.as_bytes()) {
        WRITE_ERROR.get_or_init(|| format!("cannot write the output to stderr: {e}"));
    }
}

/// The first output write error, as a message.
pub fn write_error() -> Option<String> {
    WRITE_ERROR.get().cloned()
}

/// `-B`: how output is buffered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffering {
    /// Written after each batch of events, timer and callback (the default).
    Batch = 0,
    /// `-B none`: every write goes out at once.
    None = 1,
    /// `-B line`: every line goes out at once (rtrace writes whole lines).
    Line = 2,
    /// `-B full`: written when the 64 KiB buffer is full, and at exit.
    Full = 3,
}

static BUFFERING: AtomicU8 = AtomicU8::new(0);
static NO_WARNINGS: AtomicBool = AtomicBool::new(false);

pub fn set_buffering(mode: Buffering) {
    BUFFERING.store(mode as u8, Ordering::Relaxed);
}

fn buffering() -> u8 {
    BUFFERING.load(Ordering::Relaxed)
}

/// `--no-warnings`.
pub fn set_no_warnings(off: bool) {
    NO_WARNINGS.store(off, Ordering::Relaxed);
}

/// Tell the user: every error, warning and note rtrace writes goes through
/// here. As text it is one line on stderr (after any script output waiting
/// in the buffer, and on a line of its own); with `-f json` it is also a
/// record in the output (an error stays on stderr too: that is where a
/// failed run is explained). `--no-warnings` drops warnings and notes.
pub fn report(d: &Diagnostic) {
    if d.severity != Severity::Error && NO_WARNINGS.load(Ordering::Relaxed) {
        return;
    }
    if format() == Format::Json {
        raw(&super::format_diagnostic_json(d));
        if d.severity != Severity::Error {
            return;
        }
    }
    stderr_line(d);
}

/// An action's audit line: on stderr (after any script output waiting in
/// the buffer, on a line of its own), or with `-f json` a record in the
/// output. Never silenced.
pub fn action(a: &super::audit::ActionRecord) {
    super::audit::count(a.function(), a.outcome.label());
    if format() == Format::Json {
        raw(&a.to_json());
        return;
    }
    stderr_line(a);
}

/// One line on stderr, after the script output waiting in the buffer and
/// on a line of its own.
fn stderr_line(line: &dyn std::fmt::Display) {
    flush();
    end_partial_line();
    // One write: a line of a command rtrace started (system(), -c) that
    // shares stderr can't land in the middle of it.
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// A warning of rtrace's own (`rtrace: warning: ...`): [`report`]ed.
pub fn warn(message: impl Into<String>) {
    report(&Diagnostic::tool(message).warning());
}

/// Send output to `path` (or stdout) in `format`.
pub fn init(format: Format, path: Option<&str>) -> std::io::Result<()> {
    let out: Box<dyn Write + Send> = match path {
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p)?)),
        None => Box::new(std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout())),
    };
    *SINK.lock().unwrap() = Some(Sink { format, out });
    *TARGET.lock().unwrap() = path.map(|p| format!("-o {p}"));
    Ok(())
}

pub fn format() -> Format {
    SINK.lock().unwrap().as_ref().map(|s| s.format).unwrap_or(Format::Text)
}

fn with<F: FnOnce(&mut Sink)>(f: F) {
    let mut guard = SINK.lock().unwrap();
    if guard.is_none() {
        *guard = Some(Sink {
            format: Format::Text,
            out: Box::new(std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout())),
        });
    }
    if let Some(s) = guard.as_mut() {
        f(s);
        if buffering() == Buffering::None as u8 || buffering() == Buffering::Line as u8 {
            note(s.out.flush());
        } else if WAITING_SINCE.load(Ordering::Relaxed) == 0 {
            WAITING_SINCE.store(now_ms(), Ordering::Relaxed);
        }
    }
}

/// When the oldest output still buffered was written ([`now_ms`]); 0 when
/// nothing waits.
static WAITING_SINCE: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the sink was first used, plus one (so never 0).
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// How long output may wait in the buffer while userspace code runs on.
const MAX_WAIT_MS: u64 = 100;

/// Userspace code is still running (a loop in BEGIN, a long timer or
/// callback): write out what has waited longer than [`MAX_WAIT_MS`], so a
/// header printed before the loop shows at once, also through a pipe.
/// Called from the engine's progress hook; cheap when nothing waits.
pub fn flush_waiting() {
    let since = WAITING_SINCE.load(Ordering::Relaxed);
    if since != 0 && now_ms().saturating_sub(since) >= MAX_WAIT_MS {
        flush();
    }
}

/// Write out what is buffered. Output is buffered so a burst of events
/// costs one write; the runtime flushes after every batch, timer and probe
/// callback, and while userspace code runs on ([`flush_waiting`]), so
/// nothing waits long.
pub fn flush() {
    if buffering() == Buffering::Full as u8 {
        return;
    }
    flush_all();
}

/// Write out what is buffered, whatever `-B` says (at exit).
pub fn flush_all() {
    if let Some(s) = SINK.lock().unwrap().as_mut() {
        note(s.out.flush());
        WAITING_SINCE.store(0, Ordering::Relaxed);
    }
}

/// The script's text output on stdout ends in the middle of a line (a
/// `printf` without `\n`): an error line must not be glued to it.
static PARTIAL_LINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether stdout was left in the middle of a line.
pub fn partial_line() -> bool {
    PARTIAL_LINE.load(std::sync::atomic::Ordering::Relaxed)
}

/// A line printed by the script (`print`, `printf`); `text` has no trailing newline
/// unless the script wrote one.
pub fn script_text(text: &str) {
    with(|s| {
        if s.format == Format::Text && !text.is_empty() && TARGET.lock().map(|t| t.is_none()).unwrap_or(false) {
            PARTIAL_LINE.store(!text.ends_with('\n'), std::sync::atomic::Ordering::Relaxed);
        }
        note(match s.format {
            Format::Text => s.out.write_all(text.as_bytes()),
            Format::Json => s.out.write_all(format_printf_json(text).as_bytes()),
        });
    });
}

/// A map, in the sink's format.
pub fn map(dump: &MapDump) {
    with(|s| {
        note(match s.format {
            Format::Text => s.out.write_all(format_map_text(dump).as_bytes()),
            Format::Json => s.out.write_all(format_map_json(dump).as_bytes()),
        });
    });
}

/// A line already formatted for the current format (e.g. a JSON record).
pub fn raw(text: &str) {
    with(|s| {
        note(s.out.write_all(text.as_bytes()));
    });
}

/// Before an error line on stderr: when stdout and stderr are the same
/// terminal, pipe or file and the script's output stopped in the middle of
/// a line, end that line first, so the error starts a line of its own.
fn end_partial_line() {
    if !partial_line() {
        return;
    }
    let id = |fd: i32| {
        // SAFETY: fstat only writes into the zeroed stat buffer it is given.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
    };
    let (out, err) = (id(1), id(2));
    if out.is_some() && out == err {
        crate::util::errln!();
    }
}
