//! The link to one Redis node: a pipelined connection driven by the shard, one writer
//! batching the queued requests and one reader answering them in order, a watchdog on
//! the oldest unanswered command, and a supervisor that reconnects with backoff.

use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::StreamExt;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use redis::{Cmd, Value};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::config::{RedisClientConfig, RedisTarget};
use crate::guard::breaker::Breaker;
use seckill_core::backoff::Backoff;

use super::{Inner, Reply, StoreError};

pub(crate) type Decoder = combine::stream::Decoder<
    combine::parser::combinator::AnySendSyncPartialState,
    combine::stream::PointerOffset<[u8]>,
>;

/// A command on its way to Redis, and where its reply goes.
pub(super) struct Request {
    pub(super) bytes: Vec<u8>,
    pub(super) reply: oneshot::Sender<Reply>,
    /// A script (the writes that change stock and orders): with `wait_replicas`, its
    /// reply waits for the replicas.
    pub(super) durable: bool,
}

/// What Redis owes a link, in order: a reply to a request, or the reply to the `WAIT`
/// written after a batch; each with when it was written.
pub(super) enum Owed {
    Reply(Instant, oneshot::Sender<Reply>, bool),
    Wait(Instant),
}

impl Owed {
    pub(super) fn since(&self) -> Instant {
        match self {
            Owed::Reply(t, _, _) | Owed::Wait(t) => *t,
        }
    }
}

/// The live half of a connection: where to queue requests, and how many are queued or
/// in flight.
pub(super) struct Link {
    pub(super) out: mpsc::UnboundedSender<Request>,
    pub(super) load: Rc<Cell<usize>>,
}

/// Requests one connection holds at most, queued or in flight; more fail at once.
pub(super) const MAX_IN_FLIGHT: usize = 65_536;

/// One Redis node: its link, the supervisor that keeps it up, and its circuit breaker.
pub(super) struct Node {
    pub(super) target: RedisTarget,
    pub(super) cfg: RedisClientConfig,
    /// Commands sent on every new connection before it takes traffic (SCRIPT LOAD, ...).
    pub(super) on_connect: Rc<Vec<Cmd>>,
    pub(super) link: RefCell<Option<Link>>,
    pub(super) closed: Cell<bool>,
    pub(super) connects: Cell<u64>,
    pub(super) breaker: RefCell<Breaker>,
}

/// Slots of a Redis Cluster.
/// Whether a command runs a script.
pub(super) fn is_script(cmd: &Cmd) -> bool {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => {
            name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")
        }
        _ => false,
    }
}

impl Node {
    pub(super) fn start(target: RedisTarget, inner: &Inner) -> Rc<Node> {
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

    pub(super) fn is_up(&self) -> bool {
        self.link.borrow().is_some()
    }

    pub(super) fn close(&self) {
        self.closed.set(true);
        self.link.borrow_mut().take();
    }

    /// One command on this node (behind `ASKING` when `asking`), through its breaker.
    pub(super) async fn query(&self, cmd: &Cmd, asking: bool) -> Reply {
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

    pub(super) async fn send(&self, cmd: &Cmd, asking: bool) -> Reply {
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
        // No timer of its own: the link's watchdog fails every waiting call once the
        // oldest is `command_timeout_ms` late (one timer a link, not one a call).
        match rx.await {
            Ok(Ok(Value::ServerError(e))) => Err(StoreError::Server(format!(
                "{} {}",
                e.code(),
                e.details().unwrap_or_default()
            ))),
            Ok(reply) => reply,
            Err(oneshot::Canceled) => Err(StoreError::Unavailable),
        }
    }
}

pub(super) async fn supervise(inner: Rc<Node>) {
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

/// What a link's writer, reader and watchdog share: what Redis owes, oldest first; the
/// count of requests queued or in flight; and the replicas a script's write waits for.
struct Owing {
    waiting: RefCell<VecDeque<Owed>>,
    load: Rc<Cell<usize>>,
    replicas: u32,
}

impl Owing {
    /// One request queued or in flight is done with: answered, or gone unwritten.
    fn settle_one(&self) {
        let load = self.load.get();
        debug_assert!(load > 0, "a link's load never goes below zero");
        self.load.set(load.saturating_sub(1));
    }
}

/// Serves one established connection until it fails, Redis stops answering, or the
/// handle is closed.
pub(super) async fn run_link(inner: &Rc<Node>, stream: TcpStream, mut decoder: Decoder) {
    let (read_half, write_half) = stream.split();
    let (out, rx) = mpsc::unbounded::<Request>();
    let owing = Owing {
        waiting: RefCell::default(),
        load: Rc::default(),
        // With `wait_replicas`, a batch with scripts in it is followed by `WAIT`, and the
        // scripts' replies are held until that answers: a purchase, payment or release
        // is acknowledged only once replicas have it.
        replicas: inner.cfg.wait_replicas,
    };
    *inner.link.borrow_mut() = Some(Link {
        out,
        load: owing.load.clone(),
    });
    let wait = redis::cmd("WAIT")
        .arg(owing.replicas)
        .arg(inner.cfg.wait_timeout_ms)
        .get_packed_command();
    let writer = write_batches(&owing, rx, write_half, &wait);
    let reader = read_replies(&owing, read_half, &mut decoder);
    let watchdog = watch(inner, &owing);
    select(pin!(writer), select(pin!(reader), pin!(watchdog))).await;
    // Dropping the link fails every queued and waiting request at once.
    inner.link.borrow_mut().take();
    owing.waiting.borrow_mut().clear();
}

/// Writes the queued requests, everything queued while the last batch was in flight
/// together, until the link is closed or a write fails.
async fn write_batches(
    owing: &Owing,
    mut rx: mpsc::UnboundedReceiver<Request>,
    mut write_half: futures::io::WriteHalf<TcpStream>,
    wait: &[u8],
) {
    let mut batch = Vec::with_capacity(16 * 1024);
    while let Some(first) = rx.next().await {
        let mut next = Some(first);
        let mut durable = false;
        while let Some(req) = next.take().or_else(|| rx.try_recv().ok()) {
            if req.reply.is_canceled() {
                owing.settle_one();
                continue;
            }
            batch.extend_from_slice(&req.bytes);
            durable |= req.durable;
            owing.waiting.borrow_mut().push_back(Owed::Reply(
                Instant::now(),
                req.reply,
                req.durable,
            ));
        }
        if batch.is_empty() {
            continue;
        }
        if owing.replicas > 0 && durable {
            batch.extend_from_slice(wait);
            owing
                .waiting
                .borrow_mut()
                .push_back(Owed::Wait(Instant::now()));
        }
        if let Err(e) = write_half.write_all(&batch).await {
            tracing::debug!(error = %e, "redis write failed");
            return;
        }
        batch.clear();
    }
}

/// Answers what Redis owes, in order, until a read fails or Redis says what nobody
/// asked for.
async fn read_replies(
    owing: &Owing,
    read_half: futures::io::ReadHalf<TcpStream>,
    decoder: &mut Decoder,
) {
    let mut read_half = read_half.compat();
    let replicas = owing.replicas;
    let mut held: Vec<(oneshot::Sender<Reply>, Value)> = Vec::new();
    loop {
        let value = match redis::parse_redis_value_async(decoder, &mut read_half).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "redis read failed");
                return;
            }
        };
        let owed = owing.waiting.borrow_mut().pop_front();
        match owed {
            None => {
                tracing::error!("redis sent a reply nobody asked for; dropping the connection");
                return;
            }
            Some(Owed::Reply(_, tx, durable)) => {
                owing.settle_one();
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
}

/// Watches the oldest unanswered command: past the command timeout every waiting call
/// fails and the link goes; slow, the circuit breaker hears of it.
async fn watch(inner: &Node, owing: &Owing) {
    let timeout = Duration::from_millis(inner.cfg.command_timeout_ms);
    let slow = inner.breaker.borrow().slow_call();
    // The only clock on a call: a late reply fails within a tenth of the timeout past it.
    let tick = (timeout / 10).min(slow / 2).max(Duration::from_millis(5));
    let waiting = &owing.waiting;
    loop {
        Timer::new(tick).await;
        let Some(age) = waiting.borrow().front().map(|o| o.since().elapsed()) else {
            continue;
        };
        if age > timeout {
            // Replies come in order: with the oldest overdue, every later one is stuck
            // behind it. Each waiting call fails as timed out, and the link goes, so
            // nothing more is written to a Redis that stopped answering; the supervisor
            // reconnects.
            tracing::warn!(host = %inner.target.host, port = inner.target.port, "redis stopped answering; dropping the connection");
            for owed in waiting.borrow_mut().drain(..) {
                if let Owed::Reply(_, tx, _) = owed {
                    let _ = tx.send(Err(StoreError::Timeout));
                }
            }
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
        // Calls still waiting keep their chance until the command timeout; the ones that
        // come meanwhile are refused at once.
        if inner
            .breaker
            .borrow_mut()
            .stalled(owed, age, Instant::now())
        {
            tracing::warn!(host = %inner.target.host, port = inner.target.port, waiting = owed, late_ms = age.as_millis() as u64, "redis is not answering; circuit breaker open");
        }
    }
}
