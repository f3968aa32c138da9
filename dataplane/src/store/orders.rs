//! Orders after the hold, on the order's own partition: the payment provider's events,
//! and the release of holds nobody paid for in time.

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::{OrderId, PartitionKeys};
use seckill_core::scripts;

/// A payment provider's event for an order, as its webhook says it.
#[derive(Debug, Clone)]
pub struct PaymentEvent<'a> {
    /// The webhook's id: the same webhook again gets its first answer.
    pub webhook_id: &'a str,
    /// `succeeded`, `pending`, `failed` or `refunded`.
    pub kind: &'a str,
    pub order_id: &'a str,
    pub payment_id: &'a str,
    /// In the currency's minor units.
    pub amount_cents: u64,
    pub currency: &'a str,
}

/// What the campaign asks of a payment, and the grace a pending one gives.
#[derive(Debug, Clone, Copy)]
pub struct PaymentTerms<'a> {
    pub unit_price_cents: u64,
    pub currency: &'a str,
    pub pending_grace_ms: u64,
}

/// What a payment event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// `paid`, `refund_due`, `mismatch`, `pending`, `failed`, `refunded`, `ignored`,
    /// `unmatched` or `retry`.
    pub outcome: String,
    /// The order's status after it.
    pub status: String,
    pub paid_ms: i64,
    /// Replicas the order's master has: what the caller waits for.
    pub replicas: i64,
}

pub use seckill_core::payments::PaymentRecord;

/// Most holds one release call frees, so one call never blocks Redis for long.
const RELEASE_BATCH: u32 = 256;

impl Store {
    /// Takes a payment provider's event for an order on the order's partition (see
    /// `pay.lua`): once per webhook id, once per payment id.
    pub async fn take_payment(
        &self,
        order: &OrderId<'_>,
        e: &PaymentEvent<'_>,
        terms: PaymentTerms<'_>,
    ) -> Result<Taken, StoreError> {
        let k = PartitionKeys::new(order.campaign, order.partition);
        let v = items(
            self.eval(
                &scripts::PAY,
                &[
                    &k.part(),
                    &k.holds(),
                    &k.buyers(),
                    &k.events(),
                    &k.order(e.order_id),
                    &k.payments(),
                    &k.webhooks(),
                ],
                &[
                    e.webhook_id,
                    e.kind,
                    e.order_id,
                    e.payment_id,
                    &e.amount_cents.to_string(),
                    e.currency,
                    &terms.unit_price_cents.to_string(),
                    terms.currency,
                    &terms.pending_grace_ms.to_string(),
                ],
            )
            .await?,
        )?;
        let outcome = text(v.first())
            .ok_or_else(|| StoreError::Protocol(format!("pay script answered {v:?}")))?;
        Ok(Taken {
            outcome,
            status: text(v.get(1)).unwrap_or_default(),
            paid_ms: int(v.get(2)).unwrap_or(0),
            replicas: int(v.get(3)).unwrap_or(0),
        })
    }

    /// Releases the partition's holds past their deadline; returns how many.
    pub async fn release_expired(&self, campaign: &str, partition: u32) -> Result<i64, StoreError> {
        let k = PartitionKeys::new(campaign, partition);
        let mut total = 0;
        loop {
            let n = int(Some(
                &self
                    .eval(
                        &scripts::RELEASE,
                        &[&k.part(), &k.holds(), &k.buyers(), &k.events()],
                        &[&k.order_prefix(), &RELEASE_BATCH.to_string()],
                    )
                    .await?,
            ))
            .unwrap_or(0);
            total += n;
            if n < i64::from(RELEASE_BATCH) {
                return Ok(total);
            }
        }
    }
}
