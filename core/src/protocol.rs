//! The control plane's protocol: the commands that read and write it, and the readers of
//! their replies. Pure functions over `redis::Cmd` and `redis::Value`: the blocking
//! clients (CLI, console, worker) send them with `query`, the shards over their own
//! pipelined link, and both read the replies the same way.

use redis::{Cmd, Value};
use std::collections::HashMap;

use crate::campaign::Campaign;
use crate::keys;
use crate::reply::{int, text};

/// The control plane's version: bumped by every change.
pub fn version() -> Cmd {
    redis::cmd("GET").arg(keys::CONTROL_VERSION).clone()
}

/// Announces a change to every node: the version moves (for the polls) and a message
/// goes out (for the subscribers). `what` names the campaign, `limits` or `blacklist`.
pub fn announce(what: &str) -> [Cmd; 2] {
    [
        redis::cmd("INCR").arg(keys::CONTROL_VERSION).clone(),
        redis::cmd("PUBLISH")
            .arg(keys::CONTROL_CHANNEL)
            .arg(what)
            .clone(),
    ]
}

/// Every campaign's id.
pub fn campaign_ids() -> Cmd {
    redis::cmd("SMEMBERS").arg(keys::CAMPAIGNS).clone()
}

/// One campaign's record.
pub fn campaign(id: &str) -> Cmd {
    redis::cmd("HGETALL").arg(keys::campaign(id)).clone()
}

/// A campaign from its record; `None` for a missing or damaged one.
pub fn read_campaign(v: &Value) -> Option<Campaign> {
    let fields = read_fields(v);
    if fields.is_empty() {
        return None;
    }
    Campaign::from_fields(&fields)
}

/// The limit overrides every node applies.
pub fn limits() -> Cmd {
    redis::cmd("HGETALL").arg(keys::LIMITS).clone()
}

/// The strings of an array reply (`SMEMBERS`, `ZRANGEBYSCORE`), skipping what is not one.
pub fn read_strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => {
            items.iter().filter_map(|v| text(Some(v))).collect()
        }
        _ => Vec::new(),
    }
}

/// A hash reply (`HGETALL`): field → value. RESP2 sends it as a flat array.
pub fn read_fields(v: &Value) -> HashMap<String, String> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| Some((text(kv.first())?, text(kv.get(1))?)))
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(Some(k))?, text(Some(v))?)))
            .collect(),
        _ => HashMap::new(),
    }
}

/// The blacklist's version: bumped by every change of it.
pub fn blacklist_version() -> Cmd {
    redis::cmd("GET").arg(keys::BLACKLIST_VERSION).clone()
}

/// The blacklist entries still in force at `now_ms`, with their expiries.
pub fn blacklist(now_ms: i64) -> Cmd {
    redis::cmd("ZRANGEBYSCORE")
        .arg(keys::BLACKLIST)
        .arg(now_ms)
        .arg("+inf")
        .arg("WITHSCORES")
        .clone()
}

/// Entry → expiry (ms), from the reply of [`blacklist`].
pub fn read_blacklist(v: &Value) -> HashMap<String, i64> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| Some((text(kv.first())?, int(kv.get(1))?)))
            .collect(),
        _ => HashMap::new(),
    }
}

/// Blocks `entry` (`user:<id>` or `ip:<address>`) until `until_ms`, and tells every
/// node.
pub fn block(entry: &str, until_ms: i64) -> [Cmd; 3] {
    let [bump, publish] = blacklist_changed();
    [
        redis::cmd("ZADD")
            .arg(keys::BLACKLIST)
            .arg(until_ms)
            .arg(entry)
            .clone(),
        bump,
        publish,
    ]
}

/// Tells every node that units came back to a campaign's stock (expired holds released),
/// so shards that cached `sold_out` read the stock again at once rather than at their
/// next poll. Nothing else changed, so the version stays.
pub fn stock_returned(campaign: &str) -> Cmd {
    redis::cmd("PUBLISH")
        .arg(keys::CONTROL_CHANNEL)
        .arg(format!("stock:{campaign}"))
        .clone()
}

/// Tells every node the blacklist changed.
pub fn blacklist_changed() -> [Cmd; 2] {
    [
        redis::cmd("INCR").arg(keys::BLACKLIST_VERSION).clone(),
        redis::cmd("PUBLISH")
            .arg(keys::CONTROL_CHANNEL)
            .arg("blacklist")
            .clone(),
    ]
}

/// The stock counters of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartitionStock {
    pub partition: u32,
    pub initial: i64,
    pub stock: i64,
    pub held: i64,
    pub sold: i64,
    pub transit: i64,
}

/// One partition's stock counters.
pub fn partition_stock(campaign: &str, partition: u32) -> Cmd {
    redis::cmd("HMGET")
        .arg(keys::PartitionKeys::new(campaign, partition).part())
        .arg(&{
            use keys::part::*;
            [INITIAL, STOCK, HELD, SOLD, TRANSIT]
        })
        .clone()
}

/// The counters from the reply of [`partition_stock`]; missing ones read as 0.
pub fn read_partition_stock(partition: u32, v: &Value) -> PartitionStock {
    let fields: &[Value] = match v {
        Value::Array(f) => f,
        _ => &[],
    };
    let f = |i: usize| int(fields.get(i)).unwrap_or(0);
    PartitionStock {
        partition,
        initial: f(0),
        stock: f(1),
        held: f(2),
        sold: f(3),
        transit: f(4),
    }
}

/// A waiting room's counters, as a node, the console or the CLI sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueProgress {
    /// Shoppers let through so far (the line's places 1..=admitted).
    pub admitted: u64,
    /// Shoppers in line: the pre-queue (once drawn) and everyone who joined after.
    pub line: u64,
    /// In the pre-queue: all of it before the draw, its size at the draw after.
    pub pre: u64,
    /// When the pre-queue was drawn (the opening), if it was.
    pub drawn_ms: Option<i64>,
    /// The draw's seed, shown once drawn so the draw can be checked.
    pub seed: Option<String>,
    /// SHA-1 of the seed, shown from the room's first join: what the seed must match.
    pub seed_sha1: Option<String>,
    pub admit_per_s: u32,
    pub pass_ttl_ms: i64,
    /// Passes used to buy, and passes that ran out unused.
    pub used: u64,
    pub expired: u64,
    /// Passes outstanding: each reserves a unit.
    pub outstanding: u64,
    /// Nothing left to reserve and nothing reserved: waiting shoppers are told so.
    pub sold_out: bool,
    /// Who runs the admission (`node/shard`), while the lease is held.
    pub leader: Option<String>,
}

/// Shoppers a waiting room lets through per second: the rate it runs at (an operator's
/// change, read from `live`), else the campaign's own, `spec`'s.
pub fn admit_rate(live: Option<&QueueProgress>, spec: &crate::campaign::QueueSpec) -> u32 {
    live.map(|q| q.admit_per_s)
        .filter(|r| *r > 0)
        .unwrap_or(spec.admit_per_s)
}

impl QueueProgress {
    /// Shoppers still waiting to be let through.
    pub fn waiting(&self) -> u64 {
        if self.drawn_ms.is_some() {
            self.line.saturating_sub(self.admitted)
        } else {
            self.pre
        }
    }
}

const QUEUE_FIELDS: [&str; 12] = {
    use keys::meta::*;
    [
        ADMITTED,
        PRE,
        SEQ,
        DRAWN_MS,
        SEED,
        ADMIT_PER_S,
        PASS_TTL_MS,
        USED,
        EXPIRED,
        SOLD_OUT,
        STATE,
        SEED_SHA1,
    ]
};

/// What a node follows of a waiting room, one call: its counters (not the seed).
pub fn queue_counters(campaign: &str) -> Cmd {
    redis::cmd("HMGET")
        .arg(keys::QueueKeys::new(campaign).meta())
        .arg(&QUEUE_FIELDS)
        .clone()
}

/// A waiting room in full, for operators: the counters, the pre-queue's and the
/// outstanding passes' sizes, and the lease's holder (one slot: send them together).
pub fn queue_progress(campaign: &str) -> [Cmd; 4] {
    let k = keys::QueueKeys::new(campaign);
    [
        queue_counters(campaign),
        redis::cmd("ZCARD").arg(k.pre()).clone(),
        redis::cmd("ZCARD").arg(k.passes()).clone(),
        redis::cmd("GET").arg(k.lease()).clone(),
    ]
}

/// The counters from the reply of [`queue_counters`]; `pre` counts the pre-queue only
/// once drawn (a node does not need it before), and the seed stays hidden until then.
pub fn read_queue_counters(v: &Value) -> QueueProgress {
    let fields: &[Value] = match v {
        Value::Array(f) => f,
        _ => &[],
    };
    let n = |i: usize| int(fields.get(i)).unwrap_or(0).max(0) as u64;
    let drawn_ms = int(fields.get(3)).filter(|t| *t > 0);
    QueueProgress {
        admitted: n(0),
        pre: n(1),
        line: if drawn_ms.is_some() { n(1) + n(2) } else { 0 },
        drawn_ms,
        seed: drawn_ms.and_then(|_| text(fields.get(4))),
        seed_sha1: text(fields.get(11)),
        admit_per_s: n(5) as u32,
        pass_ttl_ms: n(6) as i64,
        used: n(7),
        expired: n(8),
        sold_out: n(9) == 1,
        outstanding: 0,
        leader: None,
    }
}

/// The progress from the replies of [`queue_progress`], in order.
pub fn read_queue_progress(replies: &[Value]) -> QueueProgress {
    let mut q = read_queue_counters(replies.first().unwrap_or(&Value::Nil));
    let pre = replies
        .get(1)
        .and_then(|v| int(Some(v)))
        .unwrap_or(0)
        .max(0) as u64;
    if q.drawn_ms.is_none() {
        q.pre = pre;
    }
    q.outstanding = replies
        .get(2)
        .and_then(|v| int(Some(v)))
        .unwrap_or(0)
        .max(0) as u64;
    q.leader = replies.get(3).and_then(|v| text(Some(v)));
    q
}

/// A campaign's last reconciliation.
pub fn verdict(campaign: &str) -> Cmd {
    redis::cmd("HMGET")
        .arg(keys::verdict(campaign))
        .arg(&["at_ms", "violations"])
        .clone()
}

/// When the last reconciliation ran (ms) and how many violations it found, if it ran.
pub fn read_verdict(v: &Value) -> Option<(i64, u64)> {
    let Value::Array(f) = v else { return None };
    match (f.first(), f.get(1)) {
        (Some(Value::Nil), _) | (_, Some(Value::Nil)) => None,
        (at, n) => Some((int(at)?, int(n)?.max(0) as u64)),
    }
}

/// Redis's clock.
pub fn time() -> Cmd {
    redis::cmd("TIME")
}

/// Redis's clock in ms, from the reply of [`time`].
pub fn read_time(v: &Value) -> Option<i64> {
    let Value::Array(parts) = v else { return None };
    let (s, us) = (int(parts.first())?, int(parts.get(1))?);
    Some(s * 1000 + us / 1000)
}

/// A shard's record of its last second: written to its node's hash, which expires
/// after `ttl_s` without a refresh, with the node listed in the fleet; members silent
/// for `forget_ms` leave the fleet.
pub fn node_record(
    node: &str,
    shard: usize,
    json: &str,
    now_ms: i64,
    ttl_s: u64,
    forget_ms: i64,
) -> [Cmd; 4] {
    let key = keys::node(node);
    [
        redis::cmd("HSET")
            .arg(&key)
            .arg(format!("shard:{shard}"))
            .arg(json)
            .clone(),
        redis::cmd("EXPIRE").arg(&key).arg(ttl_s).clone(),
        redis::cmd("ZADD")
            .arg(keys::FLEET)
            .arg(now_ms)
            .arg(format!("node:{node}"))
            .clone(),
        redis::cmd("ZREMRANGEBYSCORE")
            .arg(keys::FLEET)
            .arg("-inf")
            .arg(now_ms - forget_ms)
            .clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_read_as_the_commands_promise() {
        let hash = Value::Array(vec![bulk("state"), bulk("live"), bulk("total"), bulk("5")]);
        let f = read_fields(&hash);
        assert_eq!(f.get("state").map(String::as_str), Some("live"));
        assert_eq!(f.len(), 2);
        assert!(read_campaign(&Value::Array(vec![])).is_none());
        let bl = Value::Array(vec![bulk("ip:10.0.0.9"), bulk("1700000000000")]);
        assert_eq!(
            read_blacklist(&bl).get("ip:10.0.0.9"),
            Some(&1_700_000_000_000)
        );
        let t = Value::Array(vec![bulk("1700000000"), bulk("250000")]);
        assert_eq!(read_time(&t), Some(1_700_000_000_250));
        assert_eq!(
            read_strings(&Value::Array(vec![bulk("a"), bulk("b")])),
            vec!["a".to_string(), "b".to_string()]
        );
    }

    #[test]
    fn commands_name_the_keys_of_the_key_schema() {
        let packed = |c: &Cmd| String::from_utf8_lossy(&c.get_packed_command()).into_owned();
        assert!(packed(&version()).contains(keys::CONTROL_VERSION));
        assert!(packed(&limits()).contains(keys::LIMITS));
        let [zadd, bump, publish] = block("user:mallory", 42);
        assert!(packed(&zadd).contains(keys::BLACKLIST) && packed(&zadd).contains("user:mallory"));
        assert!(packed(&bump).contains(keys::BLACKLIST_VERSION));
        assert!(packed(&publish).contains(keys::CONTROL_CHANNEL));
        let record = node_record("n1", 3, "{}", 1000, 5, 60_000);
        assert!(packed(&record[0]).contains(&keys::node("n1")));
        assert!(packed(&record[0]).contains("shard:3"));
    }
}
