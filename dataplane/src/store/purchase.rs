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
    /// With a waiting room's pass as the ticket: when the pass ends (ms). Its use goes
    /// into the partition's pass log, which the admission counts.
    pub pass_expires_ms: Option<i64>,
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
    /// The ticket was used by an earlier purchase, or the pass ran out.
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

/// The purchase script's call for one request on partition `p` (whose keys are `keys`):
/// `EVALSHA` with its keys and arguments, each written once into the command's buffer.
pub fn purchase_call(
    keys: &PartitionKeys,
    p: u32,
    req: &PurchaseRequest<'_>,
    idempotency_ttl_s: u64,
) -> redis::Cmd {
    use std::fmt::Write;
    let tag = keys.tag();
    let mut cmd = redis::Cmd::with_capacity(18, 320);
    let mut scratch = String::with_capacity(96);
    let mut arg = |cmd: &mut redis::Cmd, f: std::fmt::Arguments<'_>| {
        scratch.clear();
        scratch.write_fmt(f).ok();
        cmd.arg(scratch.as_str());
    };
    cmd.arg("EVALSHA").arg(scripts::PURCHASE.get_hash());
    cmd.arg(if req.idempotency_key.is_some() { 5 } else { 4 });
    for suffix in ["part", "buyers", "holds", "events"] {
        arg(&mut cmd, format_args!("{tag}:{suffix}"));
    }
    if let Some(k) = req.idempotency_key {
        arg(&mut cmd, format_args!("{tag}:idem:{}:{k}", req.user));
    }
    cmd.arg(req.user).arg(req.quantity).arg(req.campaign).arg(p);
    arg(&mut cmd, format_args!("{tag}:order:"));
    cmd.arg(idempotency_ttl_s);
    match req.ticket {
        Some((id, ttl)) => {
            arg(&mut cmd, format_args!("{tag}:ticket:{id}"));
            cmd.arg(ttl);
        }
        None => {
            cmd.arg("").arg("");
        }
    }
    if let Some(expires_ms) = req.pass_expires_ms {
        arg(&mut cmd, format_args!("{tag}:passes"));
        cmd.arg(expires_ms);
    }
    cmd
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
        let reply = self
            .run_script(&purchase_call(keys, p, req, self.idempotency_ttl_s))
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
            "ticket_used" | "ticket_expired" | "pass_required" => Purchase::TicketUsed,
            other => {
                return Err(StoreError::Protocol(format!(
                    "purchase script answered '{other}'"
                )))
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same call, spelled out key by key as the script's header documents it.
    fn spelled_out(keys: &PartitionKeys, p: u32, req: &PurchaseRequest<'_>, ttl: u64) -> Vec<u8> {
        let mut ks = vec![keys.part(), keys.buyers(), keys.holds(), keys.events()];
        ks.extend(req.idempotency_key.map(|k| keys.idempotency(req.user, k)));
        let (ticket, ticket_ttl) = req
            .ticket
            .map_or((String::new(), String::new()), |(id, t)| {
                (keys.ticket(id), t.to_string())
            });
        let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
        let (qty, pidx, ttl) = (req.quantity.to_string(), p.to_string(), ttl.to_string());
        let prefix = keys.order_prefix();
        let (log, pass_end) = (
            keys.pass_log(),
            req.pass_expires_ms.unwrap_or(0).to_string(),
        );
        let mut args = vec![
            req.user,
            qty.as_str(),
            req.campaign,
            pidx.as_str(),
            prefix.as_str(),
            ttl.as_str(),
            ticket.as_str(),
            ticket_ttl.as_str(),
        ];
        if req.pass_expires_ms.is_some() {
            args.extend([log.as_str(), pass_end.as_str()]);
        }
        super::super::script_call(&scripts::PURCHASE, &ks, &args).get_packed_command()
    }

    #[test]
    fn the_purchase_call_carries_every_key_and_argument() {
        let keys = PartitionKeys::new("spring", 5);
        for (idempotency_key, ticket, pass_expires_ms) in [
            (None, None, None),
            (Some("k-1"), None, None),
            (None, Some(("t9", 600)), None),
            (Some("k-2"), Some(("t9", 600)), None),
            (Some("k-3"), Some(("q17", 120)), Some(1_800_000_000_000)),
        ] {
            let req = PurchaseRequest {
                campaign: "spring",
                partitions: 8,
                user: "ann",
                quantity: 2,
                idempotency_key,
                ticket,
                pass_expires_ms,
            };
            assert_eq!(
                purchase_call(&keys, 5, &req, 86_400).get_packed_command(),
                spelled_out(&keys, 5, &req, 86_400),
                "{req:?}"
            );
        }
    }
}
