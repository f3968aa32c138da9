//! Prometheus metrics. Each shard counts into its own [`ShardMetrics`]: plain atomics
//! only that shard writes (relaxed adds, no locks, no sharing of cache lines between
//! writers), which the admin listener sums over the shards when scraped. The in-process
//! order worker has its [`WorkerMetrics`] the same way. [`render`] writes them out, one
//! function per family; [`Process`] reads the process's own figures.

use crate::answer::{Endpoint, Outcome};
use seckill_core::histo::Histo;
pub use seckill_orders::metrics::WorkerMetrics;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod process;
mod render;
mod text;
pub use process::Process;
pub use render::render;

/// What one shard counted since the node started.
pub struct ShardMetrics {
    requests: Vec<AtomicU64>,
    latency: Vec<Histo>,
    redis: Histo,
    /// Purchase script calls, and the purchases they carried (several wait for one call
    /// of their partition while its calls are on their way).
    purchase_calls: AtomicU64,
    purchases_called: AtomicU64,
    /// How long the shoppers this shard's admission let through had waited in line.
    queue_wait: WaitHisto,
    /// Set each second by the shard: its Redis link, its breaker, whether it has read
    /// the control plane.
    pub redis_up: AtomicBool,
    pub breaker_open: AtomicBool,
    pub synced: AtomicBool,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            requests: (0..Endpoint::ALL.len() * Outcome::ALL.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            latency: (0..Endpoint::ALL.len()).map(|_| Histo::default()).collect(),
            redis: Histo::default(),
            purchase_calls: AtomicU64::new(0),
            purchases_called: AtomicU64::new(0),
            queue_wait: WaitHisto::default(),
            redis_up: AtomicBool::new(false),
            breaker_open: AtomicBool::new(false),
            synced: AtomicBool::new(false),
        }
    }
}

impl ShardMetrics {
    /// Counts one answer.
    pub fn request(&self, route: Endpoint, outcome: Outcome, took: Duration) {
        self.requests[route.index() * Outcome::ALL.len() + outcome.index()].fetch_add(1, Relaxed);
        self.latency[route.index()].observe(took);
    }

    pub fn redis_round_trip(&self, took: Duration) {
        self.redis.observe(took);
    }

    /// Counts one purchase script call carrying `purchases`.
    pub fn purchase_call(&self, purchases: usize) {
        self.purchase_calls.fetch_add(1, Relaxed);
        self.purchases_called.fetch_add(purchases as u64, Relaxed);
    }

    /// Counts a shopper let through after `waited` in line.
    pub fn admitted_after(&self, waited: Duration) {
        self.queue_wait.observe(waited);
    }
}

/// Upper bounds of the waiting-time buckets, in seconds (a last `+Inf` bucket follows).
pub const WAIT_BUCKETS: [f64; 11] = [
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
];

/// A histogram of waits in line: counts per bucket (not cumulative) and the sum.
#[derive(Debug)]
struct WaitHisto {
    counts: [AtomicU64; WAIT_BUCKETS.len() + 1],
    sum_ms: AtomicU64,
}

impl Default for WaitHisto {
    fn default() -> Self {
        WaitHisto {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ms: AtomicU64::new(0),
        }
    }
}

impl WaitHisto {
    fn observe(&self, waited: Duration) {
        let s = waited.as_secs_f64();
        let i = WAIT_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(WAIT_BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ms.fetch_add(waited.as_millis() as u64, Relaxed);
    }
}

/// Every counter of the node.
pub struct Metrics {
    pub node: String,
    pub started_ms: i64,
    pub shards: Vec<Arc<ShardMetrics>>,
    pub worker: Option<Arc<WorkerMetrics>>,
    /// Set when a graceful stop begins: the node reports not ready while it drains.
    pub stopping: AtomicBool,
    /// When (ms) the scrape first saw each ended campaign: its series leave after a while.
    ended_since: Mutex<HashMap<String, i64>>,
}

impl Metrics {
    pub fn new(node: &str, started_ms: i64, shards: usize, worker: bool) -> Metrics {
        Metrics {
            node: node.to_string(),
            started_ms,
            shards: (0..shards).map(|_| Arc::default()).collect(),
            worker: worker.then(Arc::default),
            stopping: AtomicBool::new(false),
            ended_since: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a campaign in `state` still belongs in `/metrics` at `now_ms`: every
    /// campaign does, except one ended for longer than `ttl_ms` (counted from the first
    /// scrape that saw it ended, so a restarted node shows it once more for a while).
    pub fn shows(&self, id: &str, state: &str, now_ms: i64, ttl_ms: i64) -> bool {
        let mut seen = self
            .ended_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state != "ended" {
            seen.remove(id);
            return true;
        }
        let since = *seen.entry(id.to_string()).or_insert(now_ms);
        now_ms - since < ttl_ms
    }

    /// Forgets campaigns the control plane no longer lists.
    pub fn forget_except(&self, listed: &[&str]) {
        let mut seen = self
            .ended_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.retain(|id, _| listed.contains(&id.as_str()));
    }

    /// Whether every shard has its Redis link and has read the control plane, and the
    /// node is not stopping.
    pub fn ready(&self) -> Result<(), String> {
        if self.stopping.load(Relaxed) {
            return Err("stopping: draining before the listener closes".into());
        }
        for (i, s) in self.shards.iter().enumerate() {
            if !s.redis_up.load(Relaxed) {
                return Err(format!("shard {i}: no Redis connection"));
            }
            if !s.synced.load(Relaxed) {
                return Err(format!("shard {i}: control plane not read yet"));
            }
        }
        Ok(())
    }
}

/// The states `seckill_campaign_state` reports, as shoppers see them.
pub const CAMPAIGN_STATES: [&str; 6] = ["draft", "armed", "live", "paused", "sold_out", "ended"];

/// A campaign's stock as the scrape reads it from Redis.
#[derive(Debug, Clone, Default)]
pub struct CampaignGauges {
    pub id: String,
    pub state: &'static str,
    pub total: i64,
    pub remaining: i64,
    pub in_transit: i64,
    pub held: i64,
    pub sold: i64,
    /// The last reconciliation's verdict: when (ms) and how many violations.
    pub reconciled: Option<(i64, u64)>,
    /// The waiting room's counters, for a campaign that has one.
    pub queue: Option<seckill_core::protocol::QueueProgress>,
}

impl CampaignGauges {
    /// Units by which the live counters miss the ledger: remaining + in transit + held +
    /// sold against the total, and any oversell. Read partition by partition, so a
    /// transfer caught halfway can show for a moment; alert on it only when it lasts.
    pub fn mismatch(&self) -> i64 {
        let sum = self.remaining + self.in_transit + self.held + self.sold;
        (sum - self.total).abs() + (self.held + self.sold - self.total).max(0)
    }
}

#[cfg(test)]
mod tests;
