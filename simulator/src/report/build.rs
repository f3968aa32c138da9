//! The report built from what the load threads saw: answers by persona, units won,
//! latency figures, the run's failures and its conditions broken.

use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashSet};

use seckill_core::campaign::format_instant_ms;
use seckill_core::ledger::Ledger;
use seckill_orders::reconcile;

use super::payments::{PaymentEvidence, Payments};
use super::{Bucket, Latency, QueueReport, Report, Second};
use crate::plan::Persona;
use crate::scenario::Scenario;
use crate::tally::{self, Tally};

/// What the books said once the run settled: the ledger, the reconciliation and the
/// waiting room's when there are, and Redis's side of the payments.
pub(crate) struct Settled {
    pub ledger: Ledger,
    pub reconciliation: Option<reconcile::Report>,
    pub queue: Option<QueueReport>,
    pub payments: PaymentEvidence,
}

/// The report of a run: what the load threads saw (`t`, and `before`: the tickets earned
/// before the sale), and what the books said once it settled.
pub(crate) fn build(
    s: &Scenario,
    campaign: String,
    (opens_ms, planned, elapsed): (i64, u64, f64),
    (t, before): (Tally, Tally),
    settled: Settled,
) -> Report {
    let Settled {
        ledger,
        reconciliation,
        queue,
        payments,
    } = settled;
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
    let provider = if s.webhook_secret_file.is_some() {
        "webhook"
    } else {
        "demo"
    };
    let payments = Payments::of(provider, &t.payments, payments);
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
            (&ledger, reconciliation.as_ref()),
            &t,
            &payments,
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
        payments,
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
/// reconciliation, which includes it), retries answered otherwise, units sold without a
/// payment answered `paid` and deliveries short of their licence keys, the scenario's
/// thresholds.
fn failures(
    s: &Scenario,
    (ledger, reconciliation): (&Ledger, Option<&reconcile::Report>),
    t: &Tally,
    payments: &Payments,
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
    let unpaid = &payments.unpaid_orders;
    if !unpaid.is_empty() {
        let shown: Vec<&str> = unpaid.iter().take(5).map(String::as_str).collect();
        failures.push(format!(
            "{} units sold without a payment answered paid: {}{}",
            unpaid.len(),
            shown.join(", "),
            if unpaid.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        ));
    }
    if payments.keys_short > 0 {
        failures.push(format!(
            "{} delivered orders without a licence key per unit",
            payments.keys_short
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary;

    fn scenario() -> Scenario {
        toml::from_str(
            r#"
target = "http://127.0.0.1:1"
redis = "redis://127.0.0.1:1"
duration_s = 1
[campaign]
id = "c"
[arrivals]
profile = "constant"
rate = 1
[population]
users = 1
[personas]
shopper = 1
"#,
        )
        .expect("a scenario")
    }

    /// The report of a run whose one payment, for `c.0.1`, was answered `paid`, when
    /// Redis has `sold` sold.
    fn report(sold: &[&str]) -> Report {
        let mut t = Tally::new();
        t.paid = 1;
        t.payments.sent = 1;
        t.payments.answered("c.0.1", "paid".into());
        let settled = Settled {
            ledger: Ledger::default(),
            reconciliation: None,
            queue: None,
            payments: PaymentEvidence {
                sold: sold.iter().map(|o| o.to_string()).collect(),
                recorded: Default::default(),
            },
        };
        build(
            &scenario(),
            "c".into(),
            (0, 0, 1.0),
            (t, Tally::new()),
            settled,
        )
    }

    #[test]
    fn a_unit_sold_without_a_payment_answered_paid_fails_the_run() {
        let r = report(&["c.0.1"]);
        assert!(r.passed(), "{:?}", r.failures);
        assert_eq!(r.metric("unpaid_units"), 0.0);
        let r = report(&["c.0.1", "c.0.2"]);
        assert_eq!(r.payments.unpaid_orders, vec!["c.0.2".to_string()]);
        assert_eq!(r.metric("unpaid_units"), 1.0);
        assert_eq!(
            r.failures,
            vec!["1 units sold without a payment answered paid: c.0.2".to_string()]
        );
        assert!(summary(&r).contains("verdict: FAIL: 1 units sold without a payment"));
    }
}
