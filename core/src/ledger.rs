//! The ledger of a campaign as Redis holds it, and the invariants it must keep:
//! conservation (remaining + in transit + held + sold = total), no oversell, the per-user
//! limit, and every held unit backed by an order.

use crate::connection::Connection;
use redis::Commands;
use std::collections::{HashMap, HashSet};

use crate::campaign::Campaign;
use crate::control::{self, ControlError, PartitionStock};
use crate::keys::PartitionKeys;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Ledger {
    pub campaign: String,
    pub total: i64,
    /// Units on the shelves of the partitions.
    pub remaining: i64,
    /// Units taken off a partition by a transfer the target has not applied yet.
    pub in_transit: i64,
    pub held: i64,
    pub sold: i64,
    pub buyers: usize,
    pub orders: usize,
    pub violations: Vec<String>,
}

impl Ledger {
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

impl std::fmt::Display for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: remaining {} + in transit {} + held {} + sold {} = {} of total {}; {} buyers, {} orders: {}",
            self.campaign,
            self.remaining,
            self.in_transit,
            self.held,
            self.sold,
            self.remaining + self.in_transit + self.held + self.sold,
            self.total,
            self.buyers,
            self.orders,
            if self.holds() {
                "ledger holds".to_string()
            } else {
                self.violations.join("; ")
            }
        )
    }
}

/// What the ledger reads of one partition.
#[derive(Debug, Clone, Default)]
pub struct PartitionRead {
    pub counters: PartitionStock,
    /// Its outgoing transfer log: transfer id → `target:units:at`.
    pub transfers_out: HashMap<String, String>,
    /// Ids of the transfers it has applied as a target.
    pub transfers_in: HashSet<String>,
    /// User → units held or bought.
    pub buyers: HashMap<String, i64>,
    /// The quantity of each order in its hold index (0 for an order without a record, or
    /// no longer held: a stale entry backs no held unit).
    pub held_orders: Vec<i64>,
    /// Orders taken so far.
    pub seq: i64,
    /// The partition's held, sold and transit counters as read with its buyers, hold
    /// index and transfer log, at one instant: what those are judged against. (`counters`
    /// come from one transaction over every partition, for conservation.) `None`: the
    /// same as `counters`.
    pub with_books: Option<(i64, i64, i64)>,
}

/// What `PARTITION_LEDGER` reads of a partition: held, sold and transit counters, buyers,
/// outgoing transfer log, units of each order in the hold index.
type Books = (
    i64,
    i64,
    i64,
    HashMap<String, i64>,
    HashMap<String, String>,
    Vec<i64>,
);

/// Reads every partition of a campaign and checks the ledger. Conservation is judged on
/// every partition's counters read in one transaction; each partition's buyers, held
/// orders and transfer log against its own counters read with them, by one read-only
/// script, so holds released or sold while the campaign is read are no disagreement.
pub fn check(con: &mut Connection, c: &Campaign) -> Result<Ledger, ControlError> {
    let id = &c.spec.id;
    // Counters in one transaction, then every applied set, then each partition's books:
    // an incoming transfer applied after the counters were read is then counted once,
    // on its way.
    let parts = control::partitions(con, c)?;
    let mut applied = Vec::with_capacity(parts.len());
    for part in &parts {
        let k = PartitionKeys::new(id, part.partition);
        applied.push(con.smembers::<_, HashSet<String>>(k.transfers_in())?);
    }
    let mut reads = Vec::with_capacity(parts.len());
    for (counters, transfers_in) in parts.into_iter().zip(applied) {
        let k = PartitionKeys::new(id, counters.partition);
        let (held, sold, transit, buyers, transfers_out, held_orders): Books =
            crate::scripts::PARTITION_LEDGER
                .key(k.part())
                .key(k.buyers())
                .key(k.holds())
                .key(k.transfers_out())
                .arg(k.order_prefix())
                .invoke(con)?;
        let seq: Option<i64> = con.hget(k.part(), "seq")?;
        reads.push(PartitionRead {
            counters,
            transfers_out,
            transfers_in,
            buyers,
            held_orders,
            seq: seq.unwrap_or(0),
            with_books: Some((held, sold, transit)),
        });
    }
    Ok(tally(
        id,
        c.spec.total as i64,
        i64::from(c.spec.per_user_limit),
        &reads,
    ))
}

/// Judges what was read of every partition of a campaign: the ledger, with a violation
/// for each invariant that does not hold.
pub fn tally(campaign: &str, total: i64, limit: i64, parts: &[PartitionRead]) -> Ledger {
    let mut l = Ledger {
        campaign: campaign.to_string(),
        total,
        ..Ledger::default()
    };
    let applied: HashMap<u32, &HashSet<String>> = parts
        .iter()
        .map(|r| (r.counters.partition, &r.transfers_in))
        .collect();
    let mut bought_units = 0;
    let mut held_in_orders = 0;
    // The held and sold units the buyers and the held orders are judged against.
    let (mut books_held, mut books_sold) = (0, 0);
    for r in parts {
        let part = &r.counters;
        let (held, sold, transit) = r.with_books.unwrap_or((part.held, part.sold, part.transit));
        books_held += held;
        books_sold += sold;
        l.remaining += part.stock;
        l.held += part.held;
        l.sold += part.sold;
        if part.stock < 0 || part.held < 0 || part.transit < 0 {
            l.violations.push(format!(
                "partition {} has a negative counter: {part:?}",
                part.partition
            ));
        }
        let mut logged = 0;
        for (tid, v) in &r.transfers_out {
            let mut f = v.split(':');
            let target: u32 = f.next().and_then(|t| t.parse().ok()).unwrap_or(u32::MAX);
            let units: i64 = f.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            logged += units;
            if !applied.get(&target).is_some_and(|s| s.contains(tid)) {
                l.in_transit += units;
            }
        }
        if logged != transit {
            l.violations.push(format!(
                "partition {}: transit counter {transit} but {logged} units logged",
                part.partition
            ));
        }
        for (user, n) in &r.buyers {
            if *n > limit {
                l.violations.push(format!(
                    "user {user} has {n} units, above the limit of {limit}"
                ));
            }
            bought_units += n;
        }
        l.buyers += r.buyers.len();
        held_in_orders += r.held_orders.iter().sum::<i64>();
        l.orders += r.seq as usize;
    }
    let accounted = l.remaining + l.in_transit + l.held + l.sold;
    if accounted != l.total {
        l.violations.push(format!(
            "conservation: remaining + in transit + held + sold = {accounted}, total is {}",
            l.total
        ));
    }
    if l.held + l.sold > l.total {
        l.violations.push(format!(
            "oversell: {} held + {} sold > total {}",
            l.held, l.sold, l.total
        ));
    }
    if bought_units != books_held + books_sold {
        l.violations.push(format!(
            "buyers hold {bought_units} units, counters say {}",
            books_held + books_sold
        ));
    }
    if held_in_orders != books_held {
        l.violations.push(format!(
            "held orders carry {held_in_orders} units, counters say {books_held}"
        ));
    }
    l
}
