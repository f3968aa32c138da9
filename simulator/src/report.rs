//! What a run found: the report built from what the load saw, its figures, the text
//! summary, and the value of each metric a `--fail-on` condition may name.

use serde::Serialize;
use std::collections::BTreeMap;

use seckill_core::ledger::Ledger;
use seckill_orders::reconcile;

use crate::engine::{self, Tally};
use crate::fairness::Fairness;
use crate::plan::Persona;
use crate::scenario::Scenario;
use crate::verdict::{self, Condition};
use seckill_core::campaign::format_instant_ms;
use seckill_core::protocol::QueueProgress;

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

impl QueueReport {
    pub fn text(&self) -> String {
        let r = &self.room;
        let mut out = format!(
            "waiting room: {} joined before the opening, {} in line in all; {} passes given, {} used, {} expired\n",
            r.pre, r.line, r.admitted, r.used, r.expired
        );
        out += &match &self.draw {
            Some(d) => format!(
                "draw: {}: {} of {} ranks checked against the seed{}{}\n",
                if d.fair { "fair" } else { "NOT FAIR" },
                d.checked,
                d.drawn,
                if d.seed_matches_commitment {
                    ""
                } else {
                    "; the seed is not the one committed to"
                },
                if d.mismatched + d.out_of_order > 0 {
                    format!(
                        "; {} ranks mismatched, {} admitted out of order",
                        d.mismatched, d.out_of_order
                    )
                } else {
                    String::new()
                },
            ),
            None => "draw: not drawn\n".into(),
        };
        out += &self.fairness.text();
        out
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

/// Purchase latency in buckets that double from 0.25 ms, the last one holding the slowest.
fn distribution(h: &hdrhistogram::Histogram<u64>) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_log(250, 2.0)
        .map(|v| Bucket {
            up_to_ms: v.value_iterated_to() as f64 / 1000.0,
            count: v.count_since_last_iteration(),
        })
        .collect()
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

/// The report of a run: what the load threads saw (`t`, and `before`: the tickets earned
/// before the sale), the ledger, and the reconciliation and the waiting room's, when
/// there are.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    s: &Scenario,
    campaign: String,
    opens_ms: i64,
    planned: u64,
    elapsed: f64,
    (t, before): (Tally, Tally),
    ledger: Ledger,
    reconciliation: Option<reconcile::Report>,
    queue: Option<QueueReport>,
) -> Report {
    let mut outcomes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for ((p, o), n) in &t.outcomes {
        *outcomes
            .entry(p.name().into())
            .or_default()
            .entry(o.clone())
            .or_default() += n;
    }
    let mut units_won: BTreeMap<String, u64> = BTreeMap::new();
    let mut orders = std::collections::HashSet::new();
    for (p, _, order) in &t.held {
        if orders.insert(order.clone()) {
            *units_won.entry(p.name().into()).or_default() += 1;
        }
    }
    let bots: u64 = Persona::ALL
        .iter()
        .filter(|p| p.is_bot())
        .map(|p| units_won.get(p.name()).copied().unwrap_or(0))
        .sum();
    let people = units_won.get(Persona::Shopper.name()).copied().unwrap_or(0);
    let answered: u64 = t
        .outcomes
        .iter()
        .filter(|((_, o), _)| !o.starts_with("error"))
        .map(|(_, n)| n)
        .sum();
    let requests = t.requests();
    let mut all = before;
    all.merge(t);
    let t = all;
    let purchase_latency = t
        .routes
        .get("purchase")
        .map(Latency::of)
        .unwrap_or_else(|| Latency::of(&engine::histogram()));
    let purchase_latency_distribution = t
        .routes
        .get("purchase")
        .map(distribution)
        .unwrap_or_default();
    let route_latency = engine::ROUTES
        .iter()
        .filter_map(|r| t.routes.get(r).map(|h| (r.to_string(), Latency::of(h))))
        .collect();
    let mut failures = Vec::new();
    match &reconciliation {
        Some(rec) if !rec.holds() => {
            failures.push(format!("reconciliation: {}", rec.violations.join("; ")))
        }
        None if !ledger.holds() => {
            failures.push(format!("ledger: {}", ledger.violations.join("; ")))
        }
        _ => {}
    }
    if t.retry_mismatches > 0 {
        failures.push(format!(
            "{} retries did not get their first answer",
            t.retry_mismatches
        ));
    }
    if let Some(max) = s.thresholds.p99_ms {
        if purchase_latency.p99_ms > max {
            failures.push(format!(
                "p99 purchase latency {:.1} ms above {max} ms",
                purchase_latency.p99_ms
            ));
        }
    }
    if let Some(max) = s.thresholds.max_bot_units {
        if bots > max {
            failures.push(format!("bots won {bots} units, more than {max}"));
        }
    }
    let conditions = s
        .thresholds
        .fail_on
        .as_deref()
        .map(crate::verdict::parse)
        .transpose()
        .unwrap_or_default()
        .unwrap_or_default();
    let over_time = t
        .per_second
        .iter()
        .enumerate()
        .map(|(second, h)| Second {
            second,
            answered: h.len(),
            outcomes: t
                .per_second_outcomes
                .get(second)
                .cloned()
                .unwrap_or_default(),
            p50_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
            p90_ms: h.value_at_quantile(0.9) as f64 / 1000.0,
            p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
        })
        .collect();
    // The sale's steady state: purchases planned from the end of the ramp on.
    let steady_from = (s.campaign.starts_in_s + s.arrivals.ramp_s).ceil() as usize;
    let mut steady = engine::histogram();
    for h in t.per_second.iter().skip(steady_from) {
        let _ = steady.add(h);
    }
    let mut r = Report {
        steady_purchase_latency: Latency::of(&steady),
        over_time,
        scenario: s.clone(),
        campaign,
        sale_opens: format_instant_ms(opens_ms),
        offered_per_s: planned as f64 / s.duration_s,
        achieved_per_s: answered as f64 / elapsed,
        planned,
        requests,
        requests_by_route: t.sent.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        unanswered: t.failed,
        unsent: t.unsent,
        outcomes,
        route_latency,
        purchase_latency_by_outcome: t
            .purchase_by_outcome
            .iter()
            .map(|(o, h)| (o.clone(), Latency::of(h)))
            .collect(),
        send_lag: Latency::of(&t.send_lag_us),
        purchase_latency,
        purchase_latency_distribution,
        units_won,
        units_to_people: people,
        units_to_bots: bots,
        paid: t.paid,
        delivered: t.delivered,
        downloaded: t.downloaded,
        retry_mismatches: t.retry_mismatches,
        sold_before_opening: t.sold_before_opening,
        first_sale_after_opening_ms: t
            .first_sale_ms
            .iter()
            .filter_map(|(i, at)| Some((s.targets().get(*i)?.to_string(), at - opens_ms)))
            .collect(),
        ledger,
        reconciliation,
        queue,
        failures,
    };
    let broken = r.broken(&conditions);
    r.failures.extend(broken);
    r
}

pub fn summary(r: &Report) -> String {
    let mut out = String::new();
    let planned = if r.queue.is_some() {
        "sessions through the waiting room planned"
    } else {
        "purchases planned"
    };
    out += &format!(
        "campaign {} (sale opened {}), {:.0} s, {} {planned}\n",
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
    if let Some(q) = &r.queue {
        out += &q.text();
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
