//! The shard's Redis: one pipelined connection per Redis node, driven by the shard itself
//! over glommio's io_uring `TcpStream`. Requests from every task on the shard are queued,
//! written in batches by one writer and answered in order by one reader; the `redis`
//! crate encodes commands and parses replies. While a link is down every request for it
//! fails at once, and a supervisor reconnects with backoff.
//!
//! Redis is one server or a Redis Cluster; which, the first node that answers tells
//! (`CLUSTER SLOTS`). On a cluster every command goes to the master of its key's slot:
//! the slot map is read at start, re-read every second and at once after a `MOVED`;
//! a `MOVED` command is resent to the node named, an `ASK` command is resent there
//! behind `ASKING`, and `TRYAGAIN` (a slot half-migrated) is retried shortly. Redis
//! answers these before running anything, so a resent purchase never runs twice.
//!
//! A request whose caller gave up (timed out) before it was written is never sent. A
//! Redis that stops answering without closing the socket (stopped, partitioned) is
//! detected by the first command that times out (and by a watchdog on the age of the
//! oldest unanswered command): the link is dropped, everything queued fails at once, and
//! the supervisor reconnects. A command already written when
//! its caller timed out may still run: the caller's answer is "unavailable", which means
//! the outcome is unknown (purchases retried with an `Idempotency-Key` get it back).
//!
//! Three layers, a file each: this handle (what the shard's tasks call, redirections
//! followed), [`topology`] (which node serves a command) and [`link`] (one node's
//! connection, its writer, reader, watchdog and supervisor).

use glommio::timer::Timer;
use hdrhistogram::Histogram;
use redis::{Cmd, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::config::{RedisClientConfig, RedisTarget};
use crate::guard::breaker::BreakerConfig;

mod link;
mod topology;

pub(crate) use link::connect;
use link::Node;
pub use topology::slot_of;
use topology::{follow_topology, Redirect, Topology};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("redis is unreachable")]
    Unavailable,
    #[error("redis did not answer in time")]
    Timeout,
    #[error("redis error: {0}")]
    Server(String),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// Redis ran the command, but not enough replicas confirmed it in time: it may not
    /// survive the loss of the master (`redis_client.wait_replicas`).
    #[error("redis replicas did not confirm the write in time")]
    NotReplicated,
}

impl From<seckill_core::purchase::Unreadable> for StoreError {
    fn from(e: seckill_core::purchase::Unreadable) -> Self {
        StoreError::Protocol(e.0)
    }
}

pub type Reply = Result<Value, StoreError>;

const SLOTS: usize = 16_384;

/// Redirections one command follows at most before it fails.
const MAX_REDIRECTS: usize = 5;

/// Times a command is retried while its slot migrates (`TRYAGAIN`), about a second in all.
const MAX_RETRIES: u64 = 60;
struct Inner {
    seeds: Vec<RedisTarget>,
    cfg: RedisClientConfig,
    breaker_cfg: BreakerConfig,
    on_connect: Rc<Vec<Cmd>>,
    topology: Cell<Topology>,
    nodes: RefCell<Vec<Rc<Node>>>,
    /// Slot → index in `nodes` (a cluster only).
    slots: RefCell<Vec<u16>>,
    /// A redirection said the slot map is stale: re-read it now.
    stale: Cell<bool>,
    closed: Cell<bool>,
    /// Round trips of the commands answered since the last `take_round_trips`, µs.
    round_trips: RefCell<Histogram<u64>>,
    /// Where round trips are also counted for `/metrics`.
    metrics: RefCell<Option<std::sync::Arc<crate::metrics::ShardMetrics>>>,
}

fn round_trip_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).unwrap_or_else(|_| unreachable!("valid bounds"))
}

/// A shard's handle to its Redis (one server or a cluster). Cheap to clone; every clone
/// shares the links.
#[derive(Clone)]
pub struct RedisConn {
    inner: Rc<Inner>,
}

impl RedisConn {
    /// Starts finding out what `seeds` are (one server, or nodes of a cluster) and the
    /// supervisors of the links, on the current shard.
    pub fn start(
        seeds: Vec<RedisTarget>,
        cfg: RedisClientConfig,
        breaker: BreakerConfig,
        on_connect: Vec<Cmd>,
    ) -> Self {
        let inner = Rc::new(Inner {
            seeds,
            cfg,
            breaker_cfg: breaker,
            on_connect: Rc::new(on_connect),
            topology: Cell::new(Topology::Unknown),
            nodes: RefCell::default(),
            slots: RefCell::default(),
            stale: Cell::new(false),
            closed: Cell::new(false),
            round_trips: RefCell::new(round_trip_histogram()),
            metrics: RefCell::new(None),
        });
        glommio::spawn_local(follow_topology(inner.clone())).detach();
        RedisConn { inner }
    }

    /// Whether every node that serves slots (or the one server) has its link up.
    pub fn is_up(&self) -> bool {
        let nodes = self.inner.nodes.borrow();
        match self.inner.topology.get() {
            Topology::Unknown => false,
            Topology::Single => nodes.first().is_some_and(|n| n.is_up()),
            Topology::Cluster => {
                let slots = self.inner.slots.borrow();
                let mut serving = vec![false; nodes.len()];
                for &i in slots.iter() {
                    serving[usize::from(i)] = true;
                }
                nodes.iter().zip(serving).all(|(n, s)| !s || n.is_up())
            }
        }
    }

    /// Whether Redis is a cluster (false also while no node has answered yet).
    pub fn is_cluster(&self) -> bool {
        self.inner.topology.get() == Topology::Cluster
    }

    /// How many times a link was established, over every node; tests and stats read it.
    pub fn connects(&self) -> u64 {
        self.inner
            .nodes
            .borrow()
            .iter()
            .map(|n| n.connects.get())
            .sum()
    }

    /// Stops reconnecting and drops the links.
    pub fn close(&self) {
        self.inner.closed.set(true);
        for n in self.inner.nodes.borrow().iter() {
            n.close();
        }
    }

    /// Counts every round trip into `m` too.
    pub fn observe_round_trips(&self, m: std::sync::Arc<crate::metrics::ShardMetrics>) {
        *self.inner.metrics.borrow_mut() = Some(m);
    }

    /// The round trips recorded since the last call, and a fresh start.
    pub fn take_round_trips(&self) -> Histogram<u64> {
        std::mem::replace(
            &mut *self.inner.round_trips.borrow_mut(),
            round_trip_histogram(),
        )
    }

    /// Whether a circuit breaker (one per node) is refusing calls.
    pub fn breaker_open(&self) -> bool {
        self.inner
            .nodes
            .borrow()
            .iter()
            .any(|n| n.breaker.borrow().is_open())
    }

    /// Asks the node that serves `key` how many of its replicas hold every write this
    /// shard sent it so far (`WAIT`), waiting up to `timeout_ms` for `replicas` of them.
    pub async fn wait_near(
        &self,
        key: &str,
        replicas: u32,
        timeout_ms: u64,
    ) -> Result<i64, StoreError> {
        let node = self
            .inner
            .node_for_key(Some(key.as_bytes()))
            .ok_or(StoreError::Unavailable)?;
        let cmd = redis::cmd("WAIT").arg(replicas).arg(timeout_ms).clone();
        match node.query(&cmd, false).await? {
            redis::Value::Int(n) => Ok(n),
            other => Err(StoreError::Protocol(format!("WAIT answered {other:?}"))),
        }
    }

    /// Sends one command to the node that serves its key and waits for its reply, at
    /// most the command timeout; refused at once while that node's circuit breaker is
    /// open. Redirections are followed. A Redis error reply is `Err(StoreError::Server)`.
    pub async fn query(&self, cmd: &Cmd) -> Reply {
        let start = Instant::now();
        let Some(mut node) = self.inner.node_for(cmd) else {
            return Err(StoreError::Unavailable);
        };
        let mut asking = false;
        let (mut redirects, mut retries) = (0, 0);
        let reply = loop {
            let reply = node.query(cmd, asking).await;
            let redirect = match &reply {
                Err(StoreError::Server(e)) => Redirect::parse(e),
                Err(_) if self.is_cluster() => {
                    // A master may have failed over: read the slot map again.
                    self.inner.stale.set(true);
                    None
                }
                _ => None,
            };
            match redirect {
                Some(Redirect::Moved { slot, addr }) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    node = self.inner.node_at(&addr);
                    self.inner.route(slot, &node);
                    self.inner.stale.set(true);
                    asking = false;
                }
                Some(Redirect::Ask { addr }) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    node = self.inner.node_at(&addr);
                    asking = true;
                }
                Some(Redirect::TryAgain) if retries < MAX_RETRIES => {
                    // The slot's keys are moving; they will all be on one node soon.
                    retries += 1;
                    Timer::new(Duration::from_millis((2 * retries).min(20))).await;
                }
                _ => break reply,
            }
        };
        // A cluster without a master for some slots, or a node still loading its data,
        // ran nothing: the same as unreachable.
        let reply = match reply {
            Err(StoreError::Server(e))
                if e.starts_with("CLUSTERDOWN") || e.starts_with("LOADING") =>
            {
                self.inner.stale.set(true);
                Err(StoreError::Unavailable)
            }
            other => other,
        };
        if !matches!(reply, Err(StoreError::Unavailable | StoreError::Timeout)) {
            let took = start.elapsed();
            let us = (took.as_micros() as u64).clamp(1, 60_000_000);
            self.inner.round_trips.borrow_mut().record(us).ok();
            if let Some(m) = self.inner.metrics.borrow().as_ref() {
                m.redis_round_trip(took);
            }
        }
        reply
    }
}
