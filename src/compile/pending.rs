//! A lowered program group waiting for the map layouts: what pass 2
//! (split and lower) hands to passes 3 and 4, and what dispatch merges.

use crate::probes::{AttachPoint, ProbeType, ProgramSpec};

use super::lower;

/// A lowered program group waiting for the map layouts.
pub(super) struct Pending {
    pub(super) lowered: lower::Lowered,
    pub(super) name: String,
    pub(super) ptype: &'static dyn ProbeType,
    pub(super) program: ProgramSpec,
    pub(super) points: Vec<AttachPoint>,
    pub(super) probe: usize,
    /// Where its probe() was called (errors without a statement of their own).
    pub(super) pos: rhai::Position,
    /// Its closure's positions are inside a source string not placed in the script.
    pub(super) unplaced_source: bool,
    pub(super) dispatch: usize,
    /// `.unfiltered()`: no -p/-c filter.
    pub(super) unfiltered: bool,
}
