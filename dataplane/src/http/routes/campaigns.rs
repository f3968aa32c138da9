//! `GET /api/campaigns` and `GET /api/campaigns/{id}`: what is on sale, from the shard's
//! copy of the control plane (stock at most a poll interval old). Drafts are not shown.

use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::shard::{CampaignView, Shard};
use seckill_core::api::{CampaignInfo, QueueInfo};
use seckill_core::campaign::State;

fn published(v: &CampaignView) -> bool {
    !matches!(v.campaign.state, State::Draft | State::Arming)
}

fn info(v: &CampaignView) -> CampaignInfo<'_> {
    let c = &v.campaign;
    CampaignInfo {
        id: c.spec.id.as_str().into(),
        name: c.spec.name.as_str().into(),
        state: v.public_state().into(),
        starts_at_ms: c.starts_at_ms,
        ends_at_ms: c.ends_at_ms,
        total: c.spec.total,
        remaining: v.remaining,
        per_user_limit: c.spec.per_user_limit,
        price_cents: c.spec.price_cents,
        currency: c.spec.currency.as_str().into(),
        payment_url: c.spec.payment_url.as_deref().map(Into::into),
        require_ticket: c.spec.require_ticket,
        queue: c.spec.queue.map(|spec| {
            let q = v.queue.as_ref();
            QueueInfo {
                admit_per_s: seckill_core::protocol::admit_rate(q, &spec),
                pass_ttl_s: spec.pass_ttl_s,
                drawn: q.is_some_and(|q| q.drawn_ms.is_some()),
                admitted: q.map_or(0, |q| q.admitted),
                sold_out: q.is_some_and(|q| q.sold_out),
                seed_sha1: q.and_then(|q| q.seed_sha1.clone()),
                pre: q.filter(|q| q.drawn_ms.is_some()).map(|q| q.pre),
                seed: q.and_then(|q| q.seed.clone()),
            }
        }),
    }
}

/// A published campaign as its JSON, for the events stream.
pub fn info_json(v: &CampaignView) -> Option<String> {
    published(v)
        .then(|| serde_json::to_string(&info(v)).ok())
        .flatten()
}

pub fn list(shard: &Shard) -> Result<Reply, ApiError> {
    let all = shard.campaigns();
    let list: Vec<CampaignInfo> = all.iter().filter(|v| published(v)).map(info).collect();
    Ok(ok(&list))
}

pub fn get(shard: &Shard, id: &str) -> Result<Reply, ApiError> {
    shard
        .with_campaign(id, |v| published(v).then(|| ok(&info(v))))
        .flatten()
        .ok_or(ApiError::UnknownCampaign)
}
