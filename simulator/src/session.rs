//! A shopper's session in a sale without a waiting room: the purchase (resent with the
//! same Idempotency-Key by a shopper who retries), then for a buyer who pays, its
//! payments and its order ([`crate::pay`]). A queued sale's sessions ([`crate::room`])
//! buy and pay the same way.

use hdrhistogram::Histogram;
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::http::{Client, Failure, Req};
use crate::pay::{pay_and_collect, Buyer};
use crate::plan::{Arrival, Persona};
use crate::tally::{histogram, Tally, Traced};
use seckill_core::api::Glance;
use seckill_core::backoff::Backoff;

/// Status and error code of an answer, or why there was none.
fn outcome(r: &Result<(u16, Option<String>), Failure>) -> String {
    match r {
        Ok((200, _)) => "200".into(),
        Ok((code, e)) => format!("{code} {}", e.as_deref().unwrap_or("?")),
        Err(f) => format!("error {}", f.name()),
    }
}

/// A purchase's answer: its status and error code, and the order it holds.
pub(crate) type Bought = Result<(u16, Option<String>), Failure>;

/// One arrival's session in a sale without a waiting room: its purchase, then what its
/// persona does next.
pub(crate) async fn session(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    planned: Instant,
    n: usize,
    tally: &RefCell<Tally>,
) {
    let forged;
    let (token, ticket) = match a.persona {
        Persona::Forger => {
            // A real token's user and expiry with a made-up signature; on ticket
            // campaigns every other try brings a real token and a made-up ticket.
            let real = &ctx.tokens[a.user];
            if ctx.tickets.iter().any(Option::is_some) && n % 2 == 1 {
                (real.as_str(), Some("Zm9yZ2Vk.9999999999999.AAAA"))
            } else {
                forged = forge(real);
                (forged.as_str(), None)
            }
        }
        Persona::Skipper => (ctx.tokens[a.user].as_str(), None),
        _ => (ctx.tokens[a.user].as_str(), ctx.tickets[a.user].as_deref()),
    };
    let key = format!("k{n}-{}", a.user);
    let (_, order) = buy(client, ctx, a, (token, ticket, &key), planned, tally).await;
    if let (Some(o), Some(pays)) = (order, a.pays) {
        let buyer = Buyer {
            n,
            ip: a.ip,
            token,
            pays,
        };
        pay_and_collect(client, ctx, &buyer, &o, tally).await;
    }
}

/// A real token's user and expiry with a made-up signature.
pub(crate) fn forge(real: &str) -> String {
    let cut = real.rfind('.').unwrap_or(real.len());
    format!("{}.{}", &real[..cut], "A".repeat(43))
}

/// One purchase with `token`, `ticket` (a proof-of-work ticket or a waiting room's pass)
/// and Idempotency-Key `key`, its latency from `planned`, and for a shopper who retries
/// the same request again: counted, with its answer and the order it holds.
pub(crate) async fn buy(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    (token, ticket, key): (&str, Option<&str>, &str),
    planned: Instant,
    tally: &RefCell<Tally>,
) -> (Bought, Option<String>) {
    let path = format!("/api/campaigns/{}/purchase", ctx.campaign);
    let body = match ticket {
        Some(t) => format!(r#"{{"quantity":1,"ticket":"{t}"}}"#),
        None => r#"{"quantity":1}"#.to_string(),
    };
    let req = Req {
        method: "POST",
        path: &path,
        token: Some(token),
        idempotency_key: Some(key),
        receipt: None,
        headers: &[],
        body: body.as_bytes(),
    };
    let read = |status: u16, body: &[u8]| {
        let r = Glance::of(body);
        let said = if status == 200 { r.order_id } else { r.error };
        (status, said.map(Cow::into_owned))
    };
    let r: Bought = client.send(a.ip, &req, read).await;
    let order = match &r {
        Ok((200, o)) => o.clone(),
        _ => None,
    };
    count_purchase(&mut tally.borrow_mut(), client, ctx, a, planned, &r, &order);
    let (r, order) = resend_unanswered(client, ctx, a, &req, read, (r, order), tally).await;
    if !a.retries {
        return (r, order);
    }
    // The answer was "lost": the same request again must give the same answer.
    let sent = Instant::now();
    let again: Bought = client.send(a.ip, &req, read).await;
    let again_order = match &again {
        Ok((200, o)) => o.clone(),
        _ => None,
    };
    let mut t = tally.borrow_mut();
    t.timed("retry", sent, again.is_ok());
    // A retry refused for now (503, or no answer) says nothing about the first answer;
    // any other answer must be the same.
    let answered = matches!(again, Ok((status, _)) if status != 503);
    let order = match (&order, &again_order) {
        (Some(_), _) if answered && again_order != order => {
            t.retry_mismatches += 1;
            order
        }
        // The first try was refused (busy, say) and the retry got the unit.
        (None, Some(o)) => {
            t.held.push((a.persona, a.user, o.clone()));
            again_order
        }
        _ => order,
    };
    (r, order)
}

/// Counts a purchase's first answer in every book the tally keeps of it: its route, its
/// outcome (by persona, by second, and its latency from `planned`), the progress line,
/// the trace, and the order it holds.
fn count_purchase(
    t: &mut Tally,
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    planned: Instant,
    r: &Bought,
    order: &Option<String>,
) {
    t.timed("purchase", planned, r.is_ok());
    let took = (planned.elapsed().as_micros() as u64).max(1);
    t.last_answer = t.last_answer.max(ctx.start.elapsed());
    let from_start = planned.saturating_duration_since(ctx.start);
    let second = from_start.as_secs() as usize;
    while t.per_second.len() <= second {
        // Two significant digits are plenty for a per-second line on a plot.
        let h = Histogram::new_with_bounds(1, 600_000_000, 2)
            .unwrap_or_else(|_| unreachable!("valid bounds"));
        t.per_second.push(h);
    }
    t.per_second[second].record(took).ok();
    if let Ok(mut w) = ctx.progress.window.lock() {
        w.record(took).ok();
    }
    let counter = match r {
        Ok((200, _)) => &ctx.progress.held,
        Ok(_) => &ctx.progress.refused,
        Err(_) => &ctx.progress.errors,
    };
    counter.fetch_add(1, Relaxed);
    ctx.progress.answered.fetch_add(1, Relaxed);
    let said = outcome(r);
    t.purchase_by_outcome
        .entry(said.clone())
        .or_insert_with(histogram)
        .record(took)
        .ok();
    if t.per_second_outcomes.len() <= second {
        t.per_second_outcomes
            .resize_with(second + 1, Default::default);
    }
    *t.per_second_outcomes[second]
        .entry(said.clone())
        .or_default() += 1;
    if ctx.trace {
        t.trace.push(Traced {
            planned: from_start,
            took_us: took,
            outcome: said.clone(),
        });
    }
    *t.outcomes.entry((a.persona, said)).or_default() += 1;
    if let Some(o) = order {
        t.held.push((a.persona, a.user, o.clone()));
        if let Some(opens_ms) = ctx.opens_ms {
            let now = seckill_core::now_ms();
            if now < opens_ms {
                t.sold_before_opening += 1;
            }
            let target = client.target_index(a.ip);
            let first = t.first_sale_ms.entry(target).or_insert(now);
            *first = (*first).min(now);
        }
    }
}

/// A purchase that got no answer, or a 503, sent again with the same Idempotency-Key
/// while `population.resend_for_s` lasts, backing off from 250 ms to 2 s (jittered, as
/// the nodes' own reconnects): the shopper
/// learns what Redis applied while the answer was lost, and never takes a second unit.
async fn resend_unanswered(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    req: &Req<'_>,
    read: impl Fn(u16, &[u8]) -> (u16, Option<String>) + Copy,
    (mut r, mut order): (Bought, Option<String>),
    tally: &RefCell<Tally>,
) -> (Bought, Option<String>) {
    let until = (Instant::now() + ctx.resend_for).min(ctx.deadline);
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
    while matches!(r, Err(_) | Ok((503, _))) {
        let wait = backoff.wait();
        if Instant::now() + wait >= until {
            break;
        }
        tokio::time::sleep(wait).await;
        let sent = Instant::now();
        r = client.send(a.ip, req, read).await;
        let mut t = tally.borrow_mut();
        t.timed("resend", sent, r.is_ok());
        if let Ok((200, Some(o))) = &r {
            t.held.push((a.persona, a.user, o.clone()));
            order = Some(o.clone());
        }
    }
    (r, order)
}
