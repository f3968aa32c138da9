//! What a run found: the report's figures, and the value of each metric a `--fail-on`
//! condition may name; built from what the load saw in [`build`], told as text in
//! [`summary`]; the buyers' payments in [`payments`].

use serde::Serialize;
use std::collections::BTreeMap;

use seckill_core::ledger::Ledger;
use seckill_orders::reconcile;

use crate::fairness::Fairness;
use crate::scenario::Scenario;
use crate::verdict::{self, Condition};
use seckill_core::protocol::QueueProgress;

mod build;
pub mod payments;
mod summary;

pub(crate) use build::{build, Settled};
pub use payments::{PaymentEvidence, Payments};
pub use summary::summary;

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub count: u64,
}

impl Latency {
    pub(crate) fn of(h: &hdrhistogram::Histogram<u64>) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        Latency {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            count: h.len(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub campaign: String,
    pub sale_opens: String,
    /// Purchases planned per second over the run, and answered per second (in a queued
    /// sale: sessions planned, and sessions that ended with an answer).
    pub offered_per_s: f64,
    pub achieved_per_s: f64,
    /// Purchases planned; in a queued sale, sessions through the waiting room.
    pub planned: u64,
    /// Every request sent during the sale: joins and looks, purchases, retries, payments, order views
    /// and downloads (the challenges and tickets before it are in `requests_by_route`).
    pub requests: u64,
    pub requests_by_route: BTreeMap<String, u64>,
    /// Requests that got no HTTP answer (connect, transport, protocol, or given up).
    pub unanswered: u64,
    /// Planned purchases never sent: the simulator was still behind the plan when the
    /// grace period after it ended.
    pub unsent: u64,
    /// Purchase answers per persona: outcome → count.
    pub outcomes: BTreeMap<String, BTreeMap<String, u64>>,
    /// Purchases, from their planned instant (the headline figure).
    pub purchase_latency: Latency,
    /// Purchases planned once the ramp after the opening is over (the steady state, without
    /// the opening's burst of new connections), from the planned instant.
    pub steady_purchase_latency: Latency,
    /// Purchases in latency buckets, from the planned instant (the shape behind the
    /// percentiles).
    pub purchase_latency_distribution: Vec<Bucket>,
    /// Purchases by outcome (status and error code), from the planned instant: whether
    /// refusals stay fast when the node cannot reach Redis.
    pub purchase_latency_by_outcome: BTreeMap<String, Latency>,
    /// Every route, from when each request was sent; "purchase" from the planned
    /// instant; "delivered" from a payment's answer to the buyer seeing the order
    /// delivered (the buyer looks 10, 30, 70, 150 … ms after paying, then every 500 ms).
    pub route_latency: BTreeMap<String, Latency>,
    /// How late requests left compared with the plan (the simulator's own lag).
    pub send_lag: Latency,
    /// Units won: by persona.
    pub units_won: BTreeMap<String, u64>,
    pub units_to_people: u64,
    pub units_to_bots: u64,
    /// Orders whose payment was answered `paid`.
    pub paid: u64,
    /// Paid orders their buyers saw delivered, and downloads that succeeded.
    pub delivered: u64,
    pub downloaded: u64,
    /// The buyers' payments: what the node answered, what the orders said after, what the
    /// nodes recorded, and any unit sold without a payment answered `paid`.
    pub payments: Payments,
    pub retry_mismatches: u64,
    /// Purchases answered 200 before the sale opened (on Redis's clock), when the run
    /// opened it.
    pub sold_before_opening: u64,
    /// By target: the first purchase answered 200, in ms after the opening.
    pub first_sale_after_opening_ms: BTreeMap<String, i64>,
    pub ledger: Ledger,
    /// Redis, the order streams and the order stores compared, when stores are given.
    pub reconciliation: Option<reconcile::Report>,
    /// Second by second (planned send time): purchases answered and their p99.
    pub over_time: Vec<Second>,
    /// A sale through a waiting room: the room at the end and its fairness table.
    pub queue: Option<QueueReport>,
    pub failures: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    /// The room's counters in Redis at the end of the run.
    pub room: QueueProgress,
    /// The draw checked against its seed, once drawn.
    pub draw: Option<DrawCheck>,
    pub fairness: Fairness,
}

/// `campaign audit-draw`'s findings: every pre-queue joiner's rank is the seed's, the
/// seed is the one committed to, and the admissions followed the draw.
#[derive(Debug, Clone, Serialize)]
pub struct DrawCheck {
    pub fair: bool,
    pub seed_matches_commitment: bool,
    pub checked: u64,
    pub drawn: u64,
    pub mismatched: usize,
    pub out_of_order: usize,
}

impl DrawCheck {
    pub fn of(a: &seckill_core::control::DrawAudit) -> DrawCheck {
        DrawCheck {
            fair: a.fair(),
            seed_matches_commitment: a.seed_matches_commitment,
            checked: a.checked,
            drawn: a.drawn,
            mismatched: a.mismatched.len(),
            out_of_order: a.out_of_order.len(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Second {
    pub second: usize,
    pub answered: u64,
    /// Purchases answered this second, by outcome (status and error code).
    pub outcomes: BTreeMap<String, u64>,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
}

/// One bar of the purchase latency distribution: answers slower than the bar before and
/// no slower than `up_to_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub up_to_ms: f64,
    pub count: u64,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The fairness table of a queued sale.
    pub fn fairness(&self) -> Option<&Fairness> {
        self.queue.as_ref().map(|q| &q.fairness)
    }

    /// The value of a `--fail-on` metric (see [`verdict::METRICS`]).
    pub fn metric(&self, metric: &str) -> f64 {
        let r = self;
        let l = &r.purchase_latency;
        match metric {
            "p50" => l.p50_ms,
            "p90" => l.p90_ms,
            "p99" => l.p99_ms,
            "p999" => l.p999_ms,
            "max" => l.max_ms,
            "bot_wins" => r.units_to_bots as f64,
            "oversell" => (r.ledger.held + r.ledger.sold - r.ledger.total).max(0) as f64,
            "violations" => r
                .reconciliation
                .as_ref()
                .map_or(&r.ledger.violations, |rec| &rec.violations)
                .len() as f64,
            "unanswered" => r.unanswered as f64,
            "missing" => r.reconciliation.as_ref().map_or(0, |rec| rec.missing.len()) as f64,
            "undelivered" => r
                .reconciliation
                .as_ref()
                .map_or(0, |rec| rec.undelivered.len()) as f64,
            "delivered_twice" => r
                .reconciliation
                .as_ref()
                .map_or(0, |rec| rec.delivered_twice.len()) as f64,
            "errors" => r
                .outcomes
                .values()
                .flat_map(|o| o.iter())
                .filter(|(o, _)| o.starts_with("error"))
                .map(|(_, n)| *n as f64)
                .sum(),
            "retry_mismatches" => r.retry_mismatches as f64,
            "unpaid_units" => r.payments.unpaid_orders.len() as f64,
            "refunds_due" => r.payments.refunds_due as f64,
            "payment_mismatches" => r.payments.mismatches as f64,
            "sold_before_opening" => r.sold_before_opening as f64,
            "achieved_ratio" => r.achieved_per_s / r.offered_per_s.max(f64::MIN_POSITIVE),
            "join_p" => r
                .fairness()
                .map_or(f64::NAN, |f| f.by_join_time.test.p_value),
            "poll_p" => r.fairness().map_or(f64::NAN, |f| f.by_polling.test.p_value),
            "bot_p" => r.fairness().map_or(f64::NAN, |f| f.bots.test.p_value),
            _ => f64::NAN,
        }
    }

    /// The conditions this report breaks, each with the value it had.
    pub fn broken(&self, conditions: &[Condition]) -> Vec<String> {
        verdict::broken(conditions, |m| self.metric(m))
    }
}
