//! `POST /api/payments/webhook`: the payment provider's events (Standard Webhooks). The
//! signature is checked before anything else; a taken event is answered 2xx only once
//! its outcome is in Redis and, where the order's master has replicas, on
//! `payments.wait_replicas` of them, so that the provider retries anything less.

use hyper::body::Incoming;
use hyper::Request;
use serde::Deserialize;

use crate::http::body::read_bytes;
use crate::http::reply::{ok, ApiError, Reply};
use crate::payments::EVENT_TYPES;
use crate::shard::Shard;
use crate::store::{PaymentEvent, PaymentTerms, StoreError};
use seckill_core::api::PaymentTaken;
use seckill_core::keys::{OrderId, PartitionKeys, UNMATCHED_PAYMENTS};
use seckill_core::webhooks::{Headers, MAX_ID_BYTES};

/// The spec's envelope.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    data: serde_json::Value,
}

/// A payment event's `data`.
#[derive(Deserialize)]
struct PaymentData {
    order_id: String,
    /// In the currency's minor units.
    amount_cents: u64,
    currency: String,
    payment_id: String,
}

/// The largest amount taken, in minor units: beyond any price times any quantity.
const MAX_AMOUNT: u64 = 1_000_000_000_000;

pub async fn webhook(shard: &Shard, req: Request<Incoming>) -> Result<Reply, ApiError> {
    if let Err(wait) = shard.admit_webhook() {
        return Err(ApiError::RateLimited {
            retry_after_s: wait.as_secs_f64().ceil().max(1.0) as u64,
        });
    }
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (id, ts, sig) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let body = read_bytes(shard, req.into_body()).await?;
    let headers = Headers {
        id: id.as_deref(),
        timestamp: ts.as_deref(),
        signature: sig.as_deref(),
    };
    Ok(ok(&take(shard, headers, &body).await?))
}

/// Verifies a webhook and takes its event: the webhook route's work, and the demo
/// provider's, whose webhooks come this way too.
pub(crate) async fn take(
    shard: &Shard,
    headers: Headers<'_>,
    body: &[u8],
) -> Result<PaymentTaken, ApiError> {
    let payments = &shard.settings().payments;
    let now_s = seckill_core::now_ms() / 1000;
    let webhook_id = match payments.verifier.verify(headers, body, now_s) {
        Ok(id) => id,
        Err(e) => {
            tracing::info!(reason = %e, "payment webhook refused");
            return Err(ApiError::InvalidSignature);
        }
    };
    let envelope: Envelope = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid webhook body: {e}")))?;
    let Some(&(_, kind)) = EVENT_TYPES.iter().find(|(t, _)| *t == envelope.kind) else {
        // Providers send more kinds than these; answered, so they are not retried.
        return Ok(PaymentTaken {
            outcome: "ignored".into(),
            status: "absent".into(),
            order_id: None,
        });
    };
    let data: PaymentData = serde_json::from_value(envelope.data)
        .map_err(|e| ApiError::BadRequest(format!("invalid payment event data: {e}")))?;
    check(&data)?;
    let event = PaymentEvent {
        webhook_id,
        kind,
        order_id: &data.order_id,
        payment_id: &data.payment_id,
        amount_cents: data.amount_cents,
        currency: &data.currency,
    };
    let order = OrderId::parse(&data.order_id);
    let terms = order.as_ref().and_then(|o| {
        shard.with_campaign(o.campaign, |v| {
            (
                v.campaign.spec.price_cents,
                v.campaign.spec.currency.clone(),
            )
        })
    });
    let (Some(order), Some((price, currency))) = (order, terms) else {
        return unmatched(shard, &event).await;
    };
    let terms = PaymentTerms {
        unit_price_cents: price,
        currency: &currency,
        pending_grace_ms: payments.pending_grace.as_millis() as u64,
    };
    let taken = shard.store().take_payment(&order, &event, terms).await?;
    match taken.outcome.as_str() {
        "unmatched" => return unmatched(shard, &event).await,
        // A hold past its deadline on a lent partition: its unit comes back with the
        // lease, within seconds.
        "retry" => return Err(ApiError::Busy { retry_after_s: 2 }),
        _ => {}
    }
    if taken.replicas > 0 {
        let key = PartitionKeys::new(order.campaign, order.partition).order(&data.order_id);
        replicated(shard, &key).await?;
    }
    tracing::info!(order = %data.order_id, payment = %data.payment_id, kind, outcome = %taken.outcome, status = %taken.status, "payment event taken");
    Ok(PaymentTaken {
        outcome: taken.outcome,
        status: taken.status,
        order_id: Some(data.order_id),
    })
}

/// A signed event that makes no sense is the provider's bug or a forgery with a stolen
/// key: refused, named.
fn check(d: &PaymentData) -> Result<(), ApiError> {
    let id_ok = |s: &str| {
        !s.is_empty() && s.len() <= MAX_ID_BYTES && s.bytes().all(|b| b.is_ascii_graphic())
    };
    if !id_ok(&d.payment_id) {
        return Err(ApiError::BadRequest(
            "data.payment_id: 1-128 printable ASCII characters without spaces".into(),
        ));
    }
    if !id_ok(&d.order_id) {
        return Err(ApiError::BadRequest(
            "data.order_id: 1-128 printable ASCII characters without spaces".into(),
        ));
    }
    if !seckill_core::campaign::valid_currency(&d.currency) {
        return Err(ApiError::BadRequest(
            "data.currency: an ISO 4217 code of three capital letters".into(),
        ));
    }
    if d.amount_cents > MAX_AMOUNT {
        return Err(ApiError::BadRequest(format!(
            "data.amount_cents: at most {MAX_AMOUNT}"
        )));
    }
    Ok(())
}

/// A payment for an order nobody knows: kept for operators (the first record of each
/// payment id), answered 2xx so that the provider stops retrying.
async fn unmatched(shard: &Shard, e: &PaymentEvent<'_>) -> Result<PaymentTaken, ApiError> {
    let record = serde_json::json!({
        "order_id": e.order_id,
        "payment_id": e.payment_id,
        "amount_cents": e.amount_cents.to_string(),
        "currency": e.currency,
        "status": "unmatched",
        "reason": e.kind,
        "ms": seckill_core::now_ms().to_string(),
    });
    let replicas = shard
        .store()
        .eval(
            &seckill_core::scripts::RECORD_UNMATCHED,
            &[UNMATCHED_PAYMENTS],
            &[e.payment_id, &record.to_string()],
        )
        .await?;
    if let Some(shop) = &shard.settings().shop {
        // The shop hears of it too (a retry of the same payment, under the same id).
        let data = serde_json::json!({
            "order_id": e.order_id, "payment_id": e.payment_id,
            "amount_cents": e.amount_cents, "currency": e.currency, "status": "unmatched",
        });
        shard
            .read(
                redis::cmd("XADD")
                    .arg(seckill_core::keys::SHOP_OUTBOX)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(shop.cap)
                    .arg("*")
                    .arg("id")
                    .arg(format!("unmatched:{}", e.payment_id))
                    .arg("type")
                    .arg("payment.unmatched")
                    .arg("data")
                    .arg(data.to_string()),
            )
            .await?;
    }
    if matches!(replicas, redis::Value::Int(n) if n > 0) {
        replicated(shard, UNMATCHED_PAYMENTS).await?;
    }
    tracing::warn!(
        order = e.order_id,
        payment = e.payment_id,
        "payment for an unknown order recorded as unmatched"
    );
    Ok(PaymentTaken {
        outcome: "unmatched".into(),
        status: "absent".into(),
        order_id: Some(e.order_id.to_string()),
    })
}

/// Waits until `payments.wait_replicas` replicas of `key`'s master hold what this shard
/// wrote to it; 503 when they do not in time. A master without replicas has none to wait
/// for.
async fn replicated(shard: &Shard, key: &str) -> Result<(), ApiError> {
    let p = &shard.settings().payments;
    if p.wait_replicas == 0 {
        return Ok(());
    }
    let timeout = p.wait_timeout.as_millis() as u64;
    let confirmed = shard
        .store()
        .conn
        .wait_near(key, p.wait_replicas, timeout)
        .await?;
    if confirmed < i64::from(p.wait_replicas) {
        tracing::warn!(
            confirmed,
            wanted = p.wait_replicas,
            "a payment's outcome is not on enough replicas; the provider will retry"
        );
        return Err(StoreError::NotReplicated.into());
    }
    Ok(())
}
