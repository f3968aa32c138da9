//! A campaign's money against its sales: the payments that paid come to price × units
//! sold, each sold order is paid by exactly one payment, and no payment pays an order
//! that is not sold. Refunds owed and done, payments for orders nobody knows and
//! mismatches are shown beside them.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

use seckill_core::payments::{Money, PaymentRecord};

use super::RedisOrder;

/// A campaign's payments as reconciliation reads them, after its orders.
#[derive(Debug, Clone, Default)]
pub struct Payments {
    /// The campaign's currency (ISO 4217) and unit price in its minor units.
    pub currency: String,
    pub price_cents: u64,
    /// Every payment of the campaign's partitions.
    pub records: Vec<PaymentRecord>,
    /// Payments for orders nobody knows whose order id names this campaign.
    pub unmatched: Vec<PaymentRecord>,
}

/// The money section of a report, in the campaign's currency.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MoneyReport {
    /// What was paid, owed back, given back, and what did not match.
    #[serde(flatten)]
    pub taken: Money,
    pub price_cents: u64,
    /// Units sold when the orders were read: the partitions' counters, read at the
    /// instant their orders were, so a sale between the reads cannot tip the balance.
    pub sold: u64,
    /// Price × units sold: what the payments that paid must come to.
    pub sales_cents: u64,
    /// Payments that paid an order after the orders were read: in `taken`, their units
    /// not in `sold`.
    pub paid_since_read: u64,
    pub paid_since_read_cents: u64,
    /// Payments for orders nobody knows whose order id names this campaign, and their
    /// amounts by currency.
    pub unmatched: u64,
    pub unmatched_cents: BTreeMap<String, u64>,
    /// Sold orders (paid or delivered) that no payment paid.
    pub unpaid: Vec<String>,
    /// Sold orders more than one payment paid: `order (n payments)`.
    pub paid_twice: Vec<String>,
    /// Payments that paid an order that is not sold: `payment for order (its status)`.
    pub paid_unsold: Vec<String>,
}

fn sold(status: &str) -> bool {
    matches!(status, "paid" | "delivered")
}

/// The orders of payments that paid them but were not sold when the orders were read:
/// paid in between, or not at all. Their status is read again after the payments.
pub(super) fn paid_after_the_read<'a>(
    records: &'a [PaymentRecord],
    orders: &[RedisOrder],
) -> Vec<&'a str> {
    let sold_at_read: HashSet<&str> = orders
        .iter()
        .filter(|o| sold(&o.status))
        .map(|o| o.order_id.as_str())
        .collect();
    let mut ids: Vec<&str> = records
        .iter()
        .filter(|r| r.status == "paid" && !sold_at_read.contains(r.order_id.as_str()))
        .map(|r| r.order_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Judges a campaign's payments against its orders as first read and the units its
/// partitions had sold then. `read_again` holds the status Redis had, after the payments
/// were read, of each order a payment paid that the first read did not show sold.
/// Violations go to `violations`.
pub(super) fn judge_money(
    p: Payments,
    orders: &[RedisOrder],
    read_again: &HashMap<String, String>,
    sold_units: i64,
    violations: &mut Vec<String>,
) -> MoneyReport {
    let sold_units = sold_units.max(0) as u64;
    let mut m = MoneyReport {
        taken: Money::of(&p.currency, &p.records),
        price_cents: p.price_cents,
        sold: sold_units,
        sales_cents: p.price_cents.saturating_mul(sold_units),
        unmatched: p.unmatched.len() as u64,
        ..MoneyReport::default()
    };
    for u in &p.unmatched {
        *m.unmatched_cents.entry(u.currency.clone()).or_default() += u.amount();
    }
    let status: HashMap<&str, &str> = orders
        .iter()
        .map(|o| (o.order_id.as_str(), o.status.as_str()))
        .collect();
    let mut paid: HashMap<&str, u32> = HashMap::new();
    for r in p.records.iter().filter(|r| r.status == "paid") {
        let oid = r.order_id.as_str();
        *paid.entry(oid).or_default() += 1;
        if status.get(oid).is_some_and(|s| sold(s)) {
            continue;
        }
        match read_again.get(oid) {
            Some(now) if sold(now) => {
                m.paid_since_read += 1;
                m.paid_since_read_cents += r.amount();
            }
            now => m.paid_unsold.push(format!(
                "{} for {oid} ({})",
                r.payment_id,
                now.map(String::as_str)
                    .or(status.get(oid).copied())
                    .unwrap_or("no order")
            )),
        }
    }
    for o in orders.iter().filter(|o| sold(&o.status)) {
        match paid.get(o.order_id.as_str()).copied().unwrap_or(0) {
            0 => m.unpaid.push(o.order_id.clone()),
            1 => {}
            n => m.paid_twice.push(format!("{} ({n} payments)", o.order_id)),
        }
    }

    let counted = m.taken.paid_cents.saturating_sub(m.paid_since_read_cents);
    if counted != m.sales_cents {
        violations.push(format!(
            "payments paid {} for {} units sold at {}, which come to {}",
            amount(counted, &p.currency),
            m.sold,
            amount(m.price_cents, &p.currency),
            amount(m.sales_cents, &p.currency)
        ));
    }
    for (n, what) in [
        (m.unpaid.len(), "sold orders no payment paid"),
        (
            m.paid_twice.len(),
            "sold orders paid by more than one payment",
        ),
        (m.paid_unsold.len(), "payments that paid an order not sold"),
    ] {
        if n > 0 {
            violations.push(format!("{n} {what}"));
        }
    }
    m
}

/// Digits after the point of a currency's minor unit (ISO 4217); 2 unless listed.
fn exponent(currency: &str) -> u32 {
    match currency {
        "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX"
        | "UYI" | "VND" | "VUV" | "XAF" | "XOF" | "XPF" => 0,
        "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
        "CLF" | "UYW" => 4,
        _ => 2,
    }
}

/// An amount in a currency's minor units as people read it: `12.99 EUR`, `1299 JPY`.
pub fn amount(minor: u64, currency: &str) -> String {
    let e = exponent(currency);
    if e == 0 {
        return format!("{minor} {currency}");
    }
    let unit = 10u64.pow(e);
    format!(
        "{}.{:0width$} {currency}",
        minor / unit,
        minor % unit,
        width = e as usize
    )
}

impl MoneyReport {
    /// The report's lines on money, each under a label of ten columns.
    pub(super) fn fmt_lines(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.taken;
        let cur = t.currency.as_str();
        let since = if self.paid_since_read > 0 {
            format!(
                "; {} of them ({}) paid since the orders were read",
                self.paid_since_read,
                amount(self.paid_since_read_cents, cur)
            )
        } else {
            String::new()
        };
        writeln!(
            f,
            "  paid       {}, {} payments, for {} units sold at {}{since}",
            amount(t.paid_cents, cur),
            t.payments,
            self.sold,
            amount(self.price_cents, cur),
        )?;
        writeln!(
            f,
            "  refunds    {} due ({}), {} refunded ({})",
            t.refunds_due,
            amount(t.refunds_due_cents, cur),
            t.refunded,
            amount(t.refunded_cents, cur)
        )?;
        let unmatched: Vec<String> = self
            .unmatched_cents
            .iter()
            .map(|(c, n)| amount(*n, c))
            .collect();
        let unmatched = if unmatched.is_empty() {
            amount(0, cur)
        } else {
            unmatched.join(" + ")
        };
        writeln!(
            f,
            "  unmatched  {} ({unmatched}): payments for orders nobody knows",
            self.unmatched
        )?;
        writeln!(
            f,
            "  mismatches {}: payments of another amount or currency, which paid nothing",
            t.mismatches
        )
    }
}
