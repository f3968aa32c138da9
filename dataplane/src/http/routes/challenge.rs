//! `POST /api/campaigns/{id}/challenge` and `POST /api/campaigns/{id}/ticket`: the
//! proof-of-work gate of campaigns with `require_ticket`. A challenge is single-use and
//! bound to the user; solving it earns a signed ticket, bound to user and campaign,
//! short-lived, and no more than `ticket_factor × total` are ever issued.

use hyper::body::Incoming;
use hyper::Request;
use rand::Rng;

use crate::guard::pow::{self, Ticket};
use crate::http::reply::{ok, Reply};
use crate::http::request::SolutionBody;
use crate::http::{authenticate, read_json, ApiError};
use crate::shard::Shard;
use crate::store::{Challenge, Issue};

fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// The campaign's ticket cap, when it uses tickets.
fn cap(shard: &Shard, id: &str) -> Result<u64, ApiError> {
    shard
        .with_campaign(id, |v| {
            let s = &v.campaign.spec;
            s.require_ticket
                .then(|| u64::from(s.ticket_factor) * s.total)
        })
        .ok_or(ApiError::UnknownCampaign)?
        .ok_or(ApiError::NoTickets)
}

fn unavailable(e: crate::store::StoreError) -> ApiError {
    tracing::debug!(error = %e, "ticket store failed");
    ApiError::Unavailable
}

pub async fn challenge(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = authenticate(shard, &req)?;
    cap(shard, id)?;
    let t = &shard.settings.tickets;
    let challenge_id = random_hex(16);
    let c = Challenge {
        user,
        prefix: random_hex(8),
        difficulty: t.difficulty,
    };
    shard
        .store
        .open_challenge(id, &challenge_id, &c, t.challenge_ttl_s)
        .await
        .map_err(unavailable)?;
    Ok(ok(&serde_json::json!({
        "challenge_id": challenge_id,
        "prefix": c.prefix,
        "difficulty": c.difficulty,
        "expires_at_ms": crate::now_ms() + t.challenge_ttl_s as i64 * 1000,
    })))
}

pub async fn ticket(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = authenticate(shard, &req)?;
    let cap = cap(shard, id)?;
    let s: SolutionBody = read_json(shard, req).await?;
    if s.challenge_id.len() != 32 || s.nonce.is_empty() || s.nonce.len() > 64 {
        return Err(ApiError::ChallengeInvalid);
    }
    let c = shard
        .store
        .challenge(id, &s.challenge_id)
        .await
        .map_err(unavailable)?
        .ok_or(ApiError::ChallengeInvalid)?;
    if c.user != user || !pow::solves(&c.prefix, &s.nonce, c.difficulty) {
        return Err(ApiError::ChallengeInvalid);
    }
    match shard
        .store
        .issue_ticket(id, &s.challenge_id, cap)
        .await
        .map_err(unavailable)?
    {
        Issue::Granted => {}
        Issue::Gone => return Err(ApiError::ChallengeInvalid),
        Issue::Exhausted => return Err(ApiError::TicketsExhausted),
    }
    let ttl_ms = shard.settings.tickets.ticket_ttl_s as i64 * 1000;
    let expires = crate::now_ms() + ttl_ms;
    let ticket = pow::sign_ticket(
        &shard.settings.secret,
        &Ticket {
            campaign: id.to_string(),
            user,
            id: random_hex(12),
        },
        expires,
    );
    Ok(ok(
        &serde_json::json!({ "ticket": ticket, "expires_at_ms": expires }),
    ))
}
