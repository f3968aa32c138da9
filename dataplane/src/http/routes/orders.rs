//! `GET /api/orders/{id}`: an order, to its owner only; anyone else gets 404, so order
//! ids reveal nothing.

use hyper::body::Incoming;
use hyper::Request;

use crate::http::extract;
use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use crate::shard::Shard;
use crate::store::{int, items, text};
use seckill_core::api;
use seckill_core::auth;
use seckill_core::keys::{order, OrderId, PartitionKeys};

pub async fn get(shard: &Shard, id: &str, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = extract::user(shard, req.headers())?;
    let oid = OrderId::parse(id).ok_or(ApiError::NotFound)?;
    let key = PartitionKeys::new(oid.campaign, oid.partition).order(id);
    let fields = shard
        .read(redis::cmd("HMGET").arg(key).arg(&[
            order::USER,
            order::QTY,
            order::STATUS,
            order::PAY_BY_MS,
            order::PAID_MS,
            order::LICENSE_KEY,
            order::LICENSE_KEYS,
            order::REFUNDS,
        ]))
        .await
        .and_then(items)?;
    if text(fields.first()).as_deref() != Some(&*user) {
        return Err(ApiError::NotFound);
    }
    let status = text(fields.get(2)).unwrap_or_default();
    let delivered = status == "delivered";
    let mut body = api::Order {
        order_id: id.into(),
        campaign_id: oid.campaign.into(),
        user_id: (*user).into(),
        quantity: int(fields.get(1)).unwrap_or(0),
        status: status.into(),
        pay_by_ms: int(fields.get(3)).unwrap_or(0),
        paid_ms: int(fields.get(4)).filter(|t| *t > 0),
        license_key: None,
        license_keys: None,
        refunds_due: refunds_due(shard, &oid, text(fields.get(7))).await?,
        download_url: None,
        download_expires_at_ms: None,
    };
    if delivered {
        let first = text(fields.get(5)).unwrap_or_default();
        let keys = text(fields.get(6)).map_or_else(
            || vec![first.clone()],
            |k| k.lines().map(String::from).collect(),
        );
        body.license_key = Some(first.into());
        body.license_keys = Some(keys);
        let has_file = shard
            .with_campaign(oid.campaign, |v| v.campaign.spec.content_file.is_some())
            .unwrap_or(false);
        if has_file {
            // A fresh link on every look: it expires, the order does not.
            let expires = seckill_core::now_ms() + shard.settings().download_ttl.as_millis() as i64;
            let token = auth::sign_download(shard.settings().keys.downloads(), id, expires);
            body.download_url = Some(format!("/dl/{token}").into());
            body.download_expires_at_ms = Some(expires);
        }
    }
    Ok(ok(&body))
}

/// The payments of an order still owed back, from its partition's payments.
async fn refunds_due(
    shard: &Shard,
    oid: &OrderId<'_>,
    ids: Option<String>,
) -> Result<Vec<api::Refund>, ApiError> {
    let Some(ids) = ids.filter(|i| !i.is_empty()) else {
        return Ok(Vec::new());
    };
    let key = PartitionKeys::new(oid.campaign, oid.partition).payments();
    let mut cmd = redis::cmd("HMGET");
    cmd.arg(key);
    for id in ids.split(' ') {
        cmd.arg(id);
    }
    let records = shard.read(&cmd).await.and_then(items)?;
    Ok(records
        .iter()
        .filter_map(|r| serde_json::from_str::<crate::store::PaymentRecord>(&text(Some(r))?).ok())
        .filter(|r| r.status == "refund_due")
        .map(|r| api::Refund {
            amount_cents: r.amount_cents.parse().unwrap_or(0),
            payment_id: r.payment_id,
            currency: r.currency,
            reason: r.reason,
        })
        .collect())
}
