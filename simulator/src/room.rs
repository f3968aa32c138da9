//! A session through a campaign's waiting room: join, look at the line every so often,
//! sending back the last answer's receipt (so the node answers without Redis while the
//! shopper waits), buy with the pass once let through, pay as usual. The room's answers
//! decide when the session ends: `sold_out` and `ended` end it, as does a refusal other
//! than a busy one (429, 503): after that, it joins, looks or buys again at its next
//! turn.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::http::{Client, Failure, Req};
use crate::pay::{pay_and_collect, Buyer};
use crate::plan::{Arrival, Looks, Persona};
use crate::session;
use crate::tally::{Joined, Tally};
use seckill_core::api::{self, Glance};

/// A room's answer to a join or a look, owned.
#[derive(Debug, Default)]
struct Standing {
    state: String,
    place: Option<u64>,
    receipt: Option<String>,
    pass: Option<String>,
    pass_expires_ms: Option<i64>,
}

/// Its status, and the standing (200) or the error code (a refusal).
type Answer = Result<(u16, Result<Standing, Option<String>>), Failure>;

fn read(status: u16, body: &[u8]) -> (u16, Result<Standing, Option<String>>) {
    if status != 200 {
        return (status, Err(Glance::of(body).error.map(|e| e.into_owned())));
    }
    match serde_json::from_slice::<api::QueueStatus>(body) {
        Ok(s) => (
            status,
            Ok(Standing {
                state: s.state.into_owned(),
                place: s.place,
                receipt: s.receipt.map(|r| r.into_owned()),
                pass: s.ticket.map(|t| t.into_owned()),
                pass_expires_ms: s.ticket_expires_at_ms,
            }),
        ),
        Err(_) => (status, Err(Some("unreadable".into()))),
    }
}

/// How a session that never bought ended, as an outcome: `room ` and what ended it.
fn ended(r: &Answer) -> String {
    match r {
        Ok((code, Err(e))) => format!("room {code} {}", e.as_deref().unwrap_or("?")),
        Ok((_, Ok(s))) => format!("room {}", s.state),
        Err(f) => format!("room error {}", f.name()),
    }
}

fn count(tally: &RefCell<Tally>, persona: Persona, outcome: String) {
    *tally
        .borrow_mut()
        .outcomes
        .entry((persona, outcome))
        .or_default() += 1;
}

/// A made-up pass: the shape of one, signed by nobody.
const FORGED_PASS: &str = "cTE.9999999999999.AAAA";

/// One arrival's session in a queued sale. The forger joins with a forged token before
/// the opening, and buys with a forged pass after it.
pub(crate) async fn session(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    looks: Looks,
    planned: Instant,
    n: usize,
    tally: &RefCell<Tally>,
) {
    let real = ctx.tokens[a.user].as_str();
    let key = format!("k{n}-{}", a.user);
    match a.persona {
        // Straight to the purchase, without a pass (its answer is counted in the tally).
        Persona::Skipper => {
            let _ = session::buy(client, ctx, a, (real, None, &key), planned, tally).await;
            return;
        }
        // Once the sale is live: a real token with a made-up pass.
        Persona::Forger if a.at >= ctx.opening => {
            let forged = (real, Some(FORGED_PASS), key.as_str());
            let _ = session::buy(client, ctx, a, forged, planned, tally).await;
            return;
        }
        _ => {}
    }
    let forged;
    let token = if a.persona == Persona::Forger {
        forged = session::forge(real);
        forged.as_str()
    } else {
        real
    };
    let Some((pass, expires_ms)) = wait(client, ctx, a, token, looks, planned, tally).await else {
        return;
    };
    // Bought with the pass; refused for being busy, the same purchase again at the next
    // turn while the pass lasts.
    let order = loop {
        let sent = Instant::now();
        let (r, order) =
            session::buy(client, ctx, a, (token, Some(&pass), &key), sent, tally).await;
        let next = Instant::now() + looks.every;
        let busy = matches!(r, Ok((429 | 503, _)) | Err(_));
        let lasts = expires_ms
            .is_some_and(|e| seckill_core::now_ms() + looks.every.as_millis() as i64 <= e);
        if !(busy && lasts && next < ctx.deadline) {
            break order;
        }
        tokio::time::sleep_until(next.into()).await;
    };
    if a.persona == Persona::Replayer {
        // The same pass again, as a new purchase: used once, it buys nothing more.
        let again = format!("{key}-again");
        let _ = session::buy(
            client,
            ctx,
            a,
            (token, Some(&pass), &again),
            Instant::now(),
            tally,
        )
        .await;
    }
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

/// Joins and looks until let through: the pass and when it expires, or nothing when the
/// session ended otherwise (counted as its outcome). A session the room let join is
/// recorded with what the fairness table needs.
async fn wait(
    client: &Client,
    ctx: &Context,
    a: &Arrival,
    token: &str,
    looks: Looks,
    planned: Instant,
    tally: &RefCell<Tally>,
) -> Option<(String, Option<i64>)> {
    let path = format!("/api/campaigns/{}/queue", ctx.campaign);
    let body = serde_json::to_string(&api::JoinBody {
        ticket: ctx.tickets[a.user].clone(),
    })
    .unwrap_or_else(|_| "{}".into());
    let join = Req {
        method: "POST",
        path: &path,
        token: Some(token),
        idempotency_key: None,
        receipt: None,
        headers: &[],
        body: body.as_bytes(),
    };
    // Refused for being busy, joined again at the next turn.
    let mut next = planned;
    let mut standing = loop {
        let sent = Instant::now();
        let r: Answer = client.send(a.ip, &join, read).await;
        let from = if next == planned { planned } else { sent };
        tally.borrow_mut().timed("join", from, r.is_ok());
        match r {
            Ok((200, Ok(s))) => break s,
            Ok((429 | 503, _)) | Err(_)
                if next + looks.every + Duration::from_secs(1) < ctx.deadline =>
            {
                next += looks.every;
                tokio::time::sleep_until(next.into()).await;
            }
            other => {
                count(tally, a.persona, ended(&other));
                return None;
            }
        }
    };
    // Recorded at once, so a session the run's end cuts short still counts.
    let me = {
        let mut t = tally.borrow_mut();
        t.joined.push(Joined {
            persona: a.persona,
            user: a.user,
            at: a.at,
            class: looks.class,
            pre: standing.state == "waiting" && standing.place.is_none(),
            looks: 0,
            looks_refused: 0,
            looked_for: Duration::ZERO,
        });
        t.joined.len() - 1
    };
    let since = Instant::now();
    next = since;
    let outcome = loop {
        match standing.state.as_str() {
            "admitted" if standing.pass.is_some() => break None,
            "waiting" | "admitted" => {}
            other => break Some(format!("room {other}")),
        }
        next += looks.every;
        // The last look must have time to come back before the run ends.
        if next + Duration::from_secs(1) >= ctx.deadline {
            break Some("room gave up".into());
        }
        tokio::time::sleep_until(next.into()).await;
        let look = Req {
            method: "GET",
            body: b"",
            receipt: standing.receipt.as_deref(),
            ..join
        };
        let sent = Instant::now();
        let r: Answer = client.send(a.ip, &look, read).await;
        let mut t = tally.borrow_mut();
        t.timed("look", sent, r.is_ok());
        let j = &mut t.joined[me];
        j.looks += 1;
        j.looked_for = since.elapsed();
        match r {
            Ok((200, Ok(mut s))) => {
                s.receipt = s.receipt.or(standing.receipt.take());
                standing = s;
            }
            // Too fast, busy, or a connection lost: look again at the next turn.
            Ok((429, _)) => j.looks_refused += 1,
            Ok((503, _)) | Err(_) => {}
            other => break Some(ended(&other)),
        }
    };
    if let Some(o) = outcome {
        count(tally, a.persona, o);
        return None;
    }
    Some((standing.pass?, standing.pass_expires_ms))
}
