//! Latency histograms of atomics for Prometheus: fixed buckets, relaxed adds by the one
//! thread that owns each histogram, summed by whoever scrapes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (a last `+Inf` bucket follows).
pub const BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
];

/// A latency histogram of atomics: counts per bucket (not cumulative) and the sum.
#[derive(Debug)]
pub struct Histo {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Default for Histo {
    fn default() -> Self {
        Histo {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Histo {
    pub fn observe(&self, took: Duration) {
        let s = took.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(took.as_nanos() as u64, Relaxed);
    }

    /// Adds this histogram's counts and sum to `counts` and `sum_ns`.
    pub fn add_to(&self, counts: &mut [u64; BUCKETS.len() + 1], sum_ns: &mut u64) {
        for (c, a) in counts.iter_mut().zip(&self.counts) {
            *c += a.load(Relaxed);
        }
        *sum_ns += self.sum_ns.load(Relaxed);
    }
}
