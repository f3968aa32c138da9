//! Repair: replays into the first store the orders it lacks and releases overdue holds;
//! never invents or deletes a sale.

use redis::Commands;
use seckill_core::connection::Connection;
use serde::Serialize;
use std::path::PathBuf;

use crate::{Event, Kind, OrderDb};
use seckill_core::control::{self};
use seckill_core::keys::{OrderId, PartitionKeys};
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
}

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
        let k = PartitionKeys::new(id, p);
        let n: i64 = scripts::RELEASE
            .key(k.part())
            .key(k.holds())
            .key(k.buyers())
            .key(k.events())
            .arg(k.order_prefix())
            .arg(10_000)
            .invoke(con)?;
        done.holds_released += n;
    }
    if done.holds_released > 0 {
        // Best effort: the shards' next poll reads the stock all the same.
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
