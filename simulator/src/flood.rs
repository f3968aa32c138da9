//! `seckill-sim flood`: abusive connections against a data plane, to run beside a surge.
//! Two kinds at once, from their own source addresses (127.3.0.0/16):
//! - **malformed** requests at a steady rate, each on a fresh connection, cycling through
//!   broken framing (TLS on the plain port, bad methods, oversized heads and request
//!   lines, unreadable or lying lengths, headers without a colon, broken JSON, payment
//!   webhooks with a broken body); each answer's status is counted;
//! - **slow-loris** connections, opened evenly over `--slow-ramp-s` and held open by
//!   trickling a head a header line at a time; when the node closes one, another takes
//!   its place.
//!
//! Every malformed request must get a 4xx or a close, never a 5xx or a hang, and every
//! connection must be accepted; otherwise the exit status is 1.

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::provider::WEBHOOK_PATH;
use seckill_core::webhooks::Signer;

#[derive(Args, Debug)]
pub struct FloodArgs {
    /// The data plane, http://host:port.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// Malformed requests per second, each on a fresh connection.
    #[arg(long, default_value_t = 200.0)]
    pub malformed_rate: f64,
    /// Slow-loris connections kept open at once.
    #[arg(long, default_value_t = 1000)]
    pub slow: usize,
    /// Seconds between two trickles on a slow connection.
    #[arg(long, default_value_t = 1.0)]
    pub trickle_s: f64,
    /// Seconds over which the slow connections are first opened, evenly, as attackers
    /// who do not all start in the same millisecond (0: all at once).
    #[arg(long, default_value_t = 5.0)]
    pub slow_ramp_s: f64,
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Real shoppers' tokens, signed with the shop's key, so that the requests with a
    /// broken body get past authentication to the body's checks.
    #[command(flatten)]
    pub shop: crate::shop::ShopArgs,
    /// The payment provider's secret, so that the webhooks with a broken body carry a
    /// valid signature and get past it to the body's checks.
    #[command(flatten)]
    pub payment: crate::provider::PaymentArgs,
    /// Write the report as JSON here ("-" for standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What the flood saw.
#[derive(Debug, Default, Serialize)]
pub struct FloodReport {
    pub malformed_sent: u64,
    /// Answers to malformed requests: status code, "closed" (no answer, connection
    /// closed) or "timeout" (no answer within 5 s), by request kind.
    pub answers: BTreeMap<String, BTreeMap<String, u64>>,
    /// Malformed requests answered 5xx or not at all within 5 s.
    pub mishandled: u64,
    pub slow_opened: u64,
    /// Slow connections the node closed (after its header timeout).
    pub slow_closed: u64,
    /// The longest a slow connection stayed open before the node closed it, s.
    pub slow_longest_s: f64,
    /// Slow connections still open when the flood ended (the node never closed them).
    pub slow_open_at_end: u64,
    /// Connections the flood could not open (refused, or not accepted within 5 s).
    pub connect_failures: u64,
}

/// The malformed requests, by name. A webhook is signed with the provider's secret when
/// there is one, else with a made-up signature.
fn malformed(kind: usize, token: &str, provider: Option<&Signer>) -> (&'static str, Vec<u8>) {
    let long = "a".repeat(16 * 1024);
    match kind % 10 {
        0 => (
            "tls_hello",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\x00".to_vec(),
        ),
        1 => ("bad_method", b"G@T /api/time HTTP/1.1\r\nHost: a\r\n\r\n".to_vec()),
        2 => (
            "huge_header",
            format!("GET /api/time HTTP/1.1\r\nHost: a\r\nX-Big: {long}\r\n\r\n").into_bytes(),
        ),
        3 => (
            "huge_request_line",
            format!("GET /{long} HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes(),
        ),
        4 => (
            "bad_length",
            format!("POST /api/campaigns/demo/purchase HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\nContent-Length: abc\r\n\r\n")
                .into_bytes(),
        ),
        5 => (
            "lying_length",
            format!("POST /api/campaigns/demo/purchase HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\nContent-Length: 1000000\r\n\r\n{{\"quantity\":1}}")
                .into_bytes(),
        ),
        6 => (
            "no_colon",
            b"GET /api/time HTTP/1.1\r\nHost: a\r\nnocolonhere\r\n\r\n".to_vec(),
        ),
        7 => (
            "broken_json",
            format!("POST /api/campaigns/demo/purchase HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{{\"quantit")
                .into_bytes(),
        ),
        8 => (
            "binary_noise",
            (0..512u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect(),
        ),
        _ => ("broken_webhook", broken_webhook(kind, provider)),
    }
}

/// A payment webhook whose body is cut short: signed by the provider, it gets past the
/// signature and is refused for its body (400); with a made-up signature, it is refused
/// for that (401).
fn broken_webhook(n: usize, provider: Option<&Signer>) -> Vec<u8> {
    let body = r#"{"type":"payment.succeeded","data":{"order_id":"#;
    let id = format!("msg_flood_{n}");
    let ts = seckill_core::now_ms() / 1000;
    let signature = provider.map_or_else(
        || "v1,AAAA".to_string(),
        |s| s.sign(&id, ts, body.as_bytes()),
    );
    format!(
        "POST {WEBHOOK_PATH} HTTP/1.1\r\nHost: a\r\nwebhook-id: {id}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {signature}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The flood's n-th source address, 127.3.0.1 and up.
fn source(n: u64) -> SocketAddr {
    let i = (n % 65_000) as u32 + 1;
    SocketAddr::from((
        Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 3, 0, 0)) + i),
        0,
    ))
}

async fn connect(target: SocketAddr, n: u64) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(source(n))?;
    tokio::time::timeout(Duration::from_secs(5), s.connect(target))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// The status of the answer on `s`, or why there was none.
async fn answer(s: &mut TcpStream) -> String {
    let mut buf = [0u8; 1024];
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(2).any(|w| w == b"\r\n") {
                        return;
                    }
                }
            }
        }
    })
    .await;
    if read.is_err() {
        return "timeout".into();
    }
    match std::str::from_utf8(&got)
        .ok()
        .and_then(|l| l.strip_prefix("HTTP/1.1 "))
    {
        Some(rest) => rest.chars().take(3).collect(),
        None => "closed".into(),
    }
}

async fn one_malformed(
    target: SocketAddr,
    n: u64,
    (kind, bytes): (&'static str, Vec<u8>),
    report: Rc<RefCell<FloodReport>>,
) {
    let outcome = match connect(target, n).await {
        Ok(mut s) => {
            // The node may close before reading it all: the answer still counts.
            let _ = s.write_all(&bytes).await;
            answer(&mut s).await
        }
        Err(_) => {
            report.borrow_mut().connect_failures += 1;
            return;
        }
    };
    let mut r = report.borrow_mut();
    if outcome == "timeout" || outcome.starts_with('5') {
        r.mishandled += 1;
    }
    *r.answers
        .entry(kind.to_string())
        .or_default()
        .entry(outcome)
        .or_default() += 1;
}

/// Keeps one slow connection open until `until`, trickling a header line at a time and
/// opening another each time the node closes one.
async fn slow_loris(
    target: SocketAddr,
    n: u64,
    first: Instant,
    trickle: Duration,
    until: Instant,
    report: Rc<RefCell<FloodReport>>,
) {
    tokio::time::sleep_until(first.into()).await;
    let mut attempt = 0u64;
    while Instant::now() < until {
        attempt += 1;
        let Ok(mut s) = connect(target, 30_000 + n * 7 + attempt).await else {
            report.borrow_mut().connect_failures += 1;
            tokio::time::sleep(trickle).await;
            continue;
        };
        report.borrow_mut().slow_opened += 1;
        let opened = Instant::now();
        let head: &[u8] = b"GET /api/time HTTP/1.1\r\nHost: a\r\n";
        let mut alive = s.write_all(head).await.is_ok();
        while alive && Instant::now() < until {
            tokio::time::sleep(trickle).await;
            alive = s.write_all(b"X-a: b\r\n").await.is_ok();
            // A node that gave up answers 408 or just closes: look without waiting.
            let mut buf = [0u8; 256];
            let looked = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf));
            if alive && looked.await.is_ok() {
                alive = false;
            }
        }
        let mut r = report.borrow_mut();
        if alive {
            r.slow_open_at_end += 1;
        } else {
            r.slow_closed += 1;
            r.slow_longest_s = r.slow_longest_s.max(opened.elapsed().as_secs_f64());
        }
    }
}

pub fn flood(a: &FloodArgs) -> anyhow::Result<FloodReport> {
    let target = a
        .target
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_socket_addrs()
        .ok()
        .and_then(|mut t| t.next())
        .with_context(|| format!("--target: cannot resolve {}", a.target))?;
    if !(a.malformed_rate >= 0.0 && a.malformed_rate <= 100_000.0) {
        anyhow::bail!("--malformed-rate: must be between 0 and 100000");
    }
    if !(a.trickle_s > 0.0 && a.trickle_s <= 60.0) {
        anyhow::bail!("--trickle-s: must be above 0 and at most 60");
    }
    if !(a.duration_s > 0.0 && a.duration_s <= 86_400.0) {
        anyhow::bail!("--duration-s: must be above 0 and at most 86400");
    }
    if !(a.slow_ramp_s >= 0.0 && a.slow_ramp_s <= 3600.0) {
        anyhow::bail!("--slow-ramp-s: must be between 0 and 3600");
    }
    if a.slow > 60_000 {
        anyhow::bail!("--slow: at most 60000 connections");
    }
    // Tokens signed as the shop signs them: with the shop's private key.
    let shop = a.shop.signer()?;
    let provider = a.payment.signer()?;
    let expires = seckill_core::now_ms() + 3_600_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = Rc::new(RefCell::new(FloodReport::default()));
    let local = tokio::task::LocalSet::new();
    let until = Instant::now() + Duration::from_secs_f64(a.duration_s);
    let trickle = Duration::from_secs_f64(a.trickle_s);
    local.block_on(&rt, async {
        let start = Instant::now();
        let apart = Duration::from_secs_f64(a.slow_ramp_s / a.slow.max(1) as f64);
        for n in 0..a.slow as u64 {
            let first = start + apart.mul_f64(n as f64);
            tokio::task::spawn_local(slow_loris(target, n, first, trickle, until, report.clone()));
        }
        if a.malformed_rate > 0.0 {
            let every = Duration::from_secs_f64(1.0 / a.malformed_rate);
            let start = Instant::now();
            let mut n = 0u64;
            while Instant::now() < until {
                let due = start + every.mul_f64(n as f64);
                tokio::time::sleep_until(due.into()).await;
                report.borrow_mut().malformed_sent += 1;
                let token = shop
                    .as_ref()
                    .map(|s| s.token(&format!("flood-{n}"), expires));
                let token = token.as_deref().unwrap_or("x.y.z");
                let request = malformed(n as usize, token, provider.as_ref());
                tokio::task::spawn_local(one_malformed(target, n, request, report.clone()));
                n += 1;
            }
        }
        tokio::time::sleep_until(until.into()).await;
        // Answers still on their way.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    Ok(Rc::try_unwrap(report).map_or_else(
        |r| std::mem::take(&mut *r.borrow_mut()),
        RefCell::into_inner,
    ))
}

pub fn run(a: &FloodArgs) -> anyhow::Result<ExitCode> {
    let r = flood(a)?;
    let json = serde_json::to_string_pretty(&r)?;
    match &a.json {
        Some(p) if p.as_os_str() == "-" => println!("{json}"),
        Some(p) => {
            std::fs::write(p, &json).with_context(|| format!("--json: writing {}", p.display()))?
        }
        None => {}
    }
    if a.json.as_ref().is_none_or(|p| p.as_os_str() != "-") {
        println!(
            "malformed: {} sent, {} mishandled (5xx or no answer in 5 s); slow-loris: {} opened, {} closed by the node (longest {:.1} s), {} still open at the end; {} connections failed",
            r.malformed_sent, r.mishandled, r.slow_opened, r.slow_closed, r.slow_longest_s, r.slow_open_at_end, r.connect_failures
        );
        for (kind, answers) in &r.answers {
            println!("  {kind:<18} {answers:?}");
        }
    }
    Ok(if r.mishandled == 0 && r.connect_failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_core::webhooks::{Headers, Verifier, WebhookKey};

    /// The head's headers and the body of a request.
    fn parse(bytes: &[u8]) -> (BTreeMap<String, String>, Vec<u8>) {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head) = req.parse(bytes).expect("a request") else {
            panic!("a whole head");
        };
        let named = req
            .headers
            .iter()
            .map(|h| {
                let value = String::from_utf8_lossy(h.value).into_owned();
                (h.name.to_ascii_lowercase(), value)
            })
            .collect();
        (named, bytes[head..].to_vec())
    }

    #[test]
    fn a_broken_webhook_is_signed_by_the_provider_when_its_secret_is_given() {
        let key = WebhookKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a secret");
        let signer = Signer::new(&key).expect("symmetric");
        let verifier = Verifier::new(vec![key]);
        let now = seckill_core::now_ms() / 1000;
        for (provider, verifies) in [(Some(&signer), true), (None, false)] {
            let (kind, bytes) = malformed(9, "x.y.z", provider);
            assert_eq!(kind, "broken_webhook");
            let (h, body) = parse(&bytes);
            assert_eq!(h["content-length"], body.len().to_string());
            let headers = Headers {
                id: h.get("webhook-id").map(String::as_str),
                timestamp: h.get("webhook-timestamp").map(String::as_str),
                signature: h.get("webhook-signature").map(String::as_str),
            };
            assert_eq!(verifier.verify(headers, &body, now).is_ok(), verifies);
            assert!(serde_json::from_slice::<serde_json::Value>(&body).is_err());
        }
    }
}
