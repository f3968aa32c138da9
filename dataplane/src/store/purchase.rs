//! The purchase: one script on the user's partition; when that partition is dry, stock is
//! pulled from the others and the purchase retried, until it succeeds or every partition
//! is proven empty.
//!
//! Purchases of one partition go to Redis in its lane: while one call of the partition
//! is on its way, the purchases that arrive wait, and go together in the next call, which
//! the script answers one by one in their order. Redis pays a call's fixed part (the
//! partition's read, the clock, the counters' write) once for all of them.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use futures::channel::oneshot;
use futures::future::{FutureExt, LocalBoxFuture, Shared};

use super::transfer::Refill;
use super::{int, items, text, Store, StoreError};
use crate::metrics::ShardMetrics;
use seckill_core::keys::{partition_of, PartitionKeys};
use seckill_core::scripts;

/// What a shopper asked for, once authenticated and validated.
#[derive(Debug, Clone, Copy)]
pub struct PurchaseRequest<'a> {
    pub campaign: &'a str,
    pub partitions: u32,
    pub user: &'a str,
    pub quantity: u32,
    pub idempotency_key: Option<&'a str>,
    /// The id of the ticket this purchase uses (campaigns that require one).
    pub ticket: Option<&'a str>,
    /// With a waiting room's pass as the ticket: when the pass ends (ms). Its use goes
    /// into the partition's pass log, which the admission counts.
    pub pass_expires_ms: Option<i64>,
}

/// Every way a purchase can end. Refusals are outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purchase {
    Held {
        order_id: String,
        pay_by_ms: i64,
    },
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
    /// The ticket was used by an earlier purchase, or the pass ran out.
    TicketUsed,
}

/// Rounds of "dry, refill, retry" before a purchase gives up as contended.
const MAX_ROUNDS: usize = 48;

/// After this many rounds lost to other buyers of the same partition, a purchase waits a
/// random moment before the next, so the crowd at the last units spreads out.
const PATIENT_ROUNDS: usize = 4;

/// Most purchases one call carries; more wait for the next.
const MOST_IN_A_CALL: usize = 64;

/// Calls of one lane on their way at once. With one, Redis waits while the shard answers
/// a call's shoppers and reads the next ones', and the shard waits while Redis runs the
/// call; with two, each works while the other does. The link keeps them in order, so the
/// calls still come back in the order they were made.
const CALLS_IN_FLIGHT: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Done(Purchase),
    /// The partition could not serve the quantity, as the shard's `n`th purchase call
    /// to come back found it.
    Dry(u64),
}

/// One purchase's part of a call: the script's five arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub user: String,
    pub quantity: u32,
    pub idempotency_key: Option<String>,
    pub ticket: Option<String>,
    pub pass_expires_ms: Option<i64>,
}

impl Queued {
    fn of(req: &PurchaseRequest<'_>) -> Self {
        Queued {
            user: req.user.into(),
            quantity: req.quantity,
            idempotency_key: req.idempotency_key.map(Into::into),
            ticket: req.ticket.map(Into::into),
            pass_expires_ms: req.pass_expires_ms,
        }
    }
}

/// The purchase script's call for `purchases` on partition `p` of `campaign` (whose keys
/// are `keys`): `EVALSHA` with its keys and arguments, each written once into the
/// command's buffer.
pub fn purchase_call(
    keys: &PartitionKeys,
    p: u32,
    campaign: &str,
    purchases: &[Queued],
) -> redis::Cmd {
    use std::fmt::Write;
    let tag = keys.tag();
    let mut cmd = redis::Cmd::with_capacity(13 + 5 * purchases.len(), 200 + 64 * purchases.len());
    let mut scratch = String::with_capacity(96);
    let mut arg = |cmd: &mut redis::Cmd, f: std::fmt::Arguments<'_>| {
        scratch.clear();
        scratch.write_fmt(f).ok();
        cmd.arg(scratch.as_str());
    };
    cmd.arg("EVALSHA").arg(scripts::PURCHASE.get_hash()).arg(6);
    for suffix in ["part", "buyers", "holds", "events", "once", "passes"] {
        arg(&mut cmd, format_args!("{tag}:{suffix}"));
    }
    cmd.arg(campaign).arg(p);
    arg(&mut cmd, format_args!("{tag}:order:"));
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

/// A purchase waiting in its partition's lane, and where its answer goes.
struct Waiting {
    purchase: Queued,
    answer: oneshot::Sender<Result<Attempt, StoreError>>,
}

/// A partition's lane: the tasks making its calls (each makes one call at a time, and at
/// most [`CALLS_IN_FLIGHT`] run), and who waits for the next call.
#[derive(Default)]
struct Lane {
    calls: u8,
    waiting: VecDeque<Waiting>,
}

type Refilled = Shared<LocalBoxFuture<'static, Result<Refill, StoreError>>>;

/// The lanes of a shard's partitions, by the partition's hash tag (a lane goes when its
/// last purchase is answered); the refills on their way, by partition and quantity, each
/// with the count of calls back when it began; and the metrics that count the calls.
#[derive(Clone, Default)]
pub struct Lanes(Rc<LanesInner>);

#[derive(Default)]
struct LanesInner {
    lanes: RefCell<HashMap<String, Lane>>,
    calls_back: Cell<u64>,
    refills: RefCell<HashMap<(String, u32), (u64, Refilled)>>,
    metrics: RefCell<Option<Arc<ShardMetrics>>>,
}

impl Store {
    /// Counts the purchase calls into `m`.
    pub fn observe_purchase_calls(&self, m: Arc<ShardMetrics>) {
        *self.lanes.0.metrics.borrow_mut() = Some(m);
    }

    /// The first answer to an earlier request with this `Idempotency-Key`, if there was
    /// one: (order id, payment deadline).
    pub async fn first_answer(
        &self,
        campaign: &str,
        partitions: u32,
        user: &str,
        key: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let keys = PartitionKeys::new(campaign, partition_of(user, partitions));
        let first = self
            .conn
            .query(
                redis::cmd("HGET")
                    .arg(keys.once())
                    .arg(PartitionKeys::first_answer_field(user, key)),
            )
            .await?;
        let Some(order_id) = text(Some(&first)) else {
            return Ok(None);
        };
        let pay_by = self
            .conn
            .query(
                redis::cmd("HGET")
                    .arg(keys.order(&order_id))
                    .arg("pay_by_ms"),
            )
            .await?;
        Ok(Some((order_id, int(Some(&pay_by)).unwrap_or(0))))
    }

    /// Holds `req`'s units, or says why not. Found dry, the partition is refilled from
    /// the others and the purchase tried again, round after round. Before each refill it
    /// asks `sold_out`, whether the shard now answers the campaign's purchases sold out
    /// (proven empty by another purchase's refill, or by a poll): then it ends sold out,
    /// as an arrival would, rather than spend rounds on Redis to prove it again. After a
    /// refill that moved units it tries them first, whatever the shard says: they came
    /// after any proof.
    pub async fn purchase(
        &self,
        req: PurchaseRequest<'_>,
        sold_out: impl Fn() -> bool,
    ) -> Result<Purchase, StoreError> {
        let p = partition_of(req.user, req.partitions);
        let keys = PartitionKeys::new(req.campaign, p);
        for round in 0..MAX_ROUNDS {
            if round >= PATIENT_ROUNDS {
                let ms = rand::random_range(0..=round.min(10) as u64);
                glommio::timer::Timer::new(std::time::Duration::from_millis(ms)).await;
            }
            let seen = match self.attempt(&keys, p, &req).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Dry(seen) => seen,
            };
            if sold_out() {
                return Ok(Purchase::SoldOut);
            }
            match self
                .refill_after(&keys, req.campaign, req.partitions, p, req.quantity, seen)
                .await?
            {
                Refill::Moved => {}
                // Units wait for the partition's lease to end (a second at most): the
                // shopper is told to come back, not kept while every round parks more.
                Refill::Lent => return Ok(Purchase::Contended),
                Refill::Empty { remaining: 0 } => return Ok(Purchase::SoldOut),
                Refill::Empty { remaining } => return Ok(Purchase::NotEnough { remaining }),
            }
        }
        Ok(Purchase::Contended)
    }

    /// One try on the partition, in its lane: sent at once when the lane has room for
    /// another call, else with the others waiting when a call on its way comes back.
    async fn attempt(
        &self,
        keys: &PartitionKeys,
        p: u32,
        req: &PurchaseRequest<'_>,
    ) -> Result<Attempt, StoreError> {
        let (answer, answered) = oneshot::channel();
        let room = {
            let mut lanes = self.lanes.0.lanes.borrow_mut();
            let lane = lanes.entry(keys.tag().to_string()).or_default();
            lane.waiting.push_back(Waiting {
                purchase: Queued::of(req),
                answer,
            });
            let room = lane.calls < CALLS_IN_FLIGHT;
            lane.calls += u8::from(room);
            room
        };
        if room {
            // Each of the lane's calls is made by a task of its own, which no shopper
            // leaving can cancel halfway, and which ends when nobody waits.
            let (store, keys, campaign) = (self.clone(), keys.clone(), req.campaign.to_string());
            glommio::spawn_local(
                async move { while store.call_lane(&keys, p, &campaign).await {} },
            )
            .detach();
        }
        answered.await.unwrap_or(Err(StoreError::Unavailable))
    }

    /// Pulls stock to partition `p` for a purchase its lane found dry in the shard's
    /// `seen`th call back. A refill of the partition for the same quantity that began
    /// since then serves it too: the purchases of one call, found dry together, share
    /// one refill rather than each pulling from every partition at once. A refill begun
    /// earlier is not joined: its proof that every partition is empty may predate the
    /// dry answer, and units may have come back since.
    async fn refill_after(
        &self,
        keys: &PartitionKeys,
        campaign: &str,
        partitions: u32,
        p: u32,
        qty: u32,
        seen: u64,
    ) -> Result<Refill, StoreError> {
        let key = (keys.tag().to_string(), qty);
        let on_its_way = self
            .lanes
            .0
            .refills
            .borrow()
            .get(&key)
            .filter(|(began, _)| *began >= seen)
            .map(|(_, f)| f.clone());
        let refilled = match on_its_way {
            Some(f) => f,
            None => {
                let began = self.lanes.0.calls_back.get();
                let (store, campaign, mine) = (self.clone(), campaign.to_string(), key.clone());
                let f = async move {
                    let r = store.refill(&campaign, partitions, p, qty).await;
                    let mut refills = store.lanes.0.refills.borrow_mut();
                    if refills.get(&mine).is_some_and(|(b, _)| *b == began) {
                        refills.remove(&mine);
                    }
                    r
                }
                .boxed_local()
                .shared();
                self.lanes
                    .0
                    .refills
                    .borrow_mut()
                    .insert(key, (began, f.clone()));
                f
            }
        };
        refilled.await
    }

    /// Sends the lane's waiting purchases as one call and answers each. `false` when
    /// nobody was waiting: the task ends, and with its last task the lane.
    async fn call_lane(&self, keys: &PartitionKeys, p: u32, campaign: &str) -> bool {
        let (purchases, answers): (Vec<Queued>, Vec<_>) = {
            let mut lanes = self.lanes.0.lanes.borrow_mut();
            let Some(lane) = lanes.get_mut(keys.tag()) else {
                return false;
            };
            if lane.waiting.is_empty() {
                lane.calls -= 1;
                if lane.calls == 0 {
                    lanes.remove(keys.tag());
                }
                return false;
            }
            let n = lane.waiting.len().min(MOST_IN_A_CALL);
            lane.waiting
                .drain(..n)
                .map(|w| (w.purchase, w.answer))
                .unzip()
        };
        if let Some(m) = &*self.lanes.0.metrics.borrow() {
            m.purchase_call(purchases.len());
        }
        let reply = self
            .run_script(&purchase_call(keys, p, campaign, &purchases))
            .await;
        let back = self.lanes.0.calls_back.get() + 1;
        self.lanes.0.calls_back.set(back);
        match reply.and_then(|v| outcomes(v, answers.len())) {
            Ok(outcomes) => {
                for (answer, o) in answers.into_iter().zip(outcomes) {
                    let o = o.map(|a| match a {
                        Attempt::Dry(_) => Attempt::Dry(back),
                        done => done,
                    });
                    let _ = answer.send(o);
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.clone()));
                }
            }
        }
        true
    }
}

/// The script's answers, three items each, one per purchase of the call.
fn outcomes(reply: redis::Value, n: usize) -> Result<Vec<Result<Attempt, StoreError>>, StoreError> {
    let v = items(reply)?;
    if v.len() != 3 * n {
        return Err(StoreError::Protocol(format!(
            "purchase script answered {} items for {n} purchases",
            v.len()
        )));
    }
    Ok(v.chunks(3).map(outcome).collect())
}

fn outcome(v: &[redis::Value]) -> Result<Attempt, StoreError> {
    let what = text(v.first()).unwrap_or_default();
    Ok(Attempt::Done(match what.as_str() {
        "held" => Purchase::Held {
            order_id: text(v.get(1))
                .ok_or_else(|| StoreError::Protocol("held without an order id".into()))?,
            pay_by_ms: int(v.get(2)).unwrap_or(0),
        },
        "dry" => return Ok(Attempt::Dry(0)),
        "limit_reached" => Purchase::LimitReached,
        "not_started" => Purchase::NotStarted {
            starts_at_ms: int(v.get(1)).filter(|t| *t > 0),
        },
        "ended" => Purchase::Ended,
        "paused" => Purchase::Paused,
        "unknown" => Purchase::UnknownCampaign,
        "ticket_used" | "ticket_expired" | "pass_required" => Purchase::TicketUsed,
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
            return Err(StoreError::Protocol(e));
        }
        other => {
            return Err(StoreError::Protocol(format!(
                "purchase script answered '{other}'"
            )))
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(user: &str, key: Option<&str>, ticket: Option<&str>, pass: Option<i64>) -> Queued {
        Queued {
            user: user.into(),
            quantity: 2,
            idempotency_key: key.map(Into::into),
            ticket: ticket.map(Into::into),
            pass_expires_ms: pass,
        }
    }

    #[test]
    fn the_purchase_call_carries_every_key_and_each_purchase_in_order() {
        let keys = PartitionKeys::new("spring", 5);
        let batch = [
            queued("ann", None, None, None),
            queued("bob", Some("k-1"), None, None),
            queued("cy", Some("k-2"), Some("q17"), Some(1_800_000_000_000)),
        ];
        let mut args = vec![
            keys.part(),
            keys.buyers(),
            keys.holds(),
            keys.events(),
            keys.once(),
            keys.pass_log(),
            "spring".into(),
            "5".into(),
            keys.order_prefix(),
        ];
        for q in &batch {
            args.extend([
                q.user.clone(),
                q.quantity.to_string(),
                q.idempotency_key.clone().unwrap_or_default(),
                q.ticket.clone().unwrap_or_default(),
                q.pass_expires_ms.map(|t| t.to_string()).unwrap_or_default(),
            ]);
        }
        let (ks, rest) = args.split_at(6);
        let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        assert_eq!(
            purchase_call(&keys, 5, "spring", &batch).get_packed_command(),
            super::super::script_call(&scripts::PURCHASE, &ks, &rest).get_packed_command()
        );
    }

    #[test]
    fn each_purchase_of_a_call_gets_its_own_answer() {
        let s = |x: &str| redis::Value::BulkString(x.as_bytes().to_vec());
        let reply = redis::Value::Array(vec![
            s("held"),
            s("spring.5.9"),
            s("1800000000000"),
            s("dry"),
            s("0"),
            s(""),
            s("limit_reached"),
            s("2"),
            s(""),
        ]);
        let got = outcomes(reply, 3).expect("three answers");
        assert_eq!(
            got,
            [
                Ok(Attempt::Done(Purchase::Held {
                    order_id: "spring.5.9".into(),
                    pay_by_ms: 1_800_000_000_000
                })),
                Ok(Attempt::Dry(0)),
                Ok(Attempt::Done(Purchase::LimitReached)),
            ]
        );
        let short = redis::Value::Array(vec![s("held"), s("spring.5.9"), s("1")]);
        assert!(
            outcomes(short, 2).is_err(),
            "an answer missing is an error for all"
        );
        let old = redis::Value::Array(vec![s("layout"), s("1"), s("")]);
        let e = outcomes(old, 1).expect("one answer").remove(0);
        assert!(
            matches!(&e, Err(StoreError::Protocol(m)) if m.contains("layout 1")),
            "{e:?}"
        );
    }
}
