//! The control plane in Redis: campaign definitions and lifecycle, read and written with
//! the blocking client (CLI, console, tests). Every change bumps a version counter and is
//! published, so running nodes apply it within a poll interval, usually at once.

use crate::connection::Connection;
use redis::Commands;
use std::collections::HashMap;

use crate::campaign::{Action, Campaign, CampaignSpec, SpecError, State};
use crate::keys::{self, CodeKeys, PartitionKeys, QueueKeys, TicketKeys};
use crate::{protocol, scripts};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("no campaign '{0}'")]
    NotFound(String),
    #[error("campaign '{0}' already exists")]
    Exists(String),
    #[error("campaign '{id}' is {from}: cannot {action}")]
    Transition {
        id: String,
        from: String,
        action: &'static str,
    },
    #[error("invalid campaign: {0}")]
    Invalid(#[from] SpecError),
    #[error("campaign '{0}' has a damaged record in Redis")]
    Damaged(String),
    #[error("codes_file: {0}")]
    Codes(String),
    #[error("{0}")]
    Limits(String),
    #[error("{0}")]
    Rate(SpecError),
    #[error("campaign '{0}' has no waiting room")]
    NoQueue(String),
    #[error("the waiting room of '{0}' is not drawn yet: its seed is shown at the opening")]
    NotDrawn(String),
    #[error("campaign '{0}' is being armed by another run; try again when it has finished (at most a minute)")]
    ArmRunning(String),
}

pub type Result<T> = std::result::Result<T, ControlError>;

/// Connects to one Redis or a Redis Cluster (see [`Connection::open`]), and takes Redis's
/// clock as this process's (see [`crate::clock::sync`]).
pub fn connect(url: &str) -> Result<Connection> {
    connect_with(url, None)
}

/// As [`connect`], with every read and write given up after `io_timeout`: for a process
/// that must notice a server gone silent (a master cut off) and connect again, rather
/// than wait for TCP to give up.
pub fn connect_with(url: &str, io_timeout: Option<std::time::Duration>) -> Result<Connection> {
    let mut con = Connection::open(url, std::time::Duration::from_secs(2), io_timeout)?;
    crate::clock::sync(&mut con);
    Ok(con)
}

/// Announces a change to every node.
fn changed(con: &mut Connection, id: &str) -> Result<()> {
    for cmd in protocol::announce(id) {
        let _: redis::Value = cmd.query(con)?;
    }
    Ok(())
}

pub fn create(con: &mut Connection, spec: CampaignSpec) -> Result<Campaign> {
    let campaign = Campaign::new(spec)?;
    let key = keys::campaign(&campaign.spec.id);
    let fresh: bool = con.hset_nx(&key, "id", &campaign.spec.id)?;
    if !fresh {
        return Err(ControlError::Exists(campaign.spec.id.clone()));
    }
    let _: () = con.hset_multiple(&key, &campaign.to_fields())?;
    let _: () = con.sadd(keys::CAMPAIGNS, &campaign.spec.id)?;
    changed(con, &campaign.spec.id)?;
    Ok(campaign)
}

pub fn get(con: &mut Connection, id: &str) -> Result<Campaign> {
    let v: redis::Value = protocol::campaign(id).query(con)?;
    if protocol::read_fields(&v).is_empty() {
        return Err(ControlError::NotFound(id.to_string()));
    }
    protocol::read_campaign(&v).ok_or_else(|| ControlError::Damaged(id.to_string()))
}

pub fn list(con: &mut Connection) -> Result<Vec<Campaign>> {
    let v: redis::Value = protocol::campaign_ids().query(con)?;
    let mut ids = protocol::read_strings(&v);
    ids.sort();
    ids.iter().map(|id| get(con, id)).collect()
}

fn set_state(
    con: &mut Connection,
    id: &str,
    to: State,
    from: &[State],
    action: &'static str,
) -> Result<()> {
    let mut inv = scripts::SET_STATE.key(keys::campaign(id));
    inv.arg(to.as_str());
    for s in from {
        inv.arg(s.as_str());
    }
    let (ok, cur): (bool, Option<String>) = inv.invoke(con)?;
    match (ok, cur) {
        (true, _) => Ok(()),
        (false, None) => Err(ControlError::NotFound(id.to_string())),
        (false, Some(cur)) => Err(ControlError::Transition {
            id: id.to_string(),
            from: cur,
            action,
        }),
    }
}

/// Reads a code pool: one code per line, blank lines skipped, no duplicates.
pub fn read_codes(path: &str, needed: u64) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ControlError::Codes(format!("cannot read {path}: {e}")))?;
    let codes: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = codes.iter().find(|c| !seen.insert(c.as_str())) {
        return Err(ControlError::Codes(format!(
            "{path}: code {dup} appears twice"
        )));
    }
    if (codes.len() as u64) < needed {
        return Err(ControlError::Codes(format!(
            "{path} holds {} codes, fewer than the {needed} units",
            codes.len()
        )));
    }
    Ok(codes)
}

/// How long an `arm` run holds the campaign's arm lock at most (a run that died frees
/// it by then).
const ARM_LOCK_MS: u64 = 60_000;

/// Loads the stock into the partitions (and the code pool, when the campaign has one),
/// exactly once. A crash half-way is resumed by arming again; an armed campaign is never
/// re-armed. Two runs at once: the second is refused while the first holds the arm lock,
/// and even past the lock each run stages its codes in a list of its own, which only the
/// first to publish makes the pool.
pub fn arm(con: &mut Connection, id: &str) -> Result<Campaign> {
    let c = get(con, id)?;
    let codes = match &c.spec.codes_file {
        Some(path) => Some(read_codes(path, c.spec.total)?),
        None => None,
    };
    let run = format!("{:016x}", rand::random::<u64>());
    let locked: Option<String> = redis::cmd("SET")
        .arg(keys::arm_lock(id))
        .arg(&run)
        .arg("NX")
        .arg("PX")
        .arg(ARM_LOCK_MS)
        .query(con)?;
    if locked.is_none() {
        return Err(ControlError::ArmRunning(id.to_string()));
    }
    let armed = arm_locked(con, &c, codes, &run);
    // Only this run's lock is released; one that expired and was taken is not ours.
    let _: i64 = scripts::UNLOCK
        .key(keys::arm_lock(id))
        .arg(&run)
        .invoke(con)?;
    armed
}

fn arm_locked(
    con: &mut Connection,
    c: &Campaign,
    codes: Option<Vec<String>>,
    run: &str,
) -> Result<Campaign> {
    let id = c.spec.id.as_str();
    set_state(con, id, State::Arming, &[State::Draft], "arm")?;
    if let Some(codes) = codes {
        let k = CodeKeys::new(id);
        let staging = k.staging(run);
        for chunk in codes.chunks(1000) {
            let _: () = con.rpush(&staging, chunk)?;
        }
        let _: i64 = scripts::LOAD_CODES
            .key(&staging)
            .key(k.pool())
            .key(k.loaded())
            .invoke(con)?;
    }
    let (limit, ttl_ms) = (c.spec.per_user_limit, c.spec.hold_ttl_s * 1000);
    for (p, units) in c.spec.allocation().into_iter().enumerate() {
        let k = PartitionKeys::new(id, p as u32);
        let _: i64 = scripts::ARM_PARTITION
            .key(k.part())
            .arg(units)
            .arg(limit)
            .arg(ttl_ms)
            .arg(c.starts_at_ms.unwrap_or(0))
            .arg(c.ends_at_ms.unwrap_or(0))
            .invoke(con)?;
        ensure_group(con, &k.events())?;
    }
    mirror_ticket_rules(con, c, State::Armed)?;
    mirror_queue_rules(con, c, State::Armed)?;
    set_state(con, id, State::Armed, &[State::Arming], "arm")?;
    changed(con, id)?;
    get(con, id)
}

/// Mirrors what the ticket script checks into the campaign's ticket slot: the state, the
/// opening and the cap, whole each time (a campaign armed before the mirror existed gets
/// it with its next change).
fn mirror_ticket_rules(con: &mut Connection, c: &Campaign, state: State) -> Result<()> {
    if !c.spec.require_ticket {
        return Ok(());
    }
    let cap = u64::from(c.spec.ticket_factor) * c.spec.total;
    let _: () = con.hset_multiple(
        TicketKeys::new(&c.spec.id).rules(),
        &[
            ("state", state.as_str().to_string()),
            ("starts_at_ms", c.starts_at_ms.unwrap_or(0).to_string()),
            ("cap", cap.to_string()),
        ],
    )?;
    Ok(())
}

/// Creates the workers' consumer group on a stream (and the stream), unless it exists.
pub fn ensure_group(con: &mut Connection, stream: &str) -> Result<()> {
    let r: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(keys::WORKER_GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query(con);
    match r {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        other => Ok(other?),
    }
}

/// start, pause, resume or stop. Repeating an action that already took effect is
/// harmless, and re-pushes the state to every partition.
pub fn act(con: &mut Connection, id: &str, action: Action) -> Result<Campaign> {
    let (from, to) = action.transition();
    set_state(con, id, to, from, action.name())?;
    let c = get(con, id)?;
    for p in 0..c.spec.partitions {
        let _: () = con.hset(PartitionKeys::new(id, p).part(), "state", to.as_str())?;
    }
    mirror_ticket_rules(con, &c, to)?;
    mirror_queue_rules(con, &c, to)?;
    changed(con, id)?;
    Ok(c)
}

/// Mirrors what the waiting room's scripts check into its slot: the state, the opening,
/// the units and the pass's life, whole each time. The admission rate is the campaign's
/// only until an operator changes it (see [`set_admit_rate`]).
fn mirror_queue_rules(con: &mut Connection, c: &Campaign, state: State) -> Result<()> {
    let Some(q) = c.spec.queue else {
        return Ok(());
    };
    let meta = QueueKeys::new(&c.spec.id).meta();
    let _: () = con.hset_multiple(
        &meta,
        &[
            ("state", state.as_str().to_string()),
            ("starts_at_ms", c.starts_at_ms.unwrap_or(0).to_string()),
            ("ends_at_ms", c.ends_at_ms.unwrap_or(0).to_string()),
            ("total", c.spec.total.to_string()),
            ("pass_ttl_ms", (q.pass_ttl_s * 1000).to_string()),
        ],
    )?;
    // Every partition knows it sells to pass holders only: a node that does not know
    // the room (an older release, a stale copy) cannot sell past it.
    for p in 0..c.spec.partitions {
        let _: () = con.hset(PartitionKeys::new(&c.spec.id, p).part(), "queued", 1)?;
    }
    let _: bool = con.hset_nx(&meta, "admit_per_s", q.admit_per_s)?;
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
    let _: () = con.hset(QueueKeys::new(id).meta(), "admit_per_s", rate)?;
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
    let fields: Vec<String> = (0..c.spec.partitions).map(|p| format!("cur:{p}")).collect();
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
            .arg(&["held", "sold"])
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

/// Overrides limits on every node (field = value, as in `[limits]`), within a second.
pub fn set_limits(con: &mut Connection, pairs: &[(String, String)]) -> Result<()> {
    let mut check = crate::limits::Limits::default();
    for (k, v) in pairs {
        check.set(k, v).map_err(ControlError::Limits)?;
    }
    let _: () = con.hset_multiple(keys::LIMITS, pairs)?;
    changed(con, "limits")
}

/// Drops every override: nodes go back to their configured limits.
pub fn reset_limits(con: &mut Connection) -> Result<()> {
    let _: () = con.del(keys::LIMITS)?;
    changed(con, "limits")
}

pub fn limit_overrides(con: &mut Connection) -> Result<HashMap<String, String>> {
    let v: redis::Value = protocol::limits().query(con)?;
    Ok(protocol::read_fields(&v))
}

pub use crate::protocol::PartitionStock;

/// Every partition's counters, read in one transaction: a consistent picture even while
/// purchases and transfers run.
pub fn partitions(con: &mut Connection, c: &Campaign) -> Result<Vec<PartitionStock>> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for p in 0..c.spec.partitions {
        pipe.add_command(protocol::partition_stock(&c.spec.id, p));
    }
    let rows: Vec<redis::Value> = con.pipeline(&pipe)?;
    Ok(rows
        .iter()
        .enumerate()
        .map(|(p, v)| protocol::read_partition_stock(p as u32, v))
        .collect())
}
