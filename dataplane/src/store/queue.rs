//! A campaign's waiting room in Redis: a shopper's join or look, one script on the
//! room's slot; and the admission's round, which reads every partition (units taken,
//! passes used) before one script on the room's slot lets the next shoppers through.

use futures::future::join_all;

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::{PartitionKeys, QueueKeys};
use seckill_core::scripts;

/// A shopper's standing, as the room's script gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// In the pre-queue: places are drawn at the opening.
    Pre,
    Waiting {
        place: u64,
    },
    Admitted {
        place: u64,
        expires_ms: i64,
    },
    NotJoined,
    Ended,
    /// No such room: the campaign is a draft or has no queue.
    Unknown,
}

/// A standing, with the room's counters as of the same instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    pub standing: Standing,
    pub admitted: u64,
    pub sold_out: bool,
}

/// What a round of admission did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Round {
    /// Another node holds the lease: nothing was done.
    pub follower: bool,
    pub admitted: u64,
    pub outstanding: u64,
    pub left: i64,
    pub sold_out: bool,
    /// How long each shopper let through had waited in line (ms).
    pub waits_ms: Vec<i64>,
}

/// Passes used, read from one partition's log at most this many at a time.
const USAGE_BATCH: usize = 2_000;
/// A pass is counted expired this long after its end, by every partition's clock: more
/// than the clocks of a cluster's masters may differ (a replica promoted with a clock
/// behind its master's, a step of NTP), so that a use just before the end is always in
/// the logs the admission reads first.
pub const GRACE_MS: i64 = 5_000;

impl Store {
    /// Joins `user` to the room (`join`), or looks them up. `seed` is kept as the room's
    /// draw seed when theirs is the room's first join.
    pub async fn queue(
        &self,
        campaign: &str,
        user: &str,
        join: bool,
        seed: &str,
    ) -> Result<Look, StoreError> {
        let k = QueueKeys::new(campaign);
        let v = items(
            self.eval(
                &scripts::QUEUE_JOIN,
                &[&k.meta(), &k.pre(), &k.post(), &k.joined(), &k.admitted()],
                &[if join { "join" } else { "look" }, user, seed],
            )
            .await?,
        )?;
        let n = |i: usize| int(v.get(i)).unwrap_or(0).max(0) as u64;
        let standing = match text(v.first()).as_deref() {
            Some("pre") => Standing::Pre,
            Some("waiting") => Standing::Waiting { place: n(1) },
            Some("admitted") => Standing::Admitted {
                place: n(1),
                expires_ms: int(v.get(2)).unwrap_or(0),
            },
            Some("not_joined") => Standing::NotJoined,
            Some("ended") => Standing::Ended,
            Some("unknown") => Standing::Unknown,
            other => {
                return Err(StoreError::Protocol(format!(
                    "queue script answered {other:?}"
                )))
            }
        };
        Ok(Look {
            standing,
            admitted: n(3),
            sold_out: text(v.get(4)).as_deref() == Some("1"),
        })
    }

    /// One round of the room's admission as `holder` (renewing its lease for
    /// `lease_ms`), letting at most `budget` shoppers through.
    pub async fn admit(
        &self,
        campaign: &str,
        partitions: u32,
        holder: &str,
        lease_ms: u64,
        budget: u64,
    ) -> Result<Round, StoreError> {
        let k = QueueKeys::new(campaign);
        let (meta, lease) = (k.meta(), k.lease());
        // Whoever holds the lease goes on; the others spare the partitions their reads.
        let held = text(Some(&self.conn.query(redis::cmd("GET").arg(&lease)).await?));
        if held.is_some_and(|h| h != holder) {
            return Ok(Round {
                follower: true,
                ..Round::default()
            });
        }
        let fields: Vec<String> = (0..partitions).map(|p| format!("cur:{p}")).collect();
        let cursors = items(
            self.conn
                .query(redis::cmd("HMGET").arg(&meta).arg(&fields))
                .await?,
        )?;
        let batch = USAGE_BATCH.to_string();
        let reads = join_all((0..partitions).map(|p| {
            let keys = PartitionKeys::new(campaign, p);
            let cursor = int(cursors.get(p as usize)).unwrap_or(0).to_string();
            let batch = &batch;
            async move {
                self.eval(
                    &scripts::QUEUE_USAGE,
                    &[&keys.part(), &keys.pass_log()],
                    &[&cursor, batch],
                )
                .await
                .and_then(items)
            }
        }))
        .await;
        let before: Vec<String> = (0..partitions as usize)
            .map(|p| int(cursors.get(p)).unwrap_or(0).to_string())
            .collect();
        let (mut earliest, mut taken) = (i64::MAX, 0i64);
        let mut after = Vec::with_capacity(partitions as usize);
        let mut used = Vec::new();
        for r in reads {
            let v = r?;
            earliest = earliest.min(int(v.first()).unwrap_or(0));
            taken += int(v.get(1)).unwrap_or(0);
            after.push(int(v.get(2)).unwrap_or(0).to_string());
            used.extend(v.iter().skip(3).filter_map(|u| text(Some(u))));
        }
        let mut args: Vec<String> = vec![
            holder.to_string(),
            lease_ms.to_string(),
            budget.to_string(),
            taken.to_string(),
            earliest.to_string(),
            GRACE_MS.to_string(),
            partitions.to_string(),
        ];
        args.extend(before);
        args.extend(after);
        args.extend(used);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let v = items(
            self.eval(
                &scripts::QUEUE_ADMIT,
                &[
                    &meta,
                    &k.pre(),
                    &k.post(),
                    &k.joined(),
                    &k.admitted(),
                    &k.passes(),
                    &lease,
                ],
                &args,
            )
            .await?,
        )?;
        if text(v.first()).as_deref() != Some("leader") {
            return Ok(Round {
                follower: true,
                ..Round::default()
            });
        }
        let n = |i: usize| int(v.get(i)).unwrap_or(0);
        Ok(Round {
            follower: false,
            admitted: n(1).max(0) as u64,
            outstanding: n(2).max(0) as u64,
            left: n(3),
            sold_out: n(4) == 1,
            waits_ms: v.iter().skip(5).filter_map(|w| int(Some(w))).collect(),
        })
    }
}
