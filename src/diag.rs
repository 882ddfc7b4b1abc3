//! Located errors: a [`Diagnostic`] names the script file, the position in
//! it (when there is one), what is wrong and what to do. This is the one
//! place that formats them: `file:line:col: error: message`.

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

/// An error in (or about) a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The script's file name (`-e` for a script given with -e).
    pub file: String,
    pub pos: Option<Pos>,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: &str, pos: Option<Pos>, message: impl Into<String>) -> Diagnostic {
        Diagnostic { file: file.to_string(), pos, message: message.into() }
    }

    /// At `line:col` text (`?` where it is not one).
    pub fn at_text(file: &str, at: &str, message: impl Into<String>) -> Diagnostic {
        let mut d = Diagnostic::new(file, Pos::parse(at), message);
        if d.pos.is_none() {
            d.file.push_str(":?");
        }
        d
    }

    /// At a Rhai position (`?` where it has none).
    pub fn at(file: &str, pos: rhai::Position, message: impl Into<String>) -> Diagnostic {
        let mut d = Diagnostic::new(file, Pos::of(pos), message);
        if d.pos.is_none() {
            d.file.push_str(":?");
        }
        d
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(pos) => write!(f, "{}:{pos}: error: {}", self.file, self.message),
            None => write!(f, "{}: error: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for Diagnostic {}

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
        assert_eq!(Pos::parse("?"), None);
    }
}
