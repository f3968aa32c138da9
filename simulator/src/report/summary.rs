//! The report as text: the run's summary, and the waiting room's lines.

use super::{QueueReport, Report};
use crate::tally;

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
    let routes = tally::ROUTES
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
    out += &r.payments.text();
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
