//! Property of the transfer scripts, on a `redis-server` of the test's own: however `out`,
//! `in`, `ack` and the rebalancer's replay interleave, repeat or stop half-way, units are
//! conserved, each transfer arrives once, and once the logs are replayed none is in transit.

mod common;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestRunner;
use redis::Commands;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use seckill_core::campaign::Campaign;
use seckill_core::connection::Connection;
use seckill_core::control;
use seckill_core::keys::PartitionKeys;
use seckill_core::ledger;
use seckill_core::scripts;

/// One step of the transfers between a campaign's partitions, in any order shards, a crash
/// and the rebalancer may leave them.
#[derive(Debug, Clone)]
enum Step {
    /// A shard takes up to `want` units off `source` for another partition.
    Out {
        source: Index,
        hop: Index,
        want: u32,
    },
    /// Someone applies a transfer taken out earlier, perhaps not for the first time.
    In(Index),
    /// Someone acknowledges a transfer applied earlier, perhaps not for the first time.
    Ack(Index),
    /// The rebalancer finishes every transfer logged on a partition.
    Replay(Index),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (any::<Index>(), any::<Index>(), 1u32..20)
            .prop_map(|(source, hop, want)| Step::Out { source, hop, want }),
        3 => any::<Index>().prop_map(Step::In),
        2 => any::<Index>().prop_map(Step::Ack),
        1 => any::<Index>().prop_map(Step::Replay),
    ]
}

/// A transfer as the test saw it go.
#[derive(Debug)]
struct Sent {
    id: String,
    source: u32,
    target: u32,
    units: i64,
    applied: bool,
    acked: bool,
}

/// A campaign's partitions as the transfers should have left them.
struct Transfers<'a> {
    con: &'a mut Connection,
    campaign: Campaign,
    stock: Vec<i64>,
    sent: Vec<Sent>,
}

impl Transfers<'_> {
    fn keys(&self, p: u32) -> PartitionKeys {
        PartitionKeys::new(&self.campaign.spec.id, p)
    }

    fn run(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let parts = self.stock.len();
        match step {
            Step::Out { source, hop, want } => {
                let source = source.index(parts);
                let target = (source + 1 + hop.index(parts - 1)) % parts;
                let k = self.keys(source as u32);
                let (moved, id, left, transit, inflow): (i64, String, i64, i64, i64) =
                    scripts::TRANSFER_OUT
                        .key(k.part())
                        .key(k.transfers_out())
                        .arg(target)
                        .arg(want)
                        .arg(source)
                        .invoke(self.con)
                        .expect("transfer out");
                prop_assert_eq!(moved, self.stock[source].min(i64::from(*want)));
                self.stock[source] -= moved;
                prop_assert_eq!(left, self.stock[source]);
                if moved == 0 {
                    prop_assert_eq!(id, "");
                } else {
                    prop_assert!(self.sent.iter().all(|s| s.id != id), "{} reused", id);
                    self.sent.push(Sent {
                        id,
                        source: source as u32,
                        target: target as u32,
                        units: moved,
                        applied: false,
                        acked: false,
                    });
                }
                prop_assert_eq!(transit, self.unacked_from(source as u32));
                prop_assert_eq!(inflow, self.arrivals(source as u32));
            }
            Step::In(which) if !self.sent.is_empty() => {
                let i = which.index(self.sent.len());
                let applied = self.apply(i);
                prop_assert_eq!(applied, !self.sent[i].applied, "{:?}", self.sent[i]);
                if applied {
                    self.sent[i].applied = true;
                    self.stock[self.sent[i].target as usize] += self.sent[i].units;
                }
            }
            Step::Ack(which) => {
                // Nobody acknowledges a transfer before its target applied it: `in` and
                // `ack` run in that order, and `ack` only once `in` has answered.
                let applied: Vec<usize> = (0..self.sent.len())
                    .filter(|i| self.sent[*i].applied)
                    .collect();
                if !applied.is_empty() {
                    let i = applied[which.index(applied.len())];
                    let acked = self.ack(i);
                    prop_assert_eq!(acked, !self.sent[i].acked, "{:?}", self.sent[i]);
                    self.sent[i].acked = true;
                }
            }
            Step::Replay(source) => self.replay(source.index(parts) as u32)?,
            Step::In(_) => {}
        }
        self.observe()
    }

    /// Runs `in` for a transfer; whether it applied anything.
    fn apply(&mut self, i: usize) -> bool {
        let (t, k) = (&self.sent[i], self.keys(self.sent[i].target));
        let n: i64 = scripts::TRANSFER_IN
            .key(k.part())
            .key(k.transfers_in())
            .arg(&t.id)
            .arg(t.units)
            .invoke(self.con)
            .expect("transfer in");
        n == 1
    }

    /// Runs `ack` for a transfer; whether it cleared a log entry.
    fn ack(&mut self, i: usize) -> bool {
        let (t, k) = (&self.sent[i], self.keys(self.sent[i].source));
        let n: i64 = scripts::TRANSFER_ACK
            .key(k.part())
            .key(k.transfers_out())
            .arg(&t.id)
            .invoke(self.con)
            .expect("transfer ack");
        n == 1
    }

    /// Finishes every transfer logged on `source`, from the log alone, as the rebalancer
    /// does after a crash.
    fn replay(&mut self, source: u32) -> Result<(), TestCaseError> {
        let log: HashMap<String, String> = self
            .con
            .hgetall(self.keys(source).transfers_out())
            .expect("log");
        let mut expected: Vec<&str> = self
            .sent
            .iter()
            .filter(|s| s.source == source && !s.acked)
            .map(|s| s.id.as_str())
            .collect();
        let mut logged: Vec<&str> = log.keys().map(String::as_str).collect();
        expected.sort_unstable();
        logged.sort_unstable();
        prop_assert_eq!(
            logged,
            expected,
            "the log of {} is every unacknowledged transfer",
            source
        );
        for (id, v) in &log {
            let i = self.sent.iter().position(|s| &s.id == id).expect("sent");
            let t = &self.sent[i];
            let fields: Vec<&str> = v.split(':').take(2).collect();
            prop_assert_eq!(fields, vec![t.target.to_string(), t.units.to_string()]);
            if self.apply(i) {
                prop_assert!(!self.sent[i].applied, "{:?} applied twice", self.sent[i]);
                self.sent[i].applied = true;
                self.stock[self.sent[i].target as usize] += self.sent[i].units;
            }
            prop_assert!(self.ack(i));
            self.sent[i].acked = true;
        }
        Ok(())
    }

    fn unacked_from(&self, p: u32) -> i64 {
        let s = self.sent.iter().filter(|s| s.source == p && !s.acked);
        s.map(|s| s.units).sum()
    }

    fn arrivals(&self, p: u32) -> i64 {
        self.sent
            .iter()
            .filter(|s| s.target == p && s.applied)
            .count() as i64
    }

    /// Every partition's counters and the ledger agree with the transfers seen so far.
    fn observe(&mut self) -> Result<(), TestCaseError> {
        let total = self.campaign.spec.total as i64;
        let on_the_way: i64 = self
            .sent
            .iter()
            .filter(|s| !s.applied)
            .map(|s| s.units)
            .sum();
        let applied_unacked: i64 = self
            .sent
            .iter()
            .filter(|s| s.applied && !s.acked)
            .map(|s| s.units)
            .sum();
        let (mut stock, mut transit) = (0, 0);
        for p in 0..self.stock.len() as u32 {
            let (s, t, inflow): (i64, i64, i64) = redis::cmd("HMGET")
                .arg(self.keys(p).part())
                .arg(&["stock", "transit", "inflow"])
                .query(self.con)
                .expect("counters");
            prop_assert_eq!(s, self.stock[p as usize], "stock of {}", p);
            prop_assert_eq!(t, self.unacked_from(p), "transit of {}", p);
            // Each transfer arrives once, however often `in` ran.
            prop_assert_eq!(inflow, self.arrivals(p), "arrivals on {}", p);
            (stock, transit) = (stock + s, transit + t);
        }
        prop_assert_eq!(stock + on_the_way, total, "units are conserved");
        // The transit counter drops only at `ack`: between `in` and `ack` a transfer's
        // units are on the target's shelf and still counted in transit on the source.
        prop_assert_eq!(stock + transit, total + applied_unacked);
        let l = ledger::check(self.con, &self.campaign).expect("ledger");
        prop_assert!(l.holds(), "{}", l);
        prop_assert_eq!(l.in_transit, on_the_way);
        Ok(())
    }
}

fn transfers_case(
    con: &mut Connection,
    campaign: &str,
    partitions: u32,
    total: u64,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let spec = common::spec(campaign, total, partitions, 1);
    let campaign = control::create(con, spec).expect("create");
    let campaign = control::arm(con, &campaign.spec.id).expect("arm");
    let stock = campaign
        .spec
        .allocation()
        .iter()
        .map(|u| *u as i64)
        .collect();
    let mut t = Transfers {
        con,
        campaign,
        stock,
        sent: vec![],
    };
    for s in steps {
        t.run(s)?;
    }
    for p in 0..partitions {
        t.replay(p)?;
    }
    t.observe()?;
    prop_assert!(t.sent.iter().all(|s| s.applied && s.acked), "{:?}", t.sent);
    Ok(())
}

#[test]
fn transfers_conserve_units_however_their_steps_interleave_and_replay() {
    let redis = common::Redis::start();
    let con = RefCell::new(redis.con());
    let cases = Cell::new(0);
    let mut config = ProptestConfig::with_cases(64);
    config.source_file = Some(file!());
    let mut runner = TestRunner::new(config);
    let input = (2u32..=5, 1u64..=60, prop::collection::vec(step(), 1..40));
    let result = runner.run(&input, |(partitions, total, steps)| {
        // A campaign of its own for each case, shrunk ones included.
        cases.set(cases.get() + 1);
        let id = format!("xfer{}", cases.get());
        transfers_case(&mut con.borrow_mut(), &id, partitions, total, &steps)
    });
    if let Err(e) = result {
        panic!("{e}\n{runner}");
    }
}
