//! Lending an empty partition to a shard: while the lease lasts no unit enters the
//! partition, so it takes no order, and the first answers it holds are all it will hold.
//! A shard that holds the lease answers a retried `Idempotency-Key` with no first answer
//! there itself, instead of asking Redis for every refused purchase with a key.

use super::{int, items, text, Store, StoreError};
use seckill_core::keys::PartitionKeys;
use seckill_core::scripts;

/// Most entries of a partition's `once` hash (first answers and tickets' uses) for which
/// a copy is made: `HKEYS` holds Redis for about a millisecond at this size, and a
/// larger partition is not lent (its retries ask Redis, as they always did).
pub const MOST_ANSWERS: usize = 4_096;

/// What Redis answered a shard that asked for a partition's lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Lease {
    /// Not lent: units are there or on their way, or too many first answers to copy.
    Refused,
    /// Lent; no order since the order sequence the shard named, so its copy is whole.
    Whole { seq: i64 },
    /// Lent, with the partition's first answers, each `i:<user>:<key>`.
    Fresh { seq: i64, fields: Vec<String> },
}

impl Store {
    /// Asks for the lease of `campaign`'s partition `p` for `ms`, naming the order
    /// sequence of the copy of its first answers the shard has, if any.
    pub async fn lease(
        &self,
        campaign: &str,
        p: u32,
        ms: u64,
        seq: Option<i64>,
    ) -> Result<Lease, StoreError> {
        let k = PartitionKeys::new(campaign, p);
        let v = items(
            self.eval(
                &scripts::LEASE,
                &[&k.part(), &k.once()],
                &[
                    &ms.to_string(),
                    &seq.map(|s| s.to_string()).unwrap_or_default(),
                    &MOST_ANSWERS.to_string(),
                ],
            )
            .await?,
        )?;
        if int(v.first()) != Some(1) {
            return Ok(Lease::Refused);
        }
        let now = int(v.get(1))
            .ok_or_else(|| StoreError::Protocol("lease script answered no sequence".into()))?;
        if v.len() == 2 && seq == Some(now) {
            return Ok(Lease::Whole { seq: now });
        }
        let fields = v[2..].iter().filter_map(|f| text(Some(f))).collect();
        Ok(Lease::Fresh { seq: now, fields })
    }
}
