//! `POST /api/session {"user_id"}`: the demo token issuer. In production an identity
//! provider signs tokens with the shared secret; this route exists only when enabled.

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
    let body: SessionBody = read_json(shard, req).await?;
    if !auth::valid_user_id(&body.user_id) {
        return Err(ApiError::BadRequest(
            "user_id: 1-64 characters of letters, digits and _ - @ + .".into(),
        ));
    }
    let expires = seckill_core::now_ms() + shard.settings().token_ttl.as_millis() as i64;
    let token = auth::issue_token(&shard.settings().secret, &body.user_id, expires);
    Ok(ok(&api::Session {
        token: token.into(),
        user_id: body.user_id.into(),
        expires_at_ms: expires,
    }))
}
