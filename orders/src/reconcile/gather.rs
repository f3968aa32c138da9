//! What reconciliation reads: every order of a campaign in Redis, and its streams' backlog.

use redis::Commands;
use seckill_core::connection::Connection;
use std::collections::HashMap;

use seckill_core::campaign::Campaign;
use seckill_core::keys::{self, PartitionKeys};

use super::{ReconcileError, RedisOrder, StreamState};

/// user, qty, status, pay_by_ms, paid_ms, delivered_ms, license_key of an order hash.
type OrderRow = (
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

pub fn redis_orders(con: &mut Connection, c: &Campaign) -> Result<Vec<RedisOrder>, ReconcileError> {
    let mut out = Vec::new();
    for p in 0..c.spec.partitions {
        let k = PartitionKeys::new(&c.spec.id, p);
        let seq: Option<u64> = con.hget(k.part(), "seq")?;
        let ids: Vec<String> = (1..=seq.unwrap_or(0))
            .map(|n| format!("{}.{p}.{n}", c.spec.id))
            .collect();
        for chunk in ids.chunks(500) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HMGET").arg(k.order(id)).arg(&[
                    "user",
                    "qty",
                    "status",
                    "pay_by_ms",
                    "paid_ms",
                    "delivered_ms",
                    "license_key",
                ]);
            }
            let rows: Vec<OrderRow> = con.pipeline(&pipe)?;
            for (id, r) in chunk.iter().zip(rows) {
                let (Some(user), Some(quantity), Some(status)) = (r.0, r.1, r.2) else {
                    continue;
                };
                out.push(RedisOrder {
                    order_id: id.clone(),
                    user,
                    quantity,
                    status,
                    pay_by_ms: r.3.unwrap_or(0),
                    paid_ms: r.4,
                    delivered_ms: r.5,
                    license_key: r.6,
                });
            }
        }
    }
    Ok(out)
}

/// Entries of one stream the `workers` group has read and not acknowledged (pending),
/// and has not read yet (lag).
pub fn backlog(con: &mut Connection, key: &str) -> redis::RedisResult<(u64, u64)> {
    let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query(con)
        .unwrap_or_default();
    let mut out = (0, 0);
    for g in groups {
        if seckill_core::reply::text(g.get("name")).as_deref() == Some(keys::WORKER_GROUP) {
            out.0 += seckill_core::reply::int(g.get("pending")).unwrap_or(0) as u64;
            out.1 += match g.get("lag") {
                Some(redis::Value::Int(n)) => *n as u64,
                // Redis cannot always count the lag; then compare the group's last
                // delivered entry with the stream's last one.
                _ => {
                    let info: HashMap<String, redis::Value> =
                        redis::cmd("XINFO").arg("STREAM").arg(key).query(con)?;
                    let last = seckill_core::reply::text(info.get("last-generated-id"));
                    u64::from(seckill_core::reply::text(g.get("last-delivered-id")) != last)
                }
            };
        }
    }
    Ok(out)
}

pub(super) fn stream_state(
    con: &mut Connection,
    c: &Campaign,
) -> Result<(StreamState, HashMap<String, u32>), ReconcileError> {
    let mut s = StreamState::default();
    let mut deliveries: HashMap<String, u32> = HashMap::new();
    for p in 0..c.spec.partitions {
        let key = PartitionKeys::new(&c.spec.id, p).events();
        s.entries += con.xlen::<_, u64>(&key)?;
        let (pending, lag) = backlog(con, &key)?;
        s.pending += pending;
        s.lag += lag;
        let entries: redis::streams::StreamRangeReply = con.xrange_all(&key)?;
        for e in entries.ids {
            if e.get::<String>("type").as_deref() == Some("delivered") {
                if let Some(oid) = e.get::<String>("order_id") {
                    *deliveries.entry(oid).or_default() += 1;
                }
            }
        }
    }
    Ok((s, deliveries))
}
