//! `POST /api/orders/{id}/pay`: the owner pays a held order (simulated: no provider, the
//! real shape). Idempotent: paying again answers the same and changes nothing.

use hyper::body::Incoming;
use hyper::Request;

use crate::http::extract;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::shard::Shard;
use crate::store::Payment;
use seckill_core::api;
use seckill_core::keys::OrderId;

pub async fn post(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = extract::user(shard, req.headers())?;
    let order = OrderId::parse(id).ok_or(ApiError::NotFound)?;
    let paid = shard.store().pay(&order, id, &user).await?;
    match paid {
        Payment::Paid { paid_ms } => Ok(ok(&api::Paid {
            order_id: id.into(),
            status: "paid".into(),
            paid_ms,
        })),
        Payment::Expired => Err(ApiError::Expired),
        Payment::NotFound => Err(ApiError::NotFound),
    }
}
