//! HTTP/1.1 on a shard: hyper over glommio sockets, one small module per route.

pub mod admin;
mod body;
mod io;
mod quick;
mod reply;
pub mod request;
mod routes;
mod wake;

pub use reply::ApiError;

use bytes::Bytes;
use futures::future::{select, Either};
use futures::FutureExt;
use glommio::net::TcpStream;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::HeaderName;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;

use crate::answer::{Endpoint, Outcome};
use crate::guard;
use crate::shard::Shard;
use body::BodyRead;
use reply::Reply;
use request::{Headers, Route};
use seckill_core::auth;
use std::net::IpAddr;
use std::time::Instant;

/// Header names looked up or set on every request, parsed once.
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Serves one connection until the client leaves, a timeout fires, or `shutdown`
/// resolves — then in-flight requests finish and the connection closes.
pub async fn serve_connection(
    shard: Rc<Shard>,
    stream: TcpStream,
    shutdown: impl Future<Output = ()>,
) {
    let h = &shard.settings.http;
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.ip())
        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    let (stream, clock) = io::TimedStream::new(
        stream,
        Duration::from_millis(h.header_timeout_ms),
        Duration::from_millis(h.idle_timeout_ms),
    );
    let io = TokioIo::new(stream.with_lane(quick::Lane::new(shard.clone(), peer)));
    let svc_shard = shard.clone();
    let svc = service_fn(move |req| {
        clock.handling();
        let shard = svc_shard.clone();
        respond(shard, req, peer).map(Ok::<_, Infallible>)
    });
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        // A request is answered even when its client has shut its sending side, as
        // HTTP/1.1 allows; a client gone altogether is found by the answer's write (a
        // stream's, by its heartbeat). So hyper does not read while a request runs, a
        // read that would find the request still holding the read buffer and make the
        // connection a new one (8 KiB) for every request. The quick lane counts on it:
        // hyper reads only when it owes no answer, so the lane's come in their turn.
        .half_close(true)
        .max_headers(h.max_headers)
        .max_header_size(h.max_header_bytes)
        .max_buf_size((h.max_header_bytes + h.max_body_bytes).max(8192));
    until_shutdown(builder.serve_connection(io, svc), shutdown).await;
}

/// Drives a connection until the client leaves or `shutdown` resolves; then the request
/// in flight finishes and the connection closes.
async fn until_shutdown<I, S, B>(conn: http1::Connection<I, S>, shutdown: impl Future<Output = ()>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = pin!(conn);
    let mut conn = wake::Gated::new(conn);
    let result = match select(&mut conn, pin!(shutdown)).await {
        Either::Left((r, _)) => r,
        Either::Right(((), _)) => {
            conn.get_mut().as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// The client's address (`X-Forwarded-For` counts only from trusted proxies) and the
/// shard's verdict on it: blacklist and per-IP bucket.
fn admit_ip(
    shard: &Shard,
    headers: &(impl Headers + ?Sized),
    peer: IpAddr,
    now: Instant,
) -> (IpAddr, Result<(), ApiError>) {
    let trusted = &shard.settings.trusted_proxies;
    // Only a trusted proxy's header counts (`client_ip` checks again), and most peers
    // are none: the header is not looked for.
    let forwarded = if trusted.contains(&peer) {
        headers
            .value(&X_FORWARDED_FOR)
            .and_then(|v| std::str::from_utf8(v).ok())
    } else {
        None
    };
    let ip = guard::client_ip(peer, forwarded, trusted);
    let checked = shard.guard.borrow_mut().check_ip(ip, now);
    (ip, checked.map_err(ApiError::from))
}

/// A response: JSON (or a page) in one piece, or a stream of events.
type Body = http_body_util::Either<Full<Bytes>, routes::events::Events>;

/// Answers one request; every line it logs names its id, which goes back in
/// `X-Request-Id`.
///
/// Every request's future is moved into hyper and kept there while it runs, so it is
/// kept small: one `async` block ([`answer`]) under a struct, and the routes that wait
/// boxed. Nested `async fn`s, each holding the next one's future, would make it
/// kilobytes.
fn respond(
    shard: Rc<Shard>,
    req: Request<Incoming>,
    peer: IpAddr,
) -> impl Future<Output = hyper::Response<Body>> {
    let id = request_id(&shard, req.headers());
    crate::logs::in_request(id, answer(shard, req, peer)).map(|(mut response, id)| {
        // The id's own bytes become the header value, without a copy.
        if let Ok(v) = hyper::header::HeaderValue::try_from(id) {
            response.headers_mut().insert(X_REQUEST_ID, v);
        }
        response
    })
}

/// Opens an event stream, past the same IP guard as every request.
fn open_events(
    shard: &Rc<Shard>,
    req: &Request<Incoming>,
    id: &str,
    peer: IpAddr,
) -> hyper::Response<Body> {
    let start = Instant::now();
    let (ip, checked) = admit_ip(shard, req.headers(), peer, start);
    let opened = checked
        .and_then(|()| starting(shard))
        .and_then(|()| routes::events::open(shard.clone(), id, ip));
    let outcome = opened
        .as_ref()
        .map_or_else(ApiError::outcome, |_| Outcome::Ok);
    shard.answered(Endpoint::Events, outcome, start.elapsed());
    match opened {
        Ok(r) => r.map(http_body_util::Either::Right),
        Err(e) => refusal(shard, ip, e, start).map(http_body_util::Either::Left),
    }
}

/// A refusal's reply; 401, 403 and 429 count toward blocking the client.
fn refusal(shard: &Shard, ip: IpAddr, e: ApiError, now: Instant) -> Reply {
    count_refusal(shard, ip, &e, now);
    e.reply()
}

fn count_refusal(shard: &Shard, ip: IpAddr, e: &ApiError, now: Instant) {
    if matches!(e.status().as_u16(), 401 | 403 | 429) {
        shard.refused(guard::Client::Ip(ip), now);
    }
}

/// A purchase that ends on the shard in a refusal, decided from its head and answered
/// by the connection itself into `out`, without hyper: a surge is mostly such
/// purchases (before the opening, over the limits, after the last unit), and hyper's
/// parse of the head into its map, its body channel and its encoder cost more than the
/// shard's whole verdict. The same checks in the same order as [`answer`] takes them,
/// counted the same; the answer is the one hyper would write. `false`, with nothing
/// read or changed beyond the token cache, for any other request: hyper answers it.
///
/// The request is a `POST` of `target`; its body (`body_len` bytes) came with its head.
pub(crate) fn refuse_at_once(
    shard: &Shard,
    target: &str,
    headers: &impl Headers,
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
    let Some(ahead) = routes::purchase::ends_on_shard(shard, id, headers) else {
        return false;
    };
    let request_id = request_id(shard, headers);
    let refused = crate::logs::within(&request_id, || {
        let start = Instant::now();
        let (ip, checked) = admit_ip(shard, headers, peer, start);
        // Refused at the address: not routed, as `answer` counts it.
        let (endpoint, refused) = match checked {
            Err(e) => (Endpoint::Other, e),
            Ok(()) => {
                match routes::purchase::decide(shard, id, headers, body_len as u64, Some(ahead)) {
                    routes::purchase::Decision::Refused(e, _) => (Endpoint::Purchase, e),
                    // Not reached: with the campaign's part taken ahead, `decide` refuses.
                    _ => (Endpoint::Purchase, ApiError::Unavailable),
                }
            }
        };
        shard.answered(endpoint, refused.outcome(), start.elapsed());
        count_refusal(shard, ip, &refused, start);
        refused
    });
    refused.write_response(&request_id, out);
    true
}

/// A client's own `X-Request-Id` when it is short and plain, else one of the shard's.
fn request_id(shard: &Shard, headers: &(impl Headers + ?Sized)) -> String {
    let given = headers.value(&X_REQUEST_ID);
    match given {
        Some(v)
            if (1..=64).contains(&v.len())
                && v.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b)) =>
        {
            String::from_utf8_lossy(v).into_owned()
        }
        _ => shard.next_request_id(),
    }
}

/// Answers a request (an event stream's opening aside, past the IP guard), and counts
/// the answer.
///
/// A plain function returning an `async` block: the block uses what it captures where
/// it lies, where an `async fn` would also keep a copy of each argument (the request's
/// head is 248 bytes).
#[allow(clippy::manual_async_fn)]
fn answer(
    shard: Rc<Shard>,
    req: Request<Incoming>,
    peer: IpAddr,
) -> impl Future<Output = hyper::Response<Body>> {
    async move {
        if req.method() == hyper::Method::GET && req.uri().path().ends_with("/events") {
            if let Ok(Route::Events(campaign)) = Route::of(req.method(), req.uri().path()) {
                return open_events(&shard, &req, campaign, peer);
            }
        }
        let start = Instant::now();
        let (ip, checked) = admit_ip(&shard, req.headers(), peer, start);
        // The route borrows the path, and the request goes to the route: the path's bytes
        // are shared, not copied.
        let path = req.uri().path_and_query().cloned();
        let path = path.as_ref().map_or("", |p| p.path());
        let routed = checked.and_then(|()| Route::of(req.method(), path));
        let (name, result) = match routed {
            Ok(route) => {
                let answer = match dispatch(&shard, route, req) {
                    Step::Now(answer) => answer,
                    Step::Waits(answer) => answer.await,
                };
                (route.endpoint(), answer)
            }
            Err(refused) => (Endpoint::Other, Err(refused)),
        };
        let outcome = match &result {
            Ok(_) => Outcome::Ok,
            Err(e) => e.outcome(),
        };
        shard.answered(name, outcome, start.elapsed());
        let reply = result.unwrap_or_else(|e| refusal(&shard, ip, e, start));
        reply.map(http_body_util::Either::Left)
    }
}

/// A route's answer: given at once, or a future for one that waits on Redis, a body or
/// a clock.
pub(crate) enum Step<'a> {
    Now(Result<Reply, ApiError>),
    Waits(futures::future::LocalBoxFuture<'a, Result<Reply, ApiError>>),
}

/// Hands a request to its route. A route that waits is boxed. Held inline, the largest
/// of them would set the size of every request's future (kilobytes, even for
/// `/api/time`), copied over again each time the future moves on its way into hyper.
fn dispatch<'a>(shard: &'a Shard, route: Route<'a>, req: Request<Incoming>) -> Step<'a> {
    if route.reads_campaigns() {
        if let Err(e) = starting(shard) {
            return Step::Now(Err(e));
        }
    }
    let waits = match route {
        Route::Time => return Step::Now(routes::time::get()),
        Route::Campaigns => return Step::Now(routes::campaigns::list(shard)),
        Route::Campaign(id) => return Step::Now(routes::campaigns::get(shard, id)),
        Route::Page(id) => return Step::Now(routes::page::page(id, &req)),
        Route::Asset(name) => return Step::Now(routes::page::asset(name, &req)),
        Route::Description => return Step::Now(Ok(routes::page::description(&req))),
        // Streams are opened in `answer`, which owns the shard's handle they keep.
        Route::Events(_) => return Step::Now(Err(ApiError::NotFound)),
        Route::Session => routes::session::post(shard, req).boxed_local(),
        Route::Purchase(id) => return routes::purchase::post(shard, id, req),
        Route::Challenge(id) => routes::challenge::challenge(shard, id, req).boxed_local(),
        Route::Ticket(id) => routes::challenge::ticket(shard, id, req).boxed_local(),
        Route::Order(id) => routes::orders::get(shard, id, req).boxed_local(),
        Route::Pay(id) => routes::pay::post(shard, id, req).boxed_local(),
        Route::Download(token) => routes::download::get(shard, token).boxed_local(),
        Route::Queue(id, true) => routes::queue::join(shard, id, req).boxed_local(),
        Route::Queue(id, false) => {
            async move { routes::queue::look(shard, id, &req).await }.boxed_local()
        }
    };
    Step::Waits(waits)
}

/// Refuses, until the shard has read the campaigns, what would otherwise be answered
/// from an empty copy: a live sale would read as unknown.
fn starting(shard: &Shard) -> Result<(), ApiError> {
    if shard.synced() {
        Ok(())
    } else {
        Err(ApiError::Starting)
    }
}

/// The user a request's bearer token names.
fn authenticate(shard: &Shard, headers: &(impl Headers + ?Sized)) -> Result<Rc<str>, ApiError> {
    let header = headers.value(&hyper::header::AUTHORIZATION);
    let s = &shard.settings;
    let now_ms = seckill_core::clock::coarse_now_ms();
    let known = request::bearer_bytes(header).and_then(|t| shard.tokens.borrow().user(t, now_ms));
    let user = match known {
        Some(user) => user,
        None => {
            let token = request::bearer(header)?;
            let max_ttl_ms = s.max_token_ttl.as_millis() as i64;
            let (user, expires_ms) = auth::verify_token_until(&s.secret, token, now_ms, max_ttl_ms)
                .map_err(|e| {
                    ApiError::Unauthenticated(match e {
                        auth::TokenError::Expired => "token expired",
                        auth::TokenError::TooLong => {
                            "token lives longer than max_token_ttl_s allows"
                        }
                        _ => "invalid token",
                    })
                })?;
            let user: Rc<str> = user.into();
            shard
                .tokens
                .borrow_mut()
                .insert(token.as_bytes(), user.clone(), expires_ms);
            user
        }
    };
    let now = Instant::now();
    let checked = shard.guard.borrow_mut().check_user(&user, now);
    if let Err(refusal) = checked {
        shard.refused(guard::Client::User(&user), now);
        return Err(refusal.into());
    }
    Ok(user)
}

/// How long a client refused for who it is (its token, its rate) may take to send the
/// rest of its body before the answer goes and the connection closes.
const REFUSED_CLIENT_WAIT: Duration = Duration::from_millis(50);

/// An answer decided before the body was read. What has come of the body is read and
/// dropped first, within `wait`: a connection closed on unread bytes cannot carry the
/// client's next request, and a client that reuses it loses that request.
fn before_body<T>(
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
fn refused_before_body<'a>(req: Request<Incoming>, refused: ApiError, wait: Duration) -> Step<'a> {
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
fn read_json<T: DeserializeOwned>(
    shard: &Shard,
    req: Request<Incoming>,
) -> impl Future<Output = Result<T, ApiError>> {
    let limit = shard.settings.http.max_body_bytes;
    // A declared length above the limit is refused without waiting for the body. What
    // already came is read first: closing on unread bytes resets the connection, and the
    // client could lose the answer.
    let too_large = hyper::body::Body::size_hint(req.body()).lower() > limit as u64;
    let read = if too_large {
        BodyRead::discard(req.into_body(), REFUSED_CLIENT_WAIT)
    } else {
        let header_timeout = Duration::from_millis(shard.settings.http.header_timeout_ms);
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
