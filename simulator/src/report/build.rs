//! The report built from what the load threads saw: answers by persona, units won,
//! latency figures, the run's failures and its conditions broken.

use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashSet};

use seckill_core::campaign::format_instant_ms;
use seckill_core::ledger::Ledger;
use seckill_orders::reconcile;

use super::{Bucket, Latency, QueueReport, Report, Second};
use crate::plan::Persona;
use crate::scenario::Scenario;
use crate::tally::{self, Tally};

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
    let outcomes = outcomes_by_persona(&t);
    let units_won = units_won(&t);
    let (people, bots) = people_and_bots(&units_won);
    let answered = answered(&t);
    let requests = t.requests();
    let mut all = before;
    all.merge(t);
    let t = all;
    t.check_books();
    let purchases = t.routes.get("purchase");
    let purchase_latency = purchases.map_or_else(|| Latency::of(&tally::histogram()), Latency::of);
    let mut r = Report {
        steady_purchase_latency: steady_latency(s, &t),
        over_time: over_time(&t),
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
        route_latency: tally::ROUTES
            .iter()
            .filter_map(|r| t.routes.get(r).map(|h| (r.to_string(), Latency::of(h))))
            .collect(),
        purchase_latency_by_outcome: t
            .purchase_by_outcome
            .iter()
            .map(|(o, h)| (o.clone(), Latency::of(h)))
            .collect(),
        send_lag: Latency::of(&t.send_lag_us),
        failures: failures(
            s,
            &ledger,
            reconciliation.as_ref(),
            &t,
            &purchase_latency,
            bots,
        ),
        purchase_latency,
        purchase_latency_distribution: purchases.map(distribution).unwrap_or_default(),
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
    };
    let conditions = s
        .thresholds
        .fail_on
        .as_deref()
        .map(crate::verdict::parse)
        .transpose()
        .unwrap_or_default()
        .unwrap_or_default();
    let broken = r.broken(&conditions);
    r.failures.extend(broken);
    r
}

/// Purchase answers per persona: outcome → count.
fn outcomes_by_persona(t: &Tally) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut outcomes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for ((p, o), n) in &t.outcomes {
        *outcomes
            .entry(p.name().into())
            .or_default()
            .entry(o.clone())
            .or_default() += n;
    }
    outcomes
}

/// Units won by persona: each order held counts once, however often its buyer saw it.
fn units_won(t: &Tally) -> BTreeMap<String, u64> {
    let mut units_won: BTreeMap<String, u64> = BTreeMap::new();
    let mut orders = HashSet::new();
    for (p, _, order) in &t.held {
        if orders.insert(order.clone()) {
            *units_won.entry(p.name().into()).or_default() += 1;
        }
    }
    units_won
}

/// The units won by people and by bots.
fn people_and_bots(units_won: &BTreeMap<String, u64>) -> (u64, u64) {
    let bots: u64 = Persona::ALL
        .iter()
        .filter(|p| p.is_bot())
        .map(|p| units_won.get(p.name()).copied().unwrap_or(0))
        .sum();
    let people = units_won.get(Persona::Shopper.name()).copied().unwrap_or(0);
    // Every persona is a person or a bot: the two shares make up every unit won.
    assert_eq!(
        people + bots,
        units_won.values().sum::<u64>(),
        "units won by people and bots against units won"
    );
    (people, bots)
}

/// Sessions that ended with an HTTP answer.
fn answered(t: &Tally) -> u64 {
    t.outcomes
        .iter()
        .filter(|((_, o), _)| !o.starts_with("error"))
        .map(|(_, n)| n)
        .sum()
}

/// What failed the run, besides its `--fail-on` conditions: the ledger (or the
/// reconciliation, which includes it), retries answered otherwise, the scenario's
/// thresholds.
fn failures(
    s: &Scenario,
    ledger: &Ledger,
    reconciliation: Option<&reconcile::Report>,
    t: &Tally,
    purchase_latency: &Latency,
    bots: u64,
) -> Vec<String> {
    let mut failures = Vec::new();
    match reconciliation {
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
    failures
}

/// Second by second (planned send time): purchases answered, by outcome, and their
/// percentiles.
fn over_time(t: &Tally) -> Vec<Second> {
    t.per_second
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
        .collect()
}

/// The sale's steady state: purchases planned from the end of the ramp on.
fn steady_latency(s: &Scenario, t: &Tally) -> Latency {
    let steady_from = (s.campaign.starts_in_s + s.arrivals.ramp_s).ceil() as usize;
    let mut steady = tally::histogram();
    for h in t.per_second.iter().skip(steady_from) {
        let _ = steady.add(h);
    }
    Latency::of(&steady)
}

/// Purchase latency in buckets that double from 0.25 ms, the last one holding the slowest.
fn distribution(h: &Histogram<u64>) -> Vec<Bucket> {
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
