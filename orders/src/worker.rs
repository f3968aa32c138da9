//! The order worker: reads every partition's event stream through the `workers` consumer
//! group, writes the events to its SQLite file in one transaction per batch, delivers
//! paid orders, and only then acknowledges. A worker that dies leaves its entries
//! pending; any worker claims them (`XAUTOCLAIM`) once they have been idle long enough.
//! Runs on a thread of its own, with Redis's blocking client: it is not on the hot path.
//! Delivery is in `worker/deliver.rs`, the worker's life on its thread in [`run()`].

use hdrhistogram::Histogram;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadOptions, StreamReadReply};
use seckill_core::connection::Connection;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::db::OrderDb;
use crate::event::{Event, Kind};
use seckill_core::auth::Secret;
use seckill_core::campaign::State;
use seckill_core::control;
use seckill_core::keys::{self, PartitionKeys};
use seckill_core::scripts;

mod deliver;
mod run;

pub use run::run;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Consumer name in the group; keep it stable across restarts of the same worker.
    pub name: String,
    pub redis_url: String,
    pub db: PathBuf,
    /// Derives the licence keys of campaigns without a code pool (the node's licence
    /// key, [`seckill_core::node_keys::NodeKeys::licences`]).
    pub licences: Secret,
    /// Most entries read from one stream at a time.
    pub batch: usize,
    /// Pending entries idle this long are taken over from their (presumed dead) consumer.
    pub claim_idle: Duration,
    /// Counters for the node's `/metrics`, when the worker runs inside `serve`.
    pub metrics: Option<std::sync::Arc<crate::metrics::WorkerMetrics>>,
    /// Replicas that must hold what was read before it is stored (`WAIT`), so an order
    /// a master loses unreplicated never reaches a store; 0 stores at once.
    pub wait_replicas: u32,
    pub wait_timeout: Duration,
    /// The shop's webhooks: each stored event goes into their outbox, and a sender
    /// thread beside the worker posts them.
    pub shop: Option<crate::shop::ShopOptions>,
    /// Signs the download paths in `order.delivered` webhooks, good for this long.
    pub downloads: Option<(Secret, Duration)>,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("order store: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("control plane: {0}")]
    Control(#[from] control::ControlError),
}

/// Counters a worker reports.
#[derive(Debug)]
pub struct WorkerStats {
    pub events: u64,
    pub delivered: u64,
    /// Attempts to deliver a paid order that failed (the order was left pending).
    pub delivery_failures: u64,
    /// Time from payment to delivery, in milliseconds.
    pub pay_to_delivered_ms: Histogram<u64>,
    /// The same since the last telemetry record.
    recent_pay_to_delivered_ms: Histogram<u64>,
}

/// A stream that has brought nothing for this long is quiet: a campaign long sold out or
/// ended, whose late payments are all it may still bring.
const QUIET_AFTER: Duration = Duration::from_secs(2);
/// A quiet stream is read this often, not at every pass: a worker keeps on reading every
/// campaign it ever saw, and read every 5 ms each would cost Redis more with every one.
const QUIET_READ_EVERY: Duration = Duration::from_millis(200);

struct Stream {
    key: String,
    last_claim: Option<Instant>,
    /// When a read last brought entries (or the stream was found).
    last_entries: Instant,
    last_read: Option<Instant>,
    /// Where the next `XAUTOCLAIM` goes on: orders held back undelivered stay pending,
    /// and a scan that always began at the start would never reach past them.
    claim_from: String,
}

pub struct Worker {
    opts: WorkerOptions,
    con: Connection,
    db: OrderDb,
    streams: Vec<Stream>,
    /// Campaigns that hand out codes from a pool.
    pooled: HashSet<String>,
    /// Campaigns with a file to download.
    with_file: HashSet<String>,
    discovered: Option<Instant>,
    /// Paid orders this worker could not deliver and left pending, with when it last
    /// tried each: a retry refreshes them, a delivery removes them.
    held_back: HashMap<String, Instant>,
    pub stats: WorkerStats,
}

impl Worker {
    pub fn open(opts: WorkerOptions) -> Result<Worker, WorkerError> {
        // Its reads never block on Redis (no BLOCK), so a reply 10 s late (or a WAIT's
        // timeout well past) means a silent server: step fails and the worker connects
        // again, following a failover.
        let io_timeout = Duration::from_secs(10).max(opts.wait_timeout * 4);
        let mut con = control::connect_with(&opts.redis_url, Some(io_timeout))?;
        // Deliveries are pipelined by hash (EVALSHA): load the scripts on every connection.
        for s in [&*scripts::BIND_CODE, &*scripts::DELIVER] {
            let _: String = s.prepare_invoke().load(&mut con)?;
        }
        let db = OrderDb::open(&opts.db)?;
        Ok(Worker {
            opts,
            con,
            db,
            streams: Vec::new(),
            pooled: HashSet::new(),
            with_file: HashSet::new(),
            discovered: None,
            held_back: HashMap::new(),
            stats: WorkerStats {
                events: 0,
                delivered: 0,
                delivery_failures: 0,
                pay_to_delivered_ms: Histogram::new_with_bounds(1, 3_600_000, 3)
                    .unwrap_or_else(|_| unreachable!("valid bounds")),
                recent_pay_to_delivered_ms: Histogram::new_with_bounds(1, 3_600_000, 2)
                    .unwrap_or_else(|_| unreachable!("valid bounds")),
            },
        })
    }

    /// Finds the streams of every armed campaign (once a second).
    fn discover(&mut self) -> Result<(), WorkerError> {
        if self
            .discovered
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return Ok(());
        }
        let known: HashSet<String> = self.streams.iter().map(|s| s.key.clone()).collect();
        for c in control::list(&mut self.con)? {
            if matches!(c.state, State::Draft | State::Arming) {
                continue;
            }
            if c.spec.codes_file.is_some() {
                self.pooled.insert(c.spec.id.clone());
            }
            if c.spec.content_file.is_some() {
                self.with_file.insert(c.spec.id.clone());
            }
            for p in 0..c.spec.partitions {
                let key = PartitionKeys::new(&c.spec.id, p).events();
                if !known.contains(&key) {
                    control::ensure_group(&mut self.con, &key)?;
                    self.streams.push(Stream {
                        key,
                        last_claim: None,
                        last_entries: Instant::now(),
                        last_read: None,
                        claim_from: "0-0".into(),
                    });
                }
            }
        }
        self.discovered = Some(Instant::now());
        Ok(())
    }

    /// One pass over every stream: claim, read, store, deliver, acknowledge.
    /// Returns the number of entries handled.
    pub fn step(&mut self) -> Result<usize, WorkerError> {
        self.discover()?;
        let mut entries = self.claim_and_read()?;
        // What a stream's master has not replicated yet stays pending, claimed again after
        // `claim_idle` once a replica has it (or, after a failover, gone with the master
        // that never acknowledged it); the other streams go on.
        let unconfirmed = self.unreplicated(&entries)?;
        entries.retain(|(i, _)| !unconfirmed.contains(i));
        if entries.is_empty() {
            self.note_undelivered(&[], &HashSet::new());
            return Ok(0);
        }
        let (at, events) = self.events_of(&entries);
        self.db.apply(&events)?;
        let paid: Vec<&Event> = events.iter().filter(|e| e.kind == Kind::Paid).collect();
        let undelivered = self.deliver(&paid)?;
        assert!(
            undelivered.len() <= paid.len(),
            "more orders undelivered than paid"
        );
        self.note_undelivered(&paid, &undelivered);
        // An entry left unacknowledged is claimed again after `claim_idle` and retried.
        let keep: HashSet<usize> = at
            .iter()
            .zip(&events)
            .filter(|(_, e)| e.kind == Kind::Paid && undelivered.contains(e.order_id.as_str()))
            .map(|(n, _)| *n)
            .collect();
        // The shop hears of each event before it is acknowledged: a worker that dies
        // between the two tells it again, under the same webhook id.
        self.index_orders(&events)?;
        self.tell_the_shop(&at, &events, &keep)?;
        let acked = self.acknowledge(&entries, &keep)?;
        assert_eq!(
            acked + keep.len(),
            entries.len(),
            "each entry of a batch is acknowledged or kept pending, once"
        );
        // An order's event kept pending counts once, when it is finally acknowledged.
        let done = at.iter().filter(|n| !keep.contains(n)).count() as u64;
        self.stats.events += done;
        if let Some(m) = &self.opts.metrics {
            m.events.fetch_add(done, Ordering::Relaxed);
        }
        Ok(entries.len())
    }

    /// Adds each new order to its shopper's index (`GET /api/orders`): in one round trip
    /// on one Redis, a command a shopper's slot on a cluster.
    fn index_orders(&mut self, events: &[Event]) -> Result<(), WorkerError> {
        let mut pipe = redis::pipe();
        let mut any = false;
        for e in events.iter().filter(|e| e.kind == Kind::Held) {
            pipe.cmd("ZADD")
                .arg(keys::user_orders(&e.user))
                .arg(e.pay_by_ms)
                .arg(&e.order_id)
                .ignore();
            any = true;
        }
        if any {
            self.con.pipeline::<()>(&pipe)?;
        }
        Ok(())
    }

    /// Puts the shop's webhook of each event of the pass into the outbox, but for the
    /// events kept pending.
    fn tell_the_shop(
        &mut self,
        at: &[usize],
        events: &[Event],
        keep: &HashSet<usize>,
    ) -> Result<(), WorkerError> {
        let Some(shop) = &self.opts.shop else {
            return Ok(());
        };
        let out: Vec<crate::shop::Outgoing> = at
            .iter()
            .zip(events)
            .filter(|(n, _)| !keep.contains(n))
            .map(|(_, e)| {
                let path = (e.kind == Kind::Delivered && self.with_file.contains(&e.campaign))
                    .then_some(self.opts.downloads.as_ref())
                    .flatten()
                    .map(|(key, ttl)| {
                        let until = seckill_core::now_ms() + ttl.as_millis() as i64;
                        format!(
                            "/dl/{}",
                            seckill_core::auth::sign_download(key, &e.order_id, until)
                        )
                    });
                crate::shop::webhook_of(e, path)
            })
            .collect();
        crate::shop::enqueue(&mut self.con, &out, shop.cap)?;
        Ok(())
    }

    /// The entries of this pass, each with its stream's index: those claimed from dead
    /// consumers (each stream once a second), then those new to the group (a quiet
    /// stream only every `QUIET_READ_EVERY`).
    fn claim_and_read(&mut self) -> Result<Vec<(usize, StreamId)>, WorkerError> {
        let mut entries: Vec<(usize, StreamId)> = Vec::new();
        let opts = StreamReadOptions::default()
            .group(keys::WORKER_GROUP, &self.opts.name)
            .count(self.opts.batch);
        let mut reads = redis::pipe();
        let mut read = Vec::new();
        for (i, s) in self.streams.iter_mut().enumerate() {
            if s.last_claim
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                s.last_claim = Some(Instant::now());
                let claimed: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                    .arg(&s.key)
                    .arg(keys::WORKER_GROUP)
                    .arg(&self.opts.name)
                    .arg(self.opts.claim_idle.as_millis() as u64)
                    .arg(&s.claim_from)
                    .arg("COUNT")
                    .arg(self.opts.batch)
                    .query(&mut self.con)?;
                // "0-0" when the scan reached the end: the next one starts over.
                s.claim_from = claimed.next_stream_id;
                entries.extend(claimed.claimed.into_iter().map(|e| (i, e)));
            }
            let quiet = s.last_entries.elapsed() >= QUIET_AFTER;
            if !quiet || s.last_read.is_none_or(|t| t.elapsed() >= QUIET_READ_EVERY) {
                s.last_read = Some(Instant::now());
                reads.xread_options(&[&s.key], &[">"], &opts);
                read.push(i);
            }
        }
        if !read.is_empty() {
            let replies: Vec<Option<StreamReadReply>> = self.con.pipeline(&reads)?;
            for (i, reply) in read.into_iter().zip(replies) {
                for k in reply.map(|r| r.keys).unwrap_or_default() {
                    if !k.ids.is_empty() {
                        self.streams[i].last_entries = Instant::now();
                    }
                    entries.extend(k.ids.into_iter().map(|e| (i, e)));
                }
            }
        }
        Ok(entries)
    }

    /// Each readable event with the position of its entry, so an undelivered one stays
    /// pending; an unreadable one is logged, and acknowledged with the rest.
    fn events_of(&self, entries: &[(usize, StreamId)]) -> (Vec<usize>, Vec<Event>) {
        entries
            .iter()
            .enumerate()
            .flat_map(|(n, (i, e))| {
                let key = &self.streams[*i].key;
                Event::from_entry(key, e).into_iter().filter_map(move |ev| {
                    if ev.is_none() {
                        tracing::error!(stream = %key, id = %e.id, "unreadable order event; acknowledging it");
                    }
                    Some((n, ev?))
                })
            })
            .unzip()
    }

    /// Acknowledges every entry but those at the positions in `keep`, in one round trip.
    /// Returns how many it acknowledged.
    fn acknowledge(
        &mut self,
        entries: &[(usize, StreamId)],
        keep: &HashSet<usize>,
    ) -> Result<usize, WorkerError> {
        let mut acks: HashMap<usize, Vec<&str>> = HashMap::new();
        for (n, (i, e)) in entries.iter().enumerate() {
            if !keep.contains(&n) {
                acks.entry(*i).or_default().push(&e.id);
            }
        }
        if !acks.is_empty() {
            let mut pipe = redis::pipe();
            for (i, ids) in &acks {
                pipe.xack(&self.streams[*i].key, keys::WORKER_GROUP, ids)
                    .ignore();
            }
            let _: () = self.con.pipeline(&pipe)?;
        }
        Ok(acks.values().map(Vec::len).sum())
    }

    /// The streams read from whose entries `wait_replicas` replicas do not hold yet: what
    /// a master had not replicated when it was read could vanish with it in a failover,
    /// and a store must never keep an order Redis then has no record of.
    fn unreplicated(
        &mut self,
        entries: &[(usize, StreamId)],
    ) -> Result<HashSet<usize>, WorkerError> {
        let mut behind = HashSet::new();
        if self.opts.wait_replicas == 0 {
            return Ok(behind);
        }
        let streams: HashSet<usize> = entries.iter().map(|(i, _)| *i).collect();
        for i in streams {
            let key = &self.streams[i].key;
            let n =
                self.con
                    .wait_for_replicas(key, self.opts.wait_replicas, self.opts.wait_timeout)?;
            if n < i64::from(self.opts.wait_replicas) {
                tracing::warn!(stream = %key, replicas = n, wanted = self.opts.wait_replicas, "events not yet on enough replicas; left pending");
                behind.insert(i);
            }
        }
        Ok(behind)
    }

    pub fn db(&self) -> &OrderDb {
        &self.db
    }
}
