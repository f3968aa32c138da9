//! The waiting room's side of the control plane: its rules mirrored into its slot, its
//! admission rate, its counters and reservation, and the audit of its draw.

use redis::Commands;
use std::collections::HashMap;

use super::{changed, get, ControlError, Result};
use crate::campaign::{Campaign, State};
use crate::connection::Connection;
use crate::keys::{self, PartitionKeys, QueueKeys};
use crate::protocol;

/// Mirrors what the waiting room's scripts check into its slot: the state, the opening,
/// the units and the pass's life, whole each time. The admission rate is the campaign's
/// only until an operator changes it (see [`set_admit_rate`]).
pub(super) fn mirror_queue_rules(con: &mut Connection, c: &Campaign, state: State) -> Result<()> {
    let Some(q) = c.spec.queue else {
        return Ok(());
    };
    use keys::{meta, part};
    let key = QueueKeys::new(&c.spec.id).meta();
    let _: () = con.hset_multiple(
        &key,
        &[
            (meta::STATE, state.as_str().to_string()),
            (meta::STARTS_AT_MS, c.starts_at_ms.unwrap_or(0).to_string()),
            (meta::ENDS_AT_MS, c.ends_at_ms.unwrap_or(0).to_string()),
            (meta::TOTAL, c.spec.total.to_string()),
            (meta::PASS_TTL_MS, (q.pass_ttl_s * 1000).to_string()),
        ],
    )?;
    // Every partition knows it sells to pass holders only: a node that does not know
    // the room (an older release, a stale copy) cannot sell past it.
    for p in 0..c.spec.partitions {
        let _: () = con.hset(PartitionKeys::new(&c.spec.id, p).part(), part::QUEUED, 1)?;
    }
    let _: bool = con.hset_nx(&key, meta::ADMIT_PER_S, q.admit_per_s)?;
    Ok(())
}

/// Changes how many shoppers a waiting room lets through per second, from the next
/// round of its admission on.
pub fn set_admit_rate(con: &mut Connection, id: &str, rate: u32) -> Result<()> {
    crate::campaign::valid_admit_rate(rate).map_err(ControlError::Rate)?;
    let c = get(con, id)?;
    if c.spec.queue.is_none() {
        return Err(ControlError::NoQueue(id.to_string()));
    }
    let _: () = con.hset(QueueKeys::new(id).meta(), keys::meta::ADMIT_PER_S, rate)?;
    changed(con, id)
}

pub use crate::protocol::QueueProgress;

/// A waiting room's counters, read at one instant.
pub fn queue_progress(con: &mut Connection, id: &str) -> Result<QueueProgress> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for cmd in protocol::queue_progress(id) {
        pipe.add_command(cmd);
    }
    let replies: Vec<redis::Value> = con.pipeline(&pipe)?;
    Ok(protocol::read_queue_progress(&replies))
}

/// A waiting room's reservation at one instant: the units left (the total less those
/// held or sold) and the passes outstanding (given, not expired, not used to buy, counting
/// uses the admission has not read yet). `passes ≤ units left` always holds: this reads
/// the room before the partitions, and each partition's units before its pass log, so a
/// purchase in between can only make the reading look safer than the truth was.
pub fn reservation(con: &mut Connection, c: &Campaign) -> Result<(i64, u64)> {
    let id = &c.spec.id;
    let k = QueueKeys::new(id);
    let fields: Vec<String> = (0..c.spec.partitions)
        .map(|p| format!("{}{p}", keys::meta::CURSOR))
        .collect();
    // The passes and the log positions the admission moves together, read together (a
    // script: one slot, atomic on one server and on a cluster alike).
    let (zset, cursors): (u64, Vec<Option<i64>>) = redis::Script::new(
        "return {redis.call('ZCARD', KEYS[1]), redis.call('HMGET', KEYS[2], unpack(ARGV))}",
    )
    .key(k.passes())
    .key(k.meta())
    .arg(&fields)
    .invoke(con)?;
    let (mut taken, mut unread) = (0i64, 0i64);
    for (p, cursor) in cursors.iter().enumerate() {
        let keys = PartitionKeys::new(id, p as u32);
        let (held, sold): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(keys.part())
            .arg(&[keys::part::HELD, keys::part::SOLD])
            .query(con)?;
        let logged: i64 = con.llen(keys.pass_log())?;
        taken += held.unwrap_or(0) + sold.unwrap_or(0);
        unread += (logged - cursor.unwrap_or(0)).max(0);
    }
    Ok((
        c.spec.total as i64 - taken,
        zset.saturating_sub(unread.max(0) as u64),
    ))
}

/// A pre-queue joiner's draw: the first 52 bits of SHA-1(seed ‖ ':' ‖ user). The line
/// after the opening is the pre-queue in order of draw (ties by user id).
pub fn draw(seed: &str, user: &str) -> u64 {
    let digest = sha1_smol::Sha1::from(format!("{seed}:{user}"))
        .digest()
        .bytes();
    u64::from_be_bytes([
        0, digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6],
    ]) >> 4
}

/// The result of checking a waiting room's draw against its seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawAudit {
    pub seed: String,
    /// Whether the seed is the one whose SHA-1 the room showed from its first join.
    pub seed_matches_commitment: bool,
    /// Pre-queue joiners checked, and how many the room counted at the draw.
    pub checked: u64,
    pub drawn: u64,
    /// Those whose draw is not what the seed gives (none in a fair draw).
    pub mismatched: Vec<String>,
    /// Admitted pre-queue joiners whose place is not their rank in the draw.
    pub out_of_order: Vec<String>,
}

impl DrawAudit {
    /// Whether the draw is the seed's, whole, and the admissions followed it.
    pub fn fair(&self) -> bool {
        self.seed_matches_commitment
            && self.checked == self.drawn
            && self.mismatched.is_empty()
            && self.out_of_order.is_empty()
    }
}

/// Every field and value of a hash, page by page.
fn scan_hash(con: &mut Connection, key: &str) -> Result<Vec<(String, String)>> {
    let (mut cursor, mut out) = (0u64, Vec::new());
    loop {
        let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(con)?;
        out.extend(page);
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// Checks a waiting room's draw once it is drawn: the seed against the fingerprint the
/// room showed before the opening, every pre-queue joiner's draw against the seed, the
/// pre-queue's size against the one counted at the draw, and every admitted pre-queue
/// joiner's place against their rank in the draw.
pub fn audit_draw(con: &mut Connection, id: &str) -> Result<DrawAudit> {
    if get(con, id)?.spec.queue.is_none() {
        return Err(ControlError::NoQueue(id.to_string()));
    }
    let progress = queue_progress(con, id)?;
    let (Some(seed), Some(_)) = (progress.seed.clone(), progress.drawn_ms) else {
        return Err(ControlError::NotDrawn(id.to_string()));
    };
    let k = QueueKeys::new(id);
    let mut line: Vec<(u64, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut mismatched = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, page): (u64, Vec<(String, f64)>) = redis::cmd("ZSCAN")
            .arg(k.pre())
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(con)?;
        for (user, score) in page {
            // A scan may return a member twice.
            if !seen.insert(user.clone()) {
                continue;
            }
            if score as u64 != draw(&seed, &user) {
                mismatched.push(user.clone());
            }
            line.push((score as u64, user));
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    line.sort();
    let rank: HashMap<&str, u64> = line
        .iter()
        .enumerate()
        .map(|(i, (_, u))| (u.as_str(), i as u64 + 1))
        .collect();
    let mut out_of_order = Vec::new();
    for (user, pass) in scan_hash(con, &k.admitted())? {
        let place: Option<u64> = pass.split(':').next().and_then(|p| p.parse().ok());
        if let (Some(place), Some(r)) = (place, rank.get(user.as_str())) {
            if place != *r {
                out_of_order.push(user);
            }
        }
    }
    mismatched.sort();
    out_of_order.sort();
    Ok(DrawAudit {
        seed_matches_commitment: progress
            .seed_sha1
            .is_some_and(|c| c == sha1_smol::Sha1::from(&seed).digest().to_string()),
        seed,
        checked: line.len() as u64,
        drawn: progress.pre,
        mismatched,
        out_of_order,
    })
}
