//! Whether anyone still asks for something the shard keeps fresh for them: the requests
//! that ask leave a mark, and a loop counts its rounds without one.

use std::cell::Cell;

#[derive(Debug, Default, Clone)]
pub struct Demand {
    /// A request asked since the last round.
    asked: Cell<bool>,
    /// Rounds in a row without one, up to the count the caller asks about.
    quiet: u32,
}

impl Demand {
    /// A request asked.
    pub fn mark(&self) {
        self.asked.set(true);
    }

    /// Ends a round: whether `rounds` rounds in a row have now passed with no request.
    pub fn quiet_for(&mut self, rounds: u32) -> bool {
        self.quiet = if self.asked.take() {
            0
        } else {
            (self.quiet + 1).min(rounds)
        };
        self.quiet >= rounds
    }

    /// Starts the count over: what it counted no longer stands.
    pub fn reset(&mut self) {
        self.asked.set(false);
        self.quiet = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_after_so_many_rounds_without_a_mark_and_not_after_one() {
        let mut d = Demand::default();
        assert!(!d.quiet_for(3) && !d.quiet_for(3));
        assert!(d.quiet_for(3) && d.quiet_for(3));
        d.mark();
        assert!(!d.quiet_for(3), "a mark starts the count over");
        assert!(!d.quiet_for(3));
        d.reset();
        assert!(!d.quiet_for(3) && !d.quiet_for(3) && d.quiet_for(3));
    }
}
