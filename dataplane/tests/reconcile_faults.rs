//! Property of reconciliation (`ledger::tally`, `reconcile::judge`): a consistent
//! generated ledger shows nothing, and one with planted faults shows exactly those.

use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{HashMap, HashSet};

use seckill_core::control::PartitionStock;
use seckill_core::keys::OrderId;
use seckill_core::ledger::{tally, PartitionRead};
use seckill_orders::reconcile::{judge, Evidence, RedisOrder, Report, StreamState};

/// The campaign of the generated ledgers, and the instant they are judged at.
const SHOP: &str = "shop";
const NOW: i64 = 1_750_000_000_000;
const STATUSES: [&str; 4] = ["held", "paid", "delivered", "expired"];

/// A consistent campaign, in the terms its readers get: `(partition, units, status, pay_by
/// offset)` of each order, where a settled order is held, delivered or expired; units on
/// each shelf; `(source, hop, units, applied)` of each logged transfer.
#[derive(Debug, Clone)]
struct ShopSpec {
    partitions: usize,
    limit: i64,
    codes: bool,
    backlog: (u64, u64),
    orders: Vec<(Index, Index, Index, i64)>,
    shelves: Vec<i64>,
    transfers: Vec<(Index, Index, i64, bool)>,
}

fn shop_spec() -> impl Strategy<Value = ShopSpec> {
    let order = (
        any::<Index>(),
        any::<Index>(),
        any::<Index>(),
        // A hold is not overdue until 5 s past its deadline; the boundary itself often.
        prop_oneof![Just(-5_000i64), -5_000i64..300_000],
    );
    let transfer = (any::<Index>(), any::<Index>(), 1i64..6, any::<bool>());
    (
        1usize..=4,
        1i64..=3,
        any::<bool>(),
        prop_oneof![Just((0, 0)), (0u64..3, 1u64..3), (1u64..3, 0u64..3)],
        prop::collection::vec(order, 0..24),
        prop::collection::vec(0i64..12, 4),
        prop::collection::vec(transfer, 0..4),
    )
        .prop_map(
            |(partitions, limit, codes, backlog, orders, shelves, transfers)| ShopSpec {
                partitions,
                limit,
                codes,
                backlog,
                orders,
                shelves,
                transfers,
            },
        )
}

/// Everything reconciliation reads of a campaign, before the ledger is tallied.
#[derive(Debug, Clone)]
struct Shop {
    total: i64,
    limit: i64,
    reads: Vec<PartitionRead>,
    /// Each partition's hold index.
    index: Vec<Vec<String>>,
    evidence: Evidence,
    /// Orders a fault was planted on already.
    touched: HashSet<String>,
}

impl Shop {
    fn new(s: &ShopSpec) -> Shop {
        let parts = s.partitions;
        let mut reads: Vec<PartitionRead> = (0..parts)
            .map(|p| PartitionRead {
                counters: PartitionStock {
                    partition: p as u32,
                    stock: s.shelves[p],
                    ..PartitionStock::default()
                },
                ..PartitionRead::default()
            })
            .collect();
        let mut index = vec![vec![]; parts];
        let mut e = Evidence {
            campaign: SHOP.into(),
            stores: vec!["orders.sqlite".into()],
            streams: StreamState {
                entries: s.orders.len() as u64,
                pending: s.backlog.0,
                lag: s.backlog.1,
            },
            bound: s.codes.then(HashMap::new),
            ..Evidence::default()
        };
        let mut orders: Vec<_> = s.orders.iter().enumerate().collect();
        orders.sort_by_key(|(_, o)| o.0.index(parts));
        for (n, (p, qty, status, pay_by)) in orders {
            let (p, qty) = (p.index(parts), 1 + qty.index(s.limit as usize) as i64);
            let status = ["held", "delivered", "expired"][status.index(3)];
            let r = &mut reads[p];
            r.seq += 1;
            let id = format!("{SHOP}.{p}.{}", r.seq);
            let user = format!("u{n}");
            match status {
                "held" => {
                    r.counters.held += qty;
                    index[p].push(id.clone());
                }
                "delivered" => r.counters.sold += qty,
                _ => {}
            }
            if status != "expired" {
                r.buyers.insert(user.clone(), qty);
            }
            let delivered = status == "delivered";
            // A key a unit, a line each.
            let code = delivered.then(|| {
                (0..qty)
                    .map(|u| format!("K-{id}-{u}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            if let (Some(bound), Some(code)) = (&mut e.bound, &code) {
                bound.insert(id.clone(), code.clone());
            }
            if delivered {
                e.deliveries.insert(id.clone(), 1);
            }
            e.stored.insert(id.clone(), (status.into(), code.clone()));
            e.orders.push(RedisOrder {
                order_id: id,
                user,
                quantity: qty,
                status: status.into(),
                pay_by_ms: if status == "held" {
                    NOW + pay_by
                } else {
                    NOW - 600_000
                },
                paid_ms: delivered.then_some(NOW - 500_000),
                delivered_ms: delivered.then_some(NOW - 400_000),
                license_key: code,
            });
        }
        let mut on_the_way = 0;
        for (source, hop, units, applied) in &s.transfers {
            let source = source.index(parts);
            // Onto another partition; with only one, onto itself.
            let target = (source + 1 + hop.index(parts.max(2) - 1)) % parts;
            let r = &mut reads[source];
            let id = format!("{source}.{}", r.transfers_out.len() + 1);
            r.transfers_out
                .insert(id.clone(), format!("{target}:{units}:1750000000"));
            r.counters.transit += units;
            if *applied {
                // Its units are on the target's shelf already.
                reads[target].transfers_in.insert(id);
            } else {
                on_the_way += units;
            }
        }
        let c = reads.iter().map(|r| &r.counters);
        let total = c.map(|c| c.stock + c.held + c.sold).sum::<i64>() + on_the_way;
        Shop {
            total,
            limit: s.limit,
            reads,
            index,
            evidence: e,
            touched: HashSet::new(),
        }
    }

    /// The report on the campaign as it stands.
    fn judged(&self) -> Report {
        let mut e = self.evidence.clone();
        let mut reads = self.reads.clone();
        for (r, index) in reads.iter_mut().zip(&self.index) {
            // What `ledger::check` reads: the units of the held order each entry names.
            r.held_orders = index
                .iter()
                .map(|id| {
                    self.order(id)
                        .filter(|o| o.status == "held")
                        .map_or(0, |o| o.quantity)
                })
                .collect();
        }
        e.ledger = tally(SHOP, self.total, self.limit, &reads);
        e.hold_index = self.index.concat();
        e.taken = reads
            .iter()
            .enumerate()
            .map(|(p, r)| (p as u32, r.seq as u64))
            .collect();
        judge(e, NOW)
    }

    fn order(&self, id: &str) -> Option<&RedisOrder> {
        self.evidence.orders.iter().find(|o| o.order_id == id)
    }

    /// An order at one of `statuses` no fault was planted on yet, claimed for one.
    fn claim(&mut self, statuses: &[&str], at: Index) -> Option<usize> {
        let free: Vec<usize> = (0..self.evidence.orders.len())
            .filter(|i| {
                let o = &self.evidence.orders[*i];
                statuses.contains(&o.status.as_str()) && !self.touched.contains(&o.order_id)
            })
            .collect();
        let i = *free.get(at.index(free.len().max(1)))?;
        self.touched
            .insert(self.evidence.orders[i].order_id.clone());
        Some(i)
    }

    fn partition_of(&self, i: usize) -> usize {
        let id = &self.evidence.orders[i].order_id;
        OrderId::parse(id).map_or(0, |o| o.partition as usize)
    }
}

/// A fault a ledger may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// No store has an order.
    Missing,
    /// A store has an order at another status.
    Mismatched,
    /// A paid order was never delivered.
    Undelivered,
    /// An order was delivered twice.
    DeliveredTwice,
    /// Two orders got the same code.
    CodeReused,
    /// Nobody released a hold past its deadline.
    Overdue,
    /// The hold index names an order that does not exist.
    Orphaned,
    /// The hold index still names an order that is no longer held.
    StaleIndex,
    /// The hold index lost a held order.
    LostIndex,
    /// A buyer's record is gone.
    LostBuyer,
    /// A transit counter disagrees with its log.
    TransitDrift,
    /// A user has more units than the limit.
    OverLimit,
    /// Units on a shelf that came from nowhere.
    PhantomStock,
    /// Redis lost an order record a store still has.
    Vanished,
    /// More units sold than the campaign has.
    Oversell,
    /// No fault: a held order moved on between Redis's read and the stores' (a store
    /// ahead of the first read, and Redis read again agreeing with it).
    MovedOn,
}

/// Oversell comes last: it sells more than the faults before it left.
const FAULTS: [Fault; 16] = [
    Fault::MovedOn,
    Fault::Missing,
    Fault::Mismatched,
    Fault::Undelivered,
    Fault::DeliveredTwice,
    Fault::CodeReused,
    Fault::Overdue,
    Fault::Orphaned,
    Fault::StaleIndex,
    Fault::LostIndex,
    Fault::LostBuyer,
    Fault::TransitDrift,
    Fault::OverLimit,
    Fault::PhantomStock,
    Fault::Vanished,
    Fault::Oversell,
];

/// What the report must name once faults are planted.
#[derive(Debug, Default)]
struct Expected {
    missing: Vec<String>,
    unknown: Vec<String>,
    mismatched: Vec<(String, String, String)>,
    undelivered: Vec<String>,
    delivered_twice: Vec<String>,
    /// (code, first order, second order)
    codes_reused: Vec<(String, String, String)>,
    overdue_holds: Vec<String>,
    orphaned_holds: Vec<String>,
    /// Ledger violations, whole.
    exact: Vec<String>,
    /// Units the counters account for beyond the total.
    extra_units: i64,
    /// Units the hold index names beyond the held counter.
    held_index_units: i64,
    /// Units the buyers hold beyond the held and sold counters.
    buyer_units: i64,
    oversold: bool,
}

/// Plants `fault` on the shop, on orders and partitions `at` picks; records what the
/// report must say about it. A fault with nothing to plant it on is left out.
fn plant(shop: &mut Shop, x: &mut Expected, fault: Fault, at: (Index, Index)) {
    let parts = shop.reads.len();
    match fault {
        Fault::Vanished => {
            // A settled order: a held one would also leave its hold-index entry behind.
            let Some(i) = shop.claim(&["delivered", "expired"], at.0) else {
                return;
            };
            let id = shop.evidence.orders.remove(i).order_id;
            x.unknown.push(id);
        }
        Fault::Missing => {
            let Some(i) = shop.claim(&STATUSES, at.0) else {
                return;
            };
            let id = shop.evidence.orders[i].order_id.clone();
            shop.evidence.stored.remove(&id);
            x.missing.push(id);
        }
        Fault::Mismatched => {
            let Some(i) = shop.claim(&STATUSES, at.0) else {
                return;
            };
            let o = &shop.evidence.orders[i];
            let others: Vec<&str> = STATUSES.into_iter().filter(|s| *s != o.status).collect();
            let other = others[at.1.index(others.len())].to_string();
            shop.evidence.stored.get_mut(&o.order_id).expect("stored").0 = other.clone();
            // A store ahead of Redis stays a disagreement when Redis, read again, still
            // shows the earlier status (a write lost with a master).
            if at.1.index(2) == 0 {
                shop.evidence
                    .read_again
                    .insert(o.order_id.clone(), o.status.clone());
            }
            x.mismatched
                .push((o.order_id.clone(), o.status.clone(), other));
        }
        Fault::MovedOn => {
            let Some(i) = shop.claim(&["held"], at.0) else {
                return;
            };
            let id = shop.evidence.orders[i].order_id.clone();
            let later = ["paid", "expired", "delivered"][at.1.index(3)].to_string();
            shop.evidence.stored.get_mut(&id).expect("stored").0 = later.clone();
            shop.evidence.read_again.insert(id, later);
        }
        Fault::Undelivered => {
            let Some(i) = shop.claim(&["delivered"], at.0) else {
                return;
            };
            let e = &mut shop.evidence;
            let o = &mut e.orders[i];
            (o.status, o.delivered_ms, o.license_key) = ("paid".into(), None, None);
            e.stored.insert(o.order_id.clone(), ("paid".into(), None));
            e.deliveries.remove(&o.order_id);
            if let Some(bound) = &mut e.bound {
                bound.remove(&o.order_id);
            }
            x.undelivered.push(o.order_id.clone());
        }
        Fault::DeliveredTwice => {
            let Some(i) = shop.claim(&["delivered"], at.0) else {
                return;
            };
            let id = shop.evidence.orders[i].order_id.clone();
            shop.evidence.deliveries.insert(id.clone(), 2);
            x.delivered_twice.push(id);
        }
        Fault::CodeReused => {
            let Some(a) = shop.claim(&["delivered"], at.0) else {
                return;
            };
            let Some(b) = shop.claim(&["delivered"], at.1) else {
                return;
            };
            let (a, b) = (a.min(b), a.max(b));
            let e = &mut shop.evidence;
            // B's first key is A's: one code handed out twice, B's units still a key each.
            let code = e.orders[a]
                .license_key
                .as_deref()
                .and_then(|k| k.lines().next())
                .expect("a delivered order has a code")
                .to_string();
            let (ida, idb) = (e.orders[a].order_id.clone(), e.orders[b].order_id.clone());
            let keys_b = e.orders[b]
                .license_key
                .clone()
                .expect("a delivered order has a code");
            let keys_b: String = std::iter::once(code.as_str())
                .chain(keys_b.lines().skip(1))
                .collect::<Vec<_>>()
                .join("\n");
            e.orders[b].license_key = Some(keys_b.clone());
            e.stored.get_mut(&idb).expect("stored").1 = Some(keys_b.clone());
            if let Some(bound) = &mut e.bound {
                bound.insert(idb.clone(), keys_b);
            }
            x.codes_reused.push((code, ida, idb));
        }
        Fault::Overdue => {
            let Some(i) = shop.claim(&["held"], at.0) else {
                return;
            };
            let o = &mut shop.evidence.orders[i];
            // Reconciliation allows 5 s past the deadline: a millisecond more is overdue.
            o.pay_by_ms = NOW - 5_001 - [0, 1, 60_000][at.1.index(3)];
            x.overdue_holds.push(o.order_id.clone());
        }
        Fault::Orphaned => {
            let p = at.0.index(parts);
            let id = format!("{SHOP}.{p}.{}", shop.reads[p].seq + 100);
            shop.index[p].push(id.clone());
            x.orphaned_holds.push(id);
        }
        Fault::StaleIndex => {
            let Some(i) = shop.claim(&["paid", "delivered", "expired"], at.0) else {
                return;
            };
            let p = shop.partition_of(i);
            let o = &shop.evidence.orders[i];
            shop.index[p].push(o.order_id.clone());
            x.orphaned_holds.push(o.order_id.clone());
            // An entry of an order no longer held backs no held unit: with a lost entry
            // beside it, the two cannot cancel out.
        }
        Fault::LostIndex => {
            let Some(i) = shop.claim(&["held"], at.0) else {
                return;
            };
            let p = shop.partition_of(i);
            let o = &shop.evidence.orders[i];
            shop.index[p].retain(|id| id != &o.order_id);
            x.held_index_units -= o.quantity;
        }
        Fault::LostBuyer => {
            let Some(i) = shop.claim(&["held", "paid", "delivered"], at.0) else {
                return;
            };
            let p = shop.partition_of(i);
            let o = &shop.evidence.orders[i];
            shop.reads[p].buyers.remove(&o.user);
            x.buyer_units -= o.quantity;
        }
        Fault::TransitDrift => {
            let c = &mut shop.reads[at.0.index(parts)].counters;
            c.transit += 1;
            x.exact.push(format!(
                "partition {}: transit counter {} but {} units logged",
                c.partition,
                c.transit,
                c.transit - 1
            ));
        }
        Fault::OverLimit => {
            let units = shop.limit + 1;
            let Some(r) = shop.reads.iter_mut().find(|r| r.counters.stock >= units) else {
                return;
            };
            r.counters.stock -= units;
            r.counters.sold += units;
            r.buyers.insert("greedy".into(), units);
            x.exact.push(format!(
                "user greedy has {units} units, above the limit of {}",
                shop.limit
            ));
        }
        Fault::PhantomStock => {
            let units = 1 + at.1.index(5) as i64;
            shop.reads[at.0.index(parts)].counters.stock += units;
            x.extra_units += units;
        }
        Fault::Oversell => {
            // More than is left anywhere, each buyer within the limit.
            let left = shop.total + x.extra_units
                - shop
                    .reads
                    .iter()
                    .map(|r| r.counters.held + r.counters.sold)
                    .sum::<i64>();
            let units = left + 1 + at.1.index(3) as i64;
            let r = &mut shop.reads[at.0.index(parts)];
            r.counters.sold += units;
            for n in 0..units {
                *r.buyers
                    .entry(format!(
                        "over{}",
                        n % ((units + shop.limit - 1) / shop.limit)
                    ))
                    .or_default() += 1;
            }
            x.extra_units += units;
            x.oversold = true;
        }
    }
}

/// The violations the report must carry, given what was planted.
fn violations(x: &Expected, drained: bool, codes: bool) -> (Vec<String>, Vec<&'static str>) {
    let mut exact = x.exact.clone();
    let counted = [
        (
            drained,
            x.missing.len(),
            "acknowledged orders missing from every store",
        ),
        (
            drained,
            x.unknown.len(),
            "orders in a store that Redis has no record of",
        ),
        (
            drained,
            x.mismatched.len(),
            "orders at another status in the stores than in Redis",
        ),
        (drained, x.undelivered.len(), "paid orders not delivered"),
        (
            true,
            x.delivered_twice.len(),
            "orders delivered more than once",
        ),
        // The order records and the code pool each name a reused code.
        (
            true,
            x.codes_reused.len() * (1 + usize::from(codes)),
            "codes handed out twice",
        ),
        (
            true,
            x.overdue_holds.len(),
            "holds past their deadline not released",
        ),
        (
            true,
            x.orphaned_holds.len(),
            "hold-index entries without a held order",
        ),
    ];
    for (counts, n, what) in counted {
        if counts && n > 0 {
            exact.push(format!("{n} {what}"));
        }
    }
    let sums = [
        (x.extra_units != 0, "conservation: "),
        (x.oversold, "oversell: "),
        (x.buyer_units != 0, "buyers hold "),
        (x.held_index_units != 0, "held orders carry "),
    ];
    let prefixes = sums
        .iter()
        .filter(|(moved, _)| *moved)
        .map(|(_, p)| *p)
        .collect();
    (exact, prefixes)
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

proptest! {
    #[test]
    fn reconciliation_names_exactly_the_faults_planted_in_a_ledger(
        spec in shop_spec(),
        faults in prop::sample::subsequence(FAULTS.to_vec(), 0..=FAULTS.len()),
        picks in prop::collection::vec((any::<Index>(), any::<Index>()), FAULTS.len()),
    ) {
        let mut shop = Shop::new(&spec);
        let clean = shop.judged();
        prop_assert!(clean.holds(), "{}", clean);
        prop_assert!(clean.missing.is_empty() && clean.mismatched.is_empty(), "{}", clean);
        prop_assert!(clean.unknown.is_empty(), "{}", clean);
        prop_assert!(clean.undelivered.is_empty() && clean.delivered_twice.is_empty(), "{}", clean);
        prop_assert!(clean.codes_reused.is_empty() && clean.overdue_holds.is_empty(), "{}", clean);
        prop_assert!(clean.orphaned_holds.is_empty(), "{}", clean);
        prop_assert_eq!(clean.orders_in_redis.values().sum::<u64>(), spec.orders.len() as u64);
        prop_assert_eq!(&clean.orders_in_stores, &clean.orders_in_redis);

        // An order taken after Redis's orders were read, already stored by a worker:
        // in flight, not lost.
        let next = shop.reads[0].seq + 1;
        shop.evidence.stored.insert(format!("{SHOP}.0.{next}"), ("held".into(), None));
        let mut x = Expected::default();
        for (fault, at) in faults.iter().zip(picks) {
            plant(&mut shop, &mut x, *fault, at);
        }
        let r = shop.judged();
        prop_assert_eq!(sorted(&r.missing), sorted(&x.missing));
        prop_assert_eq!(sorted(&r.unknown), sorted(&x.unknown));
        prop_assert_eq!(sorted(&r.mismatched), sorted(&x.mismatched));
        prop_assert_eq!(sorted(&r.undelivered), sorted(&x.undelivered));
        prop_assert_eq!(sorted(&r.delivered_twice), sorted(&x.delivered_twice));
        prop_assert_eq!(sorted(&r.overdue_holds), sorted(&x.overdue_holds));
        prop_assert_eq!(sorted(&r.orphaned_holds), sorted(&x.orphaned_holds));
        prop_assert_eq!(r.codes_reused.len(), x.codes_reused.len() * (1 + usize::from(spec.codes)));
        for (code, a, b) in &x.codes_reused {
            prop_assert!(r.codes_reused.contains(&format!("{code} ({a}, {b})")), "{:?}", r.codes_reused);
            let pooled = r.codes_reused.iter().any(|c| {
                c.starts_with(&format!("{code} bound to ")) && c.contains(a.as_str()) && c.contains(b.as_str())
            });
            prop_assert_eq!(pooled, spec.codes, "{:?}", r.codes_reused);
        }
        let (exact, prefixes) = violations(&x, spec.backlog == (0, 0), spec.codes);
        prop_assert_eq!(r.violations.len(), exact.len() + prefixes.len(), "{:?}\nplanted {:?}", r.violations, faults);
        for v in &exact {
            prop_assert!(r.violations.contains(v), "{} not in {:?}", v, r.violations);
        }
        for p in &prefixes {
            let n = r.violations.iter().filter(|v| v.starts_with(p)).count();
            prop_assert_eq!(n, 1, "{} in {:?}", p, r.violations);
        }
    }
}
