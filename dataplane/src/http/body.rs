//! Reading a request's body, for a while at most, as one small future. It is held inline
//! in the future of the request that reads it, which is allocated and moved: nested
//! `async fn`s (read, wait, race a timer) each kept their own copy of what they held, and
//! made a purchase's future a fifth larger. Below the routes: a route reads its JSON body,
//! or drops the body of a request it refused, through here.

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use glommio::timer::Timer;
use hyper::body::{Body, Incoming};
use hyper::Request;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::reply::{ApiError, Reply};
use super::request;
use super::wake::held_back;
use crate::shard::Shard;

/// A route's answer: given at once, or a future for one that waits on Redis, a body or
/// a clock.
pub(crate) enum Step<'a> {
    Now(Result<Reply, ApiError>),
    Waits(futures::future::LocalBoxFuture<'a, Result<Reply, ApiError>>),
}

/// How long a client refused for who it is (its token, its rate) may take to send the
/// rest of its body before the answer goes and the connection closes.
pub(crate) const REFUSED_CLIENT_WAIT: Duration = Duration::from_millis(50);

/// An answer decided before the body was read. What has come of the body is read and
/// dropped first, within `wait`: a connection closed on unread bytes cannot carry the
/// client's next request, and a client that reuses it loses that request.
pub(crate) fn before_body<T>(
    req: Request<Incoming>,
    answer: Result<T, ApiError>,
    wait: Duration,
) -> impl Future<Output = Result<T, ApiError>> {
    // The head is dropped here: the future keeps only the body.
    let read = BodyRead::discard(req.into_body(), wait);
    async move {
        read.await;
        answer
    }
}

/// A refusal decided before the body was read, given at once when the body came whole
/// with its head (hyper has taken it off the connection already); else as
/// [`before_body`] gives it.
pub(crate) fn refused_before_body<'a>(
    req: Request<Incoming>,
    refused: ApiError,
    wait: Duration,
) -> Step<'a> {
    let mut read = BodyRead::discard(req.into_body(), wait);
    if read.done_now() {
        return Step::Now(Err(refused));
    }
    Step::Waits(
        async move {
            read.await;
            Err(refused)
        }
        .boxed_local(),
    )
}

/// A JSON body, which must arrive within the header timeout.
pub(crate) fn read_json<T: DeserializeOwned>(
    shard: &Shard,
    req: Request<Incoming>,
) -> impl Future<Output = Result<T, ApiError>> {
    let http = &shard.settings().http;
    let limit = http.max_body_bytes;
    // A declared length above the limit is refused without waiting for the body. What
    // already came is read first: closing on unread bytes resets the connection, and the
    // client could lose the answer.
    let too_large = hyper::body::Body::size_hint(req.body()).lower() > limit as u64;
    let read = if too_large {
        BodyRead::discard(req.into_body(), REFUSED_CLIENT_WAIT)
    } else {
        let header_timeout = Duration::from_millis(http.header_timeout_ms);
        BodyRead::keep(req.into_body(), limit, header_timeout)
    };
    async move {
        let read = read.await;
        if too_large {
            return Err(ApiError::PayloadTooLarge);
        }
        request::json_body(&read.ok_or(ApiError::Timeout)??)
    }
}

/// A body's bytes as they came (a signature covers them exactly), within the header
/// timeout and `http.max_body_bytes`.
pub(crate) fn read_bytes(
    shard: &Shard,
    body: Incoming,
) -> impl Future<Output = Result<Bytes, ApiError>> {
    let http = &shard.settings().http;
    let limit = http.max_body_bytes;
    let too_large = hyper::body::Body::size_hint(&body).lower() > limit as u64;
    let read = if too_large {
        BodyRead::discard(body, REFUSED_CLIENT_WAIT)
    } else {
        BodyRead::keep(body, limit, Duration::from_millis(http.header_timeout_ms))
    };
    async move {
        let read = read.await;
        if too_large {
            return Err(ApiError::PayloadTooLarge);
        }
        read.ok_or(ApiError::Timeout)?
    }
}

/// A refused body is read and dropped up to this much: closing a connection on unread
/// bytes resets it, and the client could lose the answer.
const DISCARDED: usize = 64 * 1024;

/// Reads a body within a time limit: its bytes (at most `limit` of them, a body in one
/// piece not copied), or, discarding, up to [`DISCARDED`] of them dropped. `None` once
/// the time is up.
///
/// Most bodies come with their head, and hyper has taken them off the connection before
/// the route runs: the timer is armed only for a body still on its way a turn later.
pub struct BodyRead {
    body: Incoming,
    /// The bytes kept, or `None` when discarding.
    keep: Option<Kept>,
    seen: usize,
    wait: Duration,
    first_turn: bool,
    timer: Option<Timer>,
}

struct Kept {
    limit: usize,
    first: Bytes,
    joined: BytesMut,
}

impl BodyRead {
    /// The body's bytes, at most `limit` of them, within `wait`.
    pub fn keep(body: Incoming, limit: usize, wait: Duration) -> Self {
        let keep = Some(Kept {
            limit,
            first: Bytes::new(),
            joined: BytesMut::new(),
        });
        BodyRead::new(body, keep, wait)
    }

    /// Reads and drops what comes of a refused body, within `wait`.
    pub fn discard(body: Incoming, wait: Duration) -> Self {
        BodyRead::new(body, None, wait)
    }

    fn new(body: Incoming, keep: Option<Kept>, wait: Duration) -> Self {
        BodyRead {
            body,
            keep,
            seen: 0,
            wait,
            first_turn: true,
            timer: None,
        }
    }

    /// Takes what has arrived of the body without waiting: `true` when that was all of
    /// it, as for a body sent with its head, which hyper has already taken off the
    /// connection. Else the read goes on when awaited.
    pub fn done_now(&mut self) -> bool {
        self.poll_body(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    }

    /// Takes what has arrived; `Ready` once the body is complete (or has failed, or
    /// broke its limit).
    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, ApiError>> {
        loop {
            // A body read to the end of its declared length is complete, whether or not
            // hyper has closed its channel yet.
            if self.body.is_end_stream() {
                return Poll::Ready(Ok(self.bytes()));
            }
            // Taking an item wakes the connection for nothing once the body is complete
            // (see `wake`); while it is not, the wake lets hyper read the rest.
            let (polled, held) = held_back(|| Pin::new(&mut self.body).poll_frame(cx));
            if let Some(task) = held.filter(|_| !self.body.is_end_stream()) {
                task.wake();
            }
            let frame = match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(self.bytes())),
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(_))) => {
                    return Poll::Ready(Err(ApiError::BadRequest(
                        "could not read the request body".into(),
                    )))
                }
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.seen += data.len();
            let Some(kept) = &mut self.keep else {
                if self.seen >= DISCARDED {
                    return Poll::Ready(Ok(Bytes::new()));
                }
                continue;
            };
            if self.seen > kept.limit {
                return Poll::Ready(Err(ApiError::PayloadTooLarge));
            }
            if kept.first.is_empty() && kept.joined.is_empty() {
                kept.first = data;
            } else {
                if kept.joined.is_empty() {
                    kept.joined
                        .extend_from_slice(&std::mem::take(&mut kept.first));
                }
                kept.joined.extend_from_slice(&data);
            }
        }
    }

    fn bytes(&mut self) -> Bytes {
        match &mut self.keep {
            Some(k) if k.joined.is_empty() => std::mem::take(&mut k.first),
            Some(k) => std::mem::take(&mut k.joined).freeze(),
            None => Bytes::new(),
        }
    }
}

impl Future for BodyRead {
    type Output = Option<Result<Bytes, ApiError>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(read) = this.poll_body(cx) {
            return Poll::Ready(Some(read));
        }
        if std::mem::take(&mut this.first_turn) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let wait = this.wait;
        let timer = this.timer.get_or_insert_with(|| Timer::new(wait));
        Pin::new(timer).poll(cx).map(|_| None)
    }
}
