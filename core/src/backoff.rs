//! Waits between reconnection attempts. When Redis restarts, every shard of every node
//! and every worker loses it in the same instant; with the same exponential waits they
//! would all come back in the same millisecond, a thundering herd on a server that has
//! just started. Each wait is drawn from the upper half of the exponential backoff
//! ("equal jitter"): attempts spread out, yet none waits less than half its share.

use std::time::Duration;

/// Exponential backoff: each failure doubles the next wait, up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        let max = max.max(min);
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// After a success: the next failure waits the least again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// The wait after a failure, drawn at random, and the backoff doubled for the next.
    pub fn wait(&mut self) -> Duration {
        self.wait_drawn(draw())
    }

    /// The same with `unit` (in [0, 1]) in place of the random draw.
    pub fn wait_drawn(&mut self, unit: f64) -> Duration {
        let wait = jittered(self.next, unit);
        self.next = (self.next * 2).min(self.max);
        wait
    }
}

/// Equal jitter: `unit` in [0, 1] picks a wait between half of `backoff` and all of it.
/// Out-of-range or NaN units are clamped, so the wait never leaves those bounds.
pub fn jittered(backoff: Duration, unit: f64) -> Duration {
    let unit = if unit.is_nan() {
        1.0
    } else {
        unit.clamp(0.0, 1.0)
    };
    let half = backoff / 2;
    half + (backoff - half).mul_f64(unit)
}

/// A uniform draw in [0, 1).
pub fn draw() -> f64 {
    rand::random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_jittered_wait_stays_between_half_the_backoff_and_all_of_it() {
        let b = 1000 * MS;
        assert_eq!(jittered(b, 0.0), 500 * MS);
        assert_eq!(jittered(b, 1.0), b);
        assert_eq!(jittered(b, 0.5), 750 * MS);
        for unit in [-3.0, 7.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let w = jittered(b, unit);
            assert!((500 * MS..=b).contains(&w), "{unit}: {w:?}");
        }
        for _ in 0..10_000 {
            let w = jittered(b, draw());
            assert!((500 * MS..=b).contains(&w), "{w:?}");
        }
        assert_eq!(jittered(Duration::ZERO, draw()), Duration::ZERO);
    }

    #[test]
    fn many_draws_spread_over_the_range() {
        let waits: Vec<Duration> = (0..1000).map(|_| jittered(1000 * MS, draw())).collect();
        let distinct: std::collections::HashSet<Duration> = waits.iter().copied().collect();
        assert!(distinct.len() > 900, "{} distinct waits", distinct.len());
        // Both halves of the range are used: the waits are not bunched at one end.
        let low = waits.iter().filter(|w| **w < 750 * MS).count();
        assert!(
            (300..=700).contains(&low),
            "{low} of 1000 in the lower half"
        );
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap_and_starts_over_after_a_reset() {
        let mut b = Backoff::new(10 * MS, 100 * MS);
        let full: Vec<Duration> = (0..6).map(|_| b.wait_drawn(1.0)).collect();
        assert_eq!(full, [10, 20, 40, 80, 100, 100].map(|n| n * MS));
        assert_eq!(b.wait_drawn(0.0), 50 * MS);
        b.reset();
        assert_eq!(b.wait_drawn(1.0), 10 * MS);
        for _ in 0..100 {
            assert!(b.wait() <= 100 * MS);
        }
        // A cap below the first wait is raised to it.
        let mut tight = Backoff::new(10 * MS, MS);
        assert_eq!(tight.wait_drawn(1.0), 10 * MS);
        assert_eq!(tight.wait_drawn(1.0), 10 * MS);
    }
}
