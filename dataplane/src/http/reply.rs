//! Responses: JSON bodies, and every refusal mapped to its HTTP status in one place.
//! Internal detail (Redis errors and the like) never reaches a client.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde::Serialize;
use std::borrow::Cow;

use crate::answer::Outcome;
use crate::store::StoreError;
use seckill_core::api;
use seckill_core::purchase::Refusal;

pub type Reply = Response<Full<Bytes>>;

pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Reply {
    json_bytes(status, to_json(body))
}

/// A body's JSON; `{}` for one that does not serialize (none of ours fails).
fn to_json<T: Serialize>(body: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec()))
}

fn json_bytes(status: StatusCode, bytes: Bytes) -> Reply {
    let mut r = Response::new(Full::new(bytes));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The `Date` of a response written now (RFC 9110's IMF-fixdate), made once a second on
/// a shard.
fn http_date(out: &mut Vec<u8>) {
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static DATE: std::cell::RefCell<(u64, String)> =
            const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(at, text)| {
        if *at != secs {
            *at = secs;
            *text = httpdate::fmt_http_date(now);
        }
        out.extend_from_slice(text.as_bytes());
    });
}

pub fn ok<T: Serialize>(body: &T) -> Reply {
    json(StatusCode::OK, body)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    BadRequest(String),
    /// A request head over the configured size or header count.
    HeadersTooLarge,
    /// The request body did not arrive in time.
    Timeout,
    PayloadTooLarge,
    Unauthenticated(&'static str),
    NotFound,
    UnknownCampaign,
    /// A known route with another method; `allow` lists the route's methods.
    MethodNotAllowed {
        allow: &'static str,
    },
    SoldOut,
    NotEnough {
        remaining: i64,
    },
    LimitReached,
    /// More units in one purchase than the campaign lets one buyer have.
    OverLimit {
        limit: u32,
    },
    Paused,
    NotStarted {
        starts_at_ms: Option<i64>,
    },
    Ended,
    /// The hold ran out before payment.
    Expired,
    /// A download link with a bad signature.
    LinkInvalid,
    LinkExpired,
    /// Redis is down, slow or erroring.
    Unavailable,
    /// The shard has not read the campaigns yet: it cannot tell a campaign that exists
    /// from one that does not.
    Starting,
    /// Over the campaign's admission rate, or stock kept moving under a purchase.
    Busy {
        retry_after_s: u64,
    },
    /// Over a client's rate limit.
    RateLimited {
        retry_after_s: u64,
    },
    /// The client address holds as many event streams on the shard as it may.
    TooManyStreams {
        retry_after_s: u64,
    },
    /// The shard holds as many event streams as it may.
    StreamsFull {
        retry_after_s: u64,
    },
    /// Blacklisted client or user.
    Blocked,
    /// A purchase without a valid, unused ticket of this user for this campaign.
    TicketInvalid,
    /// An unknown, expired or used challenge, or a nonce that does not solve it.
    ChallengeInvalid,
    /// The campaign issued all the tickets it may.
    TicketsExhausted,
    /// The campaign does not use tickets.
    NoTickets,
    /// The campaign has no waiting room.
    NoQueue,
    /// A route this request may not use, the reason said.
    Forbidden(&'static str),
    /// A webhook without a valid signature of a known key within five minutes.
    InvalidSignature,
}

impl From<crate::guard::Refusal> for ApiError {
    fn from(r: crate::guard::Refusal) -> Self {
        use crate::guard::Refusal;
        let secs = |d: std::time::Duration| d.as_secs_f64().ceil().max(1.0) as u64;
        match r {
            Refusal::Blocked => ApiError::Blocked,
            Refusal::RateLimited { retry_after } => ApiError::RateLimited {
                retry_after_s: secs(retry_after),
            },
            Refusal::Busy { retry_after } => ApiError::Busy {
                retry_after_s: secs(retry_after),
            },
        }
    }
}

/// A purchase's refusal, as the shopper is told it: the one place a purchase's outcome
/// becomes an answer (its status, code and place in the metrics come with [`Outcome`]).
impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::SoldOut => ApiError::SoldOut,
            Refusal::NotEnough { remaining } => ApiError::NotEnough { remaining },
            Refusal::LimitReached => ApiError::LimitReached,
            Refusal::NotStarted { starts_at_ms } => ApiError::NotStarted { starts_at_ms },
            Refusal::Ended => ApiError::Ended,
            Refusal::Paused => ApiError::Paused,
            Refusal::UnknownCampaign => ApiError::UnknownCampaign,
            Refusal::Contended => ApiError::Busy { retry_after_s: 1 },
            Refusal::TicketUsed => ApiError::TicketInvalid,
        }
    }
}

/// Whatever went wrong with Redis, the shopper is told only that the service is
/// unavailable; the detail goes to the log.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::debug!(error = %e, "redis call failed");
        ApiError::Unavailable
    }
}

impl ApiError {
    /// The outcome the metrics count this refusal as; its status and code come with it.
    pub fn outcome(&self) -> Outcome {
        use ApiError::*;
        match self {
            BadRequest(_) => Outcome::BadRequest,
            HeadersTooLarge => Outcome::HeadersTooLarge,
            PayloadTooLarge => Outcome::PayloadTooLarge,
            Timeout => Outcome::Timeout,
            Unauthenticated(_) => Outcome::Unauthenticated,
            NotFound => Outcome::NotFound,
            UnknownCampaign => Outcome::UnknownCampaign,
            MethodNotAllowed { .. } => Outcome::MethodNotAllowed,
            SoldOut => Outcome::SoldOut,
            NotEnough { .. } => Outcome::NotEnoughStock,
            LimitReached | OverLimit { .. } => Outcome::LimitReached,
            Paused => Outcome::Paused,
            NotStarted { .. } => Outcome::NotStarted,
            Ended => Outcome::Ended,
            Expired => Outcome::Expired,
            LinkInvalid => Outcome::LinkInvalid,
            LinkExpired => Outcome::LinkExpired,
            Unavailable => Outcome::Unavailable,
            Starting => Outcome::Starting,
            Busy { .. } | StreamsFull { .. } => Outcome::Busy,
            RateLimited { .. } => Outcome::RateLimited,
            TooManyStreams { .. } => Outcome::TooManyStreams,
            Blocked => Outcome::Blocked,
            TicketInvalid => Outcome::TicketInvalid,
            ChallengeInvalid => Outcome::ChallengeInvalid,
            TicketsExhausted => Outcome::TicketsExhausted,
            NoTickets => Outcome::NoTickets,
            NoQueue => Outcome::NoQueue,
            Forbidden(_) => Outcome::Forbidden,
            InvalidSignature => Outcome::InvalidSignature,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.outcome().status()
    }

    pub fn code(&self) -> &'static str {
        self.outcome().code()
    }

    fn message(&self) -> std::borrow::Cow<'static, str> {
        use ApiError::*;
        match self {
            BadRequest(m) => m.clone().into(),
            HeadersTooLarge => "request head too large or too many header lines".into(),
            PayloadTooLarge => "request body too large".into(),
            Timeout => "the request body did not arrive in time".into(),
            Unauthenticated(m) => (*m).into(),
            NotFound => "no such resource".into(),
            UnknownCampaign => "no such campaign".into(),
            MethodNotAllowed { .. } => "method not allowed on this route".into(),
            SoldOut => "every unit is held or sold".into(),
            NotEnough { remaining } => format!("only {remaining} units left").into(),
            LimitReached => "you already hold the most units one buyer may have".into(),
            OverLimit { limit } => format!("quantity: at most {limit} units per buyer").into(),
            Paused => "the sale is paused".into(),
            NotStarted { .. } => "the sale has not started".into(),
            Ended => "the sale has ended".into(),
            Expired => "the hold expired before payment".into(),
            LinkInvalid => "this download link is not valid".into(),
            LinkExpired => "this download link has expired; get a new one from the order".into(),
            Unavailable => "the service is temporarily unavailable".into(),
            Starting => {
                "this node is starting and has not read the campaigns yet; retry shortly".into()
            }
            Busy { .. } => "too many purchases right now; retry shortly".into(),
            RateLimited { .. } => "too many requests; slow down".into(),
            TooManyStreams { .. } => {
                "too many event streams open from this address; close one first".into()
            }
            StreamsFull { .. } => "too many event streams open right now; retry shortly".into(),
            Blocked => "access denied".into(),
            TicketInvalid => "a valid, unused ticket for this campaign is required".into(),
            ChallengeInvalid => "unknown, expired or used challenge, or a wrong nonce".into(),
            TicketsExhausted => {
                "every ticket of this campaign is taken; tickets that expire unused come back"
                    .into()
            }
            NoTickets => "this campaign needs no ticket".into(),
            NoQueue => "this campaign has no waiting room".into(),
            Forbidden(m) => (*m).into(),
            InvalidSignature => {
                "the webhook's signature does not verify, or its timestamp is more than five minutes off"
                    .into()
            }
        }
    }

    /// The JSON body: `{"error", "message"}` and the fields some refusals add.
    pub fn body(&self) -> api::Error<'static> {
        api::Error {
            error: self.code().into(),
            message: self.message(),
            starts_at_ms: match self {
                ApiError::NotStarted { starts_at_ms } => *starts_at_ms,
                _ => None,
            },
            remaining: match self {
                ApiError::NotEnough { remaining } => Some(*remaining),
                _ => None,
            },
        }
    }

    /// The error the HTTP layer's own status for an unparsable request stands for.
    pub fn of_framing_status(status: u16) -> ApiError {
        match status {
            431 => ApiError::HeadersTooLarge,
            413 => ApiError::PayloadTooLarge,
            408 => ApiError::Timeout,
            _ => ApiError::BadRequest("malformed HTTP request".into()),
        }
    }

    /// The JSON body's bytes. A surge is mostly the same few refusals, so a body made of
    /// fixed texts and numbers is serialized once on a shard and shared after.
    fn body_bytes(&self) -> Bytes {
        /// A body by its texts (fixed ones: where they are and how long) and its numbers.
        type Key = ((usize, usize), (usize, usize), Option<i64>, Option<i64>);
        const KEPT: usize = 64;
        thread_local! {
            /// The bodies kept, and the next one to give way when all places are taken
            /// (one per campaign's opening time, say, over many campaigns).
            static BODIES: std::cell::RefCell<(Vec<(Key, Bytes)>, usize)> =
                const { std::cell::RefCell::new((Vec::new(), 0)) };
        }
        let body = self.body();
        let (Cow::Borrowed(error), Cow::Borrowed(message)) = (&body.error, &body.message) else {
            return to_json(&body);
        };
        let text = |t: &str| (t.as_ptr() as usize, t.len());
        let key = (
            text(error),
            text(message),
            body.starts_at_ms,
            body.remaining,
        );
        BODIES.with_borrow_mut(|(kept, next)| {
            if let Some((_, bytes)) = kept.iter().find(|(k, _)| *k == key) {
                return bytes.clone();
            }
            let bytes = to_json(&body);
            if kept.len() < KEPT {
                kept.push((key, bytes.clone()));
            } else {
                kept[*next] = (key, bytes.clone());
                *next = (*next + 1) % KEPT;
            }
            bytes
        })
    }

    /// The seconds a refusal's `Retry-After` asks the client to wait, if it has one.
    fn retry_after_s(&self) -> Option<u64> {
        match self {
            ApiError::Unavailable | ApiError::Starting => Some(1),
            ApiError::Busy { retry_after_s }
            | ApiError::RateLimited { retry_after_s }
            | ApiError::TooManyStreams { retry_after_s }
            | ApiError::StreamsFull { retry_after_s } => Some((*retry_after_s).max(1)),
            _ => None,
        }
    }

    /// The header with a fixed value a refusal carries beside its JSON type, if any.
    fn fixed_header(&self) -> Option<(HeaderName, &'static str)> {
        match self {
            ApiError::MethodNotAllowed { allow } => Some((ALLOW, allow)),
            // The rest of the body was never read: the connection cannot carry another
            // request, and the client must not reuse it.
            ApiError::PayloadTooLarge | ApiError::Timeout => Some((CONNECTION, "close")),
            _ => None,
        }
    }

    pub fn reply(&self) -> Reply {
        let mut r = json_bytes(self.status(), self.body_bytes());
        if let Some(s) = self.retry_after_s() {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
        } else if let Some((name, value)) = self.fixed_header() {
            r.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        r
    }

    /// The refusal as an HTTP/1.1 response, written whole: what [`ApiError::reply`]
    /// gives, with the `X-Request-Id`, as hyper would write it.
    pub fn write_response(&self, request_id: &str, out: &mut Vec<u8>) {
        let status = self.status();
        let body = self.body_bytes();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\ncontent-type: application/json\r\n");
        if let Some(s) = self.retry_after_s() {
            out.extend_from_slice(b"retry-after: ");
            out.extend_from_slice(itoa::Buffer::new().format(s).as_bytes());
            out.extend_from_slice(b"\r\n");
        } else if let Some((name, value)) = self.fixed_header() {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"x-request-id: ");
        out.extend_from_slice(request_id.as_bytes());
        out.extend_from_slice(b"\r\ncontent-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        out.extend_from_slice(b"\r\ndate: ");
        http_date(out);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(&body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde makes of the refusal's body, which a kept body must equal.
    fn serialized(e: &ApiError) -> Vec<u8> {
        serde_json::to_vec(&e.body()).expect("a body serializes")
    }

    #[test]
    fn a_kept_body_is_the_refusals_own_for_each_refusal_and_number() {
        let refusals = [
            ApiError::SoldOut,
            ApiError::Unauthenticated("missing bearer token"),
            ApiError::Unauthenticated("invalid token"),
            ApiError::Busy { retry_after_s: 1 },
            ApiError::StreamsFull { retry_after_s: 1 },
            ApiError::LimitReached,
            ApiError::OverLimit { limit: 2 },
            ApiError::OverLimit { limit: 3 },
            ApiError::NotStarted { starts_at_ms: None },
            ApiError::NotStarted {
                starts_at_ms: Some(1_764_000_000_000),
            },
            ApiError::NotStarted {
                starts_at_ms: Some(1_764_000_000_001),
            },
            ApiError::NotEnough { remaining: 4 },
            ApiError::NotEnough { remaining: 5 },
            ApiError::BadRequest("quantity: must be at least 1".into()),
            ApiError::BadRequest("invalid JSON body: expected an object".into()),
        ];
        // Twice over: the first answer of each is made, the second kept.
        for _ in 0..2 {
            for e in &refusals {
                assert_eq!(e.body_bytes(), serialized(e), "{e:?}");
            }
        }
    }

    #[test]
    fn bodies_past_the_places_kept_take_turns_and_stay_right() {
        let early = |n: i64| ApiError::NotStarted {
            starts_at_ms: Some(1_764_000_000_000 + n),
        };
        for round in 0..3 {
            for n in 0..200 {
                let e = early(n);
                assert_eq!(e.body_bytes(), serialized(&e), "round {round}, {n}");
            }
        }
        // The latest are kept: one seen just now is served from the cache.
        let e = early(199);
        let kept = e.body_bytes();
        assert_eq!(
            kept.as_ptr(),
            e.body_bytes().as_ptr(),
            "shared, not made again"
        );
        assert_eq!(kept, serialized(&e));
    }
}
