//! One pipelined Redis connection, driven by the shard itself over glommio's io_uring
//! `TcpStream`. Requests from every task on the shard are queued, written in batches by
//! one writer and answered in order by one reader; the `redis` crate encodes commands
//! and parses replies. While the link is down every request fails at once, and a
//! supervisor reconnects with backoff.

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

/// The live half of a connection: where to queue bytes and whom to answer.
struct Link {
    out: mpsc::UnboundedSender<Vec<u8>>,
    waiting: Rc<RefCell<VecDeque<oneshot::Sender<Value>>>>,
}

struct Inner {
    target: RedisTarget,
    cfg: RedisClientConfig,
    /// Commands sent on every new connection before it takes traffic (SCRIPT LOAD, ...).
    on_connect: Vec<Cmd>,
    link: RefCell<Option<Link>>,
    closed: Cell<bool>,
    connects: Cell<u64>,
}

/// A shard's handle to one Redis node. Cheap to clone; every clone shares the link.
#[derive(Clone)]
pub struct RedisConn {
    inner: Rc<Inner>,
}

impl RedisConn {
    /// Starts the connection's supervisor on the current shard.
    pub fn start(target: RedisTarget, cfg: RedisClientConfig, on_connect: Vec<Cmd>) -> Self {
        let inner = Rc::new(Inner {
            target,
            cfg,
            on_connect,
            link: RefCell::new(None),
            closed: Cell::new(false),
            connects: Cell::new(0),
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

    /// Sends one command and waits for its reply, at most the command timeout.
    /// A Redis error reply is `Err(StoreError::Server)`.
    pub async fn query(&self, cmd: &Cmd) -> Reply {
        let rx = {
            let link = self.inner.link.borrow();
            let Some(link) = link.as_ref() else {
                return Err(StoreError::Unavailable);
            };
            let (tx, rx) = oneshot::channel();
            if link.out.unbounded_send(cmd.get_packed_command()).is_err() {
                return Err(StoreError::Unavailable);
            }
            link.waiting.borrow_mut().push_back(tx);
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
            Either::Right(_) => Err(StoreError::Timeout),
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

/// Serves one established connection until it fails or the handle is closed.
async fn run_link(inner: &Rc<Inner>, stream: TcpStream, mut decoder: Decoder) {
    let (read_half, mut write_half) = stream.split();
    let (out, mut rx) = mpsc::unbounded::<Vec<u8>>();
    let waiting: Rc<RefCell<VecDeque<oneshot::Sender<Value>>>> = Rc::default();
    *inner.link.borrow_mut() = Some(Link {
        out,
        waiting: waiting.clone(),
    });

    let writer = async {
        let mut batch = Vec::with_capacity(16 * 1024);
        while let Some(first) = rx.next().await {
            batch.extend_from_slice(&first);
            // Everything queued while the last batch was in flight goes out together.
            while let Ok(more) = rx.try_recv() {
                batch.extend_from_slice(&more);
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
            let Some(tx) = waiting.borrow_mut().pop_front() else {
                tracing::error!("redis sent a reply nobody asked for; dropping the connection");
                return;
            };
            // The asker may have timed out and gone; the reply is simply dropped.
            let _ = tx.send(value);
        }
    };
    select(pin!(writer), pin!(reader)).await;
    // Dropping the link fails every waiting request at once (their senders are dropped).
    inner.link.borrow_mut().take();
    waiting.borrow_mut().clear();
}
