//! The load: one thread per core, each a tokio current-thread runtime that sends its
//! share of the plan at the planned instants, over keep-alive connections pooled per
//! source address. Latency is measured from the planned instant, not from when the
//! request could go out, so a server (or a simulator) that falls behind shows it
//! (coordinated omission corrected, as wrk2 does).

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::{Arrival, Persona};

/// What one thread saw.
#[derive(Debug)]
pub struct Tally {
    /// (persona, outcome) → count; outcome is the status and error code.
    pub outcomes: BTreeMap<(Persona, String), u64>,
    /// Latency of purchases from their planned instant, µs.
    pub purchase_us: Histogram<u64>,
    /// Latency of payments from their send instant, µs.
    pub pay_us: Histogram<u64>,
    /// How late the thread sent requests compared with the plan, µs.
    pub send_lag_us: Histogram<u64>,
    /// Orders held, by persona and user (to see who won the units).
    pub held: Vec<(Persona, usize, String)>,
    pub paid: u64,
    /// Retries that got an answer other than their first.
    pub retry_mismatches: u64,
    pub sent: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    pub fn new() -> Self {
        Tally {
            outcomes: BTreeMap::new(),
            purchase_us: histogram(),
            pay_us: histogram(),
            send_lag_us: histogram(),
            held: Vec::new(),
            paid: 0,
            retry_mismatches: 0,
            sent: 0,
        }
    }

    pub fn merge(&mut self, o: Tally) {
        for (k, v) in o.outcomes {
            *self.outcomes.entry(k).or_default() += v;
        }
        let _ = self.purchase_us.add(&o.purchase_us);
        let _ = self.pay_us.add(&o.pay_us);
        let _ = self.send_lag_us.add(&o.send_lag_us);
        self.held.extend(o.held);
        self.paid += o.paid;
        self.retry_mismatches += o.retry_mismatches;
        self.sent += o.sent;
    }
}

/// Everything a thread needs besides its arrivals.
pub struct Context {
    pub target: SocketAddr,
    pub campaign: String,
    /// Bearer tokens by user index (shoppers, then the hammer, then the rotator).
    pub tokens: Vec<String>,
    pub start: Instant,
    /// Requests still unanswered this long after the plan ends are given up.
    pub deadline: Instant,
}

type Conn = SendRequest<Full<Bytes>>;

struct Client {
    target: SocketAddr,
    idle: RefCell<HashMap<Ipv4Addr, Vec<Conn>>>,
}

impl Client {
    async fn connect(&self, ip: Ipv4Addr) -> std::io::Result<Conn> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(ip.into(), 0))?;
        let stream = socket.connect(self.target).await?;
        stream.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        Ok(send)
    }

    /// Sends one request from `ip`, reusing an idle connection of that address.
    async fn send(
        &self,
        ip: Ipv4Addr,
        req: Request<Full<Bytes>>,
    ) -> Result<(u16, serde_json::Value), String> {
        let pooled = self.idle.borrow_mut().get_mut(&ip).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) if !c.is_closed() => c,
            _ => self
                .connect(ip)
                .await
                .map_err(|e| format!("connect: {}", e.kind()))?,
        };
        conn.ready()
            .await
            .map_err(|_| "connection closed".to_string())?;
        let res = conn.send_request(req).await.map_err(|e| {
            if e.is_timeout() {
                "timeout".to_string()
            } else {
                "transport".to_string()
            }
        })?;
        let status = res.status().as_u16();
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|_| "transport".to_string())?
            .to_bytes();
        self.idle.borrow_mut().entry(ip).or_default().push(conn);
        Ok((status, serde_json::from_slice(&body).unwrap_or_default()))
    }
}

fn request(
    method: Method,
    path: &str,
    token: &str,
    idem: Option<&str>,
    body: &'static str,
) -> Request<Full<Bytes>> {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "seckill")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"));
    if let Some(k) = idem {
        b = b.header("idempotency-key", k);
    }
    b.body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap_or_else(|_| unreachable!("a request built from valid parts"))
}

fn outcome(r: &Result<(u16, serde_json::Value), String>) -> String {
    match r {
        Ok((200, _)) => "200".into(),
        Ok((code, v)) => format!("{code} {}", v["error"].as_str().unwrap_or("?")),
        Err(e) => format!("error {e}"),
    }
}

/// Runs one thread's share of the plan.
pub fn run_thread(arrivals: Vec<Arrival>, ctx: Arc<Context>) -> Tally {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a load thread: {e}");
            return Tally::new();
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let client = Rc::new(Client {
            target: ctx.target,
            idle: RefCell::default(),
        });
        let tally = Rc::new(RefCell::new(Tally::new()));
        let mut tasks = Vec::with_capacity(arrivals.len());
        for (n, a) in arrivals.into_iter().enumerate() {
            let planned = ctx.start + a.at;
            tokio::time::sleep_until(planned.into()).await;
            let lag = planned.elapsed().as_micros() as u64;
            let (client, tally, ctx) = (client.clone(), tally.clone(), ctx.clone());
            tasks.push(tokio::task::spawn_local(async move {
                tally.borrow_mut().send_lag_us.record(lag.max(1)).ok();
                let work = session(&client, &ctx, &a, planned, n, &tally);
                let _ = tokio::time::timeout_at(ctx.deadline.into(), work).await;
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        // Every session task has finished, so nothing else uses the tally now.
        let done = std::mem::take(&mut *tally.borrow_mut());
        done
    })
}

/// One arrival's session: its purchase, then what its persona does next.
async fn session(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    planned: Instant,
    n: usize,
    tally: &RefCell<Tally>,
) {
    let path = format!("/api/campaigns/{}/purchase", ctx.campaign);
    let forged;
    let token = match a.persona {
        Persona::Forger => {
            // A real token's user and expiry with a made-up signature.
            let real = &ctx.tokens[a.user];
            let cut = real.rfind('.').unwrap_or(real.len());
            forged = format!("{}.{}", &real[..cut], "A".repeat(43));
            &forged
        }
        _ => &ctx.tokens[a.user],
    };
    let key = format!("k{n}-{}", a.user);
    let r = client
        .send(
            a.ip,
            request(Method::POST, &path, token, Some(&key), "{\"quantity\":1}"),
        )
        .await;
    let took = planned.elapsed().as_micros() as u64;
    let order = match &r {
        Ok((200, v)) => v["order_id"].as_str().map(str::to_string),
        _ => None,
    };
    {
        let mut t = tally.borrow_mut();
        t.sent += 1;
        t.purchase_us.record(took.max(1)).ok();
        *t.outcomes.entry((a.persona, outcome(&r))).or_default() += 1;
        if let Some(o) = &order {
            t.held.push((a.persona, a.user, o.clone()));
        }
    }
    if a.retries {
        // The answer was "lost": the same request again must give the same answer.
        let again = client
            .send(
                a.ip,
                request(Method::POST, &path, token, Some(&key), "{\"quantity\":1}"),
            )
            .await;
        let again_order = match &again {
            Ok((200, v)) => v["order_id"].as_str().map(str::to_string),
            _ => None,
        };
        let mut t = tally.borrow_mut();
        t.sent += 1;
        if order.is_some() && again_order != order {
            t.retry_mismatches += 1;
        }
    }
    if let (Some(o), true) = (order, a.pays) {
        let sent = Instant::now();
        let r = client
            .send(
                a.ip,
                request(
                    Method::POST,
                    &format!("/api/orders/{o}/pay"),
                    token,
                    None,
                    "",
                ),
            )
            .await;
        let mut t = tally.borrow_mut();
        t.sent += 1;
        t.pay_us
            .record((sent.elapsed().as_micros() as u64).max(1))
            .ok();
        if matches!(r, Ok((200, _))) {
            t.paid += 1;
        }
    }
}

/// Splits the plan over `threads` (arrival i to thread i mod threads), runs them, and
/// merges what they saw.
pub fn run(plan: Vec<Arrival>, threads: usize, ctx: Arc<Context>) -> Tally {
    let mut shares: Vec<Vec<Arrival>> = vec![Vec::new(); threads];
    for (i, a) in plan.into_iter().enumerate() {
        shares[i % threads].push(a);
    }
    let handles: Vec<_> = shares
        .into_iter()
        .map(|share| {
            let ctx = ctx.clone();
            std::thread::spawn(move || run_thread(share, ctx))
        })
        .collect();
    let mut all = Tally::new();
    for h in handles {
        if let Ok(t) = h.join() {
            all.merge(t);
        }
    }
    all
}

/// How long to wait for stragglers after the plan ends.
pub const GRACE: Duration = Duration::from_secs(10);
