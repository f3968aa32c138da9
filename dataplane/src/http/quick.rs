//! The connection's quick lane: requests the shard refuses from their head alone,
//! answered where they arrive, in the connection's read buffer, before hyper sees them.
//!
//! To answer a request itself the lane must know where each request starts, so it frames
//! them: hyper is handed one request's bytes at a time (its head and the body its
//! `Content-Length` declares), never the start of the next. A request the lane cannot
//! frame (a head not all there, a chunked body, an upgrade) turns the lane off for the
//! rest of the connection, and from then on hyper reads everything as it comes. The
//! lane answers only while hyper is idle (its last answer written and flushed), so the
//! answers go out in the order the requests came.

use hyper::header::HeaderName;
use std::io;
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::AsyncWrite;

use super::extract::{admit_ip, count_refusal, request_id, Asker, X_FORWARDED_FOR, X_REQUEST_ID};
use super::reply::ApiError;
use super::request::{self, Headers, Route};
use super::routes::purchase::{self, Decision};
use crate::answer::Endpoint;
use crate::shard::Shard;

/// Headers a request may have for the lane to frame it; with more, hyper reads it (and
/// every request after it on the connection).
const MAX_HEADERS: usize = 32;

/// Bytes of answers the lane holds at most before it writes them out: answers to
/// requests that came together go out together.
const SEND_AT: usize = 16 * 1024;

/// What the lane made of the bytes at the head of the read buffer.
pub(super) enum Take {
    /// A request of this many bytes was answered: drop them.
    Answered(usize),
    /// For hyper: at most this many of them.
    Hand(usize),
}

pub(super) struct Lane {
    shard: Rc<Shard>,
    peer: IpAddr,
    /// Bytes of the request hyper is reading that it has not been handed yet.
    owed: usize,
    /// A request could not be framed: hyper reads the rest of the connection.
    off: bool,
    /// Answers written here, and how much of them went out.
    out: Vec<u8>,
    sent: usize,
}

impl Lane {
    pub(super) fn new(shard: Rc<Shard>, peer: IpAddr) -> Lane {
        Lane {
            shard,
            peer,
            owed: 0,
            off: false,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// Looks at `arrived`, what the connection has read and not yet handed on. With
    /// `idle`, hyper has nothing in hand (no request, no answer unwritten), and a request
    /// that came whole may be answered here.
    pub(super) fn take(&mut self, arrived: &[u8], idle: bool) -> Take {
        if self.off {
            return Take::Hand(usize::MAX);
        }
        if self.owed > 0 {
            return Take::Hand(self.owed);
        }
        let mut headers = [const { MaybeUninit::uninit() }; MAX_HEADERS];
        let mut head = httparse::Request::new(&mut []);
        let framed = match head.parse_with_uninit_headers(arrived, &mut headers) {
            Ok(httparse::Status::Complete(head_len)) => {
                body_length(&head).map(|body_len| (head_len, body_len))
            }
            _ => None,
        };
        let Some((head_len, body_len)) = framed else {
            self.off = true;
            return Take::Hand(usize::MAX);
        };
        let len = head_len.saturating_add(body_len);
        if idle && arrived.len() >= len {
            let answered = self
                .answerable(&head, head_len, body_len)
                .is_some_and(|known| {
                    let path = head.path.unwrap_or_default();
                    refuse_at_once(
                        &self.shard,
                        path,
                        &known,
                        body_len,
                        self.peer,
                        &mut self.out,
                    )
                });
            if answered {
                return Take::Answered(len);
            }
        }
        self.owed = len;
        Take::Hand(len)
    }

    /// `n` bytes went to hyper.
    pub(super) fn handed(&mut self, n: usize) {
        // Framing holds only while hyper is handed no more than the request it reads.
        debug_assert!(
            self.off || n <= self.owed,
            "hyper handed {n} of {}",
            self.owed
        );
        self.owed = self.owed.saturating_sub(n);
    }

    /// Whether a request is one the lane may answer: HTTP/1.1, a `POST`, within the
    /// limits hyper would hold it to, and nothing in its head that asks more of the
    /// connection than an answer (an `Expect`, a `Connection` other than keep-alive).
    /// If so, the headers the shard reads, found in the same pass.
    fn answerable<'b>(
        &self,
        head: &httparse::Request<'_, 'b>,
        head_len: usize,
        body_len: usize,
    ) -> Option<Known<'b>> {
        let h = &self.shard.settings().http;
        let fits = head.version == Some(1)
            && head.method == Some("POST")
            && head_len <= h.max_header_bytes
            && head.headers.len() <= h.max_headers
            && body_len <= h.max_body_bytes;
        if !fits {
            return None;
        }
        let mut known = Known::default();
        for header in head.headers.iter() {
            let (name, value) = (header.name, header.value);
            let slot = match name.len() {
                13 if name.eq_ignore_ascii_case("authorization") => &mut known.authorization,
                15 if name.eq_ignore_ascii_case("idempotency-key") => &mut known.idempotency_key,
                12 if name.eq_ignore_ascii_case("x-request-id") => &mut known.request_id,
                15 if name.eq_ignore_ascii_case("x-forwarded-for") => &mut known.forwarded_for,
                6 if name.eq_ignore_ascii_case("expect") => return None,
                10 if name.eq_ignore_ascii_case("connection") => {
                    if value.eq_ignore_ascii_case(b"keep-alive") {
                        continue;
                    }
                    return None;
                }
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        Some(known)
    }

    /// Whether answers given here are still to go out.
    pub(super) fn has_output(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Whether so many answers wait to go out that they must before the lane reads on.
    pub(super) fn must_send(&self) -> bool {
        self.out.len() - self.sent >= SEND_AT
    }

    /// Writes out the answers given here; `Ready` once all have gone.
    pub(super) fn poll_send<W: AsyncWrite + Unpin>(
        &mut self,
        mut io: Pin<&mut W>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        debug_assert!(self.sent <= self.out.len());
        while self.sent < self.out.len() {
            match io.as_mut().poll_write(cx, &self.out[self.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

/// The headers the shard reads of a request the lane may answer (the first of each name).
#[derive(Default)]
pub(super) struct Known<'b> {
    authorization: Option<&'b [u8]>,
    idempotency_key: Option<&'b [u8]>,
    request_id: Option<&'b [u8]>,
    forwarded_for: Option<&'b [u8]>,
}

/// The address and the request id are read as from any request; the token and the key
/// go to the purchase's decision as its [`Asker`].
impl Headers for Known<'_> {
    fn value(&self, name: &HeaderName) -> Option<&[u8]> {
        if *name == X_REQUEST_ID {
            self.request_id
        } else if *name == X_FORWARDED_FOR {
            self.forwarded_for
        } else {
            None
        }
    }
}

/// A purchase that ends on the shard in a refusal, decided from its head and answered
/// by the connection itself into `out`, without hyper: a surge is mostly such
/// purchases (before the opening, over the limits, after the last unit), and hyper's
/// parse of the head into its map, its body channel and its encoder cost more than the
/// shard's whole verdict. The same checks in the same order as the dispatcher takes
/// them, counted the same, with the purchase route's own decision; the answer is the one
/// hyper would write. `false`, with nothing read or changed beyond the token cache, for
/// any other request: hyper answers it.
///
/// The request is a `POST` of `target`; its body (`body_len` bytes) came with its head.
fn refuse_at_once(
    shard: &Shard,
    target: &str,
    known: &Known<'_>,
    body_len: usize,
    peer: IpAddr,
    out: &mut Vec<u8>,
) -> bool {
    // hyper refuses a target that is not a plain origin-form path (a byte its URI does not
    // take, a fragment), and so must the lane; an odd one goes to hyper.
    if !request::plain_target(target) {
        return false;
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let Ok(Route::Purchase(id)) = Route::of(&hyper::Method::POST, path) else {
        return false;
    };
    if !shard.synced() {
        return false;
    }
    let asker = Asker::new(known.authorization, known.idempotency_key);
    let Some(ahead) = purchase::ends_on_shard(shard, id, &asker) else {
        return false;
    };
    let request_id = request_id(shard, known);
    let refused = crate::logs::within(&request_id, || {
        let start = Instant::now();
        let (ip, checked) = admit_ip(shard, known, peer, start);
        // Refused at the address: not routed, as the dispatcher counts it.
        let (endpoint, refused) = match checked {
            Err(e) => (Endpoint::Other, e),
            Ok(()) => match purchase::decide(shard, id, &asker, body_len as u64, Some(ahead)) {
                Decision::Refused(e, _) => (Endpoint::Purchase, e),
                // Not reached: with the campaign's part taken ahead, `decide` refuses.
                _ => (Endpoint::Purchase, ApiError::Unavailable),
            },
        };
        shard.answered(endpoint, refused.outcome(), start.elapsed());
        count_refusal(shard, ip, &refused, start);
        refused
    });
    refused.write_response(&request_id, out);
    true
}

/// The length of a request's body as its head frames it: its `Content-Length`, or none
/// at all. `None` where the lane cannot tell for sure: a chunked body, a length given
/// twice or not as plain digits, an upgrade or `CONNECT` (after which the connection may
/// carry something else).
fn body_length(head: &httparse::Request<'_, '_>) -> Option<usize> {
    if head.method == Some("CONNECT") {
        return None;
    }
    let mut length = None;
    for h in head.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding")
            || h.name.eq_ignore_ascii_case("upgrade")
        {
            return None;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let digits = h.value;
            if length.is_some() || digits.is_empty() || digits.len() > 15 {
                return None;
            }
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            length = Some(digits.iter().fold(0, |n, d| n * 10 + usize::from(d - b'0')));
        }
    }
    Some(length.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn length(request: &[u8]) -> Option<usize> {
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut head = httparse::Request::new(&mut headers);
        head.parse(request).ok()?;
        body_length(&head)
    }

    #[test]
    fn a_body_is_framed_only_by_one_plain_length() {
        assert_eq!(length(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Some(0));
        assert_eq!(
            length(b"POST / HTTP/1.1\r\nContent-Length: 15\r\n\r\n"),
            Some(15)
        );
        assert_eq!(
            length(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            None
        );
        assert_eq!(
            length(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            None
        );
        assert_eq!(
            length(b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n"),
            None
        );
        assert_eq!(
            length(b"POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n"),
            None
        );
        assert_eq!(
            length(b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"),
            None
        );
        assert_eq!(length(b"CONNECT a:1 HTTP/1.1\r\n\r\n"), None);
    }
}
