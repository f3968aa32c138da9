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

use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::StreamExt;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use hdrhistogram::Histogram;
use redis::{Cmd, Value};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::backoff::Backoff;
use crate::config::{RedisClientConfig, RedisTarget};
use crate::guard::breaker::{Breaker, BreakerConfig};

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

pub type Reply = Result<Value, StoreError>;

pub(crate) type Decoder = combine::stream::Decoder<
    combine::parser::combinator::AnySendSyncPartialState,
    combine::stream::PointerOffset<[u8]>,
>;

/// A command on its way to Redis, and where its reply goes.
struct Request {
    bytes: Vec<u8>,
    reply: oneshot::Sender<Reply>,
    /// A script (the writes that change stock and orders): with `wait_replicas`, its
    /// reply waits for the replicas.
    durable: bool,
}

/// What Redis owes a link, in order: a reply to a request, or the reply to the `WAIT`
/// written after a batch; each with when it was written.
enum Owed {
    Reply(Instant, oneshot::Sender<Reply>, bool),
    Wait(Instant),
}

impl Owed {
    fn since(&self) -> Instant {
        match self {
            Owed::Reply(t, _, _) | Owed::Wait(t) => *t,
        }
    }
}

/// The live half of a connection: where to queue requests, and how many are queued or
/// in flight.
struct Link {
    out: mpsc::UnboundedSender<Request>,
    load: Rc<Cell<usize>>,
}

/// Requests one connection holds at most, queued or in flight; more fail at once.
const MAX_IN_FLIGHT: usize = 65_536;

/// One Redis node: its link, the supervisor that keeps it up, and its circuit breaker.
struct Node {
    target: RedisTarget,
    cfg: RedisClientConfig,
    /// Commands sent on every new connection before it takes traffic (SCRIPT LOAD, ...).
    on_connect: Rc<Vec<Cmd>>,
    link: RefCell<Option<Link>>,
    closed: Cell<bool>,
    connects: Cell<u64>,
    breaker: RefCell<Breaker>,
}

/// Slots of a Redis Cluster.
const SLOTS: usize = 16_384;

/// Redirections one command follows at most before it fails.
const MAX_REDIRECTS: usize = 5;

/// Times a command is retried while its slot migrates (`TRYAGAIN`), about a second in all.
const MAX_RETRIES: u64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// No node has answered yet.
    Unknown,
    /// One server: every command goes to the first node.
    Single,
    /// A cluster: every command goes to its slot's master.
    Cluster,
}

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

/// What a redirection error asks for.
#[derive(Debug, PartialEq, Eq)]
enum Redirect {
    /// The slot lives elsewhere now: `MOVED <slot> <host:port>`.
    Moved { slot: usize, addr: String },
    /// The slot is being migrated and this key has gone: `ASK <slot> <host:port>`.
    Ask { addr: String },
    /// A slot half-migrated holds some of the keys: `TRYAGAIN`.
    TryAgain,
}

impl Redirect {
    fn parse(error: &str) -> Option<Redirect> {
        let mut words = error.split_ascii_whitespace();
        match words.next()? {
            "MOVED" => {
                let slot = words.next()?.parse().ok().filter(|s| *s < SLOTS)?;
                let addr = words.next()?.to_string();
                Some(Redirect::Moved { slot, addr })
            }
            "ASK" => Some(Redirect::Ask {
                addr: words.nth(1)?.to_string(),
            }),
            "TRYAGAIN" => Some(Redirect::TryAgain),
            _ => None,
        }
    }
}

/// The slot of a key: CRC16 (XMODEM) of the key or of its `{hash tag}`, mod 16384.
pub fn slot_of(key: &[u8]) -> usize {
    let tag = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|b| *b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|t| !t.is_empty())
        .unwrap_or(key);
    usize::from(crc16::State::<crc16::XMODEM>::calculate(tag)) % SLOTS
}

/// Whether a command runs a script.
fn is_script(cmd: &Cmd) -> bool {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => {
            name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")
        }
        _ => false,
    }
}

/// The key a command is routed by: the first key of a script, else the first argument;
/// none for the commands that name no key.
fn routing_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(b) => b,
        _ => &[],
    });
    let name = args.next()?;
    if name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL") {
        let numkeys = std::str::from_utf8(args.nth(1)?)
            .ok()?
            .parse::<usize>()
            .ok()?;
        return if numkeys > 0 { args.next() } else { None };
    }
    const KEYLESS: [&[u8]; 7] = [
        b"SCRIPT", b"TIME", b"PUBLISH", b"PING", b"INFO", b"CLIENT", b"CLUSTER",
    ];
    if KEYLESS.iter().any(|k| name.eq_ignore_ascii_case(k)) {
        return None;
    }
    args.next()
}

impl Inner {
    /// The node a command goes to first.
    fn node_for(&self, cmd: &Cmd) -> Option<Rc<Node>> {
        let nodes = self.nodes.borrow();
        match self.topology.get() {
            Topology::Unknown => None,
            Topology::Single => nodes.first().cloned(),
            Topology::Cluster => {
                // A command without a key goes to the master of slot 0: a master that
                // serves now, whichever node that is after a failover.
                let slot = routing_key(cmd).map_or(0, slot_of);
                let i = self.slots.borrow()[slot];
                nodes.get(usize::from(i)).cloned()
            }
        }
    }

    /// The node at `host:port`, started when it is new.
    fn node_at(&self, addr: &str) -> Rc<Node> {
        let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "6379"));
        let port = port.parse().unwrap_or(6379);
        let host = if host.is_empty() {
            self.seeds[0].host.as_str()
        } else {
            host
        };
        if let Some(n) = self
            .nodes
            .borrow()
            .iter()
            .find(|n| n.target.host == host && n.target.port == port)
        {
            return n.clone();
        }
        let target = RedisTarget {
            host: host.to_string(),
            port,
            ..self.seeds[0].clone()
        };
        let node = Node::start(target, self);
        self.nodes.borrow_mut().push(node.clone());
        node
    }

    /// Sends `slot` to `node` from now on.
    fn route(&self, slot: usize, node: &Rc<Node>) {
        if let Some(i) = self.nodes.borrow().iter().position(|n| Rc::ptr_eq(n, node)) {
            if let Some(s) = self.slots.borrow_mut().get_mut(slot) {
                *s = i as u16;
            }
        }
    }

    /// Asks the seeds, then every known node, until one answers `CLUSTER SLOTS`, and
    /// takes what it says: one server, or the cluster's slot map.
    async fn discover(&self) -> bool {
        let mut candidates = self.seeds.clone();
        candidates.extend(self.nodes.borrow().iter().map(|n| n.target.clone()));
        for t in candidates {
            let reply = match one_off(&t, &self.cfg, redis::cmd("CLUSTER").arg("SLOTS")).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!(host = %t.host, port = t.port, error = %e, "redis node did not answer");
                    continue;
                }
            };
            match reply {
                Value::ServerError(_) => {
                    // Cluster support disabled: one server.
                    if self.nodes.borrow().is_empty() {
                        let node = Node::start(t, self);
                        self.nodes.borrow_mut().push(node);
                    }
                    self.topology.set(Topology::Single);
                    return true;
                }
                Value::Array(ranges) => {
                    let mut slots = vec![0u16; SLOTS];
                    let mut covered = 0;
                    for range in &ranges {
                        let Some((from, to, addr)) = slot_range(range) else {
                            continue;
                        };
                        let node = self.node_at(&addr);
                        let i = self
                            .nodes
                            .borrow()
                            .iter()
                            .position(|n| Rc::ptr_eq(n, &node))
                            .unwrap_or(0) as u16;
                        for s in slots.iter_mut().take(to + 1).skip(from) {
                            *s = i;
                            covered += 1;
                        }
                    }
                    if covered == 0 {
                        continue;
                    }
                    *self.slots.borrow_mut() = slots;
                    if self.topology.get() != Topology::Cluster {
                        tracing::info!(nodes = self.nodes.borrow().len(), "redis is a cluster");
                    }
                    self.topology.set(Topology::Cluster);
                    return true;
                }
                _ => continue,
            }
        }
        false
    }
}

/// `[from, to, [host, port, ...], replicas...]` of a `CLUSTER SLOTS` reply.
fn slot_range(v: &Value) -> Option<(usize, usize, String)> {
    let Value::Array(parts) = v else { return None };
    let int = |v: &Value| match v {
        Value::Int(i) => usize::try_from(*i).ok(),
        _ => None,
    };
    let (from, to) = (int(parts.first()?)?, int(parts.get(1)?)?);
    let Value::Array(master) = parts.get(2)? else {
        return None;
    };
    let host = match master.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let port = int(master.get(1)?)?;
    (from <= to && to < SLOTS).then(|| (from, to, format!("{host}:{port}")))
}

/// Learns the topology, then keeps a cluster's slot map fresh: every second, and at
/// once when a redirection or a failed node says it moved.
async fn follow_topology(inner: Rc<Inner>) {
    let mut backoff = Backoff::new(
        Duration::from_millis(10),
        Duration::from_millis(inner.cfg.max_backoff_ms),
    );
    let mut last_read = Instant::now();
    while !inner.closed.get() {
        match inner.topology.get() {
            Topology::Unknown => {
                if !inner.discover().await {
                    Timer::new(backoff.wait()).await;
                }
            }
            Topology::Single => return,
            Topology::Cluster => {
                Timer::new(Duration::from_millis(50)).await;
                let due = last_read.elapsed() >= Duration::from_secs(1);
                if inner.stale.get() && last_read.elapsed() >= Duration::from_millis(100) || due {
                    inner.stale.set(false);
                    last_read = Instant::now();
                    inner.discover().await;
                }
            }
        }
    }
}

/// One command on a connection of its own, for the topology (so it never waits behind
/// traffic).
async fn one_off(t: &RedisTarget, cfg: &RedisClientConfig, cmd: &Cmd) -> Reply {
    let (mut stream, mut decoder) = connect(t, cfg, &[]).await?;
    let io = async {
        stream.write_all(&cmd.get_packed_command()).await?;
        let mut reader = (&mut stream).compat();
        redis::parse_redis_value_async(&mut decoder, &mut reader)
            .await
            .map_err(std::io::Error::other)
    };
    let timeout = Duration::from_millis(cfg.command_timeout_ms.max(cfg.connect_timeout_ms));
    let reply = match select(pin!(io), pin!(Timer::new(timeout))).await {
        Either::Left((Ok(v), _)) => Ok(v),
        Either::Left((Err(e), _)) => Err(StoreError::Server(e.to_string())),
        Either::Right(_) => Err(StoreError::Timeout),
    };
    reply
}

impl Node {
    fn start(target: RedisTarget, inner: &Inner) -> Rc<Node> {
        let node = Rc::new(Node {
            target,
            cfg: inner.cfg.clone(),
            on_connect: inner.on_connect.clone(),
            link: RefCell::new(None),
            closed: Cell::new(inner.closed.get()),
            connects: Cell::new(0),
            breaker: RefCell::new(Breaker::new(inner.breaker_cfg.clone(), Instant::now())),
        });
        glommio::spawn_local(supervise(node.clone())).detach();
        node
    }

    fn is_up(&self) -> bool {
        self.link.borrow().is_some()
    }

    fn close(&self) {
        self.closed.set(true);
        self.link.borrow_mut().take();
    }

    /// One command on this node (behind `ASKING` when `asking`), through its breaker.
    async fn query(&self, cmd: &Cmd, asking: bool) -> Reply {
        let start = Instant::now();
        if !self.breaker.borrow_mut().allow(start) {
            return Err(StoreError::Unavailable);
        }
        let reply = self.send(cmd, asking).await;
        let ok = !matches!(
            reply,
            Err(StoreError::Unavailable | StoreError::Timeout | StoreError::NotReplicated)
        );
        let now = Instant::now();
        self.breaker.borrow_mut().record(ok, now - start, now);
        reply
    }

    async fn send(&self, cmd: &Cmd, asking: bool) -> Reply {
        // `ASKING` goes right before the command, in the same batch; its reply is kept
        // waited for (a request whose asker has gone is not written).
        let (_asked, rx) = {
            let link = self.link.borrow();
            let Some(link) = link.as_ref() else {
                return Err(StoreError::Unavailable);
            };
            if link.load.get() >= MAX_IN_FLIGHT {
                return Err(StoreError::Unavailable);
            }
            let queue = |cmd: &Cmd| {
                let (reply, rx) = oneshot::channel();
                let request = Request {
                    bytes: cmd.get_packed_command(),
                    reply,
                    durable: is_script(cmd),
                };
                link.out.unbounded_send(request).ok()?;
                link.load.set(link.load.get() + 1);
                Some(rx)
            };
            let asked = if asking {
                Some(queue(&redis::cmd("ASKING")).ok_or(StoreError::Unavailable)?)
            } else {
                None
            };
            let rx = queue(cmd).ok_or(StoreError::Unavailable)?;
            (asked, rx)
        };
        let timeout = Timer::new(Duration::from_millis(self.cfg.command_timeout_ms));
        match select(rx, pin!(timeout)).await {
            Either::Left((Ok(Ok(Value::ServerError(e))), _)) => Err(StoreError::Server(format!(
                "{} {}",
                e.code(),
                e.details().unwrap_or_default()
            ))),
            Either::Left((Ok(reply), _)) => reply,
            Either::Left((Err(oneshot::Canceled), _)) => Err(StoreError::Unavailable),
            Either::Right(_) => {
                // Replies come in order: with this one overdue, every later one is stuck
                // behind it. Drop the link now, so nothing more is written to a Redis
                // that stopped answering; the supervisor reconnects.
                if self.link.borrow_mut().take().is_some() {
                    tracing::warn!(host = %self.target.host, port = self.target.port, "redis did not answer in time; dropping the connection");
                }
                Err(StoreError::Timeout)
            }
        }
    }
}

async fn supervise(inner: Rc<Node>) {
    let mut backoff = Backoff::new(
        Duration::from_millis(10),
        Duration::from_millis(inner.cfg.max_backoff_ms),
    );
    let mut last_warning: Option<Instant> = None;
    while !inner.closed.get() {
        match connect(&inner.target, &inner.cfg, &inner.on_connect).await {
            Ok(_) if inner.closed.get() => return,
            Ok((stream, decoder)) => {
                backoff.reset();
                inner.connects.set(inner.connects.get() + 1);
                tracing::info!(host = %inner.target.host, port = inner.target.port, "redis connected");
                run_link(&inner, stream, decoder).await;
                if !inner.closed.get() {
                    tracing::warn!(host = %inner.target.host, port = inner.target.port, "redis connection lost");
                }
            }
            Err(e) => {
                if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                    tracing::warn!(host = %inner.target.host, port = inner.target.port, error = %e, "redis unreachable, retrying");
                    last_warning = Some(Instant::now());
                }
            }
        }
        Timer::new(backoff.wait()).await;
    }
}

/// Opens a stream and runs the handshake (AUTH, SELECT, script loads) before any traffic.
pub(crate) async fn connect(
    t: &RedisTarget,
    cfg: &RedisClientConfig,
    on_connect: &[Cmd],
) -> Result<(TcpStream, Decoder), StoreError> {
    let addr = format!("{}:{}", t.host, t.port);
    let timeout = Duration::from_millis(cfg.connect_timeout_ms);
    let stream = TcpStream::connect_timeout(addr.as_str(), timeout)
        .await
        .map_err(|e| StoreError::Server(e.to_string()))?;
    stream
        .set_nodelay(true)
        .map_err(|e| StoreError::Server(e.to_string()))?;
    let mut handshake: Vec<Cmd> = Vec::new();
    if let Some(pw) = &t.password {
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = &t.username {
            auth.arg(user);
        }
        handshake.push(auth.arg(pw).clone());
    }
    if t.db != 0 {
        handshake.push(redis::cmd("SELECT").arg(t.db).clone());
    }
    handshake.extend(on_connect.iter().cloned());
    let mut decoder = Decoder::new();
    let mut stream = stream;
    if !handshake.is_empty() {
        let mut bytes = Vec::new();
        for c in &handshake {
            bytes.extend(c.get_packed_command());
        }
        let io = async {
            stream.write_all(&bytes).await?;
            let mut reader = (&mut stream).compat();
            for _ in &handshake {
                if let Value::ServerError(e) =
                    redis::parse_redis_value_async(&mut decoder, &mut reader)
                        .await
                        .map_err(std::io::Error::other)?
                {
                    return Err(std::io::Error::other(format!("{e:?}")));
                }
            }
            Ok::<_, std::io::Error>(())
        };
        match select(pin!(io), pin!(Timer::new(timeout * 10))).await {
            Either::Left((Ok(()), _)) => {}
            Either::Left((Err(e), _)) => return Err(StoreError::Server(e.to_string())),
            Either::Right(_) => return Err(StoreError::Timeout),
        };
    }
    Ok((stream, decoder))
}

/// Serves one established connection until it fails, Redis stops answering, or the
/// handle is closed.
async fn run_link(inner: &Rc<Node>, stream: TcpStream, mut decoder: Decoder) {
    let (read_half, mut write_half) = stream.split();
    let (out, mut rx) = mpsc::unbounded::<Request>();
    let load: Rc<Cell<usize>> = Rc::default();
    *inner.link.borrow_mut() = Some(Link {
        out,
        load: load.clone(),
    });
    let timeout = Duration::from_millis(inner.cfg.command_timeout_ms);
    // What Redis owes, oldest first.
    let waiting: RefCell<VecDeque<Owed>> = RefCell::default();
    // With `wait_replicas`, a batch with scripts in it is followed by `WAIT`, and the
    // scripts' replies are held until that answers: a purchase, payment or release is
    // acknowledged only once replicas have it.
    let replicas = inner.cfg.wait_replicas;
    let wait = redis::cmd("WAIT")
        .arg(replicas)
        .arg(inner.cfg.wait_timeout_ms)
        .get_packed_command();

    let writer = async {
        let mut batch = Vec::with_capacity(16 * 1024);
        while let Some(first) = rx.next().await {
            let mut next = Some(first);
            let mut durable = false;
            // Everything queued while the last batch was in flight goes out together.
            while let Some(req) = next.take().or_else(|| rx.try_recv().ok()) {
                if req.reply.is_canceled() {
                    load.set(load.get().saturating_sub(1));
                    continue;
                }
                batch.extend_from_slice(&req.bytes);
                durable |= req.durable;
                waiting
                    .borrow_mut()
                    .push_back(Owed::Reply(Instant::now(), req.reply, req.durable));
            }
            if batch.is_empty() {
                continue;
            }
            if replicas > 0 && durable {
                batch.extend_from_slice(&wait);
                waiting.borrow_mut().push_back(Owed::Wait(Instant::now()));
            }
            if let Err(e) = write_half.write_all(&batch).await {
                tracing::debug!(error = %e, "redis write failed");
                return;
            }
            batch.clear();
        }
    };
    let reader = async {
        let mut read_half = read_half.compat();
        let mut held: Vec<(oneshot::Sender<Reply>, Value)> = Vec::new();
        loop {
            let value = match redis::parse_redis_value_async(&mut decoder, &mut read_half).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!(error = %e, "redis read failed");
                    return;
                }
            };
            let owed = waiting.borrow_mut().pop_front();
            match owed {
                None => {
                    tracing::error!("redis sent a reply nobody asked for; dropping the connection");
                    return;
                }
                Some(Owed::Reply(_, tx, durable)) => {
                    load.set(load.get().saturating_sub(1));
                    if replicas > 0 && durable {
                        held.push((tx, value));
                    } else {
                        // The asker may have timed out and gone; the reply is dropped.
                        let _ = tx.send(Ok(value));
                    }
                }
                Some(Owed::Wait(_)) => {
                    let confirmed = matches!(value, Value::Int(n) if n >= i64::from(replicas));
                    if !confirmed {
                        tracing::debug!(?value, "replicas did not confirm a batch in time");
                    }
                    for (tx, v) in held.drain(..) {
                        let _ = tx.send(if confirmed {
                            Ok(v)
                        } else {
                            Err(StoreError::NotReplicated)
                        });
                    }
                }
            }
        }
    };
    let watchdog = async {
        let slow = inner.breaker.borrow().slow_call();
        let tick = (timeout / 4).min(slow / 2).max(Duration::from_millis(5));
        loop {
            Timer::new(tick).await;
            let Some(age) = waiting.borrow().front().map(|o| o.since().elapsed()) else {
                continue;
            };
            if age > timeout {
                tracing::warn!(host = %inner.target.host, port = inner.target.port, "redis stopped answering; dropping the connection");
                return;
            }
            if age <= slow {
                continue;
            }
            let owed = waiting
                .borrow()
                .iter()
                .filter(|o| matches!(o, Owed::Reply(..)))
                .count();
            // Calls still waiting keep their chance until the command timeout; the ones
            // that come meanwhile are refused at once.
            if inner
                .breaker
                .borrow_mut()
                .stalled(owed, age, Instant::now())
            {
                tracing::warn!(host = %inner.target.host, port = inner.target.port, waiting = owed, late_ms = age.as_millis() as u64, "redis is not answering; circuit breaker open");
            }
        }
    };
    select(pin!(writer), select(pin!(reader), pin!(watchdog))).await;
    // Dropping the link fails every queued and waiting request at once.
    inner.link.borrow_mut().take();
    waiting.borrow_mut().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag_as_redis_computes_them() {
        // Figures from `CLUSTER KEYSLOT` on a real Redis.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"sk:{spring.3}:part"), 1486);
        assert_eq!(slot_of(b"spring.3"), 1486);
        assert_eq!(slot_of(b"a{}b"), 13694, "an empty tag hashes the whole key");
        assert_eq!(slot_of(b"{}"), 15257);
    }

    #[test]
    fn commands_are_routed_by_their_first_key() {
        let keys = crate::keys::PartitionKeys::new("spring", 3);
        let script = crate::store::script_call(&crate::scripts::PURCHASE, &[&keys.part()], &["u"]);
        assert_eq!(routing_key(&script), Some(keys.part().as_bytes()));
        let keyless = crate::store::script_call(&crate::scripts::PURCHASE, &[], &["u"]);
        assert_eq!(routing_key(&keyless), None);
        assert_eq!(
            routing_key(redis::cmd("HGETALL").arg("sk:campaign:x")),
            Some(&b"sk:campaign:x"[..])
        );
        assert_eq!(routing_key(&redis::cmd("TIME")), None);
        assert_eq!(
            routing_key(redis::cmd("SCRIPT").arg("LOAD").arg("return 1")),
            None
        );
    }

    #[test]
    fn redirections_are_read_from_the_error() {
        assert_eq!(
            Redirect::parse("MOVED 1486 127.0.0.1:7002"),
            Some(Redirect::Moved {
                slot: 1486,
                addr: "127.0.0.1:7002".into()
            })
        );
        assert_eq!(
            Redirect::parse("ASK 1486 10.0.0.2:6379"),
            Some(Redirect::Ask {
                addr: "10.0.0.2:6379".into()
            })
        );
        assert_eq!(
            Redirect::parse("TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(Redirect::parse("MOVED 99999 a:1"), None);
        assert_eq!(Redirect::parse("ERR wrong number of arguments"), None);
    }
}
