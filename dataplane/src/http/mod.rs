//! HTTP/1.1 on a shard: hyper over glommio sockets, one small module per route.
//!
//! A request goes down, never back up: the connection ([`io`], with the [`quick`] lane
//! that answers a refused purchase from its head), this dispatcher, one module of
//! `routes`, and below the routes what every route reads the same way: the sender
//! ([`extract`]: address, user, idempotency key, request id) and the body ([`body`]).

pub mod admin;
mod body;
mod extract;
mod io;
mod quick;
mod reply;
pub mod request;
mod routes;
mod wake;

pub use reply::ApiError;

use bytes::Bytes;
use futures::FutureExt;
use glommio::net::TcpStream;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::answer::{Endpoint, Outcome};
use crate::shard::Shard;
use body::Step;
use extract::{admit_ip, count_refusal, request_id, X_REQUEST_ID};
use reply::Reply;
use request::Route;

/// Serves one connection until the client leaves, a timeout fires, or `shutdown`
/// resolves — then in-flight requests finish and the connection closes.
pub async fn serve_connection(
    shard: Rc<Shard>,
    stream: TcpStream,
    shutdown: impl Future<Output = ()>,
) {
    let h = &shard.settings().http;
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
    wake::until_shutdown(builder.serve_connection(io, svc), shutdown).await;
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
        if req.uri().path() == WEBHOOK_PATH {
            return provider(&shard, req, start).await;
        }
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

/// Where the payment provider sends its webhooks.
const WEBHOOK_PATH: &str = "/api/payments/webhook";

/// Answers the payment provider: past its own bucket, not the per-address limits and
/// blocking (a provider's retries come from few addresses, and a refusal of a bad
/// signature must not block them).
async fn provider(
    shard: &Rc<Shard>,
    req: Request<Incoming>,
    start: Instant,
) -> hyper::Response<Body> {
    let result = match Route::of(req.method(), WEBHOOK_PATH) {
        Ok(route) => match dispatch(shard, route, req) {
            Step::Now(answer) => answer,
            Step::Waits(answer) => answer.await,
        },
        Err(refused) => Err(refused),
    };
    let outcome = result
        .as_ref()
        .map_or_else(ApiError::outcome, |_| Outcome::Ok);
    shard.answered(Endpoint::PaymentWebhook, outcome, start.elapsed());
    result
        .unwrap_or_else(|e| e.reply())
        .map(http_body_util::Either::Left)
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
        Route::Orders => routes::orders::list(shard, req).boxed_local(),
        Route::Pay(id) => routes::pay::post(shard, id, req).boxed_local(),
        Route::PaymentWebhook => routes::payments::webhook(shard, req).boxed_local(),
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
