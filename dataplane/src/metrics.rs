//! Prometheus metrics. Each shard counts into its own [`ShardMetrics`]: plain atomics
//! only that shard writes (relaxed adds, no locks, no sharing of cache lines between
//! writers), which the admin listener sums over the shards when scraped. The in-process
//! order worker has its [`WorkerMetrics`] the same way.

use crate::answer::{Endpoint, Outcome};
use seckill_core::histo::{Histo, BUCKETS};
pub use seckill_orders::metrics::WorkerMetrics;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The process metrics every Prometheus client exports, read from `/proc/self` (Linux).
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: u64,
    pub start_time_seconds: f64,
}

/// Clock ticks per second of `/proc` times: `USER_HZ`, 100 in Linux's user ABI.
const TICKS_PER_S: f64 = 100.0;

impl Process {
    pub fn read() -> Option<Process> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Process::parse(&stat, &status, &boot, fds)
    }

    /// From the texts of `/proc/self/stat`, `/proc/self/status` and `/proc/stat`.
    pub fn parse(stat: &str, status: &str, boot: &str, open_fds: u64) -> Option<Process> {
        // The command name in parentheses may hold spaces: fields count from after it.
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        // After the name: state is field 3 of stat(5), so field n sits at index n - 3.
        let tick = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        let cpu_seconds = (tick(14)? + tick(15)?) / TICKS_PER_S;
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let btime: f64 = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        Some(Process {
            cpu_seconds,
            resident_bytes: rss_kb * 1024,
            open_fds,
            start_time_seconds: btime + tick(22)? / TICKS_PER_S,
        })
    }

    fn render(&self, out: &mut String) {
        for (name, kind, help, v) in [
            (
                "process_cpu_seconds_total",
                "counter",
                "User and system CPU time spent, in seconds.",
                self.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                self.resident_bytes as f64,
            ),
            (
                "process_open_fds",
                "gauge",
                "Open file descriptors.",
                self.open_fds as f64,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "When the process started, in seconds since the Unix epoch.",
                self.start_time_seconds,
            ),
        ] {
            header(out, name, kind, help);
            let _ = writeln!(out, "{name} {v}");
        }
    }
}

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

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn histogram(out: &mut String, name: &str, labels: &str, counts: &[u64], sum_ns: u64) {
    histogram_of(out, name, labels, &BUCKETS, counts, sum_ns as f64 / 1e9);
}

/// A histogram's lines: buckets bounded by `bounds` (then `+Inf`) and the sum in seconds.
fn histogram_of(
    out: &mut String,
    name: &str,
    labels: &str,
    bounds: &[f64],
    counts: &[u64],
    sum_s: f64,
) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, c) in counts.iter().enumerate() {
        cumulative += c;
        let le = bounds
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let braces = |s: &str| {
        if s.is_empty() {
            String::new()
        } else {
            format!("{{{s}}}")
        }
    };
    let _ = writeln!(out, "{name}_sum{} {}", braces(labels), sum_s);
    let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
}

/// Escapes a label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition of the node's counters and the campaigns' stock.
pub fn render(m: &Metrics, campaigns: &[CampaignGauges]) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let node = label(&m.node);
    header(
        &mut out,
        "seckill_node_info",
        "gauge",
        "This node: its name and shards.",
    );
    let _ = writeln!(
        out,
        "seckill_node_info{{node=\"{node}\",shards=\"{}\"}} 1",
        m.shards.len()
    );
    header(
        &mut out,
        "seckill_start_time_seconds",
        "gauge",
        "When the node started, in seconds since the Unix epoch.",
    );
    let _ = writeln!(
        out,
        "seckill_start_time_seconds {}",
        m.started_ms as f64 / 1000.0
    );
    header(
        &mut out,
        "seckill_build_info",
        "gauge",
        "The running build: its version.",
    );
    let _ = writeln!(
        out,
        "seckill_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(p) = Process::read() {
        p.render(&mut out);
    }
    // The header always, the value once measured: an alert on the offset names a metric
    // every node declares.
    header(
        &mut out,
        "seckill_clock_offset_seconds",
        "gauge",
        "Redis's clock minus this node's; sales open by Redis's clock.",
    );
    if let Some(offset) = seckill_core::clock::offset_ms() {
        let _ = writeln!(
            out,
            "seckill_clock_offset_seconds {}",
            offset as f64 / 1000.0
        );
    }

    header(
        &mut out,
        "seckill_http_requests_total",
        "counter",
        "Answers by route and outcome (ok, or the error code of the JSON body).",
    );
    let mut by_outcome = [0u64; Outcome::ALL.len()];
    for route in Endpoint::ALL {
        for outcome in Outcome::ALL {
            let n: u64 = m
                .shards
                .iter()
                .map(|s| {
                    s.requests[route.index() * Outcome::ALL.len() + outcome.index()].load(Relaxed)
                })
                .sum();
            by_outcome[outcome.index()] += n;
            if n > 0 {
                let _ = writeln!(
                    out,
                    "seckill_http_requests_total{{route=\"{}\",outcome=\"{}\"}} {n}",
                    route.name(),
                    outcome.code()
                );
            }
        }
    }
    for (name, outcome, help) in [
        (
            "seckill_rate_limited_total",
            Outcome::RateLimited,
            "Requests refused by a per-IP or per-user rate limit.",
        ),
        (
            "seckill_blocked_total",
            Outcome::Blocked,
            "Requests refused because the client or user is blacklisted.",
        ),
        (
            "seckill_busy_total",
            Outcome::Busy,
            "Requests refused as busy: over a campaign's admission limit, or a shard's event streams full.",
        ),
    ] {
        header(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", by_outcome[outcome.index()]);
    }

    header(
        &mut out,
        "seckill_http_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its answer, by route.",
    );
    for route in Endpoint::ALL {
        let mut counts = [0u64; BUCKETS.len() + 1];
        let mut sum = 0;
        for s in &m.shards {
            s.latency[route.index()].add_to(&mut counts, &mut sum);
        }
        if counts.iter().any(|c| *c > 0) {
            histogram(
                &mut out,
                "seckill_http_request_duration_seconds",
                &format!("route=\"{}\"", route.name()),
                &counts,
                sum,
            );
        }
    }

    header(
        &mut out,
        "seckill_redis_round_trip_seconds",
        "histogram",
        "Round trip of the shards' Redis commands, queueing included.",
    );
    let mut counts = [0u64; BUCKETS.len() + 1];
    let mut sum = 0;
    for s in &m.shards {
        s.redis.add_to(&mut counts, &mut sum);
    }
    histogram(
        &mut out,
        "seckill_redis_round_trip_seconds",
        "",
        &counts,
        sum,
    );
    for (name, help, pick) in [
        (
            "seckill_purchase_calls_total",
            "Purchase script calls to Redis.",
            (|s: &ShardMetrics| s.purchase_calls.load(Relaxed)) as fn(&ShardMetrics) -> u64,
        ),
        (
            "seckill_purchase_call_purchases_total",
            "Purchases those calls carried: the purchases waiting for a partition go in one call.",
            |s: &ShardMetrics| s.purchases_called.load(Relaxed),
        ),
    ] {
        header(&mut out, name, "counter", help);
        let _ = writeln!(
            out,
            "{name} {}",
            m.shards.iter().map(|s| pick(s)).sum::<u64>()
        );
    }
    for (name, help, pick) in [
        (
            "seckill_redis_up",
            "1 when the shard has a working Redis connection.",
            (|s: &ShardMetrics| s.redis_up.load(Relaxed)) as fn(&ShardMetrics) -> bool,
        ),
        (
            "seckill_breaker_open",
            "1 while the shard's circuit breaker refuses Redis calls.",
            |s: &ShardMetrics| s.breaker_open.load(Relaxed),
        ),
    ] {
        header(&mut out, name, "gauge", help);
        for (i, s) in m.shards.iter().enumerate() {
            let _ = writeln!(out, "{name}{{shard=\"{i}\"}} {}", u8::from(pick(s)));
        }
    }

    for (name, help, pick) in [
        (
            "seckill_campaign_total_units",
            "Units the campaign sells.",
            (|c: &CampaignGauges| c.total) as fn(&CampaignGauges) -> i64,
        ),
        (
            "seckill_campaign_remaining_units",
            "Units on the partitions' shelves.",
            |c: &CampaignGauges| c.remaining,
        ),
        (
            "seckill_campaign_in_transit_units",
            "Units moving between partitions.",
            |c: &CampaignGauges| c.in_transit,
        ),
        (
            "seckill_campaign_held_units",
            "Units held by buyers who have not paid yet.",
            |c: &CampaignGauges| c.held,
        ),
        (
            "seckill_campaign_sold_units",
            "Units paid for.",
            |c: &CampaignGauges| c.sold,
        ),
        (
            "seckill_campaign_ledger_mismatch_units",
            "Units by which remaining + in transit + held + sold misses the total (0 when the ledger holds).",
            |c: &CampaignGauges| c.mismatch(),
        ),
    ] {
        header(&mut out, name, "gauge", help);
        for c in campaigns {
            let _ = writeln!(out, "{name}{{campaign=\"{}\"}} {}", label(&c.id), pick(c));
        }
    }
    header(
        &mut out,
        "seckill_campaign_state",
        "gauge",
        "1 for the campaign's current state, 0 for the others.",
    );
    for c in campaigns {
        for state in CAMPAIGN_STATES {
            let _ = writeln!(
                out,
                "seckill_campaign_state{{campaign=\"{}\",state=\"{state}\"}} {}",
                label(&c.id),
                u8::from(c.state == state)
            );
        }
    }

    for (name, kind, help, pick) in [
        (
            "seckill_queue_waiting",
            "gauge",
            "Shoppers in the waiting room not let through yet.",
            (|q: &seckill_core::protocol::QueueProgress| q.waiting())
                as fn(&seckill_core::protocol::QueueProgress) -> u64,
        ),
        (
            "seckill_queue_admitted",
            "gauge",
            "Shoppers the waiting room has let through, since it opened.",
            |q| q.admitted,
        ),
        (
            "seckill_queue_passes_outstanding",
            "gauge",
            "Passes given and neither used nor expired: each reserves a unit.",
            |q| q.outstanding,
        ),
        (
            "seckill_queue_passes_used",
            "gauge",
            "Passes used to buy, since the room opened.",
            |q| q.used,
        ),
        (
            "seckill_queue_passes_expired",
            "gauge",
            "Passes that ran out unused (their units went to the next in line).",
            |q| q.expired,
        ),
        (
            "seckill_queue_admit_per_second",
            "gauge",
            "The waiting room's admission rate.",
            |q| u64::from(q.admit_per_s),
        ),
    ] {
        header(&mut out, name, kind, help);
        for c in campaigns {
            if let Some(q) = &c.queue {
                let _ = writeln!(out, "{name}{{campaign=\"{}\"}} {}", label(&c.id), pick(q));
            }
        }
    }
    header(
        &mut out,
        "seckill_queue_wait_seconds",
        "histogram",
        "How long the shoppers this node let through had waited in line (the pre-queue counts from the opening).",
    );
    {
        let mut counts = [0u64; WAIT_BUCKETS.len() + 1];
        let mut sum_ms = 0u64;
        for s in &m.shards {
            for (c, a) in counts.iter_mut().zip(&s.queue_wait.counts) {
                *c += a.load(Relaxed);
            }
            sum_ms += s.queue_wait.sum_ms.load(Relaxed);
        }
        histogram_of(
            &mut out,
            "seckill_queue_wait_seconds",
            "",
            &WAIT_BUCKETS,
            &counts,
            sum_ms as f64 / 1000.0,
        );
    }

    header(
        &mut out,
        "seckill_reconcile_violations",
        "gauge",
        "Violations the campaign's last reconciliation found (CLI, console or simulator).",
    );
    for c in campaigns {
        if let Some((_, v)) = c.reconciled {
            let _ = writeln!(
                out,
                "seckill_reconcile_violations{{campaign=\"{}\"}} {v}",
                label(&c.id)
            );
        }
    }
    header(
        &mut out,
        "seckill_reconcile_last_run_timestamp_seconds",
        "gauge",
        "When the campaign was last reconciled, in seconds since the Unix epoch.",
    );
    for c in campaigns {
        if let Some((at, _)) = c.reconciled {
            let _ = writeln!(
                out,
                "seckill_reconcile_last_run_timestamp_seconds{{campaign=\"{}\"}} {}",
                label(&c.id),
                at as f64 / 1000.0
            );
        }
    }

    if let Some(w) = &m.worker {
        for (name, kind, help, v) in [
            (
                "seckill_worker_events_total",
                "counter",
                "Order events the worker stored.",
                w.events.load(Relaxed),
            ),
            (
                "seckill_worker_delivered_total",
                "counter",
                "Paid orders the worker delivered.",
                w.delivered.load(Relaxed),
            ),
            (
                "seckill_worker_lag_entries",
                "gauge",
                "Order events no worker has read yet, over every stream.",
                w.lag.load(Relaxed),
            ),
            (
                "seckill_worker_pending_entries",
                "gauge",
                "Order events read and not acknowledged yet.",
                w.pending.load(Relaxed),
            ),
            (
                "seckill_worker_undelivered_orders",
                "gauge",
                "Paid orders the worker could not deliver and keeps pending to try again.",
                w.undelivered.load(Relaxed),
            ),
            (
                "seckill_worker_delivery_failures_total",
                "counter",
                "Attempts to deliver a paid order that failed (code pool empty, order not deliverable).",
                w.delivery_failures.load(Relaxed),
            ),
        ] {
            header(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {v}");
        }
        header(
            &mut out,
            "seckill_worker_pay_to_delivered_seconds",
            "histogram",
            "Time from an order's payment to its delivery.",
        );
        let mut counts = [0u64; BUCKETS.len() + 1];
        let mut sum = 0;
        w.pay_to_delivered.add_to(&mut counts, &mut sum);
        histogram(
            &mut out,
            "seckill_worker_pay_to_delivered_seconds",
            "",
            &counts,
            sum,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_every_shard_add_up_in_the_exposition() {
        let m = Metrics::new("n1", 1_700_000_000_000, 2, true);
        let req = |s: usize, r, o, took| m.shards[s].request(r, o, took);
        req(
            0,
            Endpoint::Purchase,
            Outcome::Ok,
            Duration::from_micros(300),
        );
        req(1, Endpoint::Purchase, Outcome::Ok, Duration::from_millis(3));
        req(
            1,
            Endpoint::Purchase,
            Outcome::RateLimited,
            Duration::from_micros(50),
        );
        req(
            0,
            Endpoint::Other,
            Outcome::NotFound,
            Duration::from_micros(50),
        );
        if let Some(w) = &m.worker {
            w.delivered_after(Duration::from_millis(20));
        }
        let text = render(
            &m,
            &[CampaignGauges {
                id: "c1".into(),
                state: "live",
                total: 10,
                remaining: 4,
                held: 5,
                sold: 1,
                ..Default::default()
            }],
        );
        for line in [
            "seckill_http_requests_total{route=\"purchase\",outcome=\"ok\"} 2",
            "seckill_http_requests_total{route=\"purchase\",outcome=\"rate_limited\"} 1",
            "seckill_http_requests_total{route=\"other\",outcome=\"not_found\"} 1",
            "seckill_rate_limited_total 1",
            "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"0.0001\"} 1",
            "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"0.0005\"} 2",
            "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"+Inf\"} 3",
            "seckill_http_request_duration_seconds_count{route=\"purchase\"} 3",
            "seckill_campaign_remaining_units{campaign=\"c1\"} 4",
            "seckill_campaign_state{campaign=\"c1\",state=\"live\"} 1",
            "seckill_campaign_state{campaign=\"c1\",state=\"ended\"} 0",
            "seckill_worker_delivered_total 1",
            "seckill_worker_pay_to_delivered_seconds_bucket{le=\"0.025\"} 1",
            "seckill_redis_up{shard=\"1\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        // Every sample line is `name{labels} value` or `name value`, with a number.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let v = l.rsplit(' ').next().expect("a value");
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
    }

    #[test]
    fn build_and_process_metrics_are_exposed() {
        let text = render(&Metrics::new("n1", 0, 1, false), &[]);
        let version = env!("CARGO_PKG_VERSION");
        assert!(text.contains(&format!("seckill_build_info{{version=\"{version}\"}} 1\n")));
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            let v: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("missing {name}\n{text}"))
                .parse()
                .expect("a number");
            // A test process may not have used a whole clock tick of CPU yet.
            let least = if name == "process_cpu_seconds_total" {
                0.0
            } else {
                1.0
            };
            assert!(v >= least, "{name} {v}");
        }
    }

    #[test]
    fn process_figures_come_from_proc() {
        let stat = "4242 (a (odd) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 50 0 0 20 0 3 0 12300 1000000 500 18446744073709551615";
        let status = "Name:\tseckill\nVmRSS:\t   2048 kB\nThreads:\t3\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(
            Process::parse(stat, status, boot, 17),
            Some(Process {
                cpu_seconds: 3.0,
                resident_bytes: 2048 * 1024,
                open_fds: 17,
                start_time_seconds: 1_700_000_123.0,
            })
        );
        assert_eq!(Process::parse("garbage", status, boot, 1), None);
    }

    #[test]
    fn an_ended_campaign_leaves_after_its_ttl() {
        let m = Metrics::new("n1", 0, 1, false);
        let hour = 3_600_000;
        assert!(m.shows("c1", "live", 0, hour));
        assert!(m.shows("c1", "ended", 1_000, hour), "just ended");
        assert!(m.shows("c1", "ended", 1_000 + hour - 1, hour));
        assert!(
            !m.shows("c1", "ended", 1_000 + hour, hour),
            "gone after the ttl"
        );
        // Started again (a campaign reopened): shown, and its clock starts over.
        assert!(m.shows("c1", "live", 2 * hour, hour));
        assert!(m.shows("c1", "ended", 3 * hour, hour));
        assert!(!m.shows("c2", "ended", 0, 0), "a zero ttl hides at once");
        m.forget_except(&["c2"]);
        assert!(
            m.shows("c1", "ended", 10 * hour, hour),
            "forgotten, seen anew"
        );
    }
}
