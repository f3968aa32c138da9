//! The tasks a shard runs beside its requests: measuring the clock and reading the
//! control plane (on every poll, and at once when an announcement comes), shard 0's
//! housekeeping, and the record of each second for the fleet's telemetry.

use futures::future::{select, Either};
use glommio::channels::local_channel::LocalReceiver;
use glommio::timer::Timer;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;

use super::Shard;
use crate::store::{self, StoreError};
use seckill_core::backoff::Backoff;
use seckill_core::campaign::State;
use seckill_core::keys;
use seckill_core::protocol;
use seckill_core::telemetry::{ShardRecord, FORGET_MS, RECORD_TTL_S};

/// Measures this machine's clock against Redis's (see [`seckill_core::clock`]).
async fn sample_clock(shard: &Shard) -> Result<(), StoreError> {
    let (sent, sent_ms) = (std::time::Instant::now(), seckill_core::clock::local_ms());
    let t = shard.store.conn.query(&protocol::time()).await?;
    let (rtt, received_ms) = (sent.elapsed(), seckill_core::clock::local_ms());
    if let Some(redis_ms) = protocol::read_time(&t) {
        seckill_core::clock::observe(sent_ms, redis_ms, received_ms, rtt);
    }
    Ok(())
}

pub(super) async fn sync_loop(shard: Rc<Shard>, wake: LocalReceiver<()>) {
    let poll = Duration::from_millis(shard.settings.control.poll_ms);
    // The first poll reads everything, as one an announcement woke does; an
    // announcement stands until a poll has read everything.
    let mut announced = true;
    loop {
        if let Err(e) = sample_clock(&shard).await {
            tracing::debug!(shard = shard.index, error = %e, "clock sample failed");
        }
        match shard.sync(announced).await {
            Ok(()) => announced = false,
            Err(e) => tracing::debug!(shard = shard.index, error = %e, "control sync failed"),
        }
        match select(pin!(Timer::new(poll)), pin!(wake.recv())).await {
            Either::Left(_) => {}
            Either::Right((Some(()), _)) => announced = true,
            Either::Right((None, _)) => return,
        }
    }
}

/// Renews the leases of the empty partitions of the campaigns the shard has proven
/// empty (see [`super::leases`]).
pub(super) async fn lease_loop(shard: Rc<Shard>) {
    loop {
        Timer::new(super::leases::RENEW_EVERY).await;
        if shard.stopping.get() {
            return;
        }
        shard.renew_leases().await;
    }
}

/// Subscribes to control-plane announcements on a connection of its own and wakes the
/// sync loop on each; polling covers the moments this connection is down.
pub(super) async fn listen_for_changes(shard: Rc<Shard>) {
    let s = &shard.settings;
    let subscribe = redis::cmd("SUBSCRIBE").arg(keys::CONTROL_CHANNEL).clone();
    let mut backoff = Backoff::new(
        Duration::from_millis(10),
        Duration::from_millis(s.redis_client.max_backoff_ms),
    );
    // On a cluster a message published on any node reaches every node's subscribers,
    // so the first seed that answers will do.
    for seed in s.redis.iter().cycle() {
        if let Ok((stream, mut decoder)) =
            store::connect(seed, &s.redis_client, std::slice::from_ref(&subscribe)).await
        {
            backoff.reset();
            // Anything announced while we were away is picked up by the next sync.
            let _ = shard.wake.try_send(());
            let mut reader = tokio_util::compat::FuturesAsyncReadCompatExt::compat(stream);
            while redis::parse_redis_value_async(&mut decoder, &mut reader)
                .await
                .is_ok()
            {
                let _ = shard.wake.try_send(());
            }
        }
        Timer::new(backoff.wait()).await;
    }
}

/// Shard 0's housekeeping: release holds nobody paid for in time, finish stranded
/// transfers and even out stock. Every node runs it; all of it is safe to run twice.
pub(super) async fn rebalance_loop(shard: Rc<Shard>) {
    let every = Duration::from_millis(shard.settings.control.rebalance_ms);
    loop {
        Timer::new(every).await;
        let stocked: Vec<(String, u32, State, bool)> = shard
            .campaigns
            .borrow()
            .values()
            .filter(|v| matches!(v.campaign.state, State::Live | State::Paused | State::Ended))
            .map(|v| {
                let c = &v.campaign;
                (c.spec.id.clone(), c.spec.partitions, c.state, v.sold_out)
            })
            .collect();
        for (id, partitions, state, sold_out) in stocked {
            let mut released = 0;
            for p in 0..partitions {
                match shard.store.release_expired(&id, p).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(campaign = %id, partition = p, released = n, "released expired holds");
                        released += n;
                    }
                    Err(e) => tracing::debug!(campaign = %id, error = %e, "release failed"),
                }
            }
            if released > 0 {
                // Shards that cached `sold_out` sell the units again at once, not at
                // their next poll.
                let _ = shard.store.conn.query(&protocol::stock_returned(&id)).await;
            }
            if state == State::Live && !sold_out {
                if let Err(e) = store::rebalance(&shard.store, &id, partitions).await {
                    tracing::debug!(campaign = %id, error = %e, "rebalance failed");
                }
            }
        }
    }
}

/// Writes the shard's record once a second, through its own Redis connection.
pub(super) async fn report_loop(shard: Rc<Shard>) {
    loop {
        glommio::timer::Timer::new(Duration::from_secs(1)).await;
        let (window, outcomes, routes) = shard.stats.borrow_mut().take();
        let conn = &shard.store.conn;
        let rtt = conn.take_round_trips();
        {
            use std::sync::atomic::Ordering::Relaxed;
            let m = &shard.metrics;
            m.redis_up.store(conn.is_up(), Relaxed);
            m.breaker_open.store(conn.breaker_open(), Relaxed);
            m.synced.store(shard.synced(), Relaxed);
        }
        let record = ShardRecord {
            node: shard.settings.node.clone(),
            shard: shard.index,
            shards: shard.settings.shards,
            started_ms: shard.settings.started_ms,
            at_ms: seckill_core::now_ms(),
            window_ms: window.as_millis() as u64,
            outcomes,
            routes,
            redis_p99_ms: crate::telemetry::ms(rtt.value_at_quantile(0.99)),
            redis: if !conn.is_up() {
                "down"
            } else if conn.breaker_open() {
                "breaker_open"
            } else {
                "up"
            }
            .into(),
        };
        let Ok(json) = serde_json::to_string(&record) else {
            continue;
        };
        let [hset, expire, listed, forget] = protocol::node_record(
            &shard.settings.node,
            shard.index,
            &json,
            record.at_ms,
            RECORD_TTL_S,
            FORGET_MS,
        );
        // Fire and forget: with Redis away, the record simply goes stale. Shard 0 alone
        // drops the fleet's silent members.
        let writes = if shard.index == 0 {
            vec![hset, expire, listed, forget]
        } else {
            vec![hset, expire, listed]
        };
        for cmd in writes {
            let _ = conn.query(&cmd).await;
        }
    }
}

/// How often the admission runs a round, and how long its lease lasts unrenewed.
const ADMIT_EVERY: Duration = Duration::from_millis(100);
const ADMIT_LEASE_MS: u64 = 3_000;
/// How often a node that does not hold a room's lease looks whether it lapsed.
const FOLLOWER_RETRY: Duration = Duration::from_secs(1);

/// A room's admission as one node runs it: credit earned at the room's rate, and when
/// to try again while another node holds the lease.
#[derive(Default)]
struct Admission {
    credit: f64,
    last: Option<std::time::Instant>,
    retry_at: Option<std::time::Instant>,
}

/// Shard 0's admission for every waiting room: each round lets through what the rate
/// has earned since the last, within the units free to reserve (see `queue_admit.lua`).
/// Every node runs it; the room's lease lets one node at a time do the work, and
/// another takes over within the lease's life when that one stops.
pub(super) async fn admission_loop(shard: Rc<Shard>) {
    // Unique to this run of the shard: two nodes under one name never share a lease.
    let holder = format!("{}/{}", shard.settings.node, shard.id_prefix);
    let mut rooms: std::collections::HashMap<String, Admission> = Default::default();
    loop {
        Timer::new(ADMIT_EVERY).await;
        let queued: Vec<(String, u32, u32, bool)> = shard
            .campaigns
            .borrow()
            .values()
            .filter(|v| matches!(v.campaign.state, State::Armed | State::Live | State::Paused))
            .filter_map(|v| {
                let s = &v.campaign.spec;
                let rate = seckill_core::protocol::admit_rate(v.queue.as_ref(), &s.queue?);
                Some((
                    s.id.clone(),
                    s.partitions,
                    rate,
                    v.campaign.state == State::Live,
                ))
            })
            .collect();
        rooms.retain(|id, _| queued.iter().any(|(q, ..)| q == id));
        for (id, partitions, rate, live) in queued {
            let now = std::time::Instant::now();
            let room = rooms.entry(id.clone()).or_default();
            if room.retry_at.is_some_and(|t| now < t) {
                continue;
            }
            // Credit accrues only while the sale is live, and at most a second's worth:
            // a room that had nothing to give does not burst when units come back.
            let earned = room.last.map_or(0.0, |t| {
                now.duration_since(t).as_secs_f64() * f64::from(rate)
            });
            room.last = Some(now);
            room.credit = if live {
                (room.credit + earned).min(f64::from(rate).max(1.0))
            } else {
                0.0
            };
            let budget = room.credit.floor() as u64;
            match shard
                .store
                .admit(&id, partitions, &holder, ADMIT_LEASE_MS, budget)
                .await
            {
                Ok(round) if round.follower => {
                    room.retry_at = Some(now + FOLLOWER_RETRY);
                    room.credit = 0.0;
                }
                Ok(round) => {
                    room.retry_at = None;
                    room.credit -= round.admitted as f64;
                    for w in &round.waits_ms {
                        shard
                            .metrics
                            .admitted_after(Duration::from_millis((*w).max(0) as u64));
                    }
                    if round.admitted > 0 {
                        tracing::debug!(campaign = %id, admitted = round.admitted, outstanding = round.outstanding, left = round.left, "let shoppers through");
                    }
                }
                Err(e) => tracing::debug!(campaign = %id, error = %e, "admission round failed"),
            }
        }
    }
}
