//! The render budget: one per rendered value (a repr text, a JSON display value, a structured
//! view), shared by everything that renders a part of it, so that a node shared through the
//! memo costs its output each time it is shown and the total stays bounded however often it is
//! referenced.
//!
//! Two counters, both sized by `Limits::render_budget` or, for a view, `Limits::view_budget`
//! (proportional to the payload, capped): output bytes (JSON forms also charge
//! [`RENDER_JSON_VALUE_COST`] per value) and node visits (so time is bounded even where a
//! visit writes nothing). Once either runs out the budget is `cut` and stays so: callers stop
//! and leave a marker ([`TEXT_MARKER`], [`JSON_MARKER`]).
//! Plain `Cell`s, so shared references can spend it; a budget never crosses threads.

use std::cell::Cell;

pub use crate::limits::RENDER_JSON_VALUE_COST;

/// Appended to a text cut because the budget ran out (the repr's own output-limit marker).
pub const TEXT_MARKER: &str = "...<output limit>";
/// A JSON value left out because the budget ran out.
pub const JSON_MARKER: &str = "<cut: render budget>";

/// Output bytes and node visits left for one rendered value.
#[derive(Debug)]
pub struct Budget {
    bytes: Cell<usize>,
    visits: Cell<usize>,
    cut: Cell<bool>,
}

impl Budget {
    /// A budget of `bytes` output bytes and as many node visits.
    pub fn new(bytes: usize) -> Self {
        Budget {
            bytes: Cell::new(bytes),
            visits: Cell::new(bytes),
            cut: Cell::new(false),
        }
    }

    /// Output bytes left.
    pub fn bytes_left(&self) -> usize {
        self.bytes.get()
    }

    /// Whether the budget ran out (something was left out).
    pub fn is_cut(&self) -> bool {
        self.cut.get()
    }

    /// Marks the value cut (a caller stopped early for lack of budget).
    pub fn set_cut(&self) {
        self.cut.set(true);
    }

    /// Spends one node visit; false (and cut) when none is left.
    #[inline]
    pub fn visit(&self) -> bool {
        self.visits_n(1)
    }

    /// Spends `n` node visits (work that writes nothing, such as scanning `n` items); false
    /// (and cut, with none left) when fewer are left.
    #[inline]
    pub fn visits_n(&self, n: usize) -> bool {
        match self.visits.get().checked_sub(n) {
            Some(left) => {
                self.visits.set(left);
                true
            }
            None => {
                self.visits.set(0);
                self.cut.set(true);
                false
            }
        }
    }

    /// Spends `n` output bytes; false (and cut, with nothing left) when fewer are left.
    pub fn spend(&self, n: usize) -> bool {
        match self.bytes.get().checked_sub(n) {
            Some(left) if !self.cut.get() => {
                self.bytes.set(left);
                true
            }
            _ => {
                self.bytes.set(0);
                self.cut.set(true);
                false
            }
        }
    }

    /// Records `n` bytes already written (a text rendered up to its limit): never fails, the
    /// budget just empties.
    pub fn charge(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_runs_out_once_and_stays_cut() {
        let b = Budget::new(10);
        assert!(b.spend(4) && b.visits_n(9) && b.visit());
        assert!(!b.is_cut());
        assert!(!b.visit(), "the visits are spent");
        assert!(b.is_cut());
        assert!(!b.spend(1), "a cut budget spends no more bytes");
        let b = Budget::new(10);
        assert!(!b.spend(11));
        assert_eq!(b.bytes_left(), 0);
        let b = Budget::new(10);
        b.charge(25);
        assert_eq!(b.bytes_left(), 0);
        assert!(!b.is_cut(), "charging what was written only empties it");
    }
}
