//! The control plane in Redis: campaign definitions and lifecycle, read and written with
//! the blocking client (CLI, console, tests). Every change bumps a version counter and is
//! published, so running nodes apply it within a poll interval, usually at once.

use crate::connection::Connection;
use redis::Commands;
use std::collections::HashMap;

use crate::campaign::{Action, Campaign, CampaignSpec, SpecError, State};
use crate::keys::{self, CodeKeys, PartitionKeys, TicketKeys};
use crate::{protocol, scripts};

mod room;

use room::mirror_queue_rules;
pub use room::{
    audit_draw, draw, queue_progress, reservation, set_admit_rate, DrawAudit, QueueProgress,
};

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
            (keys::rules::STATE, state.as_str().to_string()),
            (
                keys::rules::STARTS_AT_MS,
                c.starts_at_ms.unwrap_or(0).to_string(),
            ),
            (keys::rules::CAP, cap.to_string()),
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
        let _: () = con.hset(
            PartitionKeys::new(id, p).part(),
            keys::part::STATE,
            to.as_str(),
        )?;
    }
    mirror_ticket_rules(con, &c, to)?;
    mirror_queue_rules(con, &c, to)?;
    changed(con, id)?;
    Ok(c)
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
