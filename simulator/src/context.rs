//! What every load thread shares: where and what to send ([`Context`]) and the counters
//! of the live progress line ([`Progress`]).

use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::tally::histogram;

/// Counters every load thread bumps, for the live progress line.
#[derive(Debug)]
pub struct Progress {
    pub answered: AtomicU64,
    pub held: AtomicU64,
    pub refused: AtomicU64,
    pub errors: AtomicU64,
    /// Purchase latency since the line was last drawn, µs.
    pub window: Mutex<Histogram<u64>>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            answered: AtomicU64::new(0),
            held: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            window: Mutex::new(histogram()),
        }
    }
}

/// Everything a thread needs besides its arrivals.
pub struct Context {
    pub progress: Progress,
    /// Data plane nodes; each source address talks to one of them.
    pub targets: Vec<SocketAddr>,
    pub campaign: String,
    /// Sessions in flight per thread, at most (and so connections in use).
    pub connections: usize,
    /// Bearer tokens by account (see `plan::account_names`).
    pub tokens: Vec<String>,
    /// Tickets earned before the sale, by account (campaigns that require them).
    pub tickets: Vec<Option<String>>,
    pub start: Instant,
    /// When the sale opens, from the start of the run.
    pub opening: Duration,
    /// When the sale opens, ms since the Unix epoch on Redis's clock, when this run
    /// opens it (then sales before it are counted).
    pub opens_ms: Option<i64>,
    /// Requests still unanswered this long after the plan ends are given up.
    pub deadline: Instant,
    /// How long a purchase left unanswered, or answered 503, is sent again.
    pub resend_for: Duration,
    /// Whether every purchase is kept in [`crate::tally::Tally::trace`].
    pub trace: bool,
    /// The payment provider whose signed webhooks pay the buyers' orders; without one,
    /// buyers pay through the demo provider's route.
    pub provider: Option<crate::provider::Provider>,
}
