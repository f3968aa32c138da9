//! `GET /api/orders/{id}`: an order, to its owner only; anyone else gets 404, so order
//! ids reveal nothing.

use hyper::body::Incoming;
use hyper::Request;

use crate::http::reply::{ok, Reply};
use crate::http::{authenticate, ApiError};
use crate::keys::{OrderId, PartitionKeys};
use crate::shard::Shard;
use crate::store::{int, items, text};

pub async fn get(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = authenticate(shard, &req)?;
    let oid = OrderId::parse(id).ok_or(ApiError::NotFound)?;
    let key = PartitionKeys::new(oid.campaign, oid.partition).order(id);
    let fields = shard
        .store
        .conn
        .query(
            redis::cmd("HMGET")
                .arg(key)
                .arg(&["user", "qty", "status", "pay_by_ms"]),
        )
        .await
        .and_then(items)
        .map_err(|_| ApiError::Unavailable)?;
    if text(fields.first()).as_deref() != Some(user.as_str()) {
        return Err(ApiError::NotFound);
    }
    Ok(ok(&serde_json::json!({
        "order_id": id,
        "campaign_id": oid.campaign,
        "user_id": user,
        "quantity": int(fields.get(1)).unwrap_or(0),
        "status": text(fields.get(2)).unwrap_or_default(),
        "pay_by_ms": int(fields.get(3)).unwrap_or(0),
    })))
}
