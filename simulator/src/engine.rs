//! The load: one thread per core, each a tokio current-thread runtime that sends its
//! share of the plan at the planned instants, over keep-alive connections pooled per
//! source address. Latency is measured from the planned instant, not from when the
//! request could go out, so a server (or a simulator) that falls behind shows it
//! (coordinated omission corrected, as wrk2 does). At most `connections` sessions per
//! thread are in flight; later arrivals wait for a free one and their wait counts.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::http::Client;
use crate::plan::Arrival;
use crate::tally::Tally;
use crate::{room, session};

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
                let work = visit(&client, &ctx, &a, planned, n, &tally);
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

/// One arrival's session; in a queued sale, through the waiting room.
async fn visit(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    planned: Instant,
    n: usize,
    tally: &RefCell<Tally>,
) {
    match a.looks {
        Some(looks) => room::session(client, ctx, a, looks, planned, n, tally).await,
        None => session::session(client, ctx, a, planned, n, tally).await,
    }
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
