//! Stock transfers between partitions survive a crash between their steps: whoever
//! replays a logged transfer applies it exactly once.

mod common;

use common::Redis;
use seckill_core::campaign::Action;
use seckill_core::keys::PartitionKeys;
use seckill_core::{control, ledger, scripts};
use seckill_dataplane::config::{RedisClientConfig, RedisTarget};
use seckill_dataplane::guard::breaker::BreakerConfig;
use seckill_dataplane::store::{rebalance, RedisConn, Store};
use std::time::Duration;

fn stocks(con: &mut seckill_core::connection::Connection, id: &str) -> Vec<i64> {
    let c = control::get(con, id).expect("campaign");
    control::partitions(con, &c)
        .expect("partitions")
        .iter()
        .map(|p| p.stock)
        .collect()
}

/// A live campaign of `total` units on `partitions` partitions, one unit a buyer.
fn open(con: &mut seckill_core::connection::Connection, id: &str, total: u64, partitions: u32) {
    control::create(con, common::spec(id, total, partitions, 1)).expect("create");
    control::arm(con, id).expect("arm");
    control::act(con, id, Action::Start).expect("start");
}

/// Runs the rebalancer once on a glommio executor, as a shard would.
fn rebalance_once(redis: &Redis, id: &'static str, partitions: u32) {
    let target = RedisTarget::parse(&redis.url()).expect("url");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let conn = RedisConn::start(
                vec![target],
                RedisClientConfig::default(),
                BreakerConfig::default(),
                vec![],
            );
            while !conn.is_up() {
                glommio::timer::sleep(Duration::from_millis(5)).await;
            }
            let store = Store::new(conn.clone());
            rebalance(&store, id, partitions).await.expect("rebalance");
            conn.close();
        })
        .expect("executor")
        .join()
        .expect("join");
}

#[test]
fn a_transfer_interrupted_after_its_first_step_is_finished_once() {
    let redis = Redis::start();
    let mut con = redis.con();
    open(&mut con, "xfer", 40, 4);

    // A shard takes 6 units off partition 2 for partition 0, then dies.
    let src = PartitionKeys::new("xfer", 2);
    let (moved, id): (i64, String) = {
        let v: (i64, String, i64, i64, i64) = scripts::TRANSFER_OUT
            .key(src.part())
            .key(src.transfers_out())
            .arg(0)
            .arg(6)
            .arg(2)
            .invoke(&mut con)
            .expect("transfer out");
        (v.0, v.1)
    };
    assert_eq!(moved, 6);
    assert_eq!(stocks(&mut con, "xfer"), vec![10, 10, 4, 10]);
    let c = control::get(&mut con, "xfer").expect("campaign");
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "in transit is accounted for: {l}");
    assert_eq!(l.in_transit, 6);

    // The target applied it, but the source never heard back.
    let dst = PartitionKeys::new("xfer", 0);
    let applied: i64 = scripts::TRANSFER_IN
        .key(dst.part())
        .key(dst.transfers_in())
        .arg(&id)
        .arg(6)
        .invoke(&mut con)
        .expect("transfer in");
    assert_eq!(applied, 1);
    let again: i64 = scripts::TRANSFER_IN
        .key(dst.part())
        .key(dst.transfers_in())
        .arg(&id)
        .arg(6)
        .invoke(&mut con)
        .expect("transfer in again");
    assert_eq!(again, 0, "a replayed step applies nothing");
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");

    // The rebalancer replays the log (entries older than 5 s) and clears it, once.
    std::thread::sleep(Duration::from_millis(5_100));
    rebalance_once(&redis, "xfer", 4);
    rebalance_once(&redis, "xfer", 4);
    assert_eq!(stocks(&mut con, "xfer"), vec![16, 10, 4, 10]);
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
    assert_eq!((l.remaining, l.in_transit), (40, 0));
}

#[test]
fn the_rebalancer_refills_an_empty_partition() {
    let redis = Redis::start();
    let mut con = redis.con();
    open(&mut con, "even", 30, 3);
    let _: () = redis::cmd("HSET")
        .arg(PartitionKeys::new("even", 1).part())
        .arg("stock")
        .arg(0)
        .query(&mut con)
        .expect("drain");
    let _: () = redis::cmd("HSET")
        .arg(PartitionKeys::new("even", 1).part())
        .arg("sold")
        .arg(10)
        .query(&mut con)
        .expect("as if sold");
    rebalance_once(&redis, "even", 3);
    let s = stocks(&mut con, "even");
    assert!(s[1] > 0, "partition 1 refilled: {s:?}");
    assert_eq!(s.iter().sum::<i64>(), 20);
}

/// `lease.lua` on a partition: its answer, as `{lent, seq, first answers...}`.
fn lease(
    con: &mut seckill_core::connection::Connection,
    p: u32,
    ms: u64,
    seq: &str,
) -> Vec<String> {
    let k = PartitionKeys::new("lend", p);
    let v: Vec<redis::Value> = scripts::LEASE
        .key(k.part())
        .key(k.once())
        .arg(ms)
        .arg(seq)
        .arg(100)
        .invoke(con)
        .expect("lease");
    v.iter()
        .map(|x| seckill_dataplane::store::text(Some(x)).unwrap_or_default())
        .collect()
}

#[test]
fn a_lent_partition_takes_no_units_until_its_lease_is_over() {
    let redis = Redis::start();
    let mut con = redis.con();
    open(&mut con, "lend", 20, 2);
    let c = control::get(&mut con, "lend").expect("campaign");
    let transfer = |con: &mut seckill_core::connection::Connection, from: u32, to: u32| {
        let src = PartitionKeys::new("lend", from);
        let v: (i64, String, i64, i64, i64) = scripts::TRANSFER_OUT
            .key(src.part())
            .key(src.transfers_out())
            .arg(to)
            .arg(10)
            .arg(from)
            .invoke(con)
            .expect("transfer out");
        let dst = PartitionKeys::new("lend", to);
        let applied: i64 = scripts::TRANSFER_IN
            .key(dst.part())
            .key(dst.transfers_in())
            .arg(&v.1)
            .arg(v.0)
            .invoke(con)
            .expect("transfer in");
        (v.1, v.0, applied)
    };
    let ack = |con: &mut seckill_core::connection::Connection, from: u32, id: &str| {
        let src = PartitionKeys::new("lend", from);
        let _: i64 = scripts::TRANSFER_ACK
            .key(src.part())
            .key(src.transfers_out())
            .arg(id)
            .invoke(con)
            .expect("ack");
    };

    // A partition with units is not lent.
    assert_eq!(lease(&mut con, 0, 400, ""), vec!["0"]);
    // Partition 0's units go to partition 1; empty, it is lent, with its (no) first answers.
    let (id, moved, applied) = transfer(&mut con, 0, 1);
    assert_eq!((moved, applied), (10, 1));
    ack(&mut con, 0, &id);
    assert_eq!(stocks(&mut con, "lend"), vec![0, 20]);
    assert_eq!(lease(&mut con, 0, 400, ""), vec!["1", "0"]);
    // Asked again with the copy's order sequence: the copy is whole.
    assert_eq!(lease(&mut con, 0, 400, "0"), vec!["1", "0"]);

    // Units sent to it meanwhile wait on the source, in transit, and the lease is not
    // renewed: it must end so that they can come in.
    let (id, moved, applied) = transfer(&mut con, 1, 0);
    assert_eq!((moved, applied), (10, -1), "not applied while lent");
    assert_eq!(stocks(&mut con, "lend"), vec![0, 10]);
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "the units in transit are accounted for: {l}");
    assert_eq!((l.remaining, l.in_transit), (10, 10));
    assert_eq!(
        lease(&mut con, 0, 400, "0"),
        vec!["0"],
        "not renewed once units wait"
    );

    // Once it is over, the transfer is applied, once.
    std::thread::sleep(Duration::from_millis(450));
    let dst = PartitionKeys::new("lend", 0);
    let apply = |con: &mut seckill_core::connection::Connection| -> i64 {
        scripts::TRANSFER_IN
            .key(dst.part())
            .key(dst.transfers_in())
            .arg(&id)
            .arg(10)
            .invoke(con)
            .expect("transfer in")
    };
    assert_eq!(apply(&mut con), 1);
    assert_eq!(apply(&mut con), 0);
    ack(&mut con, 1, &id);
    assert_eq!(stocks(&mut con, "lend"), vec![10, 10]);
    assert_eq!(
        lease(&mut con, 0, 400, "0"),
        vec!["0"],
        "units are there again"
    );
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
    assert_eq!((l.remaining, l.in_transit), (20, 0));

    // The rebalancer sends nothing to a lent partition, and refills it once it is not.
    let (id, _, _) = transfer(&mut con, 0, 1);
    ack(&mut con, 0, &id);
    assert_eq!(stocks(&mut con, "lend"), vec![0, 20]);
    assert_eq!(lease(&mut con, 0, 600, "")[0], "1");
    rebalance_once(&redis, "lend", 2);
    assert_eq!(
        stocks(&mut con, "lend"),
        vec![0, 20],
        "nothing sent to a lent partition"
    );
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert_eq!(
        (l.remaining, l.in_transit),
        (20, 0),
        "nothing waiting in transit: {l}"
    );
    std::thread::sleep(Duration::from_millis(650));
    rebalance_once(&redis, "lend", 2);
    assert_eq!(stocks(&mut con, "lend"), vec![10, 10]);
    let l = ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
}
