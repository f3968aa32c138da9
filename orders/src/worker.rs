//! The order worker: reads every partition's event stream through the `workers` consumer
//! group, writes the events to its SQLite file in one transaction per batch, delivers
//! paid orders, and only then acknowledges. A worker that dies leaves its entries
//! pending; any worker claims them (`XAUTOCLAIM`) once they have been idle long enough.
//! Runs on a thread of its own, with Redis's blocking client: it is not on the hot path.

use hdrhistogram::Histogram;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadOptions, StreamReadReply};
use seckill_core::connection::Connection;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::db::OrderDb;
use super::event::{Event, Kind};
use seckill_core::auth::{derive_license, Secret};
use seckill_core::backoff::Backoff;
use seckill_core::campaign::State;
use seckill_core::control;
use seckill_core::keys::{self, CodeKeys, OrderId, PartitionKeys};
use seckill_core::reply::{int, text};
use seckill_core::scripts;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Consumer name in the group; keep it stable across restarts of the same worker.
    pub name: String,
    pub redis_url: String,
    pub db: PathBuf,
    pub secret: Secret,
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
        // What a stream's master has not replicated yet stays pending, claimed again after
        // `claim_idle` once a replica has it (or, after a failover, gone with the master
        // that never acknowledged it); the other streams go on.
        let unconfirmed = self.unreplicated(&entries)?;
        entries.retain(|(i, _)| !unconfirmed.contains(i));
        if entries.is_empty() {
            self.note_undelivered(&[], &HashSet::new());
            return Ok(0);
        }
        // Each event with the position of its entry, so an undelivered one stays pending.
        let (at, events): (Vec<usize>, Vec<Event>) = entries
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
            .unzip();
        self.db.apply(&events)?;
        let paid: Vec<&Event> = events.iter().filter(|e| e.kind == Kind::Paid).collect();
        let undelivered = self.deliver(&paid)?;
        self.note_undelivered(&paid, &undelivered);
        // An entry left unacknowledged is claimed again after `claim_idle` and retried.
        let keep: HashSet<usize> = at
            .iter()
            .zip(&events)
            .filter(|(_, e)| e.kind == Kind::Paid && undelivered.contains(e.order_id.as_str()))
            .map(|(n, _)| *n)
            .collect();
        let mut acks: HashMap<usize, Vec<&str>> = HashMap::new();
        for (n, (i, e)) in entries.iter().enumerate() {
            if !keep.contains(&n) {
                acks.entry(*i).or_default().push(&e.id);
            }
        }
        if !acks.is_empty() {
            let mut pipe = redis::pipe();
            for (i, ids) in acks {
                pipe.xack(&self.streams[i].key, keys::WORKER_GROUP, &ids)
                    .ignore();
            }
            let _: () = self.con.pipeline(&pipe)?;
        }
        // An order's event kept pending counts once, when it is finally acknowledged.
        let done = at.iter().filter(|n| !keep.contains(n)).count() as u64;
        self.stats.events += done;
        if let Some(m) = &self.opts.metrics {
            m.events.fetch_add(done, Ordering::Relaxed);
        }
        Ok(entries.len())
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

    /// Binds a licence key to each paid order and marks it delivered, once: a replayed
    /// `paid` event finds the same code bound and the order already delivered. Each step
    /// is one pipelined round trip for the whole batch. Returns the orders it could not
    /// deliver: their events must stay pending, to be tried again.
    fn deliver<'e>(&mut self, paid: &[&'e Event]) -> Result<HashSet<&'e str>, WorkerError> {
        let mut undelivered = HashSet::new();
        if paid.is_empty() {
            return Ok(undelivered);
        }
        let mut binds = redis::pipe();
        let pooled: Vec<&&Event> = paid
            .iter()
            .filter(|e| self.pooled.contains(&e.campaign))
            .collect();
        for e in &pooled {
            let k = CodeKeys::new(&e.campaign);
            binds
                .cmd("EVALSHA")
                .arg(scripts::BIND_CODE.get_hash())
                .arg(2)
                .arg(k.pool())
                .arg(k.bound())
                .arg(&e.order_id);
        }
        let codes: Vec<Option<String>> = if pooled.is_empty() {
            Vec::new()
        } else {
            self.con.pipeline(&binds)?
        };
        let codes: HashMap<&str, Option<String>> = pooled
            .iter()
            .map(|e| e.order_id.as_str())
            .zip(codes)
            .collect();
        let mut delivers = redis::pipe();
        let mut sent = Vec::new();
        for e in paid {
            let license = match codes.get(e.order_id.as_str()) {
                Some(Some(code)) => code.clone(),
                Some(None) => {
                    // Logged once per order: its retries show in the undelivered gauge.
                    if !self.held_back.contains_key(&e.order_id) {
                        tracing::error!(campaign = %e.campaign, order = %e.order_id, "code pool exhausted; order left pending until codes are added");
                    }
                    undelivered.insert(e.order_id.as_str());
                    continue;
                }
                None => derive_license(&self.opts.secret, &e.order_id),
            };
            let Some(oid) = OrderId::parse(&e.order_id) else {
                continue;
            };
            let k = PartitionKeys::new(oid.campaign, oid.partition);
            delivers
                .cmd("EVALSHA")
                .arg(scripts::DELIVER.get_hash())
                .arg(2)
                .arg(k.order(&e.order_id))
                .arg(k.events())
                .arg(&e.order_id)
                .arg(&license);
            sent.push(e.order_id.as_str());
        }
        if sent.is_empty() {
            return Ok(undelivered);
        }
        let replies: Vec<Vec<redis::Value>> = self.con.pipeline(&delivers)?;
        for (order, v) in sent.into_iter().zip(replies) {
            if text(v.first()).as_deref() != Some("delivered") {
                // Not expected after a `paid` event (a paid order only moves on to
                // delivered); kept pending so that it shows and is tried again.
                if !self.held_back.contains_key(order) {
                    tracing::error!(order, reply = ?v, "paid event for an order that is not paid");
                }
                undelivered.insert(order);
                continue;
            }
            let (paid_ms, delivered_ms, first) = (
                int(v.get(2)).unwrap_or(0),
                int(v.get(3)).unwrap_or(0),
                int(v.get(4)).unwrap_or(0),
            );
            if first == 1 {
                self.stats.delivered += 1;
                let took = (delivered_ms - paid_ms).max(1) as u64;
                let _ = self.stats.pay_to_delivered_ms.record(took);
                let _ = self.stats.recent_pay_to_delivered_ms.record(took);
                if let Some(m) = &self.opts.metrics {
                    m.delivered_after(Duration::from_millis(took));
                }
            }
        }
        Ok(undelivered)
    }

    /// Counts a pass's failed deliveries and updates the orders held back. One not tried
    /// again for two claim periods was claimed by another worker, and is its to report.
    fn note_undelivered(&mut self, paid: &[&Event], undelivered: &HashSet<&str>) {
        let now = Instant::now();
        for e in paid {
            if undelivered.contains(e.order_id.as_str()) {
                self.held_back.insert(e.order_id.clone(), now);
            } else {
                self.held_back.remove(&e.order_id);
            }
        }
        let forgotten = self.opts.claim_idle * 2 + Duration::from_secs(2);
        self.held_back
            .retain(|_, tried| tried.elapsed() < forgotten);
        self.stats.delivery_failures += undelivered.len() as u64;
        if let Some(m) = &self.opts.metrics {
            m.delivery_failures
                .fetch_add(undelivered.len() as u64, Ordering::Relaxed);
            m.undelivered
                .store(self.held_back.len() as u64, Ordering::Relaxed);
        }
    }

    pub fn db(&self) -> &OrderDb {
        &self.db
    }
}

/// What the last telemetry record counted from.
struct Reported {
    at: Instant,
    events: u64,
    delivered: u64,
}

/// Runs a worker until `stop` is set, reconnecting after failures.
pub fn run(opts: WorkerOptions, stop: &AtomicBool) {
    let mut worker: Option<Worker> = None;
    let mut last_report = Instant::now();
    let started_ms = seckill_core::now_ms();
    let mut reported = Reported {
        at: Instant::now(),
        events: 0,
        delivered: 0,
    };
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    while !stop.load(Ordering::Relaxed) {
        let w = match worker.as_mut() {
            Some(w) => w,
            None => match Worker::open(opts.clone()) {
                Ok(w) => {
                    tracing::info!(name = %opts.name, db = %opts.db.display(), "order worker started");
                    // A new worker counts from zero.
                    (reported.events, reported.delivered) = (0, 0);
                    backoff.reset();
                    worker.insert(w)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "order worker cannot start; retrying");
                    std::thread::sleep(backoff.wait());
                    continue;
                }
            },
        };
        match w.step() {
            Ok(0) => std::thread::sleep(Duration::from_millis(5)),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "order worker step failed; reconnecting");
                worker = None;
                std::thread::sleep(backoff.wait());
                continue;
            }
        }
        if reported.at.elapsed() >= Duration::from_secs(1) {
            if let Some(w) = worker.as_mut() {
                if let Err(e) = w.write_telemetry(started_ms, &mut reported) {
                    tracing::debug!(error = %e, "cannot write the worker's telemetry");
                }
            }
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            if let Some(w) = &worker {
                w.report("order worker");
            }
            last_report = Instant::now();
        }
    }
    if let Some(w) = &worker {
        w.report("order worker stopped");
    }
}

impl Worker {
    /// Writes this second's record for the console: backlog, rates, delivery latency.
    fn write_telemetry(&mut self, started_ms: i64, last: &mut Reported) -> Result<(), WorkerError> {
        let (mut pending, mut lag) = (0, 0);
        for s in &self.streams {
            let (p, l) = crate::reconcile::backlog(&mut self.con, &s.key)?;
            pending += p;
            lag += l;
        }
        if let Some(m) = &self.opts.metrics {
            m.lag.store(lag, Ordering::Relaxed);
            m.pending.store(pending, Ordering::Relaxed);
        }
        let secs = last.at.elapsed().as_secs_f64().max(0.001);
        let recent = &mut self.stats.recent_pay_to_delivered_ms;
        let record = seckill_core::telemetry::WorkerRecord {
            name: self.opts.name.clone(),
            started_ms,
            at_ms: seckill_core::now_ms(),
            lag,
            pending,
            events_per_s: self.stats.events.saturating_sub(last.events) as f64 / secs,
            delivered_per_s: self.stats.delivered.saturating_sub(last.delivered) as f64 / secs,
            delivered: self.stats.delivered,
            pay_to_delivered_p99_ms: recent.value_at_quantile(0.99) as f64,
            undelivered: self.held_back.len() as u64,
        };
        recent.reset();
        *last = Reported {
            at: Instant::now(),
            events: self.stats.events,
            delivered: self.stats.delivered,
        };
        seckill_core::telemetry::write_worker(&mut self.con, &record)?;
        Ok(())
    }

    fn report(&self, what: &str) {
        let h = &self.stats.pay_to_delivered_ms;
        tracing::info!(
            events = self.stats.events,
            delivered = self.stats.delivered,
            pay_to_delivered_p50_ms = h.value_at_quantile(0.5),
            pay_to_delivered_p99_ms = h.value_at_quantile(0.99),
            pay_to_delivered_max_ms = h.max(),
            "{what}"
        );
    }
}
