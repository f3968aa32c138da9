//! `GET /api/campaigns/{id}/events`: the campaign's state and stock as Server-Sent
//! Events. Each shard makes one update per change of its copy of the campaign (at most
//! one per control-plane poll, 250 ms by default) and every stream on the shard sends
//! that same text; a comment every 15 s keeps proxies from closing a quiet stream.
//! A stream holds its connection until the client leaves, so each client address and
//! the shard as a whole may hold only so many (`http.max_event_streams_per_*`).

use bytes::Bytes;
use futures::stream::{self, LocalBoxStream, StreamExt};
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;
use std::convert::Infallible;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::http::reply::ApiError;
use crate::shard::{Shard, StreamCap};

pub type Events = StreamBody<LocalBoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// How often a stream looks at the shard's copy of the campaign.
const TICK: Duration = Duration::from_millis(250);
/// A comment at least this often, and within half the idle timeout, which a quiet
/// stream would otherwise hit.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// What a refused client is told to wait: slots come back only as other streams close.
const RETRY_AFTER_S: u64 = 5;

/// The shard's current update for a published campaign, shared by all its streams.
fn live_event(shard: &Shard, id: &str) -> Option<Rc<str>> {
    shard.live_event(id, super::campaigns::info_json)
}

/// A stream's place in the shard's count, given back when the stream's body is dropped:
/// at its end, or when the client leaves.
struct Slot {
    shard: Rc<Shard>,
    client: IpAddr,
}

impl Slot {
    fn take(shard: &Rc<Shard>, client: IpAddr) -> Result<Slot, ApiError> {
        let taken = shard.take_stream_slot(client);
        let retry_after_s = RETRY_AFTER_S;
        match taken {
            Ok(()) => Ok(Slot {
                shard: shard.clone(),
                client,
            }),
            Err(StreamCap::Client) => Err(ApiError::TooManyStreams { retry_after_s }),
            Err(StreamCap::Shard) => Err(ApiError::StreamsFull { retry_after_s }),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shard.give_back_stream_slot(self.client);
    }
}

struct Stream {
    shard: Rc<Shard>,
    id: String,
    last: Option<Rc<str>>,
    sent: Instant,
    _slot: Slot,
}

fn frame(text: String) -> Result<Frame<Bytes>, Infallible> {
    Ok(Frame::data(Bytes::from(text)))
}

/// Opens a stream of `client` (the address the IP guard admitted).
pub fn open(shard: Rc<Shard>, id: &str, client: IpAddr) -> Result<Response<Events>, ApiError> {
    live_event(&shard, id).ok_or(ApiError::UnknownCampaign)?;
    let slot = Slot::take(&shard, client)?;
    let heartbeat = HEARTBEAT.min(Duration::from_millis(
        shard.settings().http.idle_timeout_ms / 2,
    ));
    let start = Stream {
        shard,
        id: id.to_string(),
        last: None,
        sent: Instant::now(),
        _slot: slot,
    };
    let events = stream::unfold(start, move |mut s| async move {
        loop {
            if s.shard.stopping() {
                return None;
            }
            // A campaign that is no longer published ends the stream.
            let now = live_event(&s.shard, &s.id)?;
            let first = s.last.is_none();
            if !s.last.as_ref().is_some_and(|l| Rc::ptr_eq(l, &now)) {
                let retry = if first { "retry: 2000\n" } else { "" };
                let text = format!("{retry}event: campaign\ndata: {now}\n\n");
                s.last = Some(now);
                s.sent = Instant::now();
                return Some((frame(text), s));
            }
            if s.sent.elapsed() >= heartbeat {
                s.sent = Instant::now();
                return Some((frame(": keep-alive\n\n".into()), s));
            }
            glommio::timer::Timer::new(TICK.min(heartbeat)).await;
        }
    });
    let mut r = Response::new(StreamBody::new(events.boxed_local()));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}
