//! Repair: replays into the first store the orders it lacks and releases overdue holds;
//! never invents or deletes a sale.

use redis::Commands;
use seckill_core::connection::Connection;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

use crate::{Event, Kind, OrderDb};
use seckill_core::control::{self};
use seckill_core::keys::{part, OrderId, PartitionKeys};
use seckill_core::protocol;
use seckill_core::scripts;

use super::judge::rank;
use super::{reconcile, redis_orders, ReconcileError};

/// What `repair` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Repaired {
    pub orders_replayed: usize,
    pub holds_released: i64,
    pub index_entries_removed: usize,
    /// Partitions whose overdue holds still wait for a shard's lease to end.
    pub holds_waiting: Vec<u32>,
}

/// Orders `release.lua` releases in one call.
const RELEASE_BATCH: i64 = 10_000;

/// How many leases `repair` waits out for one partition before it reports its holds as
/// still waiting: a shard renews no lease once a release asked for it to end, so one is
/// enough unless a shard takes the partition again in between.
const LEASE_WAITS: u32 = 3;

/// Replays into `store` the orders the stores lack or hold at an older status, and
/// releases overdue and orphaned holds. Sales are never created or removed.
pub fn repair(
    con: &mut Connection,
    id: &str,
    stores: &[PathBuf],
) -> Result<Repaired, ReconcileError> {
    let report = reconcile(con, id, stores)?;
    let c = control::get(con, id)?;
    let mut done = Repaired::default();
    let Some(first) = stores.first() else {
        return Ok(done);
    };
    let behind: std::collections::HashSet<&str> = report
        .missing
        .iter()
        .map(String::as_str)
        .chain(
            report
                .mismatched
                .iter()
                .filter(|(_, redis, store)| rank(redis) > rank(store))
                .map(|(o, _, _)| o.as_str()),
        )
        .collect();
    if !behind.is_empty() {
        let events: Vec<Event> = redis_orders(con, &c)?
            .into_iter()
            .filter(|o| behind.contains(o.order_id.as_str()))
            .filter_map(|o| {
                let oid = OrderId::parse(&o.order_id)?;
                let kind = match o.status.as_str() {
                    "held" => Kind::Held,
                    "paid" => Kind::Paid,
                    "expired" => Kind::Expired,
                    "delivered" => Kind::Delivered,
                    "refund_due" => Kind::RefundDue,
                    "refunded" => Kind::Refunded,
                    _ => return None,
                };
                Some(Event {
                    stream: "reconcile".into(),
                    entry_id: format!("{}:{}", o.order_id, o.status),
                    kind,
                    campaign: oid.campaign.to_string(),
                    partition: oid.partition,
                    user: o.user,
                    quantity: o.quantity,
                    pay_by_ms: o.pay_by_ms,
                    paid_ms: o.paid_ms,
                    expired_ms: None,
                    delivered_ms: o.delivered_ms,
                    license_key: o.license_key,
                    order_status: None,
                    payment: None,
                    order_id: o.order_id,
                })
            })
            .collect();
        let mut db = OrderDb::open(first).map_err(|source| ReconcileError::Db {
            path: first.clone(),
            source,
        })?;
        db.apply(&events).map_err(|source| ReconcileError::Db {
            path: first.clone(),
            source,
        })?;
        done.orders_replayed = events.len();
    }
    for p in 0..c.spec.partitions {
        let (n, waiting) = release_overdue(con, &PartitionKeys::new(id, p))?;
        done.holds_released += n;
        if waiting {
            done.holds_waiting.push(p);
        }
    }
    if done.holds_released > 0 {
        // Best effort: the shards read the stock within a second all the same.
        let _: redis::RedisResult<i64> = protocol::stock_returned(id).query(con);
    }
    for oid in &report.orphaned_holds {
        if let Some(o) = OrderId::parse(oid) {
            let n: usize = con.zrem(PartitionKeys::new(id, o.partition).holds(), oid)?;
            done.index_entries_removed += n;
        }
    }
    Ok(done)
}

/// Releases a partition's overdue holds; returns how many, and whether some still wait.
/// A partition lent to a shard releases none until the lease is over (`release.lua`
/// then asks for it to end and marks the partition `returning`), so this waits for the
/// lease to end, [`LEASE_WAITS`] times at most and 2 s each, rather than report nothing
/// released.
fn release_overdue(con: &mut Connection, k: &PartitionKeys) -> Result<(i64, bool), ReconcileError> {
    let (mut released, mut waits) = (0, 0);
    loop {
        let n: i64 = scripts::RELEASE
            .key(k.part())
            .key(k.holds())
            .key(k.buyers())
            .key(k.events())
            .arg(k.order_prefix())
            .arg(RELEASE_BATCH)
            .invoke(con)?;
        released += n;
        if n >= RELEASE_BATCH {
            continue;
        }
        let (lease_ms, returning): (Option<i64>, Option<String>) = redis::cmd("HMGET")
            .arg(k.part())
            .arg(part::LEASE_MS)
            .arg(part::RETURNING)
            .query(con)?;
        if returning.as_deref() != Some("1") {
            return Ok((released, false));
        }
        if waits == LEASE_WAITS {
            return Ok((released, true));
        }
        waits += 1;
        let now = protocol::read_time(&protocol::time().query(con)?).unwrap_or(0);
        let left = (lease_ms.unwrap_or(0) - now).clamp(0, 2_000) as u64;
        std::thread::sleep(Duration::from_millis(left + 10));
    }
}
