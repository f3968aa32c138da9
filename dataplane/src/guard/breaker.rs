//! The circuit breaker on a shard's Redis path. Closed, it lets calls through and counts
//! failures (errors, timeouts, slow replies) over a window; when they cross the threshold
//! it opens and refuses calls at once for a while; then it lets one probe through
//! (half-open): a good reply closes it, a bad one opens it again.

use serde::Deserialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Share of failed calls in a window that opens the breaker.
    pub failure_ratio: f64,
    /// Fewest calls in a window before the ratio counts.
    pub min_calls: u32,
    /// A reply slower than this counts as a failure.
    pub slow_call_ms: u64,
    /// How long the breaker stays open before it probes.
    pub open_ms: u64,
    /// Length of the counting window.
    pub window_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_ratio: 0.5,
            min_calls: 20,
            slow_call_ms: 250,
            open_ms: 1000,
            window_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open {
        until: Instant,
    },
    /// One probe is in flight; a probe that never reports (its caller went away) is
    /// replaced by another after `open_ms`.
    HalfOpen {
        until: Instant,
    },
}

#[derive(Debug)]
pub struct Breaker {
    cfg: BreakerConfig,
    state: State,
    window_start: Instant,
    calls: u32,
    failures: u32,
}

impl Breaker {
    pub fn new(cfg: BreakerConfig, now: Instant) -> Self {
        Breaker {
            cfg,
            state: State::Closed,
            window_start: now,
            calls: 0,
            failures: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn is_open(&self) -> bool {
        !matches!(self.state, State::Closed)
    }

    /// Whether a call may go to Redis now. When the open time is over, the first caller
    /// becomes the probe (and again when a probe has not reported for as long).
    pub fn allow(&mut self, now: Instant) -> bool {
        match self.state {
            State::Closed => true,
            State::Open { until } | State::HalfOpen { until } if now >= until => {
                self.state = State::HalfOpen {
                    until: now + Duration::from_millis(self.cfg.open_ms),
                };
                true
            }
            State::Open { .. } | State::HalfOpen { .. } => false,
        }
    }

    /// Records how a call that was allowed went.
    pub fn record(&mut self, ok: bool, took: Duration, now: Instant) {
        let failed = !ok || took > Duration::from_millis(self.cfg.slow_call_ms);
        match self.state {
            State::HalfOpen { .. } => {
                if failed {
                    self.open(now);
                } else {
                    self.state = State::Closed;
                    self.reset_window(now);
                }
            }
            State::Open { .. } => {}
            State::Closed => {
                if now.saturating_duration_since(self.window_start)
                    > Duration::from_millis(self.cfg.window_ms)
                {
                    self.reset_window(now);
                }
                self.calls += 1;
                self.failures += u32::from(failed);
                if self.calls >= self.cfg.min_calls
                    && f64::from(self.failures) >= self.cfg.failure_ratio * f64::from(self.calls)
                {
                    self.open(now);
                }
            }
        }
    }

    /// Hears that Redis owes `waiting` replies, the oldest for `oldest`. With at least
    /// `min_calls` waiting and the oldest slower than a slow call, every one of them will
    /// count as failed when it ends: the breaker opens now rather than when they do, so
    /// the calls that follow are refused at once while Redis is stuck. Returns whether it
    /// opened.
    pub fn stalled(&mut self, waiting: usize, oldest: Duration, now: Instant) -> bool {
        let stuck = self.state == State::Closed
            && waiting >= self.cfg.min_calls as usize
            && oldest > Duration::from_millis(self.cfg.slow_call_ms);
        if stuck {
            self.open(now);
        }
        stuck
    }

    /// How late the oldest reply may be before [`Breaker::stalled`] may open the breaker.
    pub fn slow_call(&self) -> Duration {
        Duration::from_millis(self.cfg.slow_call_ms)
    }

    fn open(&mut self, now: Instant) {
        self.state = State::Open {
            until: now + Duration::from_millis(self.cfg.open_ms),
        };
        self.reset_window(now);
    }

    fn reset_window(&mut self, now: Instant) {
        self.window_start = now;
        self.calls = 0;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig {
            failure_ratio: 0.5,
            min_calls: 4,
            slow_call_ms: 100,
            open_ms: 1000,
            window_ms: 1000,
        }
    }

    const FAST: Duration = Duration::from_millis(1);

    #[test]
    fn failures_open_it_a_probe_closes_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        for ok in [true, false, true, false] {
            assert!(b.allow(t0));
            b.record(ok, FAST, t0);
        }
        assert!(matches!(b.state(), State::Open { .. }));
        assert!(!b.allow(t0 + Duration::from_millis(999)));
        let later = t0 + Duration::from_millis(1000);
        assert!(b.allow(later), "the probe");
        assert!(!b.allow(later), "only one probe at a time");
        b.record(true, FAST, later);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_slow_calls_count_as_failures() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        for _ in 0..4 {
            b.allow(t0);
            b.record(true, Duration::from_millis(150), t0);
        }
        assert!(b.is_open());
        let later = t0 + Duration::from_secs(1);
        assert!(b.allow(later));
        b.record(false, FAST, later);
        assert!(!b.allow(later + Duration::from_millis(500)));
    }

    #[test]
    fn few_calls_or_old_failures_do_not_open_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        for _ in 0..3 {
            b.record(false, FAST, t0);
        }
        assert_eq!(b.state(), State::Closed, "below min_calls");
        let later = t0 + Duration::from_secs(2);
        for _ in 0..4 {
            b.record(true, FAST, later);
        }
        assert_eq!(b.state(), State::Closed, "the old failures left the window");
    }

    #[test]
    fn a_crowd_of_calls_waiting_on_a_stuck_redis_opens_it_before_they_end() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        let slow = Duration::from_millis(101);
        assert!(!b.stalled(3, slow, t0), "fewer than min_calls waiting");
        assert!(!b.stalled(10, FAST, t0), "late, but not yet slow");
        assert!(b.stalled(4, slow, t0));
        assert!(
            !b.allow(t0 + Duration::from_millis(10)),
            "later calls refused at once"
        );
        assert!(!b.stalled(4, slow, t0), "already open");
        assert!(b.allow(t0 + Duration::from_secs(1)), "then a probe");
    }

    #[test]
    fn a_probe_that_never_reports_is_replaced() {
        let t0 = Instant::now();
        let mut b = Breaker::new(cfg(), t0);
        assert!(b.stalled(4, Duration::from_millis(101), t0));
        let probe = t0 + Duration::from_secs(1);
        assert!(b.allow(probe), "the probe, whose caller then goes away");
        assert!(!b.allow(probe + Duration::from_millis(999)));
        assert!(b.allow(probe + Duration::from_secs(1)), "another probe");
        b.record(true, FAST, probe + Duration::from_secs(1));
        assert_eq!(b.state(), State::Closed);
    }
}
