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
    /// When the last purchase answer came, from the start of the run.
    pub last_answer: Duration,
    /// Per second of the run (by planned send time): purchases answered and their
    /// latency, µs.
    pub per_second: Vec<Histogram<u64>>,
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
            last_answer: Duration::ZERO,
            per_second: Vec::new(),
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
        self.last_answer = self.last_answer.max(o.last_answer);
        for (i, h) in o.per_second.into_iter().enumerate() {
            match self.per_second.get_mut(i) {
                Some(mine) => {
                    let _ = mine.add(&h);
                }
                None => self.per_second.push(h),
            }
        }
    }
}

/// Counters every load thread bumps, for the live progress line.
#[derive(Debug, Default)]
pub struct Progress {
    pub answered: std::sync::atomic::AtomicU64,
    pub held: std::sync::atomic::AtomicU64,
    pub refused: std::sync::atomic::AtomicU64,
    pub errors: std::sync::atomic::AtomicU64,
}

/// Everything a thread needs besides its arrivals.
pub struct Context {
    pub progress: Progress,
    pub target: SocketAddr,
    pub campaign: String,
    /// Bearer tokens by account (see `plan::account_names`).
    pub tokens: Vec<String>,
    /// Tickets earned before the run, by account (campaigns that require them).
    pub tickets: Vec<Option<String>>,
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
        // Keep a couple of idle connections per address; more would only hold sockets.
        let mut idle = self.idle.borrow_mut();
        let pool = idle.entry(ip).or_default();
        if pool.len() < 2 {
            pool.push(conn);
        }
        Ok((status, serde_json::from_slice(&body).unwrap_or_default()))
    }
}

fn request(
    method: Method,
    path: &str,
    token: &str,
    idem: Option<&str>,
    body: String,
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
    b.body(Full::new(Bytes::from(body)))
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
    let (token, ticket) = match a.persona {
        Persona::Forger => {
            // A real token's user and expiry with a made-up signature; on ticket
            // campaigns every other try brings a real token and a made-up ticket.
            let real = &ctx.tokens[a.user];
            if ctx.tickets.iter().any(Option::is_some) && n % 2 == 1 {
                (
                    real.as_str(),
                    Some("Zm9yZ2Vk.9999999999999.AAAA".to_string()),
                )
            } else {
                let cut = real.rfind('.').unwrap_or(real.len());
                forged = format!("{}.{}", &real[..cut], "A".repeat(43));
                (forged.as_str(), None)
            }
        }
        Persona::Skipper => (ctx.tokens[a.user].as_str(), None),
        _ => (ctx.tokens[a.user].as_str(), ctx.tickets[a.user].clone()),
    };
    let body = serde_json::json!({ "quantity": 1, "ticket": ticket }).to_string();
    let key = format!("k{n}-{}", a.user);
    let r = client
        .send(
            a.ip,
            request(Method::POST, &path, token, Some(&key), body.clone()),
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
        t.last_answer = t.last_answer.max(ctx.start.elapsed());
        let second = a.at.as_secs() as usize;
        while t.per_second.len() <= second {
            // Two significant digits are plenty for a per-second line on a plot.
            let h = Histogram::new_with_bounds(1, 600_000_000, 2)
                .unwrap_or_else(|_| unreachable!("valid bounds"));
            t.per_second.push(h);
        }
        t.per_second[second].record(took.max(1)).ok();
        let counter = match &r {
            Ok((200, _)) => &ctx.progress.held,
            Ok(_) => &ctx.progress.refused,
            Err(_) => &ctx.progress.errors,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ctx.progress
            .answered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *t.outcomes.entry((a.persona, outcome(&r))).or_default() += 1;
        if let Some(o) = &order {
            t.held.push((a.persona, a.user, o.clone()));
        }
    }
    if a.retries {
        // The answer was "lost": the same request again must give the same answer.
        let again = client
            .send(a.ip, request(Method::POST, &path, token, Some(&key), body))
            .await;
        let again_order = match &again {
            Ok((200, v)) => v["order_id"].as_str().map(str::to_string),
            _ => None,
        };
        let mut t = tally.borrow_mut();
        t.sent += 1;
        match (&order, &again_order) {
            (Some(_), _) if again_order != order => t.retry_mismatches += 1,
            // The first try was refused (busy, say) and the retry got the unit.
            (None, Some(o)) => t.held.push((a.persona, a.user, o.clone())),
            _ => {}
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
                    String::new(),
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

/// Earns a ticket for each account from its own source address (challenge, proof of
/// work, ticket), as shoppers do on the sale page before it opens. An account the data
/// plane turns away (rate limits, the ticket cap) simply has none.
pub fn earn_tickets(
    target: SocketAddr,
    campaign: &str,
    accounts: Vec<(String, Ipv4Addr)>,
    threads: usize,
) -> Vec<Option<String>> {
    let chunk = accounts.len().div_ceil(threads.max(1)).max(1);
    let handles: Vec<_> = accounts
        .chunks(chunk)
        .map(|part| {
            let (part, campaign) = (part.to_vec(), campaign.to_string());
            std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return vec![None; part.len()];
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let client = Client {
                        target,
                        idle: RefCell::default(),
                    };
                    let mut out = Vec::with_capacity(part.len());
                    for (token, ip) in &part {
                        out.push(earn_one(&client, &campaign, token, *ip).await);
                    }
                    out
                })
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect()
}

async fn earn_one(client: &Client, campaign: &str, token: &str, ip: Ipv4Addr) -> Option<String> {
    let path = format!("/api/campaigns/{campaign}/challenge");
    let (code, ch) = client
        .send(ip, request(Method::POST, &path, token, None, String::new()))
        .await
        .ok()?;
    if code != 200 {
        return None;
    }
    let nonce = seckill_dataplane::guard::pow::solve(
        ch["prefix"].as_str()?,
        ch["difficulty"].as_u64()? as u32,
    );
    let body =
        serde_json::json!({ "challenge_id": ch["challenge_id"], "nonce": nonce }).to_string();
    let path = format!("/api/campaigns/{campaign}/ticket");
    let (code, t) = client
        .send(ip, request(Method::POST, &path, token, None, body))
        .await
        .ok()?;
    (code == 200)
        .then(|| t["ticket"].as_str().map(str::to_string))
        .flatten()
}
