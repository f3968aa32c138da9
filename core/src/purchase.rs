//! The purchase script's call and its reply, beside the script (`scripts/purchase.lua`):
//! the keys come from [`PartitionKeys`] and the answers are read into one typed
//! [`Answer`] per purchase, the only place the script's words are read.

use crate::keys::PartitionKeys;
use crate::reply::{int, text};
use crate::scripts;

/// One purchase's part of a call: the script's five arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub user: String,
    pub quantity: u32,
    pub idempotency_key: Option<String>,
    pub ticket: Option<String>,
    pub pass_expires_ms: Option<i64>,
}

/// Every way a purchase is refused. The script answers all but three, which the rounds
/// of refills between its calls prove: [`Refusal::SoldOut`], [`Refusal::NotEnough`] and
/// [`Refusal::Contended`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every unit is held or sold.
    SoldOut,
    /// Some units remain, fewer than asked for.
    NotEnough {
        remaining: i64,
    },
    LimitReached,
    NotStarted {
        starts_at_ms: Option<i64>,
    },
    Ended,
    Paused,
    UnknownCampaign,
    /// Stock kept moving away for too many rounds; the client may retry.
    Contended,
    /// The ticket was used by an earlier purchase, the pass ran out, or the campaign
    /// sells through a waiting room and none was shown.
    TicketUsed,
}

/// How the script answered one purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A unit is held (also the replay of an earlier `Idempotency-Key`).
    Held {
        order_id: String,
        pay_by_ms: i64,
    },
    /// This partition cannot serve the quantity: stock may be pulled from the others.
    Dry,
    Refused(Refusal),
}

/// A reply the script's call cannot be read as: a protocol error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// The purchase script's call for `purchases` on partition `p` of `campaign` (whose keys
/// are `keys`): `EVALSHA` with its keys and arguments, each written once into the
/// command's buffer.
pub fn call(keys: &PartitionKeys, p: u32, campaign: &str, purchases: &[Queued]) -> redis::Cmd {
    use std::fmt::Write;
    let tag = keys.tag();
    let mut cmd = redis::Cmd::with_capacity(13 + 5 * purchases.len(), 200 + 64 * purchases.len());
    let mut scratch = String::with_capacity(96);
    let mut arg = |cmd: &mut redis::Cmd, f: std::fmt::Arguments<'_>| {
        scratch.clear();
        scratch.write_fmt(f).ok();
        cmd.arg(scratch.as_str());
    };
    cmd.arg("EVALSHA")
        .arg(scripts::PURCHASE.get_hash())
        .arg(KEYS.len());
    for suffix in KEYS {
        arg(&mut cmd, format_args!("{tag}:{suffix}"));
    }
    cmd.arg(campaign).arg(p);
    arg(&mut cmd, format_args!("{tag}:{}", PartitionKeys::ORDER));
    for q in purchases {
        cmd.arg(q.user.as_str())
            .arg(q.quantity)
            .arg(q.idempotency_key.as_deref().unwrap_or(""))
            .arg(q.ticket.as_deref().unwrap_or(""));
        match q.pass_expires_ms {
            Some(ms) => cmd.arg(ms),
            None => cmd.arg(""),
        };
    }
    cmd
}

/// The script's keys, in its order (`KEYS[1]`…).
const KEYS: [&str; 6] = [
    PartitionKeys::PART,
    PartitionKeys::BUYERS,
    PartitionKeys::HOLDS,
    PartitionKeys::EVENTS,
    PartitionKeys::ONCE,
    PartitionKeys::PASS_LOG,
];

/// The script's answers, three items each, one per purchase of the call of `n`.
pub fn answers(
    reply: redis::Value,
    n: usize,
) -> Result<Vec<Result<Answer, Unreadable>>, Unreadable> {
    let redis::Value::Array(v) = reply else {
        return Err(Unreadable(format!("expected an array, got {reply:?}")));
    };
    if v.len() != 3 * n {
        return Err(Unreadable(format!(
            "purchase script answered {} items for {n} purchases",
            v.len()
        )));
    }
    Ok(v.chunks(3).map(answer).collect())
}

fn answer(v: &[redis::Value]) -> Result<Answer, Unreadable> {
    let what = text(v.first()).unwrap_or_default();
    let refused = |r| Ok(Answer::Refused(r));
    match what.as_str() {
        "held" => Ok(Answer::Held {
            order_id: text(v.get(1))
                .ok_or_else(|| Unreadable("held without an order id".into()))?,
            pay_by_ms: int(v.get(2)).unwrap_or(0),
        }),
        "dry" => Ok(Answer::Dry),
        "limit_reached" => refused(Refusal::LimitReached),
        "not_started" => refused(Refusal::NotStarted {
            starts_at_ms: int(v.get(1)).filter(|t| *t > 0),
        }),
        "ended" => refused(Refusal::Ended),
        "paused" => refused(Refusal::Paused),
        "unknown" => refused(Refusal::UnknownCampaign),
        "ticket_used" | "ticket_expired" | "pass_required" => refused(Refusal::TicketUsed),
        "layout" => {
            let e = format!(
                "the partition was armed with key layout {}; this release sells layout {}",
                text(v.get(1)).unwrap_or_default(),
                PartitionKeys::LAYOUT
            );
            thread_local!(static SAID: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
            if !SAID.replace(true) {
                tracing::warn!("{e}: its purchases answer 503 here; finish the sale with the release that armed it");
            }
            Err(Unreadable(e))
        }
        other => Err(Unreadable(format!("purchase script answered '{other}'"))),
    }
}

#[cfg(test)]
mod tests;
