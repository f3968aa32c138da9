//! One pipelined Redis connection, driven by the shard itself over glommio's io_uring
//! `TcpStream`. Requests from every task on the shard are queued, written in batches by
//! one writer and answered in order by one reader; the `redis` crate encodes commands
//! and parses replies. While the link is down every request fails at once, and a
//! supervisor reconnects with backoff.
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
}

pub type Reply = Result<Value, StoreError>;

pub(crate) type Decoder = combine::stream::Decoder<
    combine::parser::combinator::AnySendSyncPartialState,
    combine::stream::PointerOffset<[u8]>,
>;

/// A command on its way to Redis, and where its reply goes.
struct Request {
    bytes: Vec<u8>,
    reply: oneshot::Sender<Value>,
}

/// The live half of a connection: where to queue requests, and how many are queued or
/// in flight.
struct Link {
    out: mpsc::UnboundedSender<Request>,
    load: Rc<Cell<usize>>,
}

/// Requests one connection holds at most, queued or in flight; more fail at once.
const MAX_IN_FLIGHT: usize = 65_536;

struct Inner {
    target: RedisTarget,
    cfg: RedisClientConfig,
    /// Commands sent on every new connection before it takes traffic (SCRIPT LOAD, ...).
    on_connect: Vec<Cmd>,
    link: RefCell<Option<Link>>,
    closed: Cell<bool>,
    connects: Cell<u64>,
    breaker: RefCell<Breaker>,
    /// Round trips of the commands answered since the last `take_round_trips`, µs.
    round_trips: RefCell<Histogram<u64>>,
    /// Where round trips are also counted for `/metrics`.
    metrics: RefCell<Option<std::sync::Arc<crate::metrics::ShardMetrics>>>,
}

fn round_trip_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).unwrap_or_else(|_| unreachable!("valid bounds"))
}

/// A shard's handle to one Redis node. Cheap to clone; every clone shares the link.
#[derive(Clone)]
pub struct RedisConn {
    inner: Rc<Inner>,
}

impl RedisConn {
    /// Starts the connection's supervisor on the current shard.
    pub fn start(
        target: RedisTarget,
        cfg: RedisClientConfig,
        breaker: BreakerConfig,
        on_connect: Vec<Cmd>,
    ) -> Self {
        let inner = Rc::new(Inner {
            target,
            cfg,
            on_connect,
            link: RefCell::new(None),
            closed: Cell::new(false),
            connects: Cell::new(0),
            breaker: RefCell::new(Breaker::new(breaker, Instant::now())),
            round_trips: RefCell::new(round_trip_histogram()),
            metrics: RefCell::new(None),
        });
        glommio::spawn_local(supervise(inner.clone())).detach();
        RedisConn { inner }
    }

    pub fn is_up(&self) -> bool {
        self.inner.link.borrow().is_some()
    }

    /// How many times a link was established; tests and stats read it.
    pub fn connects(&self) -> u64 {
        self.inner.connects.get()
    }

    /// Stops reconnecting and drops the link.
    pub fn close(&self) {
        self.inner.closed.set(true);
        self.inner.link.borrow_mut().take();
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

    /// Whether the circuit breaker is refusing calls.
    pub fn breaker_open(&self) -> bool {
        self.inner.breaker.borrow().is_open()
    }

    /// Sends one command and waits for its reply, at most the command timeout; refused
    /// at once while the circuit breaker is open. A Redis error reply is
    /// `Err(StoreError::Server)`.
    pub async fn query(&self, cmd: &Cmd) -> Reply {
        let start = Instant::now();
        if !self.inner.breaker.borrow_mut().allow(start) {
            return Err(StoreError::Unavailable);
        }
        let reply = self.send(cmd).await;
        let ok = !matches!(reply, Err(StoreError::Unavailable | StoreError::Timeout));
        let now = Instant::now();
        self.inner.breaker.borrow_mut().record(ok, now - start, now);
        if ok {
            let us = ((now - start).as_micros() as u64).clamp(1, 60_000_000);
            self.inner.round_trips.borrow_mut().record(us).ok();
            if let Some(m) = self.inner.metrics.borrow().as_ref() {
                m.redis_round_trip(now - start);
            }
        }
        reply
    }

    async fn send(&self, cmd: &Cmd) -> Reply {
        let rx = {
            let link = self.inner.link.borrow();
            let Some(link) = link.as_ref() else {
                return Err(StoreError::Unavailable);
            };
            if link.load.get() >= MAX_IN_FLIGHT {
                return Err(StoreError::Unavailable);
            }
            let (reply, rx) = oneshot::channel();
            let bytes = cmd.get_packed_command();
            if link.out.unbounded_send(Request { bytes, reply }).is_err() {
                return Err(StoreError::Unavailable);
            }
            link.load.set(link.load.get() + 1);
            rx
        };
        let timeout = Timer::new(Duration::from_millis(self.inner.cfg.command_timeout_ms));
        match select(rx, pin!(timeout)).await {
            Either::Left((Ok(Value::ServerError(e)), _)) => Err(StoreError::Server(format!(
                "{} {}",
                e.code(),
                e.details().unwrap_or_default()
            ))),
            Either::Left((Ok(v), _)) => Ok(v),
            Either::Left((Err(oneshot::Canceled), _)) => Err(StoreError::Unavailable),
            Either::Right(_) => {
                // Replies come in order: with this one overdue, every later one is stuck
                // behind it. Drop the link now, so nothing more is written to a Redis
                // that stopped answering; the supervisor reconnects.
                if self.inner.link.borrow_mut().take().is_some() {
                    tracing::warn!(host = %self.inner.target.host, port = self.inner.target.port, "redis did not answer in time; dropping the connection");
                }
                Err(StoreError::Timeout)
            }
        }
    }
}

async fn supervise(inner: Rc<Inner>) {
    let min = Duration::from_millis(10);
    let max = Duration::from_millis(inner.cfg.max_backoff_ms);
    let mut backoff = min;
    let mut last_warning: Option<Instant> = None;
    while !inner.closed.get() {
        match connect(&inner.target, &inner.cfg, &inner.on_connect).await {
            Ok(_) if inner.closed.get() => return,
            Ok((stream, decoder)) => {
                backoff = min;
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
        Timer::new(backoff).await;
        backoff = (backoff * 2).min(max);
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
async fn run_link(inner: &Rc<Inner>, stream: TcpStream, mut decoder: Decoder) {
    let (read_half, mut write_half) = stream.split();
    let (out, mut rx) = mpsc::unbounded::<Request>();
    let load: Rc<Cell<usize>> = Rc::default();
    *inner.link.borrow_mut() = Some(Link {
        out,
        load: load.clone(),
    });
    let timeout = Duration::from_millis(inner.cfg.command_timeout_ms);
    // Replies owed by Redis, oldest first, with when their command was written.
    let waiting: RefCell<VecDeque<(Instant, oneshot::Sender<Value>)>> = RefCell::default();

    let writer = async {
        let mut batch = Vec::with_capacity(16 * 1024);
        while let Some(first) = rx.next().await {
            let mut next = Some(first);
            // Everything queued while the last batch was in flight goes out together.
            while let Some(req) = next.take().or_else(|| rx.try_recv().ok()) {
                if req.reply.is_canceled() {
                    load.set(load.get().saturating_sub(1));
                    continue;
                }
                batch.extend_from_slice(&req.bytes);
                waiting.borrow_mut().push_back((Instant::now(), req.reply));
            }
            if batch.is_empty() {
                continue;
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
        loop {
            let value = match redis::parse_redis_value_async(&mut decoder, &mut read_half).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!(error = %e, "redis read failed");
                    return;
                }
            };
            let Some((_, tx)) = waiting.borrow_mut().pop_front() else {
                tracing::error!("redis sent a reply nobody asked for; dropping the connection");
                return;
            };
            load.set(load.get().saturating_sub(1));
            // The asker may have timed out and gone; the reply is simply dropped.
            let _ = tx.send(value);
        }
    };
    let watchdog = async {
        let tick = (timeout / 4).max(Duration::from_millis(5));
        loop {
            Timer::new(tick).await;
            let oldest = waiting.borrow().front().map(|(t, _)| t.elapsed());
            if oldest.is_some_and(|age| age > timeout) {
                tracing::warn!(host = %inner.target.host, port = inner.target.port, "redis stopped answering; dropping the connection");
                return;
            }
        }
    };
    select(pin!(writer), select(pin!(reader), pin!(watchdog))).await;
    // Dropping the link fails every queued and waiting request at once.
    inner.link.borrow_mut().take();
    waiting.borrow_mut().clear();
}
