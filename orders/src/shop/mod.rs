//! The shop hears of every order: outgoing webhooks, signed as Standard Webhooks with the
//! shop's secret, at least once.
//!
//! The worker puts each order event it stores into one Redis stream of its own (the
//! outbox, capped), before it acknowledges the event: `order.held`, `order.paid`,
//! `order.delivered` (with the licence keys and the download's path), `order.expired`,
//! `refund.due`, `refund.done`; the nodes add `payment.unmatched`. Each has a stable
//! `webhook-id` (the order's id and what happened to it), so a shop that hears of one
//! twice sees the same id. A sender (a thread beside each worker, a consumer of the
//! outbox's group) posts them in order; a shop that answers 2xx has it; a shop that is
//! down, slow or answers 408, 429 or 5xx is tried again after a jittered exponential
//! backoff, the events waiting in the outbox; any other 4xx puts the event in the
//! dead letters (`webhooks list`, `webhooks replay`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::streams::{StreamId, StreamReadOptions, StreamReadReply};
use redis::Commands;

use crate::event::{Event, Kind};
use seckill_core::connection::Connection;
use seckill_core::keys::{SHOP_DEAD, SHOP_OUTBOX};
use seckill_core::webhooks::Signer;

mod dead;
pub use dead::{dead_letters, replay, DeadLetter, KINDS};

/// The outbox's consumer group: every worker's sender in it.
pub const GROUP: &str = "senders";

/// Where the shop's webhooks go, and how.
#[derive(Debug, Clone)]
pub struct ShopOptions {
    /// `https://` (or `http://` to a loopback address).
    pub url: String,
    pub signer: Signer,
    /// Certificates that alone are trusted for the shop's endpoint (else the system's).
    pub ca_file: Option<PathBuf>,
    /// Most events the outbox keeps: beyond it the oldest go.
    pub cap: u64,
    /// Longest wait between two tries while the shop is failing.
    pub max_backoff: Duration,
    /// A try the shop has not answered by then failed.
    pub timeout: Duration,
}

/// One webhook for the shop.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub id: String,
    pub kind: &'static str,
    pub data: serde_json::Value,
}

/// The shop's webhook of an order event; `download_path` for a delivered order of a
/// campaign with a file.
pub fn webhook_of(e: &Event, download_path: Option<String>) -> Outgoing {
    let kind = match e.kind {
        Kind::Held => "order.held",
        Kind::Paid => "order.paid",
        Kind::Expired => "order.expired",
        Kind::Delivered => "order.delivered",
        Kind::RefundDue => "refund.due",
        Kind::Refunded => "refund.done",
    };
    let mut data = serde_json::json!({
        "order_id": e.order_id,
        "campaign_id": e.campaign,
        "user_id": e.user,
        "quantity": e.quantity,
        "status": e.status(),
    });
    let mut id = format!("{}:{}", e.order_id, e.kind.as_str());
    match e.kind {
        Kind::Held => data["pay_by_ms"] = e.pay_by_ms.into(),
        Kind::Delivered => {
            let keys: Vec<&str> = e
                .license_key
                .as_deref()
                .map_or(vec![], |k| k.lines().collect());
            data["license_keys"] = keys.into();
            if let Some(p) = download_path {
                data["download_path"] = p.into();
            }
        }
        _ => {}
    }
    if let Some(p) = &e.payment {
        data["payment_id"] = p.payment_id.clone().into();
        data["amount_cents"] = p.amount_cents.into();
        data["currency"] = p.currency.clone().into();
        if let Some(r) = &p.reason {
            data["reason"] = r.clone().into();
        }
        // An order may owe back more than one payment: each its own event.
        if matches!(e.kind, Kind::RefundDue | Kind::Refunded) {
            id = format!("{id}:{}", p.payment_id);
        }
    }
    Outgoing { id, kind, data }
}

/// Puts webhooks into the outbox, in one round trip.
pub fn enqueue(con: &mut Connection, out: &[Outgoing], cap: u64) -> redis::RedisResult<()> {
    if out.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for o in out {
        pipe.cmd("XADD")
            .arg(SHOP_OUTBOX)
            .arg("MAXLEN")
            .arg("~")
            .arg(cap)
            .arg("*")
            .arg("id")
            .arg(&o.id)
            .arg("type")
            .arg(o.kind)
            .arg("data")
            .arg(o.data.to_string())
            .ignore();
    }
    con.pipeline::<()>(&pipe)
}

/// What a try came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Taken,
    /// Try again later: the shop is down, slow, or asks for it (408, 429, 5xx).
    Again,
    /// Refused for good (any other 4xx): to the dead letters.
    Refused(u16),
}

/// Counters the node's `/metrics` shows.
#[derive(Debug, Default)]
pub struct ShopMetrics {
    pub sent: std::sync::atomic::AtomicU64,
    pub failures: std::sync::atomic::AtomicU64,
    pub backlog: std::sync::atomic::AtomicU64,
    pub dead: std::sync::atomic::AtomicU64,
}

/// Sends the outbox's webhooks to the shop until `stop` is set, reconnecting after
/// failures.
pub fn run_sender(
    opts: ShopOptions,
    redis_url: &str,
    name: &str,
    stop: &AtomicBool,
    metrics: Option<Arc<ShopMetrics>>,
) {
    let agent = match agent(&opts) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "the shop's webhooks cannot be sent");
            return;
        }
    };
    let mut failures: u32 = 0;
    let mut resume = Instant::now();
    let mut con: Option<Connection> = None;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < resume {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let c = match con.as_mut() {
            Some(c) => c,
            None => match connect(redis_url) {
                Ok(c) => con.insert(c),
                Err(e) => {
                    tracing::warn!(error = %e, "the shop's webhook sender cannot reach Redis");
                    resume = Instant::now() + Duration::from_secs(1);
                    continue;
                }
            },
        };
        match pass(c, &agent, &opts, name, &metrics) {
            Ok(Pass::Idle) => {}
            Ok(Pass::Sent) => failures = 0,
            Ok(Pass::Failed) => {
                failures += 1;
                let wait = backoff(failures, opts.max_backoff);
                tracing::warn!(url = %opts.url, failures, wait_ms = wait.as_millis() as u64, "the shop did not take a webhook; trying again later");
                resume = Instant::now() + wait;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the shop's webhook sender lost Redis");
                con = None;
                resume = Instant::now() + Duration::from_secs(1);
            }
        }
    }
}

fn connect(url: &str) -> Result<Connection, String> {
    let mut con = seckill_core::control::connect_with(url, Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let made: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(SHOP_OUTBOX)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con);
    match made {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(con),
        other => other.map(|()| con).map_err(|e| e.to_string()),
    }
}

enum Pass {
    Idle,
    Sent,
    Failed,
}

/// One pass: this sender's own pending events first (tried before and failed), then
/// those of senders gone silent for a minute, then new ones; each order's in order (a
/// lane stops at its first webhook the shop does not take), different orders' at once.
fn pass(
    con: &mut Connection,
    agent: &ureq::Agent,
    opts: &ShopOptions,
    name: &str,
    metrics: &Option<Arc<ShopMetrics>>,
) -> redis::RedisResult<Pass> {
    if let Some(m) = metrics {
        let backlog: u64 = con.xlen(SHOP_OUTBOX)?;
        let dead: u64 = con.hlen(SHOP_DEAD)?;
        m.backlog.store(backlog, Ordering::Relaxed);
        m.dead.store(dead, Ordering::Relaxed);
    }
    let mut entries = read(con, name, "0", None)?;
    if entries.is_empty() {
        let claimed: redis::streams::StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(SHOP_OUTBOX)
            .arg(GROUP)
            .arg(name)
            .arg(60_000)
            .arg("0-0")
            .arg("COUNT")
            .arg(64)
            .query(con)?;
        entries = claimed.claimed;
    }
    if entries.is_empty() {
        entries = read(con, name, ">", Some(1_000))?;
    }
    if entries.is_empty() {
        return Ok(Pass::Idle);
    }
    // Each order's webhooks go in order, a lane an order; the lanes at once.
    let mut lanes: Vec<Vec<Webhook>> = (0..LANES).map(|_| Vec::new()).collect();
    for e in &entries {
        let get = |k: &str| e.get::<String>(k).unwrap_or_default();
        let w = Webhook {
            entry: e.id.clone(),
            id: get("id"),
            kind: get("type"),
            data: get("data"),
        };
        // The order's id (or the unmatched payment's) leads the webhook id.
        let lane = fnv(w.id.split(':').next().unwrap_or_default()) % LANES;
        lanes[lane].push(w);
    }
    let tried: Vec<(Webhook, Sent)> = std::thread::scope(|s| {
        let running: Vec<_> = lanes
            .into_iter()
            .filter(|l| !l.is_empty())
            .map(|lane| {
                s.spawn(move || {
                    let mut tried = Vec::new();
                    for w in lane {
                        let sent = send(agent, opts, &w.id, &w.body());
                        let again = sent == Sent::Again;
                        tried.push((w, sent));
                        if again {
                            break;
                        }
                    }
                    tried
                })
            })
            .collect();
        running
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut done = redis::pipe();
    let mut failed = false;
    for (w, sent) in &tried {
        match sent {
            Sent::Taken => {
                if let Some(m) = metrics {
                    m.sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            Sent::Again => {
                if let Some(m) = metrics {
                    m.failures.fetch_add(1, Ordering::Relaxed);
                }
                failed = true;
                continue;
            }
            Sent::Refused(status) => {
                tracing::error!(webhook = %w.id, status, "the shop refused a webhook; it is kept in the dead letters (webhooks list, webhooks replay)");
                let record = serde_json::json!({
                    "id": w.id, "type": w.kind,
                    "data": serde_json::from_str::<serde_json::Value>(&w.data).unwrap_or_default(),
                    "status": status, "at_ms": seckill_core::now_ms(),
                });
                done.hset(SHOP_DEAD, &w.id, record.to_string()).ignore();
            }
        }
        done.cmd("XACK")
            .arg(SHOP_OUTBOX)
            .arg(GROUP)
            .arg(&w.entry)
            .ignore()
            .cmd("XDEL")
            .arg(SHOP_OUTBOX)
            .arg(&w.entry)
            .ignore();
    }
    // A pass the shop took none of has nothing to acknowledge (and an empty pipeline is
    // no command).
    if tried.iter().any(|(_, sent)| *sent != Sent::Again) {
        con.pipeline::<()>(&done)?;
    }
    Ok(if failed { Pass::Failed } else { Pass::Sent })
}

/// Webhooks sent at once, each order's in its own lane.
const LANES: usize = 8;

/// A webhook read from the outbox.
struct Webhook {
    entry: String,
    id: String,
    kind: String,
    data: String,
}

impl Webhook {
    /// The body as the spec's envelope, timestamped now.
    fn body(&self) -> String {
        format!(
            "{{\"type\":{},\"timestamp\":{},\"data\":{}}}",
            serde_json::Value::from(self.kind.as_str()),
            serde_json::Value::from(seckill_core::campaign::format_instant_ms(
                seckill_core::now_ms()
            )),
            self.data,
        )
    }
}

/// FNV-1a: a lane for an order, the same for all its webhooks.
fn fnv(s: &str) -> usize {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as usize
}

fn read(
    con: &mut Connection,
    name: &str,
    from: &str,
    block_ms: Option<usize>,
) -> redis::RedisResult<Vec<StreamId>> {
    let mut o = StreamReadOptions::default().group(GROUP, name).count(64);
    if let Some(ms) = block_ms {
        o = o.block(ms);
    }
    let reply: Option<StreamReadReply> = con.xread_options(&[SHOP_OUTBOX], &[from], &o)?;
    Ok(reply
        .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
        .unwrap_or_default())
}

/// One try: the webhook signed now.
fn send(agent: &ureq::Agent, opts: &ShopOptions, id: &str, body: &str) -> Sent {
    let ts = seckill_core::now_ms() / 1000;
    let sig = opts.signer.sign(id, ts, body.as_bytes());
    let answer = agent
        .post(&opts.url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", &ts.to_string())
        .header("webhook-signature", &sig)
        .send(body);
    match answer {
        Ok(r) => match r.status().as_u16() {
            200..=299 => Sent::Taken,
            408 | 429 | 500..=599 => Sent::Again,
            400..=499 => Sent::Refused(r.status().as_u16()),
            _ => Sent::Again,
        },
        Err(e) => {
            tracing::debug!(error = %e, "a webhook to the shop failed");
            Sent::Again
        }
    }
}

/// The wait after `failures` failures in a row: doubling from a second up to `max`,
/// each between half and all of it (so that senders do not come back together).
fn backoff(failures: u32, max: Duration) -> Duration {
    let full = Duration::from_secs(1)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(20))
        .min(max);
    full.mul_f64(0.5 + rand_unit() / 2.0)
}

/// A number in [0, 1) from the clock's nanoseconds: jitter needs no more.
fn rand_unit() -> f64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(n % 1_000_000) / 1_000_000.0
}

/// The client the sender posts with: the system's roots, or the CA file's alone.
fn agent(opts: &ShopOptions) -> Result<ureq::Agent, String> {
    Ok(ureq::Agent::config_builder()
        .timeout_global(Some(opts.timeout))
        .http_status_as_error(false)
        .tls_config(crate::https::tls(opts.ca_file.as_deref())?)
        .build()
        .new_agent())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_its_most_with_jitter() {
        let max = Duration::from_secs(60);
        for (n, full) in [(1, 1), (2, 2), (3, 4), (7, 60), (40, 60)] {
            let w = backoff(n, max);
            let full = Duration::from_secs(full);
            assert!(w >= full / 2 && w <= full, "{n}: {w:?}");
        }
    }
}
