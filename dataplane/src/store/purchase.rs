//! The purchase: one script on the user's partition; when that partition is dry, stock is
//! pulled from the others and the purchase retried, until it succeeds or every partition
//! is proven empty.

use super::transfer::Refill;
use super::{int, items, text, Store, StoreError};
use crate::keys::{partition_of, PartitionKeys};
use crate::scripts;

/// What a shopper asked for, once authenticated and validated.
#[derive(Debug, Clone, Copy)]
pub struct PurchaseRequest<'a> {
    pub campaign: &'a str,
    pub partitions: u32,
    pub user: &'a str,
    pub quantity: u32,
    pub idempotency_key: Option<&'a str>,
    /// The id of the ticket this purchase uses (campaigns that require one), and how
    /// long its use is remembered.
    pub ticket: Option<(&'a str, u64)>,
}

/// Every way a purchase can end. Refusals are outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purchase {
    Held {
        order_id: String,
        pay_by_ms: i64,
    },
    /// Every unit is held or sold.
    SoldOut,
    /// Some units remain, fewer than asked for.
    NotEnough {
        remaining: i64,
    },
    LimitReached,
    NotStarted {
        starts_at_ms: Option<i64>,
    },
    Ended,
    Paused,
    UnknownCampaign,
    /// Stock kept moving away for too many rounds; the client may retry.
    Contended,
    /// The ticket was used by an earlier purchase.
    TicketUsed,
}

/// Rounds of "dry, refill, retry" before a purchase gives up as contended.
const MAX_ROUNDS: usize = 48;

/// After this many rounds lost to other buyers of the same partition, a purchase waits a
/// random moment before the next, so the crowd at the last units spreads out.
const PATIENT_ROUNDS: usize = 4;

enum Attempt {
    Done(Purchase),
    Dry,
}

impl Store {
    /// The first answer to an earlier request with this `Idempotency-Key`, if there was
    /// one: (order id, payment deadline).
    pub async fn first_answer(
        &self,
        campaign: &str,
        partitions: u32,
        user: &str,
        key: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let keys = PartitionKeys::new(campaign, partition_of(user, partitions));
        let first = self
            .conn
            .query(redis::cmd("GET").arg(keys.idempotency(user, key)))
            .await?;
        let Some(order_id) = text(Some(&first)) else {
            return Ok(None);
        };
        let pay_by = self
            .conn
            .query(
                redis::cmd("HGET")
                    .arg(keys.order(&order_id))
                    .arg("pay_by_ms"),
            )
            .await?;
        Ok(Some((order_id, int(Some(&pay_by)).unwrap_or(0))))
    }

    pub async fn purchase(&self, req: PurchaseRequest<'_>) -> Result<Purchase, StoreError> {
        let p = partition_of(req.user, req.partitions);
        let keys = PartitionKeys::new(req.campaign, p);
        for round in 0..MAX_ROUNDS {
            if round >= PATIENT_ROUNDS {
                let ms = rand::random_range(0..=round.min(10) as u64);
                glommio::timer::Timer::new(std::time::Duration::from_millis(ms)).await;
            }
            match self.attempt(&keys, p, &req).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Dry => {}
            }
            match self
                .refill(req.campaign, req.partitions, p, req.quantity)
                .await?
            {
                Refill::Moved => {}
                Refill::Empty { remaining: 0 } => return Ok(Purchase::SoldOut),
                Refill::Empty { remaining } => return Ok(Purchase::NotEnough { remaining }),
            }
        }
        Ok(Purchase::Contended)
    }

    async fn attempt(
        &self,
        keys: &PartitionKeys,
        p: u32,
        req: &PurchaseRequest<'_>,
    ) -> Result<Attempt, StoreError> {
        let (part, buyers, holds, events) =
            (keys.part(), keys.buyers(), keys.holds(), keys.events());
        let idem = req.idempotency_key.map(|k| keys.idempotency(req.user, k));
        let mut ks = vec![
            part.as_str(),
            buyers.as_str(),
            holds.as_str(),
            events.as_str(),
        ];
        if let Some(i) = &idem {
            ks.push(i);
        }
        let (qty, pidx, ttl) = (
            req.quantity.to_string(),
            p.to_string(),
            self.idempotency_ttl_s.to_string(),
        );
        let prefix = keys.order_prefix();
        let (ticket, ticket_ttl) = match req.ticket {
            Some((id, ttl)) => (keys.ticket(id), ttl.to_string()),
            None => (String::new(), String::new()),
        };
        let reply = self
            .eval(
                &scripts::PURCHASE,
                &ks,
                &[
                    req.user,
                    &qty,
                    req.campaign,
                    &pidx,
                    &prefix,
                    &ttl,
                    &ticket,
                    &ticket_ttl,
                ],
            )
            .await?;
        let v = items(reply)?;
        let outcome = text(v.first()).unwrap_or_default();
        Ok(Attempt::Done(match outcome.as_str() {
            "held" => Purchase::Held {
                order_id: text(v.get(1))
                    .ok_or_else(|| StoreError::Protocol("held without an order id".into()))?,
                pay_by_ms: int(v.get(2)).unwrap_or(0),
            },
            "dry" => return Ok(Attempt::Dry),
            "limit_reached" => Purchase::LimitReached,
            "not_started" => Purchase::NotStarted {
                starts_at_ms: int(v.get(1)).filter(|t| *t > 0),
            },
            "ended" => Purchase::Ended,
            "paused" => Purchase::Paused,
            "unknown" => Purchase::UnknownCampaign,
            "ticket_used" => Purchase::TicketUsed,
            other => {
                return Err(StoreError::Protocol(format!(
                    "purchase script answered '{other}'"
                )))
            }
        }))
    }
}
