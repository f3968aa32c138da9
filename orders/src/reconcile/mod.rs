//! Reconciliation: one campaign compared across Redis (stock, holds, buyers, orders), the
//! order streams (entries, pending, lag) and every order store, against the ledger:
//! conservation, no oversell, the per-user limit, every acknowledged order stored, every
//! paid order delivered exactly once, no code handed out twice, and the money: payments
//! that come to price × units sold, one payment for each sold order (`money`). `repair`
//! replays into the first store what it lacks and releases overdue holds; it never
//! invents or deletes a sale.

use redis::Commands;
use seckill_core::connection::Connection;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::OrderDb;
use seckill_core::control::{self, ControlError};
use seckill_core::keys::{self, CodeKeys};
use seckill_core::ledger::{self, Ledger};
use seckill_core::payments;

mod gather;
mod judge;
mod money;
mod repair;
#[cfg(test)]
mod tests;

use gather::stream_state;
pub use gather::{backlog, partition_books, redis_orders, PartitionBooks};
pub use judge::judge;
use judge::rank;
use money::paid_after_the_read;
pub use money::{amount, MoneyReport, Payments};
pub use repair::{repair, Repaired};

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("partition {0}: its books came back in a shape no script of ours returns")]
    Unreadable(u32),
    #[error("order store {path}: {source}")]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("order store {0}: no order tables in it yet (a worker makes them when it first opens its store)")]
    Unmade(PathBuf),
}

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
    /// Its licence keys, a line each.
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
    /// Delivered orders whose keys are not one a unit.
    pub keys_short: Vec<String>,
    /// Held orders past their deadline (nobody released them).
    pub overdue_holds: Vec<String>,
    /// Hold-index entries whose order is not held.
    pub orphaned_holds: Vec<String>,
    /// Held orders missing from their partition's hold index: nobody would release them.
    pub unindexed_holds: Vec<String>,
    /// The payments against the sales; `None` when the evidence held no payments.
    pub money: Option<MoneyReport>,
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
    /// Each partition's counters, buyers and hold index, read at the instant its orders
    /// were: the counters must agree with the orders to the unit.
    pub books: Vec<PartitionBooks>,
    /// Orders a later read showed further on than Redis's first read (a store, or a
    /// payment that paid it), read from Redis again after the stores and the payments:
    /// the status each has now. An order paid or expired between the reads is not a
    /// disagreement; a store or a payment ahead of what Redis still holds is.
    pub read_again: HashMap<String, String>,
    /// The campaign's payments, read after its orders; without them (`None`) the money
    /// is not judged.
    pub payments: Option<Payments>,
}

/// The status Redis has now of each order a store holds at a later status than `orders`
/// (Redis's first read) showed, and of each order a payment paid that `orders` did not
/// show sold.
fn read_again(
    con: &mut Connection,
    orders: &[RedisOrder],
    stored: &HashMap<String, (String, Option<String>)>,
    payments: &Payments,
) -> Result<HashMap<String, String>, ReconcileError> {
    let mut ahead: Vec<&str> = orders
        .iter()
        .filter(|o| {
            stored
                .get(&o.order_id)
                .is_some_and(|(s, _)| rank(s) > rank(&o.status))
        })
        .map(|o| o.order_id.as_str())
        .chain(paid_after_the_read(&payments.records, orders))
        .collect();
    ahead.sort_unstable();
    ahead.dedup();
    let mut now = HashMap::with_capacity(ahead.len());
    for id in ahead {
        let Some(oid) = keys::OrderId::parse(id) else {
            continue;
        };
        let key = keys::PartitionKeys::new(oid.campaign, oid.partition).order(id);
        let status: Option<String> = con.hget(key, keys::order::STATUS)?;
        if let Some(s) = status {
            now.insert(id.to_string(), s);
        }
    }
    Ok(now)
}

/// Reconciles one campaign against the given order stores.
pub fn reconcile(
    con: &mut Connection,
    id: &str,
    stores: &[PathBuf],
) -> Result<Report, ReconcileError> {
    let c = control::get(con, id)?;
    let ledger = ledger::check(con, &c)?;
    let books = partition_books(con, &c)?;
    let taken = books.iter().map(|b| (b.partition, b.seq)).collect();
    let orders: Vec<RedisOrder> = books.iter().flat_map(|b| b.orders.clone()).collect();
    let hold_index = books.iter().flat_map(|b| b.hold_index.clone()).collect();
    let (streams, deliveries) = stream_state(con, &c)?;

    // The furthest status any store holds for each order (workers share the streams).
    let mut stored: HashMap<String, (String, Option<String>)> = HashMap::new();
    for path in stores {
        let db_err = |source| ReconcileError::Db {
            path: path.clone(),
            source,
        };
        let db = OrderDb::open_existing(path).map_err(db_err)?;
        if !db.is_made().map_err(db_err)? {
            return Err(ReconcileError::Unmade(path.clone()));
        }
        let rows = db.orders(id).map_err(db_err)?;
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
    // After the orders: a payment taken in between shows here and is read again below.
    let campaign_orders = format!("{id}{}", keys::OrderId::SEP);
    let payments = Payments {
        currency: c.spec.currency.clone(),
        price_cents: c.spec.price_cents,
        records: payments::of_campaign(con, id, c.spec.partitions)?,
        unmatched: payments::unmatched(con)?
            .into_iter()
            .filter(|p| p.order_id.starts_with(&campaign_orders))
            .collect(),
    };
    let read_again = read_again(con, &orders, &stored, &payments)?;
    let bound = match c.spec.codes_file {
        Some(_) => Some(con.hgetall(CodeKeys::new(id).bound())?),
        None => None,
    };
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
        books,
        read_again,
        payments: Some(payments),
    };
    Ok(judge(evidence, seckill_core::now_ms()))
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = &self.ledger;
        // The four statuses always; money owed or given back only when some order has it.
        let counts = |m: &BTreeMap<String, u64>| {
            let always = ["held", "paid", "delivered", "expired"];
            always
                .iter()
                .map(|s| format!("{s} {}", m.get(*s).copied().unwrap_or(0)))
                .chain(
                    m.iter()
                        .filter(|(s, n)| !always.contains(&s.as_str()) && **n > 0)
                        .map(|(s, n)| format!("{s} {n}")),
                )
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
        if let Some(m) = &self.money {
            m.fmt_lines(f)?;
        }
        let none = Vec::new();
        let money =
            |list: fn(&MoneyReport) -> &Vec<String>| self.money.as_ref().map_or(&none, list);
        for (label, list) in [
            ("missing", &self.missing),
            ("not in redis", &self.unknown),
            ("undelivered", &self.undelivered),
            ("delivered twice", &self.delivered_twice),
            ("codes reused", &self.codes_reused),
            ("keys short", &self.keys_short),
            ("overdue holds", &self.overdue_holds),
            ("orphaned holds", &self.orphaned_holds),
            ("unindexed holds", &self.unindexed_holds),
            ("unpaid", money(|m| &m.unpaid)),
            ("paid twice", money(|m| &m.paid_twice)),
            ("paid unsold", money(|m| &m.paid_unsold)),
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
