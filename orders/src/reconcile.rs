//! Reconciliation: one campaign compared across Redis (stock, holds, buyers, orders), the
//! order streams (entries, pending, lag) and every order store, against the ledger:
//! conservation, no oversell, the per-user limit, every acknowledged order stored, every
//! paid order delivered exactly once, no code handed out twice. `repair` replays into
//! the first store what it lacks and releases overdue holds; it never invents or deletes
//! a sale.

use redis::Commands;
use seckill_core::connection::Connection;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::{Event, Kind, OrderDb};
use seckill_core::campaign::Campaign;
use seckill_core::control::{self, ControlError};
use seckill_core::keys::{self, CodeKeys, OrderId, PartitionKeys};
use seckill_core::ledger::{self, Ledger};
use seckill_core::scripts;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("order store {path}: {source}")]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

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

/// An order as Redis records it.
#[derive(Debug, Clone, Serialize)]
pub struct RedisOrder {
    pub order_id: String,
    pub user: String,
    pub quantity: i64,
    pub status: String,
    pub pay_by_ms: i64,
    pub paid_ms: Option<i64>,
    pub delivered_ms: Option<i64>,
    pub license_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamState {
    pub entries: u64,
    /// Read by a worker, not acknowledged yet.
    pub pending: u64,
    /// Not read by any worker yet.
    pub lag: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub campaign: String,
    pub ledger: Ledger,
    pub orders_in_redis: BTreeMap<String, u64>,
    pub orders_in_stores: BTreeMap<String, u64>,
    pub stores: Vec<String>,
    pub streams: StreamState,
    /// Acknowledged orders no store holds.
    pub missing: Vec<String>,
    /// Orders a store holds that Redis has no record of: lost from Redis (a failover
    /// that lost writes, an eviction, a restore from an old file).
    pub unknown: Vec<String>,
    /// Orders a store shows at another status than Redis: (order, redis, store).
    pub mismatched: Vec<(String, String, String)>,
    /// Paid orders not delivered.
    pub undelivered: Vec<String>,
    /// Orders with more than one delivery.
    pub delivered_twice: Vec<String>,
    /// Codes bound to more than one order.
    pub codes_reused: Vec<String>,
    /// Held orders past their deadline (nobody released them).
    pub overdue_holds: Vec<String>,
    /// Hold-index entries whose order is not held.
    pub orphaned_holds: Vec<String>,
    pub violations: Vec<String>,
}

impl Report {
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }

    /// Whether every event was read and acknowledged.
    pub fn drained(&self) -> bool {
        self.streams.pending == 0 && self.streams.lag == 0
    }
}

/// Grace after a hold's deadline before it counts as overdue (the reaper runs each second).
const OVERDUE_GRACE_MS: i64 = 5_000;

fn rank(status: &str) -> u8 {
    match status {
        "held" => 1,
        "paid" | "expired" => 2,
        "delivered" => 3,
        _ => 0,
    }
}

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

fn stream_state(
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

/// Records a reconciliation's verdict in the control plane (`keys::verdict`), for
/// `/metrics` and alerts: `at_ms`, `violations`, `stores`.
pub fn record(con: &mut Connection, r: &Report) -> Result<(), ReconcileError> {
    let _: () = con.hset_multiple(
        keys::verdict(&r.campaign),
        &[
            ("at_ms", seckill_core::now_ms().to_string()),
            ("violations", r.violations.len().to_string()),
            ("stores", r.stores.len().to_string()),
        ],
    )?;
    Ok(())
}

/// What reconciliation reads of one campaign, for [`judge`].
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub campaign: String,
    pub ledger: Ledger,
    /// Every order Redis records, partition by partition in sequence order.
    pub orders: Vec<RedisOrder>,
    /// The furthest status any store holds for each order, and its code.
    pub stored: HashMap<String, (String, Option<String>)>,
    /// The stores read, as shown in the report.
    pub stores: Vec<String>,
    pub streams: StreamState,
    /// `delivered` events per order, over every stream.
    pub deliveries: HashMap<String, u32>,
    /// Order → code as the code pool bound them; `None` for a campaign without codes.
    pub bound: Option<HashMap<String, String>>,
    /// Every entry of every partition's hold index.
    pub hold_index: Vec<String>,
    /// Orders each partition had taken before its orders were read: a stored order
    /// above that may have been taken since, and is not missing from Redis.
    pub taken: HashMap<u32, u64>,
}

/// Reconciles one campaign against the given order stores.
pub fn reconcile(
    con: &mut Connection,
    id: &str,
    stores: &[PathBuf],
) -> Result<Report, ReconcileError> {
    let c = control::get(con, id)?;
    let ledger = ledger::check(con, &c)?;
    let mut taken = HashMap::new();
    for p in 0..c.spec.partitions {
        let seq: Option<u64> = con.hget(PartitionKeys::new(id, p).part(), "seq")?;
        taken.insert(p, seq.unwrap_or(0));
    }
    let orders = redis_orders(con, &c)?;
    let (streams, deliveries) = stream_state(con, &c)?;

    // The furthest status any store holds for each order (workers share the streams).
    let mut stored: HashMap<String, (String, Option<String>)> = HashMap::new();
    for path in stores {
        let db = OrderDb::open_existing(path).map_err(|source| ReconcileError::Db {
            path: path.clone(),
            source,
        })?;
        let rows = db.orders(id).map_err(|source| ReconcileError::Db {
            path: path.clone(),
            source,
        })?;
        for o in rows {
            let e = stored
                .entry(o.order_id)
                .or_insert_with(|| (o.status.clone(), None));
            if rank(&o.status) > rank(&e.0) {
                e.0 = o.status;
            }
            if o.license_key.is_some() {
                e.1 = o.license_key;
            }
        }
    }
    let bound = match c.spec.codes_file {
        Some(_) => Some(con.hgetall(CodeKeys::new(id).bound())?),
        None => None,
    };
    let mut hold_index = Vec::new();
    for p in 0..c.spec.partitions {
        let indexed: Vec<String> = con.zrange(PartitionKeys::new(id, p).holds(), 0, -1)?;
        hold_index.extend(indexed);
    }
    let evidence = Evidence {
        campaign: id.to_string(),
        ledger,
        orders,
        stored,
        stores: stores.iter().map(|p| p.display().to_string()).collect(),
        streams,
        deliveries,
        bound,
        hold_index,
        taken,
    };
    Ok(judge(evidence, seckill_core::now_ms()))
}

/// Judges what was read of one campaign at `now` (ms): the ledger's violations, and the
/// orders Redis, the streams and the stores disagree on.
pub fn judge(e: Evidence, now: i64) -> Report {
    let Evidence {
        campaign,
        ledger,
        orders,
        stored,
        stores,
        streams,
        deliveries,
        bound,
        hold_index,
        taken,
    } = e;
    let mut r = Report {
        campaign,
        violations: ledger.violations.clone(),
        ledger,
        orders_in_redis: BTreeMap::new(),
        orders_in_stores: BTreeMap::new(),
        stores,
        streams,
        missing: vec![],
        unknown: vec![],
        mismatched: vec![],
        undelivered: vec![],
        delivered_twice: vec![],
        codes_reused: vec![],
        overdue_holds: vec![],
        orphaned_holds: vec![],
    };
    let mut codes: HashMap<&str, &str> = HashMap::new();
    for o in &orders {
        *r.orders_in_redis.entry(o.status.clone()).or_default() += 1;
        match stored.get(&o.order_id) {
            None => r.missing.push(o.order_id.clone()),
            Some((s, _)) if s != &o.status => {
                r.mismatched
                    .push((o.order_id.clone(), o.status.clone(), s.clone()))
            }
            Some(_) => {}
        }
        if o.status == "paid" {
            r.undelivered.push(o.order_id.clone());
        }
        if o.status == "held" && o.pay_by_ms + OVERDUE_GRACE_MS < now {
            r.overdue_holds.push(o.order_id.clone());
        }
        if deliveries.get(&o.order_id).copied().unwrap_or(0) > 1 {
            r.delivered_twice.push(o.order_id.clone());
        }
        if let Some(code) = &o.license_key {
            if let Some(other) = codes.insert(code, &o.order_id) {
                r.codes_reused
                    .push(format!("{code} ({other}, {})", o.order_id));
            }
        }
    }
    for (s, _) in stored.values() {
        *r.orders_in_stores.entry(s.clone()).or_default() += 1;
    }
    let known: std::collections::HashSet<&str> =
        orders.iter().map(|o| o.order_id.as_str()).collect();
    let before_the_read = |id: &str| {
        OrderId::parse(id).is_none_or(|o| o.seq <= taken.get(&o.partition).copied().unwrap_or(0))
    };
    r.unknown = stored
        .keys()
        .filter(|id| !known.contains(id.as_str()) && before_the_read(id))
        .cloned()
        .collect();
    r.unknown.sort();
    if let Some(bound) = &bound {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for (oid, code) in bound {
            if let Some(other) = seen.insert(code, oid) {
                r.codes_reused
                    .push(format!("{code} bound to {other} and {oid}"));
            }
        }
    }
    let held: std::collections::HashSet<&str> = orders
        .iter()
        .filter(|o| o.status == "held")
        .map(|o| o.order_id.as_str())
        .collect();
    r.orphaned_holds.extend(
        hold_index
            .into_iter()
            .filter(|o| !held.contains(o.as_str())),
    );

    // Store differences are violations only once every event was read and acknowledged.
    let drained = r.drained();
    let findings = [
        (
            drained,
            r.missing.len(),
            "acknowledged orders missing from every store",
        ),
        (
            drained,
            r.unknown.len(),
            "orders in a store that Redis has no record of",
        ),
        (
            drained,
            r.mismatched.len(),
            "orders at another status in the stores than in Redis",
        ),
        (drained, r.undelivered.len(), "paid orders not delivered"),
        (
            true,
            r.delivered_twice.len(),
            "orders delivered more than once",
        ),
        (true, r.codes_reused.len(), "codes handed out twice"),
        (
            true,
            r.overdue_holds.len(),
            "holds past their deadline not released",
        ),
        (
            true,
            r.orphaned_holds.len(),
            "hold-index entries without a held order",
        ),
    ];
    let v: Vec<String> = findings
        .iter()
        .filter(|(counts, n, _)| *counts && *n > 0)
        .map(|(_, n, what)| format!("{n} {what}"))
        .collect();
    r.violations.extend(v);
    r
}

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
    for oid in &report.orphaned_holds {
        if let Some(o) = OrderId::parse(oid) {
            let n: usize = con.zrem(PartitionKeys::new(id, o.partition).holds(), oid)?;
            done.index_entries_removed += n;
        }
    }
    Ok(done)
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = &self.ledger;
        let counts = |m: &BTreeMap<String, u64>| {
            ["held", "paid", "delivered", "expired"]
                .iter()
                .map(|s| format!("{s} {}", m.get(*s).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(f, "reconciliation of {}", self.campaign)?;
        writeln!(
            f,
            "  stock      remaining {} + in transit {} + held {} + sold {} = {} (total {})",
            l.remaining,
            l.in_transit,
            l.held,
            l.sold,
            l.remaining + l.in_transit + l.held + l.sold,
            l.total
        )?;
        writeln!(
            f,
            "  redis      {} orders: {}",
            self.orders_in_redis.values().sum::<u64>(),
            counts(&self.orders_in_redis)
        )?;
        writeln!(
            f,
            "  stores     {} orders: {}  ({})",
            self.orders_in_stores.values().sum::<u64>(),
            counts(&self.orders_in_stores),
            self.stores.join(", ")
        )?;
        writeln!(
            f,
            "  streams    {} entries, {} pending, {} unread{}",
            self.streams.entries,
            self.streams.pending,
            self.streams.lag,
            if self.drained() {
                ""
            } else {
                " (not drained: store differences may be in flight)"
            }
        )?;
        for (label, list) in [
            ("missing", &self.missing),
            ("not in redis", &self.unknown),
            ("undelivered", &self.undelivered),
            ("delivered twice", &self.delivered_twice),
            ("codes reused", &self.codes_reused),
            ("overdue holds", &self.overdue_holds),
            ("orphaned holds", &self.orphaned_holds),
        ] {
            if !list.is_empty() {
                let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
                writeln!(
                    f,
                    "  {label:<10} {}: {}{}",
                    list.len(),
                    shown.join(", "),
                    if list.len() > 5 { ", …" } else { "" }
                )?;
            }
        }
        if !self.mismatched.is_empty() {
            let shown: Vec<String> = self
                .mismatched
                .iter()
                .take(5)
                .map(|(o, r, s)| format!("{o} redis {r} / store {s}"))
                .collect();
            writeln!(
                f,
                "  mismatched {}: {}",
                self.mismatched.len(),
                shown.join(", ")
            )?;
        }
        if self.holds() {
            write!(f, "  verdict    the ledger holds")
        } else {
            write!(f, "  verdict    VIOLATED: {}", self.violations.join("; "))
        }
    }
}
