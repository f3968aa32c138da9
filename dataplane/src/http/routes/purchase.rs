//! `POST /api/campaigns/{id}/purchase {"quantity"}`: everything the shard can decide alone
//! is decided here; only a purchase that may succeed reaches Redis, as one script call.

use futures::FutureExt;
use hyper::body::Incoming;
use hyper::Request;

use crate::campaign::State;
use crate::guard::pow;
use crate::http::reply::{ok, Reply};
use crate::http::request::{self, PurchaseBody};
use crate::http::{authenticate, before_body, read_json, ApiError, IDEMPOTENCY_KEY};
use crate::shard::Shard;
use crate::store::{Purchase, PurchaseRequest};
use seckill_core::{api, queue};

/// Within this long of the opening or the end, the shard leaves the verdict to the
/// purchase script, which reads Redis's clock: the shard's own is corrected to Redis's
/// only to within half a round trip (see [`crate::clock`]), and read coarsely, a tick
/// behind.
const EDGE_MS: i64 = 50;

fn held(order_id: &str, pay_by_ms: i64) -> Reply {
    ok(&api::Held {
        order_id: order_id.into(),
        status: "held".into(),
        pay_by_ms,
    })
}

/// The first answer to an earlier request with this `Idempotency-Key`, when there was
/// one; else `refusal`. Redis is asked unless the user's partition is lent to the shard
/// and the shard's copy of its first answers shows there is none.
async fn first_answer_or(
    shard: &Shard,
    id: &str,
    partitions: u32,
    user: &str,
    idem: Option<&str>,
    refusal: ApiError,
) -> Result<Reply, ApiError> {
    let Some(key) = idem else {
        return Err(refusal);
    };
    if !shard
        .leases
        .borrow()
        .may_have_first_answer(id, partitions, user, key)
    {
        return Err(refusal);
    }
    let first = shard
        .store
        .first_answer(id, partitions, user, key)
        // Redis calls' futures are boxed where they are made: inline, they would set the
        // size of every purchase's future, refusals' included.
        .boxed_local()
        .await
        .map_err(|e| {
            tracing::debug!(campaign = id, error = %e, "idempotency lookup failed in redis");
            ApiError::Unavailable
        })?;
    match first {
        Some((order_id, pay_by_ms)) => Ok(held(&order_id, pay_by_ms)),
        None => Err(refusal),
    }
}

pub async fn post(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = match authenticate(shard, &req) {
        Ok(user) => user,
        Err(e) => return before_body(req, e).await,
    };
    let idem =
        match request::idempotency_key(req.headers().get(IDEMPOTENCY_KEY).map(|v| v.as_bytes())) {
            Ok(key) => key,
            Err(e) => return before_body(req, e).await,
        };
    let body: PurchaseBody = read_json(shard, req).await?;
    if body.quantity < 1 {
        return Err(ApiError::BadRequest("quantity: must be at least 1".into()));
    }

    // The shard's own verdict, taken before any Redis call.
    let (partitions, limit, needs_ticket, pass_ttl_s, refusal) = shard
        .with_campaign(id, |v| {
            let c = &v.campaign;
            let now = crate::clock::coarse_now_ms();
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
                State::Live if c.ends_at_ms.is_some_and(|e| now >= e + EDGE_MS) => {
                    Some(ApiError::Ended)
                }
                // A pass reserves a unit: its holder hears `sold_out` from no one, and
                // the script has the last word for anyone.
                State::Live if v.sold_out && c.spec.queue.is_none() => Some(ApiError::SoldOut),
                State::Live => None,
            };
            (
                c.spec.partitions,
                c.spec.per_user_limit,
                c.spec.require_ticket,
                c.spec.queue.map(|q| q.pass_ttl_s),
                refusal,
            )
        })
        .ok_or(ApiError::UnknownCampaign)?;

    // A retry gets its first answer whatever happened since (sold out, paused, ended,
    // its pass run out). A purchase that goes to Redis has it from the script, which
    // looks first; only a refusal decided here on the shard needs the lookup.
    if let Some(refusal) = refusal {
        return first_answer_or(shard, id, partitions, &user, idem.as_deref(), refusal).await;
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
            .and_then(|t| pow::verify_ticket_until(&shard.settings.secret, t, crate::now_ms()).ok())
            .filter(|(t, _)| {
                let pass = queue::is_pass(&t.id);
                t.campaign == id && *t.user == *user && pass == pass_ttl_s.is_some()
            });
        let Some((t, expires_ms)) = verified else {
            let refusal = ApiError::TicketInvalid;
            return first_answer_or(shard, id, partitions, &user, idem.as_deref(), refusal).await;
        };
        (Some(t.id), pass_ttl_s.map(|_| expires_ms))
    } else {
        (None, None)
    };
    shard
        .guard
        .borrow_mut()
        .admit(id, std::time::Instant::now())?;
    let outcome = shard
        .store
        .purchase(PurchaseRequest {
            campaign: id,
            partitions,
            user: &user,
            quantity: body.quantity as u32,
            idempotency_key: idem.as_deref(),
            ticket: ticket.as_deref(),
            pass_expires_ms,
        })
        .boxed_local()
        .await
        .map_err(|e| {
            tracing::debug!(campaign = id, error = %e, "purchase failed in redis");
            ApiError::Unavailable
        })?;
    match outcome {
        Purchase::Held {
            order_id,
            pay_by_ms,
        } => Ok(held(&order_id, pay_by_ms)),
        Purchase::SoldOut => {
            shard.mark_sold_out(id);
            Err(ApiError::SoldOut)
        }
        Purchase::NotEnough { remaining } => Err(ApiError::NotEnough { remaining }),
        Purchase::LimitReached => Err(ApiError::LimitReached),
        Purchase::NotStarted { starts_at_ms } => Err(ApiError::NotStarted { starts_at_ms }),
        Purchase::Ended => Err(ApiError::Ended),
        Purchase::Paused => Err(ApiError::Paused),
        Purchase::UnknownCampaign => Err(ApiError::UnknownCampaign),
        Purchase::Contended => Err(ApiError::Busy { retry_after_s: 1 }),
        Purchase::TicketUsed => Err(ApiError::TicketInvalid),
    }
}
