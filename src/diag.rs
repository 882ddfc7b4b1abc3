//! Errors, warnings and notes: one [`Diagnostic`] type for everything rtrace
//! tells the user about a script or a run. It names the script file and the
//! position in it when there is one (else `rtrace` speaks for itself), the
//! severity, what is wrong, and what to do. This is the one place that
//! formats them — `file:line:col: error: message; hint`; `output` renders them as JSON
//! records, and `output::sink::report` is the one place that
//! writes them (so `-f json` and `--no-warnings` hold for every one).

use std::fmt;

/// A position in the script, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    /// From a Rhai position; None when it has none.
    pub fn of(pos: rhai::Position) -> Option<Pos> {
        Some(Pos { line: pos.line()? as u32, col: pos.position().unwrap_or(1) as u32 })
    }

    /// From `line:col` text (as `script::position_text` writes it).
    pub fn parse(text: &str) -> Option<Pos> {
        let (line, col) = text.split_once(':')?;
        Some(Pos { line: line.parse().ok()?, col: col.parse().ok()? })
    }

    /// From the span an IR instruction carries; None for rtrace's own code.
    pub fn of_span(span: probes_ebpf::ir::Span) -> Option<Pos> {
        (span.line > 0).then_some(Pos { line: span.line, col: span.col })
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// How serious a [`Diagnostic`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The script can't run (or stopped): rtrace exits non-zero.
    Error,
    /// Something the user should know; the run goes on. `--no-warnings`
    /// silences these.
    Warning,
    /// A remark beside a result (how to see more, what was left out).
    Note,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// Where in the script a diagnostic points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// About rtrace or the run as a whole: `rtrace: error: ...`.
    Nowhere,
    /// About the script, at no one place: `t.rhai: error: ...`.
    File,
    /// In the script at a position rtrace could not recover: `t.rhai:?: ...`.
    Unknown,
    At(Pos),
}

/// An error, warning or note for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The script's file name (`-e` for a script given with -e); empty for
    /// [`Place::Nowhere`].
    pub file: String,
    pub place: Place,
    /// What is wrong.
    pub message: String,
    /// What to do about it, when the message doesn't already say.
    pub hint: Option<String>,
    /// A wrong command line (an option's value, a missing script): exit
    /// status 2, as clap's own and bpftrace's; every other error exits 1.
    pub usage: bool,
    /// Already written (an error the runtime showed before its summary
    /// lines): the exit path reports it without writing it again.
    pub shown: bool,
}

impl Diagnostic {
    /// The error a run ended with, as the one diagnostic the user sees: a
    /// [`Diagnostic`] as it was made (with what the code around it added in
    /// front of its message), anything else as rtrace's own error, on one line.
    pub fn of_error(e: &anyhow::Error) -> Diagnostic {
        let mut context = Vec::new();
        for cause in e.chain() {
            if let Some(d) = cause.downcast_ref::<Diagnostic>() {
                let mut d = d.clone();
                if !context.is_empty() {
                    d.message = format!("{}: {}", context.join(": "), d.message);
                }
                d.message = without_errno_numbers(&d.message);
                return d;
            }
            context.push(cause.to_string());
        }
        let msg = format!("{e:#}");
        Diagnostic::tool(without_errno_numbers(msg.lines().next().unwrap_or("")))
    }

    /// An error in `file` at `pos` (or about the file as a whole).
    pub fn new(file: &str, pos: Option<Pos>, message: impl Into<String>) -> Diagnostic {
        let place = pos.map_or(Place::File, Place::At);
        Diagnostic::with(Severity::Error, file, place, message)
    }

    fn with(severity: Severity, file: &str, place: Place, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity,
            file: file.to_string(),
            place,
            message: message.into(),
            hint: None,
            usage: false,
            shown: false,
        }
    }

    /// An error at `line:col` text (`?` where it is not one).
    pub fn at_text(file: &str, at: &str, message: impl Into<String>) -> Diagnostic {
        let place = Pos::parse(at).map_or(Place::Unknown, Place::At);
        Diagnostic::with(Severity::Error, file, place, message)
    }

    /// An error at a Rhai position (`?` where it has none).
    pub fn at(file: &str, pos: rhai::Position, message: impl Into<String>) -> Diagnostic {
        let place = Pos::of(pos).map_or(Place::Unknown, Place::At);
        Diagnostic::with(Severity::Error, file, place, message)
    }

    /// An error of rtrace's own, at no place in a script.
    pub fn tool(message: impl Into<String>) -> Diagnostic {
        Diagnostic::with(Severity::Error, "", Place::Nowhere, message)
    }

    /// A usage error (exit status 2) of rtrace's own.
    pub fn usage(message: impl Into<String>) -> Diagnostic {
        Diagnostic { usage: true, ..Diagnostic::tool(message) }
    }

    /// The same, as a warning.
    pub fn warning(self) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..self }
    }

    /// The same, as a note.
    pub fn note(self) -> Diagnostic {
        Diagnostic { severity: Severity::Note, ..self }
    }

    /// The same, with what to do.
    pub fn hint(self, hint: impl Into<String>) -> Diagnostic {
        Diagnostic { hint: Some(hint.into()), ..self }
    }

    /// `file:line:col`, `file:?`, `file` or `rtrace`: who speaks.
    pub fn location(&self) -> String {
        match self.place {
            Place::Nowhere => "rtrace".to_string(),
            Place::File => self.file.clone(),
            Place::Unknown => format!("{}:?", self.file),
            Place::At(pos) => format!("{}:{pos}", self.file),
        }
    }

    /// The position, when there is one.
    pub fn pos(&self) -> Option<Pos> {
        match self.place {
            Place::At(pos) => Some(pos),
            _ => None,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.location(), self.severity.name(), self.message)?;
        match &self.hint {
            Some(hint) => write!(f, "; {hint}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Diagnostic {}

/// Drop the ` (os error N)` that system errors carry: the text before it
/// already says what went wrong.
pub fn without_errno_numbers(line: &str) -> String {
    crate::util::errno::replace_os_errors(line, |_| String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_format_for_located_errors() {
        let d = Diagnostic::new("t.rhai", Some(Pos { line: 3, col: 7 }), "unknown event field `x`");
        assert_eq!(d.to_string(), "t.rhai:3:7: error: unknown event field `x`");
        assert_eq!(Diagnostic::new("-e", None, "-c: no such command").to_string(), "-e: error: -c: no such command");
        assert_eq!(Diagnostic::at("t.rhai", rhai::Position::NONE, "x").to_string(), "t.rhai:?: error: x");
        assert_eq!(Pos::of(rhai::Position::new(2, 5)), Some(Pos { line: 2, col: 5 }));
        assert_eq!(Pos::of_span(probes_ebpf::ir::Span { line: 0, col: 0 }), None);
        assert_eq!(Diagnostic::at_text("t.rhai", "4:2", "x").to_string(), "t.rhai:4:2: error: x");
        assert_eq!(Diagnostic::at_text("t.rhai", "?", "x").place, Place::Unknown);
        assert_eq!(Pos::parse("?"), None);
    }

    #[test]
    fn errno_numbers_are_dropped() {
        assert_eq!(
            without_errno_numbers("cannot open x: No such file or directory (os error 2); use y (os error 13)"),
            "cannot open x: No such file or directory; use y"
        );
        assert_eq!(without_errno_numbers("keep (os error here)"), "keep (os error here)");
    }

    #[test]
    fn severity_hint_and_who_speaks() {
        let d = Diagnostic::at("t.rhai", rhai::Position::new(1, 2), "syntax error: x").hint("write y");
        assert_eq!(d.to_string(), "t.rhai:1:2: error: syntax error: x; write y");
        assert_eq!(d.clone().warning().to_string(), "t.rhai:1:2: warning: syntax error: x; write y");
        assert_eq!(Diagnostic::tool("lost 3").note().to_string(), "rtrace: note: lost 3");
        assert_eq!(Diagnostic::tool("x").location(), "rtrace");
        assert!(Diagnostic::usage("-d x").usage && !Diagnostic::tool("x").usage);
        assert_eq!(d.pos(), Some(Pos { line: 1, col: 2 }));
        assert_eq!(Diagnostic::new("f", None, "x").pos(), None);
    }
}
