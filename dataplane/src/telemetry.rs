//! A shard's side of the fleet telemetry (see [`seckill_core::telemetry`]): the answers of
//! the current second, which the shard's report loop writes to its node's record.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::answer::{Endpoint, Outcome};
use seckill_core::telemetry::RouteStats;

/// A shard's counters for the current window.
pub struct Window {
    started: Instant,
    outcomes: [u64; Outcome::ALL.len()],
    routes: [Option<Histogram<u64>>; Endpoint::ALL.len()],
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).unwrap_or_else(|_| unreachable!("valid bounds"))
}

pub(crate) fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Default for Window {
    fn default() -> Self {
        Window {
            started: Instant::now(),
            outcomes: [0; Outcome::ALL.len()],
            routes: std::array::from_fn(|_| None),
        }
    }
}

impl Window {
    /// Counts one answer.
    pub fn record(&mut self, route: Endpoint, outcome: Outcome, took: Duration) {
        self.outcomes[outcome.index()] += 1;
        let us = (took.as_micros() as u64).clamp(1, 60_000_000);
        self.routes[route.index()]
            .get_or_insert_with(histogram)
            .record(us)
            .ok();
    }

    /// The window as a record, and a fresh window in its place.
    pub(crate) fn take(
        &mut self,
    ) -> (
        Duration,
        BTreeMap<String, u64>,
        BTreeMap<String, RouteStats>,
    ) {
        let w = std::mem::take(self);
        let outcomes = Outcome::ALL
            .iter()
            .zip(w.outcomes)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.code().to_string(), n))
            .collect();
        let routes = Endpoint::ALL
            .iter()
            .map(|e| e.name())
            .zip(w.routes)
            .filter_map(|(k, h)| h.map(|h| (k, h)))
            .map(|(k, h)| {
                let s = RouteStats {
                    count: h.len(),
                    p50_ms: ms(h.value_at_quantile(0.5)),
                    p99_ms: ms(h.value_at_quantile(0.99)),
                };
                (k.to_string(), s)
            })
            .collect();
        (w.started.elapsed(), outcomes, routes)
    }
}
