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
use super::{int, text, Store, StoreError};
use crate::metrics::ShardMetrics;
use seckill_core::keys::{once, order, partition_of, PartitionKeys};
use seckill_core::purchase::{self as script, Answer, Queued, Refusal};

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

/// How a purchase ended: held, or refused (refusals are outcomes, not errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purchase {
    Held { order_id: String, pay_by_ms: i64 },
    Refused(Refusal),
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

impl Attempt {
    /// The script's answer to a purchase of the shard's `back`th call to come back.
    fn of(answer: Answer, back: u64) -> Self {
        match answer {
            Answer::Held {
                order_id,
                pay_by_ms,
            } => Attempt::Done(Purchase::Held {
                order_id,
                pay_by_ms,
            }),
            Answer::Dry => Attempt::Dry(back),
            Answer::Refused(r) => Attempt::Done(Purchase::Refused(r)),
        }
    }
}

fn queued(req: &PurchaseRequest<'_>) -> Queued {
    Queued {
        user: req.user.into(),
        quantity: req.quantity,
        idempotency_key: req.idempotency_key.map(Into::into),
        ticket: req.ticket.map(Into::into),
        pass_expires_ms: req.pass_expires_ms,
    }
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
                    .arg(once::first_answer(user, key)),
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
                    .arg(order::PAY_BY_MS),
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
                return Ok(Purchase::Refused(Refusal::SoldOut));
            }
            match self
                .refill_after(&keys, req.campaign, req.partitions, p, req.quantity, seen)
                .await?
            {
                Refill::Moved => {}
                // Units wait for the partition's lease to end (a second at most): the
                // shopper is told to come back, not kept while every round parks more.
                Refill::Lent => return Ok(Purchase::Refused(Refusal::Contended)),
                Refill::Empty { remaining: 0 } => return Ok(Purchase::Refused(Refusal::SoldOut)),
                Refill::Empty { remaining } => {
                    return Ok(Purchase::Refused(Refusal::NotEnough { remaining }))
                }
            }
        }
        Ok(Purchase::Refused(Refusal::Contended))
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
                purchase: queued(req),
                answer,
            });
            let room = lane.calls < CALLS_IN_FLIGHT;
            lane.calls += u8::from(room);
            debug_assert!(
                lane.calls <= CALLS_IN_FLIGHT,
                "a lane never runs more calls"
            );
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
                debug_assert!(lane.calls > 0, "the task ending is one of the lane's calls");
                lane.calls -= 1;
                if lane.calls == 0 {
                    lanes.remove(keys.tag());
                }
                return false;
            }
            let n = lane.waiting.len().min(MOST_IN_A_CALL);
            debug_assert!(
                (1..=MOST_IN_A_CALL).contains(&n),
                "a call carries 1 to the most"
            );
            lane.waiting
                .drain(..n)
                .map(|w| (w.purchase, w.answer))
                .unzip()
        };
        if let Some(m) = &*self.lanes.0.metrics.borrow() {
            m.purchase_call(purchases.len());
        }
        let reply = self
            .run_script(&script::call(keys, p, campaign, &purchases))
            .await;
        let back = self.lanes.0.calls_back.get() + 1;
        self.lanes.0.calls_back.set(back);
        let read = reply.and_then(|v| Ok(script::answers(v, answers.len())?));
        match read {
            Ok(said) => {
                for (answer, a) in answers.into_iter().zip(said) {
                    let a = a.map(|a| Attempt::of(a, back)).map_err(StoreError::from);
                    let _ = answer.send(a);
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
