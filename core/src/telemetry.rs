//! Fleet telemetry in the control plane. Every shard of every node counts its answers by
//! route and outcome, and once a second writes what it saw in that second to its node's
//! hash (`sk:node:{node}`, field `shard:{i}`); every order worker writes its own record
//! (`sk:worker:{name}`). Both expire within seconds, so a dead node or worker disappears,
//! and both are listed in `sk:fleet` by when they last reported. The console reads them
//! with [`read_fleet`].

use crate::connection::Connection;
use crate::keys;
use redis::Commands;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Records live this long without a refresh.
pub const RECORD_TTL_S: u64 = 5;
/// Members not heard of for this long are dropped from the fleet set.
pub const FORGET_MS: i64 = 60_000;

/// Latency of one route in a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteStats {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// What one shard saw in one window (about a second).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub node: String,
    pub shard: usize,
    pub shards: usize,
    pub started_ms: i64,
    pub at_ms: i64,
    pub window_ms: u64,
    /// Answers by outcome: `ok`, or the error code (`sold_out`, `rate_limited`, …).
    pub outcomes: BTreeMap<String, u64>,
    pub routes: BTreeMap<String, RouteStats>,
    /// Round trip of the shard's Redis commands, queueing included.
    pub redis_p99_ms: f64,
    /// `up`, `down` (no connection) or `breaker_open`.
    pub redis: String,
}

/// What an order worker did in its last window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub name: String,
    pub started_ms: i64,
    pub at_ms: i64,
    /// Events not read by any worker yet, over every stream.
    pub lag: u64,
    /// Events read and not acknowledged yet.
    pub pending: u64,
    pub events_per_s: f64,
    pub delivered_per_s: f64,
    pub delivered: u64,
    pub pay_to_delivered_p99_ms: f64,
    /// Paid orders the worker could not deliver (no code left in the pool) and keeps
    /// pending to try again.
    #[serde(default)]
    pub undelivered: u64,
}

/// Writes a worker's record (from the worker's own thread).
pub fn write_worker(con: &mut Connection, r: &WorkerRecord) -> redis::RedisResult<()> {
    let json = serde_json::to_string(r).unwrap_or_default();
    con.pipeline(
        redis::pipe()
            .set_ex(keys::worker(&r.name), json, RECORD_TTL_S)
            .ignore()
            .zadd(keys::FLEET, format!("worker:{}", r.name), r.at_ms)
            .ignore(),
    )
}

/// A node, from its shards' latest records.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeView {
    pub node: String,
    pub shards: usize,
    pub shards_reporting: usize,
    pub started_ms: i64,
    /// When its freshest record was written.
    pub at_ms: i64,
    /// Answers per second, by outcome, summed over its shards.
    pub outcomes_per_s: BTreeMap<String, f64>,
    /// Per route: answers counted in the shards' windows, the median of the shards' p50
    /// and the worst shard's p99 (percentiles of different shards cannot be merged
    /// exactly).
    pub routes: BTreeMap<String, RouteStats>,
    pub redis_p99_ms: f64,
    /// The worst shard's Redis state.
    pub redis: String,
}

impl NodeView {
    pub fn requests_per_s(&self) -> f64 {
        self.outcomes_per_s.values().sum()
    }

    /// Folds shard records into one view of the node.
    pub fn of(node: &str, records: &[ShardRecord]) -> NodeView {
        let mut v = NodeView {
            node: node.to_string(),
            redis: "up".into(),
            ..NodeView::default()
        };
        let mut p50s: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in records {
            v.shards = v.shards.max(r.shards);
            v.shards_reporting += 1;
            v.started_ms = r.started_ms;
            v.at_ms = v.at_ms.max(r.at_ms);
            let secs = (r.window_ms.max(1) as f64) / 1000.0;
            for (o, n) in &r.outcomes {
                *v.outcomes_per_s.entry(o.clone()).or_default() += *n as f64 / secs;
            }
            for (route, s) in &r.routes {
                let e = v.routes.entry(route.clone()).or_default();
                e.count += s.count;
                e.p99_ms = e.p99_ms.max(s.p99_ms);
                p50s.entry(route.clone()).or_default().push(s.p50_ms);
            }
            v.redis_p99_ms = v.redis_p99_ms.max(r.redis_p99_ms);
            let rank = |s: &str| match s {
                "down" => 2,
                "breaker_open" => 1,
                _ => 0,
            };
            if rank(&r.redis) > rank(&v.redis) {
                v.redis = r.redis.clone();
            }
        }
        for (route, mut p) in p50s {
            p.sort_by(f64::total_cmp);
            if let Some(e) = v.routes.get_mut(&route) {
                e.p50_ms = p[p.len() / 2];
            }
        }
        v
    }
}

/// Every node and worker that reported within the records' lifetime.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fleet {
    pub nodes: Vec<NodeView>,
    pub workers: Vec<WorkerRecord>,
}

impl Fleet {
    /// Answers per second by outcome over the whole fleet.
    pub fn outcomes_per_s(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for n in &self.nodes {
            for (o, r) in &n.outcomes_per_s {
                *out.entry(o.clone()).or_default() += r;
            }
        }
        out
    }
}

/// Reads the fleet's records.
pub fn read_fleet(con: &mut Connection) -> redis::RedisResult<Fleet> {
    let since = crate::now_ms() - RECORD_TTL_S as i64 * 1000;
    let members: Vec<String> = con.zrangebyscore(keys::FLEET, since, "+inf")?;
    let mut fleet = Fleet::default();
    for m in members {
        if let Some(node) = m.strip_prefix("node:") {
            let fields: HashMap<String, String> = con.hgetall(keys::node(node))?;
            // A shard that stopped writing (a node restarted with fewer shards, or one
            // shard lost Redis) leaves its last record behind: only fresh ones count.
            let records: Vec<ShardRecord> = fields
                .iter()
                .filter(|(k, _)| k.starts_with("shard:"))
                .filter_map(|(_, v)| serde_json::from_str::<ShardRecord>(v).ok())
                .filter(|r| r.at_ms >= since)
                .collect();
            if !records.is_empty() {
                fleet.nodes.push(NodeView::of(node, &records));
            }
        } else if let Some(name) = m.strip_prefix("worker:") {
            let json: Option<String> = con.get(keys::worker(name))?;
            if let Some(r) = json.and_then(|j| serde_json::from_str(&j).ok()) {
                fleet.workers.push(r);
            }
        }
    }
    fleet.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    fleet.workers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(fleet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_view_sums_rates_and_keeps_the_worst_p99() {
        let shard = |i: usize, ok: u64, p99: f64, redis: &str| ShardRecord {
            node: "n".into(),
            shard: i,
            shards: 2,
            window_ms: 500,
            outcomes: BTreeMap::from([("ok".into(), ok), ("sold_out".into(), 10)]),
            routes: BTreeMap::from([(
                "purchase".into(),
                RouteStats {
                    count: ok + 10,
                    p50_ms: 1.0 + i as f64,
                    p99_ms: p99,
                },
            )]),
            redis: redis.into(),
            ..ShardRecord::default()
        };
        let v = NodeView::of(
            "n",
            &[shard(0, 100, 3.0, "up"), shard(1, 50, 9.0, "breaker_open")],
        );
        assert_eq!(v.shards_reporting, 2);
        assert_eq!(v.outcomes_per_s["ok"], 300.0);
        assert_eq!(v.outcomes_per_s["sold_out"], 40.0);
        assert_eq!(v.requests_per_s(), 340.0);
        assert_eq!(v.routes["purchase"].p99_ms, 9.0);
        assert_eq!(v.routes["purchase"].count, 170);
        assert_eq!(v.redis, "breaker_open");
    }
}
