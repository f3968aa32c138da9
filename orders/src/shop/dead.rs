//! The dead letters: webhooks the shop refused for good (a 4xx other than 408 or 429),
//! kept until an operator puts them back in the outbox.

use redis::Commands;

use super::{enqueue, Outgoing};
use seckill_core::connection::Connection;
use seckill_core::keys::SHOP_DEAD;

/// A dead letter: a webhook the shop refused for good.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct DeadLetter {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: serde_json::Value,
    pub status: u16,
    pub at_ms: i64,
}

/// The dead letters, oldest first.
pub fn dead_letters(con: &mut Connection) -> redis::RedisResult<Vec<DeadLetter>> {
    let all: Vec<(String, String)> = con.hgetall(SHOP_DEAD)?;
    let mut out: Vec<DeadLetter> = all
        .into_iter()
        .filter_map(|(_, v)| serde_json::from_str(&v).ok())
        .collect();
    out.sort_by_key(|d| d.at_ms);
    Ok(out)
}

/// Puts dead letters back in the outbox (their ids unchanged), `None` for all; returns
/// how many.
pub fn replay(con: &mut Connection, id: Option<&str>, cap: u64) -> redis::RedisResult<usize> {
    let letters: Vec<DeadLetter> = dead_letters(con)?
        .into_iter()
        .filter(|d| id.is_none_or(|i| d.id == i))
        .collect();
    for d in &letters {
        let kind = KINDS
            .iter()
            .find(|k| **k == d.kind)
            .copied()
            .unwrap_or("order.event");
        enqueue(
            con,
            &[Outgoing {
                id: d.id.clone(),
                kind,
                data: d.data.clone(),
            }],
            cap,
        )?;
        let _: () = con.hdel(SHOP_DEAD, &d.id)?;
    }
    Ok(letters.len())
}

/// Every kind of webhook the shop hears.
pub const KINDS: [&str; 7] = [
    "order.held",
    "order.paid",
    "order.delivered",
    "order.expired",
    "refund.due",
    "refund.done",
    "payment.unmatched",
];
