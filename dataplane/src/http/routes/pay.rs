//! `POST /api/orders/{id}/pay`: the demo payment provider (`payments.provider = "demo"`),
//! for demos and tests on a loopback listener. The owner's payment is a webhook the node
//! signs to itself, taken through the provider's own door
//! ([`super::payments::take`]); without the demo provider the route does not exist (404).

use hyper::body::Incoming;
use hyper::Request;

use crate::http::extract;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::shard::Shard;
use crate::store::{int, items, text};
use seckill_core::api;
use seckill_core::keys::{order, OrderId, PartitionKeys};
use seckill_core::webhooks::Headers;

pub async fn post(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let Some(signer) = shard.settings().payments.demo.as_ref() else {
        return Err(ApiError::NotFound);
    };
    let user = extract::user(shard, req.headers())?;
    let oid = OrderId::parse(id).ok_or(ApiError::NotFound)?;
    let key = PartitionKeys::new(oid.campaign, oid.partition).order(id);
    let fields = shard
        .read(redis::cmd("HMGET").arg(key).arg(&[order::USER, order::QTY]))
        .await
        .and_then(items)?;
    if text(fields.first()).as_deref() != Some(&*user) {
        return Err(ApiError::NotFound);
    }
    let units = int(fields.get(1)).unwrap_or(0).max(0) as u64;
    let (price, currency) = shard
        .with_campaign(oid.campaign, |v| {
            (
                v.campaign.spec.price_cents,
                v.campaign.spec.currency.clone(),
            )
        })
        .ok_or(ApiError::NotFound)?;
    // One payment an order: paying again is the same payment, taken once.
    let payment = format!("demo_{id}");
    let body = serde_json::json!({
        "type": "payment.succeeded",
        "timestamp": seckill_core::campaign::format_instant_ms(seckill_core::now_ms()),
        "data": {
            "order_id": id,
            "amount_cents": price * units,
            "currency": currency,
            "payment_id": payment,
        },
    })
    .to_string();
    let ts = seckill_core::now_ms() / 1000;
    let sig = signer.sign(&payment, ts, body.as_bytes());
    let ts = ts.to_string();
    let headers = Headers {
        id: Some(&payment),
        timestamp: Some(&ts),
        signature: Some(&sig),
    };
    let taken = super::payments::take(shard, headers, body.as_bytes()).await?;
    match taken.status.as_str() {
        "paid" | "delivered" => {
            let paid_ms = shard
                .read(
                    redis::cmd("HGET")
                        .arg(PartitionKeys::new(oid.campaign, oid.partition).order(id))
                        .arg(order::PAID_MS),
                )
                .await
                .ok()
                .and_then(|v| int(Some(&v)))
                .unwrap_or(0);
            Ok(ok(&api::Paid {
                order_id: id.into(),
                status: "paid".into(),
                paid_ms,
            }))
        }
        _ => Err(ApiError::Expired),
    }
}
