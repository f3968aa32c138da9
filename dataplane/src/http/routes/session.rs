//! `POST /api/session {"user_id"}`: the demo token issuer. In production the shop's
//! identity provider signs shoppers' JWTs; the demo issuer signs the same kind of token
//! with an Ed25519 key of the node's own (`kid` `seckill-demo`), which the nodes trust only
//! while it is on, and this route exists only then. Its tokens are checked on the shop's
//! path: the same issuer, audience and times.

use hyper::body::Incoming;
use hyper::Request;

use crate::http::body::read_json;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::http::request::SessionBody;
use crate::shard::Shard;
use seckill_core::api;
use seckill_core::auth;

pub async fn post(shard: &Shard, req: Request<Incoming>) -> Result<Reply, ApiError> {
    if !shard.settings().demo_issuer {
        return Err(ApiError::NotFound);
    }
    // It listens on loopback only; a request a proxy forwarded (either header a proxy
    // names its client in, RFC 7239's or the older one) comes from farther away.
    let h = req.headers();
    if h.contains_key("x-forwarded-for") || h.contains_key("forwarded") {
        return Err(ApiError::Forbidden(
            "the demo issuer answers local requests only, not a proxy's",
        ));
    }
    let body: SessionBody = read_json(shard, req).await?;
    if !auth::valid_user_id(&body.user_id) {
        return Err(ApiError::BadRequest(
            "user_id: 1-64 characters of letters, digits and _ - @ + .".into(),
        ));
    }
    let expires = seckill_core::now_ms() + shard.settings().token_ttl.as_millis() as i64;
    let s = shard.settings();
    let rules = &s.identity.rules;
    let token =
        s.keys
            .demo_issuer()
            .shopper_token(&body.user_id, &rules.issuer, &rules.audience, expires);
    Ok(ok(&api::Session {
        token: token.into(),
        user_id: body.user_id.into(),
        expires_at_ms: expires,
    }))
}
