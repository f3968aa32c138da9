//! Orders after the hold, on the order's own partition: payment, and the release of holds
//! nobody paid for in time.

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::{OrderId, PartitionKeys};
use seckill_core::scripts;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payment {
    /// Paid now or before; a repeated payment changes nothing.
    Paid { paid_ms: i64 },
    /// The hold ran out before payment.
    Expired,
    /// No such order for this user.
    NotFound,
}

/// Most holds one release call frees, so one call never blocks Redis for long.
const RELEASE_BATCH: u32 = 256;

impl Store {
    pub async fn pay(
        &self,
        order: &OrderId<'_>,
        order_id: &str,
        user: &str,
    ) -> Result<Payment, StoreError> {
        let k = PartitionKeys::new(order.campaign, order.partition);
        let v = items(
            self.eval(
                &scripts::PAY,
                &[&k.part(), &k.holds(), &k.events(), &k.order(order_id)],
                &[user, order_id],
            )
            .await?,
        )?;
        Ok(match text(v.first()).as_deref() {
            Some("paid") => Payment::Paid {
                paid_ms: int(v.get(1)).unwrap_or(0),
            },
            Some("expired") => Payment::Expired,
            Some("not_found") => Payment::NotFound,
            other => {
                return Err(StoreError::Protocol(format!(
                    "pay script answered {other:?}"
                )));
            }
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
