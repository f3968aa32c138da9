//! The load: one thread per core, each a tokio current-thread runtime that sends its
//! share of the plan at the planned instants, over keep-alive connections pooled per
//! source address. Latency is measured from the planned instant, not from when the
//! request could go out, so a server (or a simulator) that falls behind shows it
//! (coordinated omission corrected, as wrk2 does). At most `connections` sessions per
//! thread are in flight; later arrivals wait for a free one and their wait counts.

use hdrhistogram::Histogram;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http::Client;
use crate::plan::{Arrival, Persona};

/// The routes whose latency the report shows, in the order of a shopper's flow.
pub const ROUTES: [&str; 11] = [
    "challenge",
    "ticket",
    "join",
    "look",
    "purchase",
    "retry",
    "resend",
    "pay",
    "order",
    "delivered",
    "download",
];

/// What one thread saw.
#[derive(Debug)]
pub struct Tally {
    /// (persona, outcome) → count; outcome is the status and error code.
    pub outcomes: BTreeMap<(Persona, String), u64>,
    /// Latency by route, µs: purchases from their planned instant, the rest from when
    /// they were sent; "delivered" is from the payment's answer to the first view of the
    /// order as delivered (views 10, 30, 70, 150 … ms after it, then every 500 ms).
    pub routes: BTreeMap<&'static str, Histogram<u64>>,
    /// Purchase latency by outcome (status and error code), µs from the planned instant.
    pub purchase_by_outcome: BTreeMap<String, Histogram<u64>>,
    /// How late the thread sent requests compared with the plan, µs.
    pub send_lag_us: Histogram<u64>,
    /// Orders held, by persona and user (to see who won the units).
    pub held: Vec<(Persona, usize, String)>,
    /// In a queued sale: the sessions the waiting room let join.
    pub joined: Vec<Joined>,
    pub paid: u64,
    /// Paid orders seen delivered by their buyer, and downloads that succeeded.
    pub delivered: u64,
    pub downloaded: u64,
    /// Retries that got an answer other than their first.
    pub retry_mismatches: u64,
    /// Purchases answered 200 before the opening, by this machine's clock.
    pub sold_before_opening: u64,
    /// By target index: when its first purchase was answered 200, ms since the epoch.
    pub first_sale_ms: BTreeMap<usize, i64>,
    /// Every request sent, by route.
    pub sent: BTreeMap<&'static str, u64>,
    /// Requests that got no HTTP answer.
    pub failed: u64,
    /// Planned purchases never sent: the thread was still behind the plan when the
    /// run's grace period ended.
    pub unsent: u64,
    /// When the last purchase answer came, from the start of the run.
    pub last_answer: Duration,
    /// Per second of the run (by planned send time): purchases answered and their
    /// latency, µs.
    pub per_second: Vec<Histogram<u64>>,
    /// Per second of the run (by planned send time): purchases answered by outcome.
    pub per_second_outcomes: Vec<BTreeMap<String, u64>>,
    /// Every purchase answered, when the run is traced ([`Context::trace`]).
    pub trace: Vec<Traced>,
}

/// One purchase of a traced run.
#[derive(Debug, Clone)]
pub struct Traced {
    /// The instant its latency is measured from (when it was planned; through a waiting
    /// room, when it was sent), from the start of the run.
    pub planned: Duration,
    /// Its latency from then, µs.
    pub took_us: u64,
    /// Its answer's status and error code, or why there was none.
    pub outcome: String,
}

pub fn histogram() -> Histogram<u64> {
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
            routes: BTreeMap::new(),
            purchase_by_outcome: BTreeMap::new(),
            send_lag_us: histogram(),
            held: Vec::new(),
            joined: Vec::new(),
            paid: 0,
            delivered: 0,
            downloaded: 0,
            retry_mismatches: 0,
            sold_before_opening: 0,
            first_sale_ms: BTreeMap::new(),
            sent: BTreeMap::new(),
            failed: 0,
            unsent: 0,
            last_answer: Duration::ZERO,
            per_second: Vec::new(),
            per_second_outcomes: Vec::new(),
            trace: Vec::new(),
        }
    }

    pub fn merge(&mut self, o: Tally) {
        for (k, v) in o.outcomes {
            *self.outcomes.entry(k).or_default() += v;
        }
        for (route, h) in o.routes {
            let _ = self.routes.entry(route).or_insert_with(histogram).add(&h);
        }
        for (outcome, h) in o.purchase_by_outcome {
            let _ = self
                .purchase_by_outcome
                .entry(outcome)
                .or_insert_with(histogram)
                .add(&h);
        }
        let _ = self.send_lag_us.add(&o.send_lag_us);
        self.held.extend(o.held);
        self.joined.extend(o.joined);
        self.paid += o.paid;
        self.delivered += o.delivered;
        self.downloaded += o.downloaded;
        self.retry_mismatches += o.retry_mismatches;
        self.sold_before_opening += o.sold_before_opening;
        for (target, at) in o.first_sale_ms {
            let mine = self.first_sale_ms.entry(target).or_insert(at);
            *mine = (*mine).min(at);
        }
        for (route, n) in o.sent {
            *self.sent.entry(route).or_default() += n;
        }
        self.failed += o.failed;
        self.unsent += o.unsent;
        self.last_answer = self.last_answer.max(o.last_answer);
        self.trace.extend(o.trace);
        for (i, h) in o.per_second.into_iter().enumerate() {
            match self.per_second.get_mut(i) {
                Some(mine) => {
                    let _ = mine.add(&h);
                }
                None => self.per_second.push(h),
            }
        }
        for (i, outcomes) in o.per_second_outcomes.into_iter().enumerate() {
            match self.per_second_outcomes.get_mut(i) {
                Some(mine) => {
                    for (k, n) in outcomes {
                        *mine.entry(k).or_default() += n;
                    }
                }
                None => self.per_second_outcomes.push(outcomes),
            }
        }
    }

    /// Counts one request on `route` that took `since.elapsed()`.
    pub(crate) fn timed(&mut self, route: &'static str, since: Instant, answered: bool) {
        *self.sent.entry(route).or_default() += 1;
        if !answered {
            self.failed += 1;
        }
        self.latency(route, since);
    }

    /// Records `since.elapsed()` as a latency of `route`.
    pub(crate) fn latency(&mut self, route: &'static str, since: Instant) {
        let us = (since.elapsed().as_micros() as u64).max(1);
        self.routes
            .entry(route)
            .or_insert_with(histogram)
            .record(us)
            .ok();
    }

    pub fn requests(&self) -> u64 {
        self.sent.values().sum()
    }
}

/// A session the waiting room let join.
#[derive(Debug, Clone)]
pub struct Joined {
    pub persona: Persona,
    /// Its account (index into the token table).
    pub user: usize,
    /// When it joined, planned, from the start of the run.
    pub at: Duration,
    /// A shopper's polling class.
    pub class: Option<usize>,
    /// Joined before the draw: the answer had no place yet.
    pub pre: bool,
    /// Looks it sent, those refused for being too many or too fast (429), and for how
    /// long it kept looking.
    pub looks: u64,
    pub looks_refused: u64,
    pub looked_for: Duration,
}

/// Counters every load thread bumps, for the live progress line.
#[derive(Debug)]
pub struct Progress {
    pub answered: AtomicU64,
    pub held: AtomicU64,
    pub refused: AtomicU64,
    pub errors: AtomicU64,
    /// Purchase latency since the line was last drawn, µs.
    pub window: Mutex<Histogram<u64>>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            answered: AtomicU64::new(0),
            held: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            window: Mutex::new(histogram()),
        }
    }
}

/// Everything a thread needs besides its arrivals.
pub struct Context {
    pub progress: Progress,
    /// Data plane nodes; each source address talks to one of them.
    pub targets: Vec<SocketAddr>,
    pub campaign: String,
    /// Sessions in flight per thread, at most (and so connections in use).
    pub connections: usize,
    /// Bearer tokens by account (see `plan::account_names`).
    pub tokens: Vec<String>,
    /// Tickets earned before the sale, by account (campaigns that require them).
    pub tickets: Vec<Option<String>>,
    pub start: Instant,
    /// When the sale opens, from the start of the run.
    pub opening: Duration,
    /// When the sale opens, ms since the Unix epoch on Redis's clock, when this run
    /// opens it (then sales before it are counted).
    pub opens_ms: Option<i64>,
    /// Requests still unanswered this long after the plan ends are given up.
    pub deadline: Instant,
    /// How long a purchase left unanswered, or answered 503, is sent again.
    pub resend_for: Duration,
    /// Whether every purchase is kept in [`Tally::trace`].
    pub trace: bool,
}

/// Runs one thread's share of the plan.
/// Each arrival comes with its index in the whole plan, which makes its Idempotency-Key
/// unique across threads.
pub fn run_thread(arrivals: Vec<(usize, Arrival)>, ctx: Arc<Context>) -> Tally {
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
        let client = Rc::new(Client::new(ctx.targets.clone(), ctx.connections));
        let tally = Rc::new(RefCell::new(Tally::new()));
        let slots = Arc::new(tokio::sync::Semaphore::new(ctx.connections.max(1)));
        let pacer = crate::pace::Pacer::new();
        for (n, a) in arrivals {
            let planned = ctx.start + a.at;
            pacer.until(planned).await;
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            if Instant::now() >= ctx.deadline {
                // So far behind the plan that the rest would only be given up.
                tally.borrow_mut().unsent += 1;
                continue;
            }
            let lag = planned.elapsed().as_micros() as u64;
            tally.borrow_mut().send_lag_us.record(lag.max(1)).ok();
            let (client, tally, ctx) = (client.clone(), tally.clone(), ctx.clone());
            tokio::task::spawn_local(async move {
                let work = crate::session::session(&client, &ctx, &a, planned, n, &tally);
                let _ = tokio::time::timeout_at(ctx.deadline.into(), work).await;
                drop(slot);
            });
        }
        // Each session holds a slot until it ends: having them all back means all ended.
        let _ = slots.acquire_many(ctx.connections.max(1) as u32).await;
        // Every session task has finished, so nothing else uses the tally now.
        let done = std::mem::take(&mut *tally.borrow_mut());
        done
    })
}

/// Splits the plan over `threads` by source address (each address's sessions on one
/// thread, as each client machine holds its own connections, which its next sessions
/// reuse), runs them, and merges what they saw. Addresses go to targets by the address
/// modulo the targets (`Client::target_index`) and to threads by the quotient, so each
/// thread talks to every target.
pub fn run(plan: Vec<Arrival>, threads: usize, ctx: Arc<Context>) -> Tally {
    reserve_descriptors((threads * ctx.connections) as u64 + seckill_core::fds::SPARE);
    let mut shares: Vec<Vec<(usize, Arrival)>> = vec![Vec::new(); threads];
    let targets = ctx.targets.len().max(1);
    for (i, a) in plan.into_iter().enumerate() {
        shares[u32::from(a.ip) as usize / targets % threads].push((i, a));
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

/// Sizes the descriptor table for every connection the load threads may hold, before
/// they open any: a table that grows while they connect stalls them all for an RCU grace
/// period at each doubling (see [`seckill_core::fds`]), and that stall would count in
/// the latencies measured.
fn reserve_descriptors(wanted: u64) {
    match seckill_core::fds::reserve(wanted) {
        Ok(r) if r.limit < wanted => eprintln!(
            "the limit on open files (ulimit -n) is {}, below the {wanted} connections and files planned: connections past it fail",
            r.limit
        ),
        Ok(_) => {}
        Err(e) => eprintln!("cannot size the descriptor table ({e}): it grows while connecting"),
    }
}

/// How long to wait for stragglers after the plan ends.
pub const GRACE: Duration = Duration::from_secs(10);
