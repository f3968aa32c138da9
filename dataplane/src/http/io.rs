//! The bridge from glommio's socket to hyper, written once: glommio's `TcpStream` speaks
//! `futures::io`, `tokio_util::compat` turns it into `tokio::io`, and hyper-util's
//! `TokioIo` into hyper's traits, all without `unsafe`.
//!
//! On the way it keeps the connection's clock. Between requests the connection may be
//! idle for the idle timeout; once a request's first byte arrives, its head must be
//! complete within the header timeout (so a client that trickles bytes holds the
//! connection no longer than that); while a request is being handled no read deadline
//! runs (the handler bounds its own work). The service marks the start of handling
//! through [`Clock::handling`]; writing the response starts the idle time, and every
//! write restarts it (a stream of events is not idle).

use futures::io::AsyncBufRead;
use glommio::net::{Preallocated, TcpStream};
use glommio::timer::Timer;
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request.
    Idle,
    /// A request's head is arriving.
    Head,
    /// A request is being handled.
    Handling,
}

/// Milliseconds on the kernel's coarse monotonic clock, which moves once a tick (a few
/// milliseconds) and is read for a fifth of what the precise clock costs. A connection's
/// deadlines are seconds apart, and it reads the clock several times a request.
///
/// Read through the C library, whose vDSO call valgrind knows how to run: the node runs
/// under callgrind (`bench/node-instructions.sh`), where rustix's own vDSO lookup fails.
fn coarse_ms() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    // Linux has had this clock since 2.6.32; a node without it could keep no deadline.
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE).expect("the coarse monotonic clock");
    t.tv_sec() as u64 * 1000 + t.tv_nsec() as u64 / 1_000_000
}

/// How far [`coarse_ms`] may trail the precise clock timers run on: a tick, and the
/// milliseconds' truncation. A timer is set this much past the deadline, so that the
/// coarse clock has reached the deadline by the time it fires.
fn coarse_lag() -> Duration {
    static LAG: OnceLock<Duration> = OnceLock::new();
    *LAG.get_or_init(|| {
        use nix::time::{clock_getres, ClockId};
        let tick = clock_getres(ClockId::CLOCK_MONOTONIC_COARSE).expect("the coarse clock's tick");
        Duration::new(tick.tv_sec() as u64, tick.tv_nsec() as u32) + Duration::from_millis(1)
    })
}

/// Where a connection is in its request cycle, shared by the stream and the service.
#[derive(Debug)]
pub struct Clock {
    phase: Cell<Phase>,
    /// When the phase began, in [`coarse_ms`].
    since: Cell<u64>,
}

impl Clock {
    fn new() -> Rc<Self> {
        Rc::new(Clock {
            phase: Cell::new(Phase::Idle),
            since: Cell::new(coarse_ms()),
        })
    }

    fn set(&self, phase: Phase) {
        self.phase.set(phase);
        self.since.set(coarse_ms());
    }

    /// The request's head is parsed; its handler runs now.
    pub fn handling(&self) {
        self.set(Phase::Handling);
    }
}

/// Requests the quick lane answers in one turn of the connection's task at most.
const ANSWERS_A_TURN: usize = 16;

/// Bytes read from the socket at a time: a request head fits several times over, and
/// an idle connection keeps it small.
const READ_BUFFER: usize = 2048;

pub struct TimedStream {
    /// Read through the socket's own buffer, so a read copies what arrived into hyper's
    /// buffer and never has to zero that buffer first.
    inner: Compat<TcpStream<Preallocated>>,
    clock: Rc<Clock>,
    header_timeout: Duration,
    idle_timeout: Duration,
    timer: Option<Armed>,
    /// A JSON error response written in place of the HTTP layer's own (empty) answer to
    /// a request it could not parse, and how much of it went out.
    replacement: Option<(Vec<u8>, usize)>,
    /// The quick lane, on the shopper API's connections.
    lane: Option<super::quick::Lane>,
    /// hyper has written and not yet flushed: an answer of its own is on its way.
    unflushed: bool,
}

impl TimedStream {
    pub fn new(
        stream: TcpStream,
        header_timeout: Duration,
        idle_timeout: Duration,
    ) -> (Self, Rc<Clock>) {
        // A client that stops reading its responses is dropped after the idle timeout.
        // glommio refuses only a zero duration, which configuration validation excludes.
        let _ = stream.set_write_timeout(Some(idle_timeout));
        let clock = Clock::new();
        let s = TimedStream {
            inner: stream
                .buffered_with(Preallocated::new(READ_BUFFER))
                .compat(),
            clock: clock.clone(),
            header_timeout,
            idle_timeout,
            timer: None,
            replacement: None,
            lane: None,
            unflushed: false,
        };
        (s, clock)
    }

    /// Answers here what the quick lane can.
    pub fn with_lane(mut self, lane: super::quick::Lane) -> Self {
        self.lane = Some(lane);
        self
    }

    /// The current phase's deadline, in [`coarse_ms`].
    fn deadline(&self) -> Option<u64> {
        let since = self.clock.since.get();
        let limit = match self.clock.phase.get() {
            Phase::Idle => self.idle_timeout,
            Phase::Head => self.header_timeout,
            Phase::Handling => return None,
        };
        Some(since.saturating_add(limit.as_millis() as u64))
    }

    /// Arms the timer for the current deadline; `Ready` once it has passed.
    ///
    /// A timer armed for an earlier deadline, for this task, is left to run: when it
    /// fires, the connection wakes, looks at its deadline again and sets the timer for
    /// it. A busy connection's deadline moves with every request, and so the timer is
    /// set about once an idle timeout rather than once a request.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(deadline) = self.deadline() else {
            return Poll::Pending;
        };
        let now = coarse_ms();
        if now >= deadline {
            return Poll::Ready(());
        }
        let left = Duration::from_millis(deadline - now) + coarse_lag();
        if let Some(armed) = &self.timer {
            if now < armed.at && armed.at <= deadline && armed.waker.will_wake(cx.waker()) {
                return Poll::Pending;
            }
        }
        let armed = match &mut self.timer {
            Some(armed) => {
                armed.timer.reset(left);
                armed
            }
            None => self.timer.insert(Armed {
                at: deadline,
                timer: Box::pin(Timer::new(left)),
                waker: cx.waker().clone(),
            }),
        };
        armed.at = deadline;
        armed.waker.clone_from(cx.waker());
        armed.timer.as_mut().poll(cx).map(|_| ())
    }
}

/// The connection's timer, the deadline it is set for (in [`coarse_ms`]) and the task
/// it wakes.
struct Armed {
    at: u64,
    timer: Pin<Box<Timer>>,
    waker: Waker,
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let mut answered = 0;
        loop {
            // A client that sends requests without reading the answers is answered no
            // faster than it reads.
            if this
                .lane
                .as_ref()
                .is_some_and(super::quick::Lane::must_send)
            {
                std::task::ready!(this.poll_lane(cx))?;
            }
            // hyper has nothing in hand: its last answer is written and flushed, and it
            // asks for a request's first bytes.
            let idle = this.clock.phase.get() == Phase::Idle
                && !this.unflushed
                && this.replacement.is_none();
            let socket = Pin::new(this.inner.get_mut());
            match socket.poll_fill_buf(cx) {
                Poll::Ready(Ok(arrived)) => {
                    let mut n = arrived.len().min(buf.remaining());
                    if let (Some(lane), false) = (&mut this.lane, arrived.is_empty()) {
                        match lane.take(arrived, idle) {
                            super::quick::Take::Answered(len) => {
                                Pin::new(this.inner.get_mut()).consume(len);
                                this.clock.set(Phase::Idle);
                                // A client that keeps sending gets its turn, then waits
                                // for the shard's other work, as hyper's loop does.
                                answered += 1;
                                if answered == ANSWERS_A_TURN {
                                    std::task::ready!(this.poll_lane(cx))?;
                                    cx.waker().wake_by_ref();
                                    return Poll::Pending;
                                }
                                continue;
                            }
                            super::quick::Take::Hand(most) => n = n.min(most),
                        }
                    }
                    // The lane's answers go out before hyper reads on (or learns the
                    // client has finished), so they come before anything it answers.
                    if this
                        .lane
                        .as_ref()
                        .is_some_and(super::quick::Lane::has_output)
                    {
                        std::task::ready!(this.poll_lane(cx))?;
                        continue;
                    }
                    buf.put_slice(&arrived[..n]);
                    if let Some(lane) = &mut this.lane {
                        lane.handed(n);
                    }
                    Pin::new(this.inner.get_mut()).consume(n);
                    if n > 0 && this.clock.phase.get() == Phase::Idle {
                        this.clock.set(Phase::Head);
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    std::task::ready!(this.poll_lane(cx))?;
                    return match this.poll_deadline(cx) {
                        Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            match this.clock.phase.get() {
                                Phase::Head => "request head not received in time",
                                _ => "connection idle",
                            },
                        ))),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

impl TimedStream {
    /// A response is being written: the request is done, and the connection is not
    /// idle while its response (a long event stream, say) keeps flowing.
    fn responding(&self) {
        match self.clock.phase.get() {
            Phase::Handling => self.clock.set(Phase::Idle),
            Phase::Idle => self.clock.since.set(coarse_ms()),
            Phase::Head => {}
        }
    }

    /// hyper answers a request it cannot parse (bad framing, too many or too large
    /// headers) itself, with an empty body, before any handler runs. Such a response is
    /// swallowed and a JSON error with the same status is written instead.
    fn swallow(&mut self, first: &[u8]) -> bool {
        if self.replacement.is_some() {
            return true;
        }
        if self.clock.phase.get() == Phase::Handling || !first.starts_with(b"HTTP/1.") {
            return false;
        }
        let Some(status) = first
            .get(9..12)
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|s| *s >= 400)
        else {
            return false;
        };
        // Every response of ours carries a body; hyper's own error answers do not.
        let empty = first
            .windows(19)
            .any(|w| w.eq_ignore_ascii_case(b"content-length: 0\r\n"));
        if !empty {
            return false;
        }
        let e = super::reply::ApiError::of_framing_status(status);
        let body = serde_json::to_string(&e.body()).unwrap_or_default();
        let head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            e.status().as_u16(),
            e.status().canonical_reason().unwrap_or(""),
            body.len()
        );
        self.replacement = Some(([head.into_bytes(), body.into_bytes()].concat(), 0));
        true
    }

    /// Writes out the quick lane's answers.
    fn poll_lane(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.lane {
            Some(lane) => lane.poll_send(Pin::new(&mut self.inner), cx),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Writes what is left of the replacement response.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.replacement {
            if *done == bytes.len() {
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.swallow(buf) {
            return Poll::Ready(Ok(buf.len()));
        }
        self.responding();
        self.unflushed = true;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        if self.swallow(first) {
            return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
        }
        self.responding();
        self.unflushed = true;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_replacement(cx))?;
        std::task::ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        // hyper flushes once its buffer has gone to the socket.
        self.unflushed = false;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_lane(cx))?;
        std::task::ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
