//! Moving stock between partitions, crash-safe in three steps, each one script on one slot:
//! `out` takes units off the source and logs the transfer there; `in` applies it on the
//! target once (by id); `ack` clears the log on the source. Whoever finds a logged
//! transfer — the shard that started it, another shard, the rebalancer after a crash —
//! may finish it, because `in` and `ack` are idempotent.

use futures::future::{join, join_all};
use std::collections::HashMap;

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::{part, PartitionKeys};
use seckill_core::scripts;

/// One partition's counters, as read at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionProbe {
    pub stock: i64,
    /// Units sent away whose transfer is not acknowledged yet.
    pub transit: i64,
    /// Bumped every time units arrive; proves nothing moved between two reads.
    pub inflow: i64,
    /// Until when (ms, Redis's clock) the partition is lent to a shard and takes no units.
    pub lent_until_ms: i64,
}

impl PartitionProbe {
    /// Whether the partition is lent now, by the sale's clock (to within its offset from
    /// Redis's): units sent to it wait for the lease to end.
    pub fn lent(&self) -> bool {
        self.lent_until_ms > seckill_core::now_ms()
    }
}

#[derive(Clone)]
pub(crate) enum Refill {
    /// Units arrived (or may have): try the purchase again.
    Moved,
    /// Units are on their way but wait for the target's lease to end.
    Lent,
    /// Every partition was empty at one instant but for `remaining` units on the target.
    Empty { remaining: i64 },
}

/// Units a transfer moved, and its id when it moved any.
struct Out {
    source: u32,
    moved: i64,
    id: String,
    probe: PartitionProbe,
}

impl Store {
    pub async fn probe(&self, campaign: &str, p: u32) -> Result<PartitionProbe, StoreError> {
        let v = items(
            self.conn
                .query(
                    redis::cmd("HMGET")
                        .arg(PartitionKeys::new(campaign, p).part())
                        .arg(&[part::STOCK, part::TRANSIT, part::INFLOW, part::LEASE_MS]),
                )
                .await?,
        )?;
        Ok(PartitionProbe {
            stock: int(v.first()).unwrap_or(0),
            transit: int(v.get(1)).unwrap_or(0),
            inflow: int(v.get(2)).unwrap_or(0),
            lent_until_ms: int(v.get(3)).unwrap_or(0),
        })
    }

    pub async fn probe_all(
        &self,
        campaign: &str,
        partitions: u32,
    ) -> Result<Vec<PartitionProbe>, StoreError> {
        join_all((0..partitions).map(|p| self.probe(campaign, p)))
            .await
            .into_iter()
            .collect()
    }

    async fn transfer_out(
        &self,
        campaign: &str,
        source: u32,
        target: u32,
        want: u32,
    ) -> Result<Out, StoreError> {
        let k = PartitionKeys::new(campaign, source);
        let (part, log) = (k.part(), k.transfers_out());
        let v = items(
            self.eval(
                &scripts::TRANSFER_OUT,
                &[&part, &log],
                &[&target.to_string(), &want.to_string(), &source.to_string()],
            )
            .await?,
        )?;
        Ok(Out {
            source,
            moved: int(v.first()).unwrap_or(0),
            id: text(v.get(1)).unwrap_or_default(),
            probe: PartitionProbe {
                stock: int(v.get(2)).unwrap_or(0),
                transit: int(v.get(3)).unwrap_or(0),
                inflow: int(v.get(4)).unwrap_or(0),
                lent_until_ms: 0,
            },
        })
    }

    /// Applies a logged transfer on its target, then clears it on its source. Whether it
    /// is applied: a target lent to a shard (see [`Store::lease`]) takes it once the lease
    /// is over, and until then the log keeps it on the source.
    async fn finish_transfer(
        &self,
        campaign: &str,
        source: u32,
        target: u32,
        id: &str,
        units: i64,
    ) -> Result<bool, StoreError> {
        let t = PartitionKeys::new(campaign, target);
        let applied = self
            .eval(
                &scripts::TRANSFER_IN,
                &[&t.part(), &t.transfers_in()],
                &[id, &units.to_string()],
            )
            .await?;
        if int(Some(&applied)) == Some(-1) {
            return Ok(false);
        }
        let s = PartitionKeys::new(campaign, source);
        self.eval(
            &scripts::TRANSFER_ACK,
            &[&s.part(), &s.transfers_out()],
            &[id],
        )
        .await?;
        Ok(true)
    }

    /// Finishes every transfer logged on `source` (older than `min_age_s`, by Redis time):
    /// how many were applied, and how many wait for their target's lease to end.
    async fn replay(
        &self,
        campaign: &str,
        source: u32,
        min_age_s: i64,
    ) -> Result<(usize, usize), StoreError> {
        let log = self
            .conn
            .query(redis::cmd("HGETALL").arg(PartitionKeys::new(campaign, source).transfers_out()))
            .await?;
        let now_s = int(items(self.conn.query(&redis::cmd("TIME")).await?)?.first()).unwrap_or(0);
        let entries = items(log)?;
        let (mut done, mut waiting) = (0, 0);
        for pair in entries.chunks(2) {
            let (Some(id), Some(v)) = (text(pair.first()), text(pair.get(1))) else {
                continue;
            };
            let mut f = v.split(':').map(|x| x.parse::<i64>().ok());
            let (Some(Some(target)), Some(Some(units)), Some(Some(at))) =
                (f.next(), f.next(), f.next())
            else {
                tracing::error!(campaign, source, id, "unreadable transfer log entry");
                continue;
            };
            if now_s - at < min_age_s {
                continue;
            }
            if self
                .finish_transfer(campaign, source, target as u32, &id, units)
                .await?
            {
                done += 1;
            } else {
                waiting += 1;
            }
        }
        Ok((done, waiting))
    }

    /// Pulls at least `qty` units into the dry partition `target`, or proves there are none.
    /// The target is read alongside the transfers, its part of the first pass: it only
    /// counts when none of them moved a unit, and then nothing they did reached it.
    pub(crate) async fn refill(
        &self,
        campaign: &str,
        partitions: u32,
        target: u32,
        qty: u32,
    ) -> Result<Refill, StoreError> {
        let (results, own) = join(
            join_all(
                (0..partitions)
                    .filter(|q| *q != target)
                    .map(|q| self.transfer_out(campaign, q, target, qty)),
            ),
            self.probe(campaign, target),
        )
        .await;
        // Finish every transfer that took units before reporting any failure, so none
        // waits in transit for the rebalancer.
        let moved: Vec<&Out> = results.iter().flatten().filter(|o| o.moved > 0).collect();
        let finished = join_all(
            moved
                .iter()
                .map(|o| self.finish_transfer(campaign, o.source, target, &o.id, o.moved)),
        )
        .await;
        let outs: Vec<Out> = results.into_iter().collect::<Result<_, _>>()?;
        let applied = finished.into_iter().collect::<Result<Vec<bool>, _>>()?;
        if applied.contains(&true) {
            return Ok(Refill::Moved);
        }
        if !applied.is_empty() {
            return Ok(Refill::Lent);
        }
        let own = own?;
        if own.stock >= i64::from(qty) {
            return Ok(Refill::Moved);
        }
        let mut first: HashMap<u32, PartitionProbe> =
            outs.iter().map(|o| (o.source, o.probe)).collect();
        first.insert(target, own);
        let in_flight: Vec<u32> = first
            .iter()
            .filter(|(_, pr)| pr.transit > 0)
            .map(|(p, _)| *p)
            .collect();
        if !in_flight.is_empty() {
            // Units are on their way somewhere; finish those transfers and look again.
            let (mut applied, mut waiting) = (0, 0);
            for p in in_flight {
                let (a, w) = self.replay(campaign, p, 0).await?;
                (applied, waiting) = (applied + a, waiting + w);
            }
            return Ok(if applied == 0 && waiting > 0 {
                Refill::Lent
            } else {
                Refill::Moved
            });
        }
        // Every partition read empty, but not at one instant. Read the arrival counters
        // again: if none moved, no unit arrived anywhere after it was looked at, so at the
        // end of the first pass there was none left.
        let second = self.probe_all(campaign, partitions).await?;
        let unchanged = second.iter().enumerate().all(|(p, pr)| {
            first
                .get(&(p as u32))
                .is_some_and(|f| f.inflow == pr.inflow)
        });
        if unchanged {
            Ok(Refill::Empty {
                remaining: own.stock,
            })
        } else {
            Ok(Refill::Moved)
        }
    }
}

/// One pass of the background rebalancer over a live campaign: finish transfers left
/// behind by a crash, then give each empty partition half of the fullest one's stock.
pub async fn rebalance(store: &Store, campaign: &str, partitions: u32) -> Result<(), StoreError> {
    let probes = store.probe_all(campaign, partitions).await?;
    for (p, pr) in probes.iter().enumerate() {
        if pr.transit > 0 {
            let (n, _) = store.replay(campaign, p as u32, 5).await?;
            if n > 0 {
                tracing::info!(
                    campaign,
                    partition = p,
                    transfers = n,
                    "finished stranded transfers"
                );
            }
        }
    }
    let mut stock: Vec<i64> = probes.iter().map(|p| p.stock).collect();
    for dry in 0..stock.len() {
        // A lent partition takes no units until its lease ends: a transfer to it would
        // only wait, its units sold nowhere meanwhile.
        if stock[dry] > 0 || probes[dry].lent() {
            continue;
        }
        let Some((rich, &most)) = stock.iter().enumerate().max_by_key(|(_, s)| **s) else {
            return Ok(());
        };
        if most < 2 {
            return Ok(());
        }
        let out = store
            .transfer_out(campaign, rich as u32, dry as u32, (most / 2) as u32)
            .await?;
        if out.moved > 0 {
            let applied = store
                .finish_transfer(campaign, rich as u32, dry as u32, &out.id, out.moved)
                .await?;
            stock[rich] -= out.moved;
            if applied {
                stock[dry] += out.moved;
            }
        }
    }
    Ok(())
}
