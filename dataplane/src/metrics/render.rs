//! The Prometheus text exposition: one function per family of metrics, written in the
//! order a scrape shows them (the node, its HTTP answers, its Redis link, the campaigns'
//! stock, the waiting rooms, the reconciliations, the order worker).

use super::text::{header, histogram, histogram_of, label};
use super::{
    CampaignGauges, Metrics, Process, ShardMetrics, WorkerMetrics, CAMPAIGN_STATES, WAIT_BUCKETS,
};
use crate::answer::{Endpoint, Outcome};
use seckill_core::histo::BUCKETS;
use seckill_core::protocol::QueueProgress;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

/// The Prometheus text exposition of the node's counters and the campaigns' stock.
pub fn render(m: &Metrics, campaigns: &[CampaignGauges]) -> String {
    let mut out = String::with_capacity(16 * 1024);
    node(&mut out, m);
    if let Some(p) = Process::read() {
        process(&mut out, &p);
    }
    clock(&mut out);
    http(&mut out, &m.shards);
    redis(&mut out, &m.shards);
    campaign_stock(&mut out, campaigns);
    queue(&mut out, &m.shards, campaigns);
    reconcile(&mut out, campaigns);
    if let Some(w) = &m.worker {
        worker(&mut out, w);
    }
    out
}

/// The node's name and shards, its start, its build.
fn node(out: &mut String, m: &Metrics) {
    let node = label(&m.node);
    header(
        out,
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
        out,
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
        out,
        "seckill_build_info",
        "gauge",
        "The running build: its version.",
    );
    let _ = writeln!(
        out,
        "seckill_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
}

/// The `process_*` family every Prometheus client exports.
fn process(out: &mut String, p: &Process) {
    for (name, kind, help, v) in [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            p.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            p.resident_bytes as f64,
        ),
        (
            "process_open_fds",
            "gauge",
            "Open file descriptors.",
            p.open_fds as f64,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "When the process started, in seconds since the Unix epoch.",
            p.start_time_seconds,
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
}

/// The offset of Redis's clock. The header always, the value once measured: an alert on
/// the offset names a metric every node declares.
fn clock(out: &mut String) {
    header(
        out,
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
}

/// Answers by route and outcome, the refusals among them, and their latency.
fn http(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>]) {
    header(
        out,
        "seckill_http_requests_total",
        "counter",
        "Answers by route and outcome (ok, or the error code of the JSON body).",
    );
    let mut by_outcome = [0u64; Outcome::ALL.len()];
    for route in Endpoint::ALL {
        for outcome in Outcome::ALL {
            let n: u64 = shards
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
        header(out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", by_outcome[outcome.index()]);
    }

    header(
        out,
        "seckill_http_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its answer, by route.",
    );
    for route in Endpoint::ALL {
        let mut counts = [0u64; BUCKETS.len() + 1];
        let mut sum = 0;
        for s in shards {
            s.latency[route.index()].add_to(&mut counts, &mut sum);
        }
        if counts.iter().any(|c| *c > 0) {
            histogram(
                out,
                "seckill_http_request_duration_seconds",
                &format!("route=\"{}\"", route.name()),
                &counts,
                sum,
            );
        }
    }
}

/// The shards' Redis link: round trips, purchase calls, and each shard's link and breaker.
fn redis(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>]) {
    header(
        out,
        "seckill_redis_round_trip_seconds",
        "histogram",
        "Round trip of the shards' Redis commands, queueing included.",
    );
    let mut counts = [0u64; BUCKETS.len() + 1];
    let mut sum = 0;
    for s in shards {
        s.redis.add_to(&mut counts, &mut sum);
    }
    histogram(out, "seckill_redis_round_trip_seconds", "", &counts, sum);
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
        header(out, name, "counter", help);
        let _ = writeln!(
            out,
            "{name} {}",
            shards.iter().map(|s| pick(s)).sum::<u64>()
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
        header(out, name, "gauge", help);
        for (i, s) in shards.iter().enumerate() {
            let _ = writeln!(out, "{name}{{shard=\"{i}\"}} {}", u8::from(pick(s)));
        }
    }
}

/// Each campaign's units, where they are, whether the ledger holds, and its state.
fn campaign_stock(out: &mut String, campaigns: &[CampaignGauges]) {
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
        header(out, name, "gauge", help);
        for c in campaigns {
            let _ = writeln!(out, "{name}{{campaign=\"{}\"}} {}", label(&c.id), pick(c));
        }
    }
    header(
        out,
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
}

/// The waiting rooms' counters, and how long the shoppers this node let through waited.
fn queue(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>], campaigns: &[CampaignGauges]) {
    for (name, help, pick) in [
        (
            "seckill_queue_waiting",
            "Shoppers in the waiting room not let through yet.",
            (|q: &QueueProgress| q.waiting()) as fn(&QueueProgress) -> u64,
        ),
        (
            "seckill_queue_admitted",
            "Shoppers the waiting room has let through, since it opened.",
            |q| q.admitted,
        ),
        (
            "seckill_queue_passes_outstanding",
            "Passes given and neither used nor expired: each reserves a unit.",
            |q| q.outstanding,
        ),
        (
            "seckill_queue_passes_used",
            "Passes used to buy, since the room opened.",
            |q| q.used,
        ),
        (
            "seckill_queue_passes_expired",
            "Passes that ran out unused (their units went to the next in line).",
            |q| q.expired,
        ),
        (
            "seckill_queue_admit_per_second",
            "The waiting room's admission rate.",
            |q| u64::from(q.admit_per_s),
        ),
    ] {
        header(out, name, "gauge", help);
        for c in campaigns {
            if let Some(q) = &c.queue {
                let _ = writeln!(out, "{name}{{campaign=\"{}\"}} {}", label(&c.id), pick(q));
            }
        }
    }
    header(
        out,
        "seckill_queue_wait_seconds",
        "histogram",
        "How long the shoppers this node let through had waited in line (the pre-queue counts from the opening).",
    );
    let mut counts = [0u64; WAIT_BUCKETS.len() + 1];
    let mut sum_ms = 0u64;
    for s in shards {
        for (c, a) in counts.iter_mut().zip(&s.queue_wait.counts) {
            *c += a.load(Relaxed);
        }
        sum_ms += s.queue_wait.sum_ms.load(Relaxed);
    }
    histogram_of(
        out,
        "seckill_queue_wait_seconds",
        "",
        &WAIT_BUCKETS,
        &counts,
        sum_ms as f64 / 1000.0,
    );
}

/// Each campaign's last reconciliation: its violations and when it ran.
fn reconcile(out: &mut String, campaigns: &[CampaignGauges]) {
    header(
        out,
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
        out,
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
}

/// The in-process order worker: what it stored and delivered, and what it still owes.
fn worker(out: &mut String, w: &WorkerMetrics) {
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
        (
            "seckill_refunds_due",
            "gauge",
            "Payments owed back (paid after the hold expired, or a second time), as the worker's store knows them.",
            w.refunds_due.load(Relaxed),
        ),
        (
            "seckill_shop_webhooks_sent_total",
            "counter",
            "Webhooks the shop took (answered 2xx).",
            w.shop.sent.load(Relaxed),
        ),
        (
            "seckill_shop_webhooks_failures_total",
            "counter",
            "Tries the shop did not take (down, slow, 408, 429 or 5xx): tried again later.",
            w.shop.failures.load(Relaxed),
        ),
        (
            "seckill_shop_webhooks_backlog",
            "gauge",
            "Webhooks waiting for the shop to take them (the outbox, fleet-wide).",
            w.shop.backlog.load(Relaxed),
        ),
        (
            "seckill_shop_webhooks_dead_letters",
            "gauge",
            "Webhooks the shop refused for good (4xx), kept until replayed.",
            w.shop.dead.load(Relaxed),
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    header(
        out,
        "seckill_worker_pay_to_delivered_seconds",
        "histogram",
        "Time from an order's payment to its delivery.",
    );
    let mut counts = [0u64; BUCKETS.len() + 1];
    let mut sum = 0;
    w.pay_to_delivered.add_to(&mut counts, &mut sum);
    histogram(
        out,
        "seckill_worker_pay_to_delivered_seconds",
        "",
        &counts,
        sum,
    );
}
