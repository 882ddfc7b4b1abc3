//! The script's timers, `every()` and `after()`: when each falls due, on
//! a fixed schedule from the start of tracing, and running the calls due.

use std::time::Instant;

use anyhow::Result;

use crate::script::Session;

/// The script's `every()` and `after()` callbacks and when each is next
/// due. `every(P)` falls due at start + P, start + 2P, ...: a call that runs
/// late does not move the ones after it, and calls missed while rtrace was
/// held up all run, in order (as queued `interval` events would).
pub struct Timers {
    timers: Vec<crate::script::Timer>,
    next: Vec<Option<Instant>>,
}

impl Timers {
    pub fn new(timers: Vec<crate::script::Timer>, start: Instant) -> Timers {
        let next = timers.iter().map(|t| Some(start + t.period)).collect();
        Timers { timers, next }
    }

    /// When the first timer falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.next.iter().flatten().min().copied()
    }

    /// Run every call due at or before `until`, earliest first, until one
    /// calls exit().
    pub fn run_due(&mut self, session: &Session, until: Instant) -> Result<()> {
        while let Some(i) = self.pop_due(until) {
            session.call(&session.ast, &self.timers[i].closure)?;
            if session.exit_requested() {
                break;
            }
        }
        Ok(())
    }

    /// The timer whose call falls due first at or before `until` (a tie:
    /// the one registered first), its next call scheduled.
    fn pop_due(&mut self, until: Instant) -> Option<usize> {
        let due = self.next.iter().enumerate().filter_map(|(i, d)| d.filter(|d| *d <= until).map(|d| (d, i)));
        let (at, i) = due.min()?;
        let t = &self.timers[i];
        self.next[i] = t.repeat.then(|| at + t.period);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timer(ms: u64, repeat: bool) -> crate::script::Timer {
        crate::script::Timer {
            period: Duration::from_millis(ms),
            repeat,
            closure: rhai::FnPtr::new("f").unwrap(),
            pos: rhai::Position::NONE,
        }
    }

    /// The calls due by `until`, as timer numbers, in the order they run.
    fn calls(t: &mut Timers, until: Instant) -> Vec<usize> {
        std::iter::from_fn(|| t.pop_due(until)).collect()
    }

    #[test]
    fn timers_run_on_a_fixed_schedule_in_the_order_they_fell_due() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let mut t = Timers::new(vec![timer(100, true), timer(250, false), timer(100, true)], start);
        assert_eq!(t.next_due(), Some(ms(100)));
        // Looked at late, all at once (rtrace was held up): each call that
        // fell due runs, earliest first, ties in registration order.
        assert_eq!(calls(&mut t, ms(320)), [0, 2, 0, 2, 1, 0, 2]);
        // The late calls did not move the schedule; after() ran once.
        assert_eq!(t.next_due(), Some(ms(400)));
        assert_eq!(calls(&mut t, ms(399)), [] as [usize; 0]);
        // Up to 1000 ms (the call due exactly then included): each
        // every(100ms) has run 10 times in all.
        assert_eq!(calls(&mut t, ms(1000)), [0, 2].repeat(7));
        assert_eq!(t.next_due(), Some(ms(1100)));
    }
}
