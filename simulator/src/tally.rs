//! What the load saw, counted per thread and merged: answers by persona and outcome,
//! latency by route and by second, the orders held, paid and delivered, the payments and
//! what the node answered them, and the sessions the waiting room let join.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::plan::Persona;

/// The routes whose latency the report shows, in the order of a shopper's flow.
pub const ROUTES: [&str; 12] = [
    "challenge",
    "ticket",
    "join",
    "look",
    "purchase",
    "retry",
    "resend",
    "pay",
    "pay copy",
    "order",
    "delivered",
    "download",
];

/// What one thread saw.
#[derive(Debug)]
pub struct Tally {
    /// (persona, outcome) → count; outcome is the status and error code.
    pub outcomes: BTreeMap<(Persona, String), u64>,
    /// Latency by route, µs: purchases from their planned instant, the rest from when
    /// they were sent; "delivered" is from the payment's answer to the first view of the
    /// order as delivered (views 10, 30, 70, 150 … ms after it, then every 500 ms).
    pub routes: BTreeMap<&'static str, Histogram<u64>>,
    /// Purchase latency by outcome (status and error code), µs from the planned instant.
    pub purchase_by_outcome: BTreeMap<String, Histogram<u64>>,
    /// How late the thread sent requests compared with the plan, µs.
    pub send_lag_us: Histogram<u64>,
    /// Orders held, by persona and user (to see who won the units).
    pub held: Vec<(Persona, usize, String)>,
    /// In a queued sale: the sessions the waiting room let join.
    pub joined: Vec<Joined>,
    /// Orders paid: their payment was answered `paid`.
    pub paid: u64,
    pub payments: PaymentBook,
    /// Paid orders seen delivered by their buyer, and downloads that succeeded.
    pub delivered: u64,
    pub downloaded: u64,
    /// Retries that got an answer other than their first.
    pub retry_mismatches: u64,
    /// Purchases answered 200 before the opening, by this machine's clock.
    pub sold_before_opening: u64,
    /// By target index: when its first purchase was answered 200, ms since the epoch.
    pub first_sale_ms: BTreeMap<usize, i64>,
    /// Every request sent, by route.
    pub sent: BTreeMap<&'static str, u64>,
    /// Requests that got no HTTP answer.
    pub failed: u64,
    /// Planned purchases never sent: the thread was still behind the plan when the
    /// run's grace period ended.
    pub unsent: u64,
    /// When the last purchase answer came, from the start of the run.
    pub last_answer: Duration,
    /// Per second of the run (by planned send time): purchases answered and their
    /// latency, µs.
    pub per_second: Vec<Histogram<u64>>,
    /// Per second of the run (by planned send time): purchases answered by outcome.
    pub per_second_outcomes: Vec<BTreeMap<String, u64>>,
    /// Every purchase answered, when [`crate::context::Context::trace`] is set.
    pub trace: Vec<Traced>,
}

/// One purchase of a traced run.
#[derive(Debug, Clone)]
pub struct Traced {
    /// The instant its latency is measured from (when it was planned; through a waiting
    /// room, when it was sent), from the start of the run.
    pub planned: Duration,
    /// Its latency from then, µs.
    pub took_us: u64,
    /// Its answer's status and error code, or why there was none.
    pub outcome: String,
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    pub fn new() -> Self {
        Tally {
            outcomes: BTreeMap::new(),
            routes: BTreeMap::new(),
            purchase_by_outcome: BTreeMap::new(),
            send_lag_us: histogram(),
            held: Vec::new(),
            joined: Vec::new(),
            paid: 0,
            payments: PaymentBook::default(),
            delivered: 0,
            downloaded: 0,
            retry_mismatches: 0,
            sold_before_opening: 0,
            first_sale_ms: BTreeMap::new(),
            sent: BTreeMap::new(),
            failed: 0,
            unsent: 0,
            last_answer: Duration::ZERO,
            per_second: Vec::new(),
            per_second_outcomes: Vec::new(),
            trace: Vec::new(),
        }
    }

    pub fn merge(&mut self, o: Tally) {
        for (k, v) in o.outcomes {
            *self.outcomes.entry(k).or_default() += v;
        }
        for (route, h) in o.routes {
            let _ = self.routes.entry(route).or_insert_with(histogram).add(&h);
        }
        for (outcome, h) in o.purchase_by_outcome {
            let _ = self
                .purchase_by_outcome
                .entry(outcome)
                .or_insert_with(histogram)
                .add(&h);
        }
        let _ = self.send_lag_us.add(&o.send_lag_us);
        self.held.extend(o.held);
        self.joined.extend(o.joined);
        self.paid += o.paid;
        self.payments.merge(o.payments);
        self.delivered += o.delivered;
        self.downloaded += o.downloaded;
        self.retry_mismatches += o.retry_mismatches;
        self.sold_before_opening += o.sold_before_opening;
        for (target, at) in o.first_sale_ms {
            let mine = self.first_sale_ms.entry(target).or_insert(at);
            *mine = (*mine).min(at);
        }
        for (route, n) in o.sent {
            *self.sent.entry(route).or_default() += n;
        }
        self.failed += o.failed;
        self.unsent += o.unsent;
        self.last_answer = self.last_answer.max(o.last_answer);
        self.trace.extend(o.trace);
        for (i, h) in o.per_second.into_iter().enumerate() {
            match self.per_second.get_mut(i) {
                Some(mine) => {
                    let _ = mine.add(&h);
                }
                None => self.per_second.push(h),
            }
        }
        for (i, outcomes) in o.per_second_outcomes.into_iter().enumerate() {
            match self.per_second_outcomes.get_mut(i) {
                Some(mine) => {
                    for (k, n) in outcomes {
                        *mine.entry(k).or_default() += n;
                    }
                }
                None => self.per_second_outcomes.push(outcomes),
            }
        }
    }

    /// Counts one request on `route` that took `since.elapsed()`.
    pub(crate) fn timed(&mut self, route: &'static str, since: Instant, answered: bool) {
        *self.sent.entry(route).or_default() += 1;
        if !answered {
            self.failed += 1;
        }
        self.latency(route, since);
    }

    /// Records `since.elapsed()` as a latency of `route`.
    pub(crate) fn latency(&mut self, route: &'static str, since: Instant) {
        let us = (since.elapsed().as_micros() as u64).max(1);
        self.routes
            .entry(route)
            .or_insert_with(histogram)
            .record(us)
            .ok();
    }

    pub fn requests(&self) -> u64 {
        self.sent.values().sum()
    }

    /// Checks the tally's own books: every purchase answered is counted once as an
    /// outcome, once in its second and once as sent (a session the waiting room ended
    /// without a purchase is an outcome, `room …`, and no purchase); a buyer is counted
    /// delivered only once paid, and downloaded only once delivered.
    pub(crate) fn check_books(&self) {
        let purchases: u64 = self
            .outcomes
            .iter()
            .filter(|((_, o), _)| !o.starts_with("room "))
            .map(|(_, n)| n)
            .sum();
        let by_second: u64 = self
            .per_second_outcomes
            .iter()
            .flat_map(|o| o.values())
            .sum();
        let sent = self.sent.get("purchase").copied().unwrap_or(0);
        assert_eq!(purchases, sent, "purchase outcomes against purchases sent");
        assert_eq!(
            by_second, sent,
            "purchase outcomes by second against purchases sent"
        );
        assert!(
            self.downloaded <= self.delivered && self.delivered <= self.paid,
            "{} downloaded, {} delivered, {} paid",
            self.downloaded,
            self.delivered,
            self.paid
        );
    }
}

/// The buyers' payments: how many were sent and sent again, what the node answered each,
/// and what the buyers saw of their orders after paying.
#[derive(Debug, Default)]
pub struct PaymentBook {
    /// Payments sent, each with a payment id of its own.
    pub sent: u64,
    /// Tries sent again with the same `webhook-id`, by what the try before was answered:
    /// a 429 or a 503 and its error code, or `error …` for no answer.
    pub resent_after: BTreeMap<String, u64>,
    /// Payments still unanswered when the run ended.
    pub unanswered: u64,
    /// Each payment's answer: what the webhook did (`paid`, `refund_due`, `mismatch` …),
    /// or a refusal's status and error code.
    pub outcomes: BTreeMap<String, u64>,
    /// The orders whose payment was answered `paid`.
    pub paid_orders: Vec<String>,
    /// The buyers' last look at their orders after paying: orders by status, and the
    /// payments they listed as owed back.
    pub orders_seen: BTreeMap<String, u64>,
    pub refunds_listed: u64,
    /// Orders a buyer saw sold (paid or delivered) though no payment of theirs was
    /// answered `paid`.
    pub unpaid_seen: Vec<String>,
    /// Delivered orders whose answer did not carry a licence key per unit.
    pub keys_short: u64,
    /// Late payers whose hold outlasted the run: their payment was never sent.
    pub late_not_sent: u64,
    /// Copies of the webhooks sent at once with them (a retry storm), each once, by what
    /// the node answered: an outcome, a status and error code, or `error …`.
    pub copies: BTreeMap<String, u64>,
}

impl PaymentBook {
    /// Counts what the node answered a payment for `order`.
    pub(crate) fn answered(&mut self, order: &str, outcome: String) {
        if outcome == "paid" {
            self.paid_orders.push(order.to_string());
        }
        *self.outcomes.entry(outcome).or_default() += 1;
    }

    /// Counts a buyer's last look at `order`: its `status`, the payments it listed as
    /// owed back, its licence keys for its `units`; `paid`: whether a payment of the
    /// buyer's was answered `paid`.
    pub(crate) fn seen(&mut self, order: &str, look: &OrderLook, paid: bool) {
        *self.orders_seen.entry(look.status.clone()).or_default() += 1;
        self.refunds_listed += look.refunds as u64;
        let sold = matches!(look.status.as_str(), "paid" | "delivered");
        if sold && !paid {
            self.unpaid_seen.push(order.to_string());
        }
        if look.status == "delivered" && look.keys as i64 != look.units {
            self.keys_short += 1;
        }
    }

    fn merge(&mut self, o: PaymentBook) {
        self.sent += o.sent;
        for (k, n) in o.resent_after {
            *self.resent_after.entry(k).or_default() += n;
        }
        self.unanswered += o.unanswered;
        for (k, n) in o.outcomes {
            *self.outcomes.entry(k).or_default() += n;
        }
        self.paid_orders.extend(o.paid_orders);
        for (k, n) in o.orders_seen {
            *self.orders_seen.entry(k).or_default() += n;
        }
        self.refunds_listed += o.refunds_listed;
        self.unpaid_seen.extend(o.unpaid_seen);
        self.keys_short += o.keys_short;
        self.late_not_sent += o.late_not_sent;
        for (k, n) in o.copies {
            *self.copies.entry(k).or_default() += n;
        }
    }
}

/// What a buyer read of its order (`GET /api/orders/{id}`).
#[derive(Debug, Clone, Default)]
pub struct OrderLook {
    pub status: String,
    pub units: i64,
    /// When the hold ends, ms since the epoch on Redis's clock.
    pub pay_by_ms: i64,
    /// Licence keys it carried, payments it listed as owed back.
    pub keys: usize,
    pub refunds: usize,
    pub download_url: Option<String>,
}

impl OrderLook {
    /// An order's answer, when the body is one.
    pub fn of(body: &[u8]) -> Option<OrderLook> {
        let o: seckill_core::api::Order = serde_json::from_slice(body).ok()?;
        Some(OrderLook {
            status: o.status.into_owned(),
            units: o.quantity,
            pay_by_ms: o.pay_by_ms,
            keys: o.license_keys.map_or(0, |k| k.len()),
            refunds: o.refunds_due.len(),
            download_url: o.download_url.map(|u| u.into_owned()),
        })
    }
}

/// A session the waiting room let join.
#[derive(Debug, Clone)]
pub struct Joined {
    pub persona: Persona,
    /// Its account (index into the token table).
    pub user: usize,
    /// When it joined, planned, from the start of the run.
    pub at: Duration,
    /// A shopper's polling class.
    pub class: Option<usize>,
    /// Joined before the draw: the answer had no place yet.
    pub pre: bool,
    /// Looks it sent, those refused for being too many or too fast (429), and for how
    /// long it kept looking.
    pub looks: u64,
    pub looks_refused: u64,
    pub looked_for: Duration,
}
