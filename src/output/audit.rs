//! The audit of actions: every signal sent, operation denied or process
//! killed by a script (or, under `--monitor`, `--dry-run` or `--explain`,
//! not done) is one [`ActionRecord`], written by [`sink::action`]: a line
//! on stderr, or with `-f json` an `"action"` record in the output, so an
//! unattended run can be reviewed afterwards.

use std::fmt;

use super::json::escape_json;
use crate::diag::Pos;

/// One action and its outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionRecord {
    /// The script, and where in it the action is.
    pub file: String,
    pub pos: Option<Pos>,
    /// The probe it ran in (`lsm:file_open`); None in userspace code.
    pub probe: Option<String>,
    /// What was done: `signal(SIGKILL)`, `deny(EPERM)`, `kill(1234, SIGTERM)`.
    pub action: String,
    /// The task it hit: `(pid, tid, comm)`.
    pub task: Option<(u32, u32, String)>,
    /// What became of it, for the counters.
    pub outcome: Outcome,
    /// `sent`, `denied`, `not sent (--monitor)`, or why it failed.
    pub result: String,
}

/// What became of an action, in one word (the `outcome` label of
/// `rtrace_actions` on `/metrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sent, denied, ran.
    Done,
    /// Failed (a command's non-zero status, a signal that could not be sent).
    Failed,
    /// Killed at `--command-timeout`.
    TimedOut,
    /// Not done: `--monitor`, `--dry-run`, `--explain`.
    NotDone,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::NotDone => "not_done",
        }
    }
}

/// Actions per (function, outcome), audited or not (a call over
/// `--command-rate` is counted here and summed up at exit, not audited).
static COUNTS: std::sync::Mutex<std::collections::BTreeMap<(String, &'static str), u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Count one action of function `name` (`system`, `deny`) with `outcome`.
pub fn count(name: &str, outcome: &'static str) {
    *COUNTS.lock().unwrap_or_else(|e| e.into_inner()).entry((name.to_string(), outcome)).or_default() += 1;
}

/// Every count so far: ((function, outcome), actions).
pub fn counts() -> Vec<((String, &'static str), u64)> {
    COUNTS.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), *v)).collect()
}

impl fmt::Display for ActionRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rtrace: action: {}:", self.file)?;
        match self.pos {
            Some(p) => write!(f, "{}:{}:", p.line, p.col)?,
            None => write!(f, "?:")?,
        }
        if let Some(probe) = &self.probe {
            write!(f, " {probe}:")?;
        }
        write!(f, " {}", self.action)?;
        if let Some((pid, tid, comm)) = &self.task {
            write!(f, " on pid {pid} tid {tid} ({comm})")?;
        }
        write!(f, ": {}", self.result)
    }
}

/// The script's name, for actions taken by userspace code (set once).
static SCRIPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Name the script the actions come from.
pub fn set_script(file: &str) {
    let _ = SCRIPT.set(file.to_string());
}

impl ActionRecord {
    /// An action of the script's userspace code, at `pos` (`line:col`).
    pub fn userspace(pos: Option<Pos>, action: String, outcome: Outcome, result: String) -> ActionRecord {
        let file = SCRIPT.get().cloned().unwrap_or_else(|| "-e".to_string());
        ActionRecord { file, pos, probe: None, action, task: None, outcome, result }
    }

    /// The function that acted: `system`, `signal`, `deny`.
    pub fn function(&self) -> &str {
        self.action.split('(').next().unwrap_or(&self.action)
    }

    /// The record as one NDJSON line (`{"type": "action", "data": {...}}`).
    pub fn to_json(&self) -> String {
        let mut d = format!("\"file\": \"{}\"", escape_json(&self.file));
        if let Some(p) = self.pos {
            d += &format!(", \"line\": {}, \"col\": {}", p.line, p.col);
        }
        if let Some(probe) = &self.probe {
            d += &format!(", \"probe\": \"{}\"", escape_json(probe));
        }
        d += &format!(", \"action\": \"{}\"", escape_json(&self.action));
        if let Some((pid, tid, comm)) = &self.task {
            d += &format!(", \"pid\": {pid}, \"tid\": {tid}, \"comm\": \"{}\"", escape_json(comm));
        }
        d += &format!(", \"result\": \"{}\"", escape_json(&self.result));
        format!("{{\"type\": \"action\", \"data\": {{{d}}}}}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_is_one_line_of_text_or_json() {
        let mut a = ActionRecord {
            file: "t.rhai".into(),
            pos: Some(Pos { line: 3, col: 9 }),
            probe: Some("lsm:file_open".into()),
            action: "deny(EPERM)".into(),
            task: Some((12, 13, "c\"at".into())),
            outcome: Outcome::Done,
            result: "denied".into(),
        };
        assert_eq!(
            a.to_string(),
            "rtrace: action: t.rhai:3:9: lsm:file_open: deny(EPERM) on pid 12 tid 13 (c\"at): denied"
        );
        assert_eq!(
            a.to_json(),
            "{\"type\": \"action\", \"data\": {\"file\": \"t.rhai\", \"line\": 3, \"col\": 9, \"probe\": \
             \"lsm:file_open\", \"action\": \"deny(EPERM)\", \"pid\": 12, \"tid\": 13, \"comm\": \"c\\\"at\", \
             \"result\": \"denied\"}}\n"
        );
        a.probe = None;
        a.task = None;
        a.pos = None;
        assert_eq!(a.to_string(), "rtrace: action: t.rhai:?: deny(EPERM): denied");
        assert_eq!(a.function(), "deny");
    }
}
