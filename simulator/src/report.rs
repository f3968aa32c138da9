//! What a run found: the report's figures, the text summary, and the value of each
//! metric a `--fail-on` condition may name.

use serde::Serialize;
use std::collections::BTreeMap;

use seckill_core::ledger::Ledger;
use seckill_orders::reconcile;

use crate::engine;
use crate::scenario::Scenario;
use crate::verdict::{self, Condition};

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
    /// Purchases planned per second over the run, and answered per second.
    pub offered_per_s: f64,
    pub achieved_per_s: f64,
    pub planned: u64,
    /// Every request sent during the sale: purchases, retries, payments, order views
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
    pub paid: u64,
    /// Paid orders their buyers saw delivered, and downloads that succeeded.
    pub delivered: u64,
    pub downloaded: u64,
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
    pub failures: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Second {
    pub second: usize,
    pub answered: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
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
            "sold_before_opening" => r.sold_before_opening as f64,
            "achieved_ratio" => r.achieved_per_s / r.offered_per_s.max(f64::MIN_POSITIVE),
            _ => f64::NAN,
        }
    }

    /// The conditions this report breaks, each with the value it had.
    pub fn broken(&self, conditions: &[Condition]) -> Vec<String> {
        verdict::broken(conditions, |m| self.metric(m))
    }
}

pub fn summary(r: &Report) -> String {
    let mut out = String::new();
    out += &format!(
        "campaign {} (sale opened {}), {:.0} s, {} purchases planned\n",
        r.campaign, r.sale_opens, r.scenario.duration_s, r.planned
    );
    out += &format!(
        "offered {:.0}/s, answered {:.0}/s, {} requests in all ({} unanswered, {} never sent); the simulator's own send lag: p99 {:.2} ms, max {:.2}\n",
        r.offered_per_s, r.achieved_per_s, r.requests, r.unanswered, r.unsent, r.send_lag.p99_ms, r.send_lag.max_ms
    );
    out += "latency, ms   requests      p50      p90      p99    p99.9      max\n";
    let routes = engine::ROUTES
        .iter()
        .filter_map(|k| r.route_latency.get(*k).map(|l| (k, l)));
    for (route, l) in routes {
        out += &format!(
            "  {route:<10} {:>9} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}\n",
            l.count, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
        );
    }
    out += "  (purchase: from the planned send; delivered: from the payment's answer)\n";
    out += "outcomes:\n";
    for (persona, outcomes) in &r.outcomes {
        for (o, n) in outcomes {
            out += &format!("  {persona:<11} {o:<28} {n:>9}\n");
        }
    }
    out += &format!(
        "units won: {} by people, {} by bots {:?}\n",
        r.units_to_people, r.units_to_bots, r.units_won
    );
    out += &format!(
        "buyers: {} paid, {} saw their order delivered, {} downloaded it\n",
        r.paid, r.delivered, r.downloaded
    );
    if r.scenario.campaign.scheduled {
        out += &format!(
            "opening: {} sold before it; first sale after it, ms: {:?}\n",
            r.sold_before_opening, r.first_sale_after_opening_ms
        );
    }
    out += &format!("ledger: {}\n", r.ledger);
    if let Some(rec) = &r.reconciliation {
        out += &format!(
            "reconciliation with {}: orders {:?} in Redis, {:?} stored; missing {}, undelivered {}, delivered twice {}, codes reused {}; streams: {} pending, {} unread\n",
            rec.stores.join(", "),
            rec.orders_in_redis,
            rec.orders_in_stores,
            rec.missing.len(),
            rec.undelivered.len(),
            rec.delivered_twice.len(),
            rec.codes_reused.len(),
            rec.streams.pending,
            rec.streams.lag,
        );
    }
    if r.passed() {
        out += "verdict: PASS\n";
    } else {
        out += &format!("verdict: FAIL: {}\n", r.failures.join("; "));
    }
    out
}
