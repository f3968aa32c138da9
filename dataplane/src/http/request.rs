//! What a client sends, checked without touching anything: the route a method and path
//! name, JSON bodies, the idempotency key. Pure functions, so they can be fuzzed.

use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method};
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::answer::Endpoint;

/// Every route of the shopper API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    Time,
    Session,
    Campaigns,
    Campaign(&'a str),
    Purchase(&'a str),
    Challenge(&'a str),
    Ticket(&'a str),
    Order(&'a str),
    /// The bearer's orders.
    Orders,
    Pay(&'a str),
    Download(&'a str),
    /// Server-Sent Events: the campaign's state and stock as they change.
    Events(&'a str),
    /// The campaign's page, and the files it loads.
    Page(&'a str),
    Asset(&'a str),
    /// The API's OpenAPI description.
    Description,
    /// The waiting room: join (`POST`) or look (`GET`).
    Queue(&'a str, bool),
    /// The payment provider's webhooks.
    PaymentWebhook,
}

impl<'a> Route<'a> {
    /// The endpoint the metrics and the telemetry count the route's answers under.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Route::Time => Endpoint::Time,
            Route::Session => Endpoint::Session,
            Route::Campaigns => Endpoint::Campaigns,
            Route::Campaign(_) => Endpoint::Campaign,
            Route::Purchase(_) => Endpoint::Purchase,
            Route::Challenge(_) => Endpoint::Challenge,
            Route::Ticket(_) => Endpoint::Ticket,
            Route::Order(_) | Route::Orders => Endpoint::Order,
            Route::Pay(_) => Endpoint::Pay,
            Route::Download(_) => Endpoint::Download,
            Route::Events(_) => Endpoint::Events,
            Route::Page(_) => Endpoint::Page,
            Route::Asset(_) | Route::Description => Endpoint::Asset,
            Route::Queue(..) => Endpoint::Queue,
            Route::PaymentWebhook => Endpoint::PaymentWebhook,
        }
    }

    /// Whether the answer comes from the shard's copy of the campaigns, which a shard
    /// that has not read them yet cannot give truthfully.
    pub fn reads_campaigns(&self) -> bool {
        matches!(
            self,
            Route::Campaigns
                | Route::Campaign(_)
                | Route::Purchase(_)
                | Route::Challenge(_)
                | Route::Ticket(_)
                | Route::Events(_)
                | Route::Order(_)
                | Route::Orders
                | Route::Download(_)
                | Route::Queue(..)
                | Route::Pay(_)
                | Route::PaymentWebhook
        )
    }

    /// The route for a method and path: 404 for an unknown path, 405 for a known path
    /// with another method.
    pub fn of(method: &Method, path: &'a str) -> Result<Route<'a>, ApiError> {
        // No route has more than five segments; a longer path is unknown.
        // Split by hand on the byte '/', which always falls between characters: `split`
        // with a `char` pattern costs several times as much on paths this short.
        let mut segments = [""; 5];
        let mut n = 0;
        let mut rest = path.trim_matches('/');
        loop {
            let Some(slot) = segments.get_mut(n) else {
                return Err(ApiError::NotFound);
            };
            n += 1;
            match rest.bytes().position(|b| b == b'/') {
                Some(i) => {
                    *slot = &rest[..i];
                    rest = &rest[i + 1..];
                }
                None => {
                    *slot = rest;
                    break;
                }
            }
        }
        let (route, allowed) = match &segments[..n] {
            ["api", "time"] => (Route::Time, Method::GET),
            ["api", "openapi.json"] => (Route::Description, Method::GET),
            ["api", "session"] => (Route::Session, Method::POST),
            ["api", "campaigns"] => (Route::Campaigns, Method::GET),
            ["api", "campaigns", id] => (Route::Campaign(id), Method::GET),
            ["api", "campaigns", id, "purchase"] => (Route::Purchase(id), Method::POST),
            ["api", "campaigns", id, "challenge"] => (Route::Challenge(id), Method::POST),
            ["api", "campaigns", id, "ticket"] => (Route::Ticket(id), Method::POST),
            ["api", "orders"] => (Route::Orders, Method::GET),
            ["api", "orders", id] => (Route::Order(id), Method::GET),
            ["api", "orders", id, "pay"] => (Route::Pay(id), Method::POST),
            ["api", "payments", "webhook"] => (Route::PaymentWebhook, Method::POST),
            ["dl", token] => (Route::Download(token), Method::GET),
            ["api", "campaigns", id, "events"] => (Route::Events(id), Method::GET),
            ["c", id] => (Route::Page(id), Method::GET),
            ["static", name] => (Route::Asset(name), Method::GET),
            ["api", "campaigns", id, "queue"] => {
                return match *method {
                    Method::POST => Ok(Route::Queue(id, true)),
                    Method::GET => Ok(Route::Queue(id, false)),
                    _ => Err(ApiError::MethodNotAllowed { allow: "GET, POST" }),
                }
            }
            _ => return Err(ApiError::NotFound),
        };
        if *method == allowed {
            Ok(route)
        } else if allowed == Method::GET {
            Err(ApiError::MethodNotAllowed { allow: "GET" })
        } else {
            Err(ApiError::MethodNotAllowed { allow: "POST" })
        }
    }
}

/// Parses a JSON body, which must be an object; a body of no bytes at all reads as `{}`
/// (whitespace alone is no JSON). (serde would also read a struct from an array of its
/// fields in order, which no client means.)
pub fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let body: &[u8] = if body.is_empty() { b"{}" } else { body };
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::BadRequest(
            "invalid JSON body: expected an object".into(),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
}

pub use seckill_core::api::{PurchaseBody, SessionBody, SolutionBody};

/// A request's headers, read by name: hyper's map, or a head parsed where it lies in
/// the connection's buffer.
pub trait Headers {
    /// The value of the first header named `name`.
    fn value(&self, name: &HeaderName) -> Option<&[u8]>;
}

impl Headers for HeaderMap {
    fn value(&self, name: &HeaderName) -> Option<&[u8]> {
        self.get(name).map(HeaderValue::as_bytes)
    }
}

/// Whether a request target is a plain origin-form path and query: a `/` first, then
/// only RFC 3986's unreserved and sub-delimiter characters, `:`, `@`, `/`, `?` and
/// `%`. Every such target is one hyper's URI takes as it is.
pub fn plain_target(target: &str) -> bool {
    const PLAIN: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            t[b] = c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'.'
                        | b'_'
                        | b'~'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                        | b':'
                        | b'@'
                        | b'/'
                        | b'?'
                        | b'%'
                );
            b += 1;
        }
        t
    };
    target.starts_with('/') && target.bytes().all(|b| PLAIN[usize::from(b)])
}

/// An `Idempotency-Key`: 1-64 characters of letters, digits and `_ - . :`.
pub fn idempotency_key(value: Option<&[u8]>) -> Result<Option<&str>, ApiError> {
    let Some(b) = value else {
        return Ok(None);
    };
    let fits = (1..=64).contains(&b.len())
        && b.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    // Only ASCII passes, so the header's bytes are the key's text.
    match std::str::from_utf8(b) {
        Ok(key) if fits => Ok(Some(key)),
        _ => Err(ApiError::BadRequest(
            "Idempotency-Key: 1-64 characters of letters, digits and _ - . :".into(),
        )),
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(value: Option<&[u8]>) -> Result<&str, ApiError> {
    let v = value.ok_or(ApiError::Unauthenticated("missing bearer token"))?;
    std::str::from_utf8(v)
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(ApiError::Unauthenticated(
            "expected 'Authorization: Bearer <token>'",
        ))
}

/// The bearer token's bytes as they came, for a lookup among the tokens already
/// verified, which needs no UTF-8 check: a token found there is one. Where the bytes are
/// no such token (not UTF-8, say, or with other whitespace than ASCII around it), the
/// lookup misses and [`bearer`] reads the header in full.
pub fn bearer_bytes(value: Option<&[u8]>) -> Option<&[u8]> {
    value?.strip_prefix(b"Bearer ").map(<[u8]>::trim_ascii)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        assert_eq!(Route::of(&Method::GET, "/api/time"), Ok(Route::Time));
        assert_eq!(
            Route::of(&Method::POST, "/api/campaigns/c/purchase"),
            Ok(Route::Purchase("c"))
        );
        assert_eq!(
            Route::of(&Method::GET, "/api/campaigns/c/purchase"),
            Err(ApiError::MethodNotAllowed { allow: "POST" })
        );
        assert_eq!(Route::of(&Method::GET, "/nope"), Err(ApiError::NotFound));
        assert_eq!(
            Route::of(&Method::GET, "/api/campaigns/c/x/y"),
            Err(ApiError::NotFound)
        );
        assert_eq!(
            Route::of(&Method::POST, "/api/campaigns/c/purchase/x/y/z"),
            Err(ApiError::NotFound)
        );
        assert_eq!(
            Route::of(&Method::POST, "//api/campaigns/c/purchase//"),
            Ok(Route::Purchase("c"))
        );
        // Empty segments inside a path are segments: no route has one.
        assert_eq!(
            Route::of(&Method::GET, "/api//time"),
            Err(ApiError::NotFound)
        );
        assert_eq!(Route::of(&Method::GET, "/"), Err(ApiError::NotFound));
        assert_eq!(Route::of(&Method::GET, ""), Err(ApiError::NotFound));
        assert_eq!(Route::of(&Method::GET, "/c/ünï"), Ok(Route::Page("ünï")));
    }

    #[test]
    fn bodies_and_headers_are_checked() {
        assert_eq!(json_body::<PurchaseBody>(b"").map(|b| b.quantity), Ok(1));
        assert_eq!(
            json_body::<PurchaseBody>(b" {} ").map(|b| b.quantity),
            Ok(1)
        );
        assert!(json_body::<PurchaseBody>(b"  ").is_err());
        assert!(json_body::<PurchaseBody>(b"\n").is_err());
        assert!(json_body::<PurchaseBody>(b"{\"quantity\": \"1\"}").is_err());
        assert!(json_body::<PurchaseBody>(b"{\"x\": 1}").is_err());
        // An array of the fields in order is no purchase, whatever serde makes of it.
        assert!(json_body::<PurchaseBody>(b" [1]").is_err());
        assert!(json_body::<PurchaseBody>(b"1").is_err());
        assert_eq!(idempotency_key(None), Ok(None));
        assert_eq!(
            idempotency_key(Some(b"retry-1:a_b.c")),
            Ok(Some("retry-1:a_b.c"))
        );
        assert!(idempotency_key(Some(b"has space")).is_err());
        assert!(idempotency_key(Some(&[0xff])).is_err());
        assert!(idempotency_key(Some(&[b'k'; 65])).is_err());
        assert!(plain_target("/api/campaigns/c-1/purchase?a=b&c=%20"));
        for odd in ["api/x", "/a#b", "/a?b=<", "/a`", "/ü", "/a b", "*", ""] {
            assert!(!plain_target(odd), "{odd}");
        }
        assert_eq!(bearer(Some(b"Bearer abc ")), Ok("abc"));
        assert!(bearer(Some(b"Basic abc")).is_err());
        assert_eq!(bearer_bytes(Some(b"Bearer abc ")), Some(&b"abc"[..]));
        assert_eq!(bearer_bytes(Some(b"Basic abc")), None);
        assert_eq!(bearer_bytes(None), None);
    }
}
