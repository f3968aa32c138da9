//! The verdict on what was read: a pure function of the evidence and the time.

use std::collections::{BTreeMap, HashMap, HashSet};

use seckill_core::keys::OrderId;

use super::money::judge_money;
use super::{Evidence, PartitionBooks, RedisOrder, Report};

/// Grace after a hold's deadline before it counts as overdue (the reaper runs each second).
const OVERDUE_GRACE_MS: i64 = 5_000;

pub(super) fn rank(status: &str) -> u8 {
    match status {
        "held" => 1,
        "paid" | "expired" => 2,
        "delivered" | "refund_due" => 3,
        "refunded" => 4,
        _ => 0,
    }
}

/// Whether an order at status `now` has been at `then` or passed it: held → paid →
/// delivered, held → expired → refund_due → refunded.
fn reached(then: &str, now: &str) -> bool {
    then == now
        || (then == "held" && rank(now) > 1)
        || (then == "paid" && now == "delivered")
        || (then == "expired" && matches!(now, "refund_due" | "refunded"))
        || (then == "refund_due" && now == "refunded")
}

/// Judges what was read of one campaign at `now` (ms): the ledger's violations, the
/// orders Redis, the streams and the stores disagree on, and the money.
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
        books,
        read_again,
        payments,
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
        keys_short: vec![],
        overdue_holds: vec![],
        orphaned_holds: vec![],
        unindexed_holds: vec![],
        money: None,
    };
    for o in &orders {
        *r.orders_in_redis.entry(o.status.clone()).or_default() += 1;
    }
    for (s, _) in stored.values() {
        *r.orders_in_stores.entry(s.clone()).or_default() += 1;
    }
    // Counts this verdict makes itself, not evidence: each order once, by its status.
    assert_eq!(r.orders_in_redis.values().sum::<u64>(), orders.len() as u64);
    assert_eq!(
        r.orders_in_stores.values().sum::<u64>(),
        stored.len() as u64
    );
    orders_against_stores(&orders, &stored, &read_again, &deliveries, now, &mut r);
    r.unknown = unknown(&orders, &stored, &taken);
    if let Some(bound) = &bound {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for (oid, codes) in bound {
            for code in codes.lines() {
                if let Some(other) = seen.insert(code, oid) {
                    r.codes_reused
                        .push(format!("{code} bound to {other} and {oid}"));
                }
            }
        }
    }
    let held: HashSet<&str> = orders
        .iter()
        .filter(|o| o.status == "held")
        .map(|o| o.order_id.as_str())
        .collect();
    r.orphaned_holds.extend(
        hold_index
            .into_iter()
            .filter(|o| !held.contains(o.as_str())),
    );
    for b in &books {
        books_against_orders(b, &mut r);
    }
    let findings = findings(&r);
    r.violations.extend(findings);
    if let Some(p) = payments {
        // The counters read with the orders, not the ledger's earlier read: a payment
        // between the two reads would otherwise look unbalanced.
        let sold = books.iter().map(|b| b.sold).sum();
        r.money = Some(judge_money(
            p,
            &orders,
            &read_again,
            sold,
            &mut r.violations,
        ));
    }
    r
}

/// Each order Redis records against the stores, its deliveries and its deadline:
/// missing, mismatched, undelivered, overdue, delivered twice, its code reused.
fn orders_against_stores(
    orders: &[RedisOrder],
    stored: &HashMap<String, (String, Option<String>)>,
    read_again: &HashMap<String, String>,
    deliveries: &HashMap<String, u32>,
    now: i64,
    r: &mut Report,
) {
    let mut codes: HashMap<&str, &str> = HashMap::new();
    for o in orders {
        match stored.get(&o.order_id) {
            None => r.missing.push(o.order_id.clone()),
            // A store further on than Redis's first read, where Redis read again has
            // caught up, shows an order that moved on between the reads.
            Some((s, _))
                if s != &o.status
                    && !(rank(s) > rank(&o.status)
                        && read_again
                            .get(&o.order_id)
                            .is_some_and(|now| reached(s, now))) =>
            {
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
        let keys: Vec<&str> = o
            .license_key
            .as_deref()
            .map_or(vec![], |k| k.lines().collect());
        for code in &keys {
            if let Some(other) = codes.insert(code, &o.order_id) {
                r.codes_reused
                    .push(format!("{code} ({other}, {})", o.order_id));
            }
        }
        if o.status == "delivered" && keys.len() as i64 != o.quantity {
            r.keys_short.push(format!(
                "{} ({} units, {} keys)",
                o.order_id,
                o.quantity,
                keys.len()
            ));
        }
    }
}

/// The stored orders Redis has no record of, sorted; an order taken after Redis's
/// orders were read is not one of them.
fn unknown(
    orders: &[RedisOrder],
    stored: &HashMap<String, (String, Option<String>)>,
    taken: &HashMap<u32, u64>,
) -> Vec<String> {
    let known: HashSet<&str> = orders.iter().map(|o| o.order_id.as_str()).collect();
    let before_the_read = |id: &str| {
        OrderId::parse(id).is_none_or(|o| o.seq <= taken.get(&o.partition).copied().unwrap_or(0))
    };
    let mut unknown: Vec<String> = stored
        .keys()
        .filter(|id| !known.contains(id.as_str()) && before_the_read(id))
        .cloned()
        .collect();
    unknown.sort();
    unknown
}

/// The report's lists as violations, each with its count. Store differences are
/// violations only once every event was read and acknowledged.
fn findings(r: &Report) -> Vec<String> {
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
            r.keys_short.len(),
            "delivered orders without a licence key a unit",
        ),
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
        (
            true,
            r.unindexed_holds.len(),
            "held orders missing from the hold index (never released)",
        ),
    ];
    findings
        .iter()
        .filter(|(counts, n, _)| *counts && *n > 0)
        .map(|(_, n, what)| format!("{n} {what}"))
        .collect()
}

/// One partition's counters and buyers against its own orders, all read at one instant:
/// held units are the held orders', sold units the paid and delivered orders', each
/// buyer's credit the units of their live orders, and each held order in the hold index.
/// A sale without an order record (stock down, sold and the buyer up, no order) and a
/// lost index entry behind a stale one of the same quantity both show here.
fn books_against_orders(b: &PartitionBooks, r: &mut Report) {
    let indexed: HashSet<&str> = b.hold_index.iter().map(String::as_str).collect();
    let (mut held, mut sold) = (0, 0);
    let mut credited: HashMap<&str, i64> = HashMap::new();
    for o in &b.orders {
        match o.status.as_str() {
            "held" => {
                held += o.quantity;
                if !indexed.contains(o.order_id.as_str()) {
                    r.unindexed_holds.push(o.order_id.clone());
                }
            }
            "paid" | "delivered" => sold += o.quantity,
            _ => continue,
        }
        *credited.entry(o.user.as_str()).or_default() += o.quantity;
    }
    let p = b.partition;
    if held != b.held {
        r.violations.push(format!(
            "partition {p}: held orders carry {held} units, its counter says {}",
            b.held
        ));
    }
    if sold != b.sold {
        r.violations.push(format!(
            "partition {p}: paid and delivered orders carry {sold} units, its counter says {} sold",
            b.sold
        ));
    }
    let mut users: Vec<&str> = b
        .buyers
        .keys()
        .map(String::as_str)
        .chain(credited.keys().copied())
        .collect();
    users.sort_unstable();
    users.dedup();
    let wrong: Vec<String> = users
        .into_iter()
        .filter_map(|u| {
            let (has, orders) = (
                b.buyers.get(u).copied().unwrap_or(0),
                credited.get(u).copied().unwrap_or(0),
            );
            (has != orders).then(|| format!("{u} credited {has}, orders {orders}"))
        })
        .collect();
    if !wrong.is_empty() {
        r.violations.push(format!(
            "partition {p}: {} buyers credited with other than their orders carry ({})",
            wrong.len(),
            wrong.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
}
