//! `POST /api/campaigns/{id}/queue` (join) and `GET /api/campaigns/{id}/queue` (look): a
//! shopper's standing in a campaign's waiting room. A look that brings its receipt is
//! answered from the admission counter the shard follows while the shopper waits, so
//! Redis sees each shopper a handful of times however often they look: at the join,
//! once after the draw to learn the place, and once when admitted to fetch the pass.

use hyper::body::Incoming;
use hyper::Request;

use crate::guard::pow;
use crate::http::body::{before_body, read_json, REFUSED_CLIENT_WAIT};
use crate::http::extract;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::shard::Shard;
use crate::store::{Look, Standing};
use seckill_core::api::{JoinBody, QueueStatus};
use seckill_core::campaign::State;
use seckill_core::queue;

/// How long a receipt is good for: a day (a look with a stale one goes to Redis).
const RECEIPT_TTL_MS: i64 = 24 * 3600 * 1000;

/// What the shard knows of a room: whether the campaign has one and is past its draft,
/// its state, and the counters it follows.
struct Room {
    state: State,
    require_ticket: bool,
    drawn: bool,
    admitted: u64,
    sold_out: bool,
    admit_per_s: u32,
}

fn room(shard: &Shard, id: &str) -> Result<Room, ApiError> {
    shard
        .with_campaign(id, |v| {
            let c = &v.campaign;
            if matches!(c.state, State::Draft | State::Arming) {
                return Err(ApiError::UnknownCampaign);
            }
            let spec = c.spec.queue.ok_or(ApiError::NoQueue)?;
            let q = v.queue.as_ref();
            Ok(Room {
                state: c.state,
                require_ticket: c.spec.require_ticket,
                drawn: q.is_some_and(|q| q.drawn_ms.is_some()),
                admitted: q.map_or(0, |q| q.admitted),
                sold_out: q.is_some_and(|q| q.sold_out),
                admit_per_s: seckill_core::protocol::admit_rate(q, &spec),
            })
        })
        .ok_or(ApiError::UnknownCampaign)?
}

fn status(state: &'static str) -> QueueStatus<'static> {
    QueueStatus {
        state: state.into(),
        position: None,
        eta_ms: None,
        ticket: None,
        ticket_expires_at_ms: None,
        place: None,
        receipt: None,
    }
}

/// A waiting shopper's answer: their place against the admissions so far.
fn waiting(
    shard: &Shard,
    id: &str,
    user: &str,
    place: u64,
    admitted: u64,
    sold_out: bool,
    rate: u32,
) -> QueueStatus<'static> {
    let receipt = queue::sign_receipt(
        shard.settings().keys.receipts(),
        id,
        user,
        place,
        seckill_core::now_ms() + RECEIPT_TTL_MS,
    );
    let mut s = status(if sold_out { "sold_out" } else { "waiting" });
    if place > 0 {
        let position = place.saturating_sub(admitted).max(1);
        s.place = Some(place);
        if !sold_out {
            s.position = Some(position);
            s.eta_ms = Some(queue::eta_ms(position - 1, rate));
        }
    }
    s.receipt = Some(receipt.into());
    s
}

/// The answer to what the room's script said.
fn answer(shard: &Shard, id: &str, user: &str, look: Look, rate: u32) -> Result<Reply, ApiError> {
    Ok(ok(&match look.standing {
        Standing::Unknown => return Err(ApiError::UnknownCampaign),
        Standing::Ended => status("ended"),
        Standing::NotJoined => status("not_joined"),
        Standing::Pre => waiting(shard, id, user, 0, 0, look.sold_out, rate),
        Standing::Waiting { place } => {
            waiting(shard, id, user, place, look.admitted, look.sold_out, rate)
        }
        Standing::Admitted { place, expires_ms } => {
            let mut s = status("admitted");
            s.place = Some(place);
            s.ticket = Some(
                queue::sign_pass(shard.settings().keys.tickets(), id, user, place, expires_ms)
                    .into(),
            );
            s.ticket_expires_at_ms = Some(expires_ms);
            s
        }
    }))
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

pub async fn join(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let checked = extract::user(shard, req.headers()).and_then(|u| room(shard, id).map(|r| (u, r)));
    let (user, room) = match checked {
        Ok(v) => v,
        Err(e) => return before_body(req, Err(e), REFUSED_CLIENT_WAIT).await,
    };
    let body: JoinBody = read_json(shard, req).await?;
    if room.state == State::Ended {
        return Ok(ok(&status("ended")));
    }
    // With both a room and proof of work, the work is the price of a place in line.
    if room.require_ticket {
        body.ticket
            .as_deref()
            .and_then(|t| {
                pow::verify_ticket(shard.settings().keys.tickets(), t, seckill_core::now_ms()).ok()
            })
            .filter(|t| t.campaign == id && *t.user == *user && !queue::is_pass(&t.id))
            .ok_or(ApiError::TicketInvalid)?;
    }
    let look = shard
        .store()
        .queue(id, &user, true, &random_hex(16))
        .await?;
    answer(shard, id, &user, look, room.admit_per_s)
}

pub async fn look(shard: &Shard, id: &str, req: &Request<Incoming>) -> Result<Reply, ApiError> {
    let user = extract::user(shard, req.headers())?;
    let room = room(shard, id)?;
    if room.state == State::Ended {
        return Ok(ok(&status("ended")));
    }
    let receipt = req
        .headers()
        .get("queue-receipt")
        .and_then(|v| v.to_str().ok())
        .and_then(|r| {
            queue::verify_receipt(
                shard.settings().keys.receipts(),
                r,
                id,
                &user,
                seckill_core::now_ms(),
            )
        });
    // The receipt answers while the shopper is still waiting as the shard last saw the
    // room; their turn, or a draw the receipt predates, takes a look in Redis.
    match receipt {
        Some(0) if !room.drawn => {
            return Ok(ok(&waiting(
                shard,
                id,
                &user,
                0,
                0,
                room.sold_out,
                room.admit_per_s,
            )))
        }
        Some(place) if place > room.admitted && room.drawn => {
            return Ok(ok(&waiting(
                shard,
                id,
                &user,
                place,
                room.admitted,
                room.sold_out,
                room.admit_per_s,
            )))
        }
        _ => {}
    }
    let look = shard.store().queue(id, &user, false, "").await?;
    answer(shard, id, &user, look, room.admit_per_s)
}
