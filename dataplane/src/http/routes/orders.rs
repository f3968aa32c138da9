//! `GET /api/orders/{id}`: an order, to its owner only; anyone else gets 404, so order
//! ids reveal nothing. `GET /api/orders`: the bearer's own orders, newest first, from
//! their index (which the order workers keep as they store each order).

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
    let body = view(shard, id, &user).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(&body))
}

/// Most orders one list shows.
const LISTED: isize = 50;

pub async fn list(shard: &Shard, req: Request<Incoming>) -> Result<Reply, ApiError> {
    let user = extract::user(shard, req.headers())?;
    let campaign = match req.uri().query() {
        None => None,
        Some(q) => Some(campaign_filter(q)?),
    };
    let ids = shard
        .read(
            redis::cmd("ZREVRANGE")
                .arg(seckill_core::keys::user_orders(&user))
                .arg(0)
                .arg(LISTED - 1),
        )
        .await
        .and_then(items)?;
    let mut orders = Vec::new();
    for id in ids.iter().filter_map(|v| text(Some(v))) {
        if campaign
            .as_deref()
            .is_some_and(|c| OrderId::parse(&id).is_none_or(|o| o.campaign != c))
        {
            continue;
        }
        if let Some(o) = view(shard, &id, &user).await? {
            orders.push(serde_json::to_value(&o).map_err(|e| {
                ApiError::BadRequest(format!("order {id} does not serialize: {e}"))
            })?);
        }
    }
    Ok(ok(&serde_json::json!({ "orders": orders })))
}

/// The campaign of `?campaign=ID`, the one query the list takes.
fn campaign_filter(query: &str) -> Result<String, ApiError> {
    match query.split_once('=') {
        Some(("campaign", id)) if seckill_core::campaign::valid_id(id) => Ok(id.to_string()),
        _ => Err(ApiError::BadRequest(
            "query: campaign=<campaign id> is the only one".into(),
        )),
    }
}

/// An order as its owner sees it; `None` when it is not `user`'s (or not at all).
async fn view(
    shard: &Shard,
    id: &str,
    user: &str,
) -> Result<Option<api::Order<'static>>, ApiError> {
    let Some(oid) = OrderId::parse(id) else {
        return Ok(None);
    };
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
    if text(fields.first()).as_deref() != Some(user) {
        return Ok(None);
    }
    let status = text(fields.get(2)).unwrap_or_default();
    let delivered = status == "delivered";
    let mut body = api::Order {
        order_id: id.to_string().into(),
        campaign_id: oid.campaign.to_string().into(),
        user_id: user.to_string().into(),
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
    Ok(Some(body))
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
