//! The partitions lent to this shard, with their first answers (see `store::lease`): a
//! refused purchase that carries an `Idempotency-Key` ends here, without a Redis call,
//! when the user's partition is lent to the shard and holds no first answer for the key.

use futures::future::join_all;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use crate::store::{Lease, Store, StoreError};
use seckill_core::keys::partition_of;

/// How long Redis keeps a partition lent: units that come back to a lent partition
/// (expired holds, transfers) wait at most this long after the last renewal.
const LEASE: Duration = Duration::from_millis(1_000);

/// How often a shard renews the leases it holds: its trust outlasts one late renewal.
pub const RENEW_EVERY: Duration = Duration::from_millis(250);

/// How much shorter the shard trusts a lease than Redis keeps it: for Redis's clock
/// stepping ahead of the shard's (the lease ends by Redis's clock, the trust by the
/// shard's monotonic one, counted from before it asked).
const MARGIN: Duration = Duration::from_millis(400);

/// Rounds of renewal (10 s) a campaign's leases outlast the last keyed refusal of it that
/// looked at them: then the shard stops asking, its leases lapse, and a sold-out sale
/// nobody buys from any more costs Redis no lease calls. The next keyed refusal asks
/// Redis, and the shard asks for the leases again at its next round.
const QUIET_ROUNDS: u32 = 40;

/// One lent partition: until when it is trusted, the order sequence its copy was made
/// at, and the copy: the fingerprints of its fields, sorted.
struct Lent {
    until: Instant,
    seq: i64,
    answers: Vec<u64>,
}

/// One campaign's partitions, each lent or not, and whether keyed refusals look at them.
#[derive(Default)]
struct Held {
    parts: Vec<Option<Lent>>,
    demand: super::Demand,
}

/// The campaigns whose partitions the shard holds, and the key of the copies'
/// fingerprints.
#[derive(Default)]
pub struct Leases {
    campaigns: HashMap<String, Held, foldhash::fast::RandomState>,
    fingerprints: foldhash::quality::RandomState,
}

impl Leases {
    /// Whether `user`'s `key` may have a first answer in Redis: `false` only while the
    /// user's partition is lent to this shard and its copy holds none for the key.
    pub fn may_have_first_answer(
        &self,
        campaign: &str,
        partitions: u32,
        user: &str,
        key: &str,
    ) -> bool {
        let Some(held) = self.campaigns.get(campaign) else {
            return true;
        };
        held.demand.mark();
        match held.parts.get(partition_of(user, partitions) as usize) {
            Some(Some(lent)) if Instant::now() < lent.until => {
                // `keys::once::first_answer`, laid out here.
                let first = seckill_core::keys::once::FIRST_ANSWER.as_bytes();
                let pieces = [first, user.as_bytes(), b":", key.as_bytes()];
                let len: usize = pieces.iter().map(|p| p.len()).sum();
                if len > FIELD_MAX {
                    return true;
                }
                let mut field = [0u8; FIELD_MAX];
                let mut at = 0;
                for piece in pieces {
                    field[at..at + piece.len()].copy_from_slice(piece);
                    at += piece.len();
                }
                let print = fingerprint(&self.fingerprints, &field[..len]);
                lent.answers.binary_search(&print).is_ok()
            }
            _ => true,
        }
    }

    /// Keeps only the campaigns `keep` names.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.campaigns.retain(|id, _| keep(id));
    }

    /// Whether to ask for `campaign`'s leases this round: for a campaign new here, and
    /// until [`QUIET_ROUNDS`] rounds in a row pass with no keyed refusal looking at them.
    pub fn wanted(&mut self, campaign: &str) -> bool {
        let Some(held) = self.campaigns.get_mut(campaign) else {
            return true;
        };
        !held.demand.quiet_for(QUIET_ROUNDS)
    }

    /// The order sequence of each partition's copy, for asking again.
    fn seqs(&self, campaign: &str, partitions: u32) -> Vec<Option<i64>> {
        let held = self.campaigns.get(campaign);
        (0..partitions as usize)
            .map(|p| held.and_then(|h| h.parts.get(p)?.as_ref()).map(|l| l.seq))
            .collect()
    }
}

/// The longest first answer's field the shard looks up itself; a longer one (a long user
/// id) is asked of Redis.
const FIELD_MAX: usize = 192;

/// A first answer's field (`i:<user>:<key>`) as 64 bits of foldhash under the shard's own
/// random seed. The clients choose the keys, not the seed; a field that shares a
/// fingerprint with a first answer only sends its refusal to Redis to ask.
fn fingerprint(seed: &foldhash::quality::RandomState, field: &[u8]) -> u64 {
    seed.hash_one(field)
}

/// A partition's first answers, as the sorted fingerprints of their fields.
fn copy(seed: &foldhash::quality::RandomState, fields: Vec<String>) -> Vec<u64> {
    let mut answers: Vec<u64> = fields
        .iter()
        .map(|f| fingerprint(seed, f.as_bytes()))
        .collect();
    answers.sort_unstable();
    answers
}

/// Asks for the lease of every partition of `campaign` (all proven empty), and keeps
/// what came back in `leases`. A copy not lent this time is kept, untrusted: a later
/// lease at the same order sequence trusts it again, without a copy.
pub async fn renew(
    store: &Store,
    leases: &std::cell::RefCell<Leases>,
    campaign: &str,
    partitions: u32,
) -> Result<(), StoreError> {
    let seqs = leases.borrow().seqs(campaign, partitions);
    let ms = LEASE.as_millis() as u64;
    let asked = Instant::now();
    let answers = join_all(
        seqs.iter()
            .enumerate()
            .map(|(p, seq)| store.lease(campaign, p as u32, ms, *seq)),
    )
    .await;
    let mut leases = leases.borrow_mut();
    let leases = &mut *leases;
    let parts = &mut leases
        .campaigns
        .entry(campaign.to_string())
        .or_default()
        .parts;
    parts.resize_with(partitions as usize, || None);
    let until = asked + LEASE - MARGIN;
    let mut failed = None;
    for (slot, answer) in parts.iter_mut().zip(answers) {
        match answer {
            Ok(Lease::Whole { seq }) => match slot {
                Some(lent) if lent.seq == seq => lent.until = until,
                _ => *slot = None,
            },
            Ok(Lease::Fresh { seq, fields }) => {
                *slot = Some(Lent {
                    until,
                    seq,
                    answers: copy(&leases.fingerprints, fields),
                })
            }
            Ok(Lease::Refused) => untrust(slot, asked),
            Err(e) => {
                untrust(slot, asked);
                failed = Some(e);
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

fn untrust(slot: &mut Option<Lent>, now: Instant) {
    if let Some(lent) = slot {
        lent.until = lent.until.min(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(parts: Vec<Option<Lent>>) -> Held {
        Held {
            parts,
            ..Held::default()
        }
    }

    fn lent(l: &Leases, until: Instant, answers: &[&str]) -> Option<Lent> {
        Some(Lent {
            until,
            seq: 7,
            answers: copy(
                &l.fingerprints,
                answers.iter().map(|a| a.to_string()).collect(),
            ),
        })
    }

    #[test]
    fn a_field_too_long_to_look_up_here_is_asked_of_redis() {
        let later = Instant::now() + Duration::from_secs(60);
        let mut l = Leases::default();
        let long = "u".repeat(FIELD_MAX);
        let copy = lent(&l, later, &["i:alice:k1"]);
        l.campaigns.insert("c".into(), held(vec![copy]));
        assert!(!l.may_have_first_answer("c", 1, &long[..FIELD_MAX - 5], "k"));
        assert!(l.may_have_first_answer("c", 1, &long, "k"));
    }

    #[test]
    fn a_lease_outlasts_a_late_renewal() {
        assert!(LEASE - MARGIN > 2 * RENEW_EVERY);
    }

    #[test]
    fn only_a_trusted_copy_without_the_key_ends_the_question() {
        let later = Instant::now() + Duration::from_secs(60);
        let mut l = Leases::default();
        // One partition: every user is on partition 0.
        let copy = lent(&l, later, &["i:alice:k1"]);
        l.campaigns.insert("c".into(), held(vec![copy]));
        assert!(l.may_have_first_answer("c", 1, "alice", "k1"));
        assert!(!l.may_have_first_answer("c", 1, "alice", "k2"));
        assert!(!l.may_have_first_answer("c", 1, "bob", "k1"));
        assert!(l.may_have_first_answer("other", 1, "bob", "k1"));
        let past = lent(&l, Instant::now(), &[]);
        l.campaigns.insert("c".into(), held(vec![past]));
        assert!(
            l.may_have_first_answer("c", 1, "bob", "k1"),
            "a lease past its trust asks Redis"
        );
        l.campaigns.insert("c".into(), held(vec![None]));
        assert!(l.may_have_first_answer("c", 1, "bob", "k1"));
        assert_eq!(l.seqs("c", 2), vec![None, None]);
        l.retain(|_| false);
        assert!(l.campaigns.is_empty());
    }

    #[test]
    fn leases_nobody_looks_at_lapse_until_a_keyed_refusal_looks_again() {
        let mut l = Leases::default();
        assert!(l.wanted("c"), "a campaign new here is asked for");
        let copy = lent(&l, Instant::now() + Duration::from_secs(60), &[]);
        l.campaigns.insert("c".into(), held(vec![copy]));
        for round in 1..QUIET_ROUNDS {
            assert!(l.wanted("c"), "round {round} of quiet");
        }
        assert!(!l.wanted("c"), "quiet too long: no more asking");
        assert!(!l.wanted("c"));
        assert!(!l.may_have_first_answer("c", 1, "alice", "k"));
        assert!(l.wanted("c"), "a keyed refusal looked: asked for again");
        assert!(l.wanted("c"));
    }
}
