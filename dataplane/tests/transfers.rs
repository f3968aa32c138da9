//! Stock transfers between partitions survive a crash between their steps: whoever
//! replays a logged transfer applies it exactly once.

mod common;

use common::Redis;
use seckill_dataplane::campaign::Action;
use seckill_dataplane::config::{RedisClientConfig, RedisTarget};
use seckill_dataplane::guard::breaker::BreakerConfig;
use seckill_dataplane::keys::PartitionKeys;
use seckill_dataplane::store::{rebalance, RedisConn, Store};
use seckill_dataplane::{control, ledger, scripts};
use std::time::Duration;

fn stocks(con: &mut seckill_dataplane::connection::Connection, id: &str) -> Vec<i64> {
    let c = control::get(con, id).expect("campaign");
    control::partitions(con, &c)
        .expect("partitions")
        .iter()
        .map(|p| p.stock)
        .collect()
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
    control::create(&mut con, common::spec("xfer", 40, 4, 1)).expect("create");
    control::arm(&mut con, "xfer").expect("arm");
    control::act(&mut con, "xfer", Action::Start).expect("start");

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
    control::create(&mut con, common::spec("even", 30, 3, 1)).expect("create");
    control::arm(&mut con, "even").expect("arm");
    control::act(&mut con, "even", Action::Start).expect("start");
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
