//! What reconciliation reads: each partition's books at one instant (counters, buyers,
//! hold index, orders), and the streams' backlog.

use redis::{Commands, Value};
use seckill_core::connection::Connection;
use std::collections::HashMap;

use seckill_core::campaign::Campaign;
use seckill_core::keys::{self, PartitionKeys};
use seckill_core::reply::text;
use seckill_core::scripts;

use super::{ReconcileError, RedisOrder, StreamState};

/// One partition's books as read at one instant (`scripts::PARTITION_BOOKS`): its
/// counters, buyers, hold index and every order it has taken.
#[derive(Debug, Clone, Default)]
pub struct PartitionBooks {
    pub partition: u32,
    pub held: i64,
    pub sold: i64,
    /// Orders taken when it was read.
    pub seq: u64,
    /// User → units credited to them.
    pub buyers: HashMap<String, i64>,
    pub hold_index: Vec<String>,
    /// Its order records, in sequence order (an order number without one is left out).
    pub orders: Vec<RedisOrder>,
}

fn pairs(v: Option<&Value>) -> HashMap<String, String> {
    let Some(Value::Array(items)) = v else {
        return HashMap::new();
    };
    items
        .chunks(2)
        .filter_map(|kv| Some((text(kv.first())?, text(kv.get(1))?)))
        .collect()
}

/// Reads every partition of a campaign, each at one instant of its own.
pub fn partition_books(
    con: &mut Connection,
    c: &Campaign,
) -> Result<Vec<PartitionBooks>, ReconcileError> {
    let mut out = Vec::with_capacity(c.spec.partitions as usize);
    for p in 0..c.spec.partitions {
        let k = PartitionKeys::new(&c.spec.id, p);
        let v: Value = scripts::PARTITION_BOOKS
            .key(k.part())
            .key(k.buyers())
            .key(k.holds())
            .arg(k.order_prefix())
            .arg(&c.spec.id)
            .arg(p)
            .invoke(con)?;
        let Value::Array(parts) = v else {
            return Err(ReconcileError::Unreadable(p));
        };
        let counters = pairs(parts.first());
        let number = |f: &str| counters.get(f).and_then(|v| v.parse().ok()).unwrap_or(0);
        let seq = number("seq");
        let Some(Value::Array(index)) = parts.get(2) else {
            return Err(ReconcileError::Unreadable(p));
        };
        let Some(Value::Array(rows)) = parts.get(3) else {
            return Err(ReconcileError::Unreadable(p));
        };
        let mut orders = Vec::with_capacity(rows.len());
        for (n, row) in rows.iter().enumerate() {
            let Value::Array(f) = row else { continue };
            let field = |i: usize| text(f.get(i));
            let number = |i: usize| field(i).and_then(|v| v.parse::<i64>().ok());
            let (Some(user), Some(quantity), Some(status)) = (field(0), number(1), field(2)) else {
                continue;
            };
            orders.push(RedisOrder {
                order_id: format!("{}.{p}.{}", c.spec.id, n + 1),
                user,
                quantity,
                status,
                pay_by_ms: number(3).unwrap_or(0),
                paid_ms: number(4),
                delivered_ms: number(5),
                license_key: field(6),
            });
        }
        out.push(PartitionBooks {
            partition: p,
            held: number(keys::part::HELD),
            sold: number(keys::part::SOLD),
            seq: seq.max(0) as u64,
            buyers: pairs(parts.get(1))
                .into_iter()
                .map(|(u, n)| (u, n.parse().unwrap_or(0)))
                .collect(),
            hold_index: index.iter().filter_map(|v| text(Some(v))).collect(),
            orders,
        });
    }
    Ok(out)
}

/// Every order of a campaign in Redis, partition by partition in sequence order.
pub fn redis_orders(con: &mut Connection, c: &Campaign) -> Result<Vec<RedisOrder>, ReconcileError> {
    Ok(partition_books(con, c)?
        .into_iter()
        .flat_map(|b| b.orders)
        .collect())
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
