//! The buyers' payments in the report: what the node answered them, what the orders said
//! after, what the nodes recorded, and the units sold without a payment answered `paid`,
//! which fail the run.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use seckill_core::payments::Money;

use crate::tally::PaymentBook;

/// What Redis holds of a run's payments once it has settled.
#[derive(Debug, Clone, Default)]
pub struct PaymentEvidence {
    /// The run's orders sold (paid or delivered): every order of a campaign it created,
    /// of another the orders it held.
    pub sold: Vec<String>,
    /// The campaign's payments as the nodes recorded them.
    pub recorded: Money,
}

#[derive(Debug, Clone, Serialize)]
pub struct Payments {
    /// `webhook`: signed here as the provider signs them; `demo`: through the demo
    /// provider's route.
    pub provider: String,
    /// Payments sent (each with a payment id of its own), tries sent again with the same
    /// `webhook-id` (after a 429, a 503 or no answer) and by what the try before was
    /// answered, and payments still unanswered at the end.
    pub sent: u64,
    pub resent: u64,
    pub resent_after: BTreeMap<String, u64>,
    pub unanswered: u64,
    /// Each payment's answer: what the webhook did, or a refusal's status and error code.
    pub outcomes: BTreeMap<String, u64>,
    /// Payments owed back (after the hold's deadline, or a second one) and payments that
    /// did not match the order (amount or currency), by those answers.
    pub refunds_due: u64,
    pub mismatches: u64,
    /// The buyers' last look at their orders after paying: orders by status, and the
    /// payments they listed as owed back.
    pub orders_seen: BTreeMap<String, u64>,
    pub refunds_listed: u64,
    /// Delivered orders whose answer did not carry a licence key per unit.
    pub keys_short: u64,
    /// Late payers whose hold outlasted the run: their payment was never sent.
    pub late_not_sent: u64,
    /// Copies of the webhooks sent at once with them (a retry storm), and by what the
    /// node answered them; they count no payment.
    pub copies: u64,
    pub copy_answers: BTreeMap<String, u64>,
    /// Orders sold (in Redis, or as their buyers saw them) without a payment of the run
    /// answered `paid`: units given without a matching payment.
    pub unpaid_orders: Vec<String>,
    /// The campaign's payments as the nodes recorded them.
    pub recorded: Money,
}

impl Payments {
    /// From what the load saw (`book`) and what Redis holds (`evidence`).
    pub(crate) fn of(provider: &str, book: &PaymentBook, evidence: PaymentEvidence) -> Payments {
        let count = |o: &str| book.outcomes.get(o).copied().unwrap_or(0);
        Payments {
            provider: provider.to_string(),
            sent: book.sent,
            resent: book.resent_after.values().sum(),
            resent_after: book.resent_after.clone(),
            unanswered: book.unanswered,
            outcomes: book.outcomes.clone(),
            refunds_due: count("refund_due"),
            mismatches: count("mismatch"),
            orders_seen: book.orders_seen.clone(),
            refunds_listed: book.refunds_listed,
            keys_short: book.keys_short,
            late_not_sent: book.late_not_sent,
            copies: book.copies.values().sum(),
            copy_answers: book.copies.clone(),
            unpaid_orders: unpaid(&evidence.sold, &book.unpaid_seen, &book.paid_orders),
            recorded: evidence.recorded,
        }
    }

    /// The line of the text summary.
    pub fn text(&self) -> String {
        let r = &self.recorded;
        format!(
            "payments ({}): {} sent ({} sent again{}, {} unanswered{}); answers {:?};{} {} refunds due, {} mismatches; orders after paying {:?}, {} refunds listed; recorded: {} paid ({} {} cents), {} refunds due, {} mismatches; {} units sold without a payment\n",
            self.provider,
            self.sent,
            self.resent,
            if self.resent > 0 {
                format!(" after {:?}", self.resent_after)
            } else {
                String::new()
            },
            self.unanswered,
            if self.late_not_sent > 0 {
                format!(", {} late ones never sent", self.late_not_sent)
            } else {
                String::new()
            },
            self.outcomes,
            if self.copies > 0 {
                format!(" {} copies sent at once, answers {:?};", self.copies, self.copy_answers)
            } else {
                String::new()
            },
            self.refunds_due,
            self.mismatches,
            self.orders_seen,
            self.refunds_listed,
            r.payments,
            r.paid_cents,
            r.currency,
            r.refunds_due,
            r.mismatches,
            self.unpaid_orders.len(),
        )
    }
}

/// The orders sold (`sold`, from Redis; `seen`, by their buyers) that are not among those
/// whose payment was answered `paid`: each once, in order.
pub fn unpaid(sold: &[String], seen: &[String], paid: &[String]) -> Vec<String> {
    let paid: BTreeSet<&str> = paid.iter().map(String::as_str).collect();
    sold.iter()
        .chain(seen)
        .map(String::as_str)
        .filter(|o| !paid.contains(o))
        .collect::<BTreeSet<&str>>()
        .into_iter()
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_unit_sold_without_a_payment_answered_paid_is_named_once() {
        let paid = ids(&["c.0.1", "c.1.1"]);
        assert!(unpaid(&ids(&["c.0.1", "c.1.1"]), &[], &paid).is_empty());
        // Sold in Redis and seen by its buyer: named once.
        assert_eq!(
            unpaid(&ids(&["c.1.1", "c.0.2"]), &ids(&["c.0.2", "c.1.3"]), &paid),
            ids(&["c.0.2", "c.1.3"])
        );
    }

    #[test]
    fn the_payments_count_the_webhooks_answers_and_the_orders_looks() {
        let mut book = PaymentBook::default();
        for (order, outcome) in [
            ("c.0.1", "paid"),
            ("c.0.2", "paid"),
            ("c.0.2", "refund_due"),
            ("c.0.3", "refund_due"),
            ("c.0.4", "mismatch"),
        ] {
            book.sent += 1;
            book.answered(order, outcome.into());
        }
        let evidence = PaymentEvidence {
            sold: ids(&["c.0.1", "c.0.2", "c.0.9"]),
            recorded: Money::default(),
        };
        let p = Payments::of("webhook", &book, evidence);
        assert_eq!((p.sent, p.refunds_due, p.mismatches), (5, 2, 1));
        assert_eq!(p.outcomes["paid"], 2);
        assert_eq!(p.unpaid_orders, ids(&["c.0.9"]));
        assert!(
            p.text().contains("2 refunds due, 1 mismatches"),
            "{}",
            p.text()
        );
    }
}
