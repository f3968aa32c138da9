//! The admin listener, served by shard 0 on its own address: `GET /metrics` (Prometheus
//! text, every shard's counters summed, each campaign's stock read from Redis),
//! `GET /healthz` (the process answers) and `GET /readyz` (every shard has Redis and has
//! read the control plane, and the clock is within `control.max_clock_skew_ms` of Redis's).
//! With a token configured, every request must bring it.

use glommio::net::TcpStream;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::convert::Infallible;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::io;
use super::reply::{json, Reply};
use crate::metrics::{self, CampaignGauges, Metrics};
use crate::shard::Shard;
use seckill_core::protocol;

pub async fn serve_connection(
    shard: Rc<Shard>,
    metrics: Arc<Metrics>,
    stream: TcpStream,
    shutdown: impl Future<Output = ()>,
) {
    let h = &shard.settings().http;
    let (stream, clock) = io::TimedStream::new(
        stream,
        Duration::from_millis(h.header_timeout_ms),
        Duration::from_millis(h.idle_timeout_ms),
    );
    let svc = service_fn(move |req| {
        clock.handling();
        let (shard, metrics) = (shard.clone(), metrics.clone());
        async move { Ok::<_, Infallible>(answer(&shard, &metrics, req).await) }
    });
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    super::wake::until_shutdown(conn, shutdown).await;
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn answer(shard: &Shard, metrics: &Metrics, req: Request<Incoming>) -> Reply {
    if let Some(token) = &shard.settings().admin_token {
        let given = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| same(g, token.as_bytes())) {
            return json(
                StatusCode::UNAUTHORIZED,
                &json!({ "error": "unauthenticated", "message": "this listener needs the admin token" }),
            );
        }
    }
    if req.method() != Method::GET {
        let mut r = json(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({ "error": "method_not_allowed", "message": "the admin routes are GET only" }),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET"),
        );
        return r;
    }
    match req.uri().path() {
        "/healthz" => json(StatusCode::OK, &json!({ "status": "ok" })),
        "/readyz" => match metrics
            .ready()
            .and_then(|()| seckill_core::clock::check(shard.settings().control.max_clock_skew_ms))
        {
            Ok(()) => json(StatusCode::OK, &json!({ "status": "ready" })),
            Err(reason) => json(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({ "status": "not_ready", "reason": reason }),
            ),
        },
        "/metrics" => {
            let campaigns = stock(shard, metrics).await;
            let mut r = Reply::new(metrics::render(metrics, &campaigns).into());
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        _ => json(
            StatusCode::NOT_FOUND,
            &json!({ "error": "not_found", "message": "admin routes: /metrics, /healthz, /readyz" }),
        ),
    }
}

/// Every campaign's stock, summed over its partitions; campaigns Redis cannot be asked
/// about right now, and those ended longer than `metrics.ended_campaign_ttl_s` ago, are
/// left out.
async fn stock(shard: &Shard, metrics: &Metrics) -> Vec<CampaignGauges> {
    let mut out = Vec::new();
    let views = shard.campaigns();
    let ids: Vec<&str> = views.iter().map(|v| v.campaign.spec.id.as_str()).collect();
    metrics.forget_except(&ids);
    let now_ms = seckill_core::clock::local_ms();
    let ttl_ms = (shard.settings().metrics.ended_campaign_ttl_s as i64).saturating_mul(1000);
    for v in &views {
        let c = &v.campaign;
        if !metrics.shows(&c.spec.id, v.public_state(), now_ms, ttl_ms) {
            continue;
        }
        let mut g = CampaignGauges {
            id: c.spec.id.clone(),
            state: v.public_state(),
            total: c.spec.total as i64,
            ..CampaignGauges::default()
        };
        let mut complete = true;
        for p in 0..c.spec.partitions {
            let cmd = protocol::partition_stock(&c.spec.id, p);
            match shard.read(&cmd).await {
                Ok(v) => {
                    let s = protocol::read_partition_stock(p, &v);
                    g.remaining += s.stock;
                    g.held += s.held;
                    g.sold += s.sold;
                    g.in_transit += s.transit;
                }
                Err(_) => {
                    complete = false;
                    break;
                }
            }
        }
        if c.spec.queue.is_some() {
            let mut replies = Vec::new();
            for cmd in protocol::queue_progress(&c.spec.id) {
                match shard.read(&cmd).await {
                    Ok(v) => replies.push(v),
                    Err(_) => break,
                }
            }
            if replies.len() == 4 {
                g.queue = Some(protocol::read_queue_progress(&replies));
            }
        }
        let verdict = protocol::verdict(&c.spec.id);
        if let Ok(v) = shard.read(&verdict).await {
            g.reconciled = protocol::read_verdict(&v);
        }
        if complete {
            out.push(g);
        }
    }
    out
}
