//! Payments as Redis keeps them: each partition's `payments` hash (payment id → the
//! payment as taken, written by `pay.lua`) and the fleet's unmatched payments, read for
//! operators (`payments refunds`, the console, reconciliation).

use redis::Commands;
use serde::{Deserialize, Serialize};

use crate::connection::Connection;
use crate::keys::{PartitionKeys, UNMATCHED_PAYMENTS};

/// One payment as taken (the script writes every field as a string).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PaymentRecord {
    pub order_id: String,
    pub payment_id: String,
    pub amount_cents: String,
    pub currency: String,
    /// `paid`, `refund_due`, `refunded`, `mismatch`, `pending`, `failed`, or `unmatched`
    /// (no such order).
    pub status: String,
    /// `expired` or `duplicate` for money owed back, `amount` or `currency` for a
    /// mismatch; the event's kind for an unmatched payment.
    pub reason: String,
    /// When it was taken (ms).
    pub ms: String,
}

impl PaymentRecord {
    pub fn amount(&self) -> u64 {
        self.amount_cents.parse().unwrap_or(0)
    }
}

/// Every payment of a campaign's partitions, in order of payment id.
pub fn of_campaign(
    con: &mut Connection,
    campaign: &str,
    partitions: u32,
) -> redis::RedisResult<Vec<PaymentRecord>> {
    let mut out = Vec::new();
    for p in 0..partitions {
        let all: Vec<(String, String)> = con.hgetall(PartitionKeys::new(campaign, p).payments())?;
        out.extend(
            all.into_iter()
                .filter_map(|(_, v)| serde_json::from_str::<PaymentRecord>(&v).ok()),
        );
    }
    out.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
    Ok(out)
}

/// Payments for orders nobody knows, in order of payment id.
pub fn unmatched(con: &mut Connection) -> redis::RedisResult<Vec<PaymentRecord>> {
    let all: Vec<(String, String)> = con.hgetall(UNMATCHED_PAYMENTS)?;
    let mut out: Vec<PaymentRecord> = all
        .into_iter()
        .filter_map(|(_, v)| serde_json::from_str(&v).ok())
        .collect();
    out.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
    Ok(out)
}

/// A campaign's money: what was paid for units sold, what is owed back or was given
/// back, what did not match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Money {
    pub currency: String,
    /// Payments that paid an order (minor units), and how many.
    pub paid_cents: u64,
    pub payments: u64,
    pub refunds_due: u64,
    pub refunds_due_cents: u64,
    pub refunded: u64,
    pub refunded_cents: u64,
    /// Payments of the wrong amount or currency (nothing was paid by them).
    pub mismatches: u64,
}

impl Money {
    pub fn of(currency: &str, records: &[PaymentRecord]) -> Money {
        let mut m = Money {
            currency: currency.to_string(),
            ..Money::default()
        };
        for r in records {
            match r.status.as_str() {
                "paid" => {
                    m.payments += 1;
                    m.paid_cents += r.amount();
                }
                "refund_due" => {
                    m.refunds_due += 1;
                    m.refunds_due_cents += r.amount();
                }
                "refunded" => {
                    m.refunded += 1;
                    m.refunded_cents += r.amount();
                }
                "mismatch" => m.mismatches += 1,
                _ => {}
            }
        }
        m
    }
}
