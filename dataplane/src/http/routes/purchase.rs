//! `POST /api/campaigns/{id}/purchase {"quantity"}`: everything the shard can decide alone
//! is decided here; only a purchase that may succeed reaches Redis, as one script call.

use futures::FutureExt;
use hyper::body::Incoming;
use hyper::Request;

use crate::guard::pow;
use crate::http::body::{before_body, read_json, refused_before_body, Step, REFUSED_CLIENT_WAIT};
use crate::http::extract::Asker;
use crate::http::reply::{ok, ApiError, Reply};
use crate::http::request::PurchaseBody;
use crate::shard::Shard;
use crate::store::{Purchase, PurchaseRequest};
use seckill_core::campaign::State;
use seckill_core::purchase::Refusal;
use seckill_core::{api, queue};
use std::rc::Rc;
use std::time::Duration;

/// Within this long of the opening or the end, the shard leaves the verdict to the
/// purchase script, which reads Redis's clock: the shard's own is corrected to Redis's
/// only to within half a round trip (see [`seckill_core::clock`]), and read coarsely, a tick
/// behind.
const EDGE_MS: i64 = 50;

fn held(order_id: &str, pay_by_ms: i64) -> Reply {
    ok(&api::Held {
        order_id: order_id.into(),
        status: "held".into(),
        pay_by_ms,
    })
}

/// The first answer to an earlier request with this `Idempotency-Key`, from Redis; else
/// `refusal`.
async fn first_answer_or(
    shard: &Shard,
    id: &str,
    partitions: u32,
    user: &str,
    key: &str,
    refusal: ApiError,
) -> Result<Reply, ApiError> {
    let first = shard
        .store()
        .first_answer(id, partitions, user, key)
        // Redis calls' futures are boxed where they are made: inline, they would set the
        // size of every purchase's future.
        .boxed_local()
        .await?;
    match first {
        Some((order_id, pay_by_ms)) => Ok(held(&order_id, pay_by_ms)),
        None => Err(refusal),
    }
}

/// `refusal`, unless the request's `Idempotency-Key` may have a first answer in Redis
/// and has one there.
async fn refused(
    shard: &Shard,
    id: &str,
    partitions: u32,
    user: &str,
    idem: Option<&str>,
    refusal: ApiError,
) -> Result<Reply, ApiError> {
    match key_to_ask(shard, id, partitions, user, idem) {
        Some(key) => first_answer_or(shard, id, partitions, user, key, refusal).await,
        None => Err(refusal),
    }
}

/// The `Idempotency-Key` to ask Redis for a first answer with, if any: none without a
/// key, nor while the user's partition is lent to the shard and the shard's copy of its
/// first answers holds none for the key.
fn key_to_ask<'k>(
    shard: &Shard,
    id: &str,
    partitions: u32,
    user: &str,
    idem: Option<&'k str>,
) -> Option<&'k str> {
    idem.filter(|key| shard.may_have_first_answer(id, partitions, user, key))
}

/// What the shard decided on its own: a refusal, and what the purchase needs if none.
pub(crate) struct Verdict {
    partitions: u32,
    limit: u32,
    needs_ticket: bool,
    pass_ttl_s: Option<u64>,
    refusal: Option<ApiError>,
    /// The campaign's [`CampaignView::restocks`](crate::shard::CampaignView::restocks)
    /// when the purchase came.
    restocks: u64,
}

/// What the shard makes of a purchase from its head alone: address and token aside
/// (checked before), then the key and the campaign.
pub(crate) enum Decision<'h> {
    /// Refused whatever the body says; the rest of the body is waited for this long
    /// before the answer goes.
    Refused(ApiError, Duration),
    /// Refused, unless Redis holds a first answer for the key.
    Ask {
        user: Rc<str>,
        key: &'h str,
        partitions: u32,
        refusal: ApiError,
        body_wait: Duration,
    },
    /// Not refused: the body, the ticket, then Redis.
    Buy {
        user: Rc<str>,
        key: Option<&'h str>,
        verdict: Verdict,
    },
}

/// The campaign's part of a purchase's decision, taken ahead of the rest by
/// [`ends_on_shard`]: the campaign's verdict, a refusal (none for an unknown campaign),
/// with no first answer to look up for the purchase's key.
pub(crate) struct Refusing(Option<Verdict>);

/// Decides a purchase from its head (`declared`: the body's length, as its head gives
/// it), the campaign's part as `ahead` took it if given. Counts toward the user's limits,
/// as every purchase does. Given `ahead`, the purchase is refused whatever else it finds.
pub(crate) fn decide<'h>(
    shard: &Shard,
    id: &str,
    asker: &Asker<'h>,
    declared: u64,
    ahead: Option<Refusing>,
) -> Decision<'h> {
    let user = match asker.user(shard) {
        Ok(user) => user,
        Err(e) => return Decision::Refused(e, REFUSED_CLIENT_WAIT),
    };
    let idem = match asker.idempotency_key() {
        Ok(key) => key,
        Err(e) => return Decision::Refused(e, REFUSED_CLIENT_WAIT),
    };
    // A refusal for the sale's sake waits for the rest of the body as long as a purchase
    // would: the connection is a shopper's, who may buy again on it. Not for a body over
    // the limit, which a purchase would refuse at once.
    let http = &shard.settings().http;
    let body_wait = if declared > http.max_body_bytes as u64 {
        REFUSED_CLIENT_WAIT
    } else {
        Duration::from_millis(http.header_timeout_ms)
    };
    let (verdict, settled) = match ahead {
        Some(Refusing(verdict)) => (verdict, true),
        None => (shard.with_campaign(id, verdict), false),
    };
    let Some(verdict) = verdict else {
        return Decision::Refused(ApiError::UnknownCampaign, body_wait);
    };
    let Some(refusal) = verdict.refusal else {
        return Decision::Buy {
            user,
            key: idem,
            verdict,
        };
    };
    // A retry gets its first answer whatever happened since (sold out, paused, ended,
    // its pass run out). A purchase that goes to Redis has it from the script, which
    // looks first; a refusal decided here asks Redis unless the user's partition is lent
    // to the shard and the shard's copy of its first answers shows there is none. The
    // refusal holds whatever the body says: the body is not parsed.
    let partitions = verdict.partitions;
    let ask = if settled {
        None
    } else {
        key_to_ask(shard, id, partitions, &user, idem)
    };
    match ask {
        Some(key) => Decision::Ask {
            user,
            key,
            partitions,
            refusal,
            body_wait,
        },
        None => Decision::Refused(refusal, body_wait),
    }
}

/// The campaign's part of the decision, when [`decide`] refuses a purchase from this
/// asker whatever the checks before the campaign's find: the campaign refuses every
/// purchase now (or is unknown), and the key (if any) can have no first answer waiting
/// in Redis. Reads the shard's state and changes nothing but two marks: that a keyed
/// refusal looked at the partition's lease (which keeps the lease renewed), and that a
/// purchase of a sold-out campaign came (which keeps its stock read), so a caller may
/// ask before it commits to an answer of its own; handed to [`decide`], what it found
/// stands, read once whatever the clocks do meanwhile.
pub(crate) fn ends_on_shard(shard: &Shard, id: &str, asker: &Asker<'_>) -> Option<Refusing> {
    let Some(verdict) = shard.with_campaign(id, verdict) else {
        return Some(Refusing(None));
    };
    verdict.refusal.as_ref()?;
    let Ok(Some(key)) = asker.idempotency_key() else {
        return Some(Refusing(Some(verdict)));
    };
    // A key's first answers are kept under its user's partition, known here only from a
    // token verified before.
    let user = asker.known_user(shard)?;
    key_to_ask(shard, id, verdict.partitions, &user, Some(key))
        .is_none()
        .then_some(Refusing(Some(verdict)))
}

/// A purchase. Everything the shard can decide alone is decided before any future is
/// made: a refusal whose body came with its head (as clients send a small body) is
/// answered at once. Only what waits (a body on its way, Redis) becomes a future.
pub fn post<'a>(shard: &'a Shard, id: &'a str, req: Request<Incoming>) -> Step<'a> {
    let declared = hyper::body::Body::size_hint(req.body()).lower();
    let asker = Asker::of(req.headers());
    match decide(shard, id, &asker, declared, None) {
        Decision::Refused(e, wait) => refused_before_body(req, e, wait),
        Decision::Ask {
            user,
            key,
            partitions,
            refusal,
            body_wait,
        } => {
            let key = key.to_owned();
            Step::Waits(
                async move {
                    let first = first_answer_or(shard, id, partitions, &user, &key, refusal).await;
                    before_body(req, first, body_wait).await
                }
                .boxed_local(),
            )
        }
        Decision::Buy { user, key, verdict } => {
            let idem = key.map(str::to_owned);
            Step::Waits(buy(shard, id, req, user, idem, verdict).boxed_local())
        }
    }
}

/// The shard's verdict on a purchase of campaign `v`, taken before any Redis call. The
/// purchase script checks the same and is the judge; the shard decides only what spares
/// Redis a call (and the shopper the wait for it): a campaign not on sale (unknown,
/// armed, paused, ended), well before its opening or after its end (outside
/// [`EDGE_MS`]), or proven sold out. Beside these, [`buy`] refuses a quantity over the
/// per-user limit and a ticket whose signature does not hold; everything else (the
/// limit with what the user has, a ticket's use, a pass's expiry) is the script's.
fn verdict(v: &crate::shard::CampaignView) -> Verdict {
    let c = &v.campaign;
    let now = seckill_core::clock::coarse_now_ms();
    let refusal = match c.state {
        State::Draft | State::Arming => Some(ApiError::UnknownCampaign),
        State::Armed => Some(ApiError::NotStarted {
            starts_at_ms: c.starts_at_ms,
        }),
        State::Paused => Some(ApiError::Paused),
        State::Ended => Some(ApiError::Ended),
        State::Live if c.starts_at_ms.is_some_and(|s| now < s - EDGE_MS) => {
            Some(ApiError::NotStarted {
                starts_at_ms: c.starts_at_ms,
            })
        }
        State::Live if c.ends_at_ms.is_some_and(|e| now >= e + EDGE_MS) => Some(ApiError::Ended),
        State::Live if v.refuses_as_sold_out() => Some(ApiError::SoldOut),
        State::Live => None,
    };
    Verdict {
        partitions: c.spec.partitions,
        limit: c.spec.per_user_limit,
        needs_ticket: c.spec.require_ticket,
        pass_ttl_s: c.spec.queue.map(|q| q.pass_ttl_s),
        refusal,
        restocks: v.restocks,
    }
}

/// A purchase the shard did not refuse: its body, its ticket, then Redis.
async fn buy(
    shard: &Shard,
    id: &str,
    req: Request<Incoming>,
    user: Rc<str>,
    idem: Option<String>,
    verdict: Verdict,
) -> Result<Reply, ApiError> {
    let Verdict {
        partitions,
        limit,
        needs_ticket,
        pass_ttl_s,
        restocks,
        ..
    } = verdict;
    let body: PurchaseBody = read_json(shard, req).await?;
    if body.quantity < 1 {
        return Err(ApiError::BadRequest("quantity: must be at least 1".into()));
    }

    if body.quantity > i64::from(limit) {
        return Err(ApiError::OverLimit { limit });
    }
    // With a waiting room the ticket is its pass (the proof of work, if any, was the
    // price of joining); else the proof of work's ticket, for a campaign that asks one.
    let (ticket, pass_expires_ms) = if needs_ticket || pass_ttl_s.is_some() {
        let verified = body
            .ticket
            .as_deref()
            .and_then(|t| {
                pow::verify_ticket_until(shard.settings().keys.tickets(), t, seckill_core::now_ms())
                    .ok()
            })
            .filter(|(t, _)| {
                let pass = queue::is_pass(&t.id);
                t.campaign == id && *t.user == *user && pass == pass_ttl_s.is_some()
            });
        let Some((t, expires_ms)) = verified else {
            let refusal = ApiError::TicketInvalid;
            return refused(shard, id, partitions, &user, idem.as_deref(), refusal).await;
        };
        (Some(t.id), pass_ttl_s.map(|_| expires_ms))
    } else {
        (None, None)
    };
    shard.admit_purchase(id, std::time::Instant::now())?;
    let outcome = shard
        .store()
        .purchase(
            PurchaseRequest {
                campaign: id,
                partitions,
                user: &user,
                quantity: body.quantity as u32,
                idempotency_key: idem.as_deref(),
                ticket: ticket.as_deref(),
                pass_expires_ms,
            },
            || shard.refuses_as_sold_out(id),
        )
        .boxed_local()
        .await?;
    let refusal = match outcome {
        Purchase::Held {
            order_id,
            pay_by_ms,
        } => return Ok(held(&order_id, pay_by_ms)),
        Purchase::Refused(r) => r,
    };
    // Sold out and not enough are proven between the script's rounds, not by the script:
    // a twin of this request (the same key, on another connection) may have been answered
    // meanwhile, so its first answer is asked for.
    match refusal {
        Refusal::SoldOut => shard.mark_sold_out(id, restocks),
        Refusal::NotEnough { .. } => {}
        other => return Err(other.into()),
    }
    refused(
        shard,
        id,
        partitions,
        &user,
        idem.as_deref(),
        refusal.into(),
    )
    .await
}
