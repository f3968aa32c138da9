//! `POST /api/campaigns/{id}/challenge` and `POST /api/campaigns/{id}/ticket`: the
//! proof-of-work gate of campaigns with `require_ticket`. A challenge is single-use and
//! bound to the user; solving it earns a signed ticket, bound to user and campaign,
//! short-lived. A user holds at most one live ticket per campaign (asking again returns
//! it), live tickets never exceed `ticket_factor × total`, and none are issued for drafts
//! or earlier than `tickets.window_s` before the opening (for a campaign with a waiting
//! room, where the ticket is the price of joining, from the moment it is armed).

use hyper::body::Incoming;
use hyper::Request;
use rand::RngExt;

use crate::guard::pow::{self, Ticket};
use crate::http::body::{before_body, read_json, REFUSED_CLIENT_WAIT};
use crate::http::extract;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::http::request::SolutionBody;
use crate::shard::Shard;
use crate::store::{Challenge, Issue, NewTicket};
use seckill_core::api;
use seckill_core::campaign::State;

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// Whether the campaign takes tickets now, by the shard's copy: a refusal here spares
/// the shopper a proof of work. The issuing script decides again, atomically.
fn open_for_tickets(shard: &Shard, id: &str) -> Result<(), ApiError> {
    shard
        .with_campaign(id, |v| {
            let c = &v.campaign;
            let window_ms = window_ms(shard, c);
            match c.state {
                State::Draft | State::Arming => Err(ApiError::UnknownCampaign),
                _ if !c.spec.require_ticket => Err(ApiError::NoTickets),
                State::Ended => Err(ApiError::Ended),
                // Armed, or started ahead of a set opening: the window counts either way.
                _ if c
                    .starts_at_ms
                    .is_some_and(|s| seckill_core::now_ms() < s - window_ms) =>
                {
                    Err(ApiError::NotStarted {
                        starts_at_ms: c.starts_at_ms,
                    })
                }
                _ => Ok(()),
            }
        })
        .ok_or(ApiError::UnknownCampaign)?
}

/// How long before the opening tickets are issued: `tickets.window_s`, or for the
/// pre-queue of a waiting room all the time it is open.
fn window_ms(shard: &Shard, c: &seckill_core::campaign::Campaign) -> i64 {
    if c.spec.queue.is_some() {
        i64::MAX / 4
    } else {
        shard.settings().tickets.window_s as i64 * 1000
    }
}

pub async fn challenge(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = extract::user(shard, req.headers())?;
    open_for_tickets(shard, id)?;
    let t = &shard.settings().tickets;
    let challenge_id = random_hex(16);
    let c = Challenge {
        user: user.to_string(),
        prefix: random_hex(8),
        difficulty: t.difficulty,
    };
    shard
        .store()
        .open_challenge(id, &challenge_id, &c, t.challenge_ttl_s)
        .await?;
    Ok(ok(&api::Challenge {
        challenge_id: challenge_id.into(),
        prefix: c.prefix.into(),
        difficulty: c.difficulty,
        expires_at_ms: seckill_core::now_ms() + t.challenge_ttl_s as i64 * 1000,
    }))
}

pub async fn ticket(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = match extract::user(shard, req.headers())
        .and_then(|u| open_for_tickets(shard, id).map(|()| u))
    {
        Ok(user) => user,
        Err(e) => return before_body(req, Err(e), REFUSED_CLIENT_WAIT).await,
    };
    let s: SolutionBody = read_json(shard, req).await?;
    if s.challenge_id.len() != 32 || s.nonce.is_empty() || s.nonce.len() > 64 {
        return Err(ApiError::ChallengeInvalid);
    }
    let c = shard
        .store()
        .challenge(id, &s.challenge_id)
        .await?
        .ok_or(ApiError::ChallengeInvalid)?;
    if *c.user != *user || !pow::solves(&c.prefix, &s.nonce, c.difficulty) {
        return Err(ApiError::ChallengeInvalid);
    }
    let t = &shard.settings().tickets;
    let expires = seckill_core::now_ms() + t.ticket_ttl_s as i64 * 1000;
    let ticket = pow::sign_ticket(
        shard.settings().keys.tickets(),
        &Ticket {
            campaign: id.to_string(),
            user: user.to_string(),
            id: random_hex(12),
        },
        expires,
    );
    let issued = shard
        .store()
        .issue_ticket(&NewTicket {
            campaign: id,
            challenge: &s.challenge_id,
            user: &user,
            ticket: &ticket,
            expires_ms: expires,
            window_ms: shard
                .with_campaign(id, |v| window_ms(shard, &v.campaign))
                .unwrap_or(t.window_s as i64 * 1000),
        })
        .await?;
    let (ticket, expires) = match issued {
        Issue::Granted => (ticket, expires),
        Issue::Same { ticket, expires_ms } => (ticket, expires_ms),
        Issue::Gone => return Err(ApiError::ChallengeInvalid),
        Issue::Exhausted => return Err(ApiError::TicketsExhausted),
        Issue::Unknown => return Err(ApiError::UnknownCampaign),
        Issue::Ended => return Err(ApiError::Ended),
        Issue::Early { starts_at_ms } => {
            return Err(ApiError::NotStarted {
                starts_at_ms: Some(starts_at_ms),
            })
        }
    };
    Ok(ok(&api::Ticket {
        ticket: ticket.into(),
        expires_at_ms: expires,
    }))
}
