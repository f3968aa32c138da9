//! Campaigns in the control plane as the tests set them up, and what the tests check of
//! them: the stock, the ledger, reconciliation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use seckill_core::campaign::{Action, CampaignSpec};
use seckill_core::control;

use crate::node::Node;
use crate::users::RedisUrl;
use crate::wait::wait_until;

pub fn spec(id: &str, total: u64, partitions: u32, limit: u32) -> CampaignSpec {
    CampaignSpec {
        id: id.into(),
        name: format!("test campaign {id}"),
        total,
        partitions,
        per_user_limit: limit,
        hold_ttl_s: 300,
        price_cents: 500,
        currency: "EUR".into(),
        payment_url: None,
        starts_at: None,
        ends_at: None,
        codes_file: None,
        content_file: None,
        require_ticket: false,
        ticket_factor: 3,
        queue: None,
    }
}

/// A campaign of one unit per shopper with a waiting room.
pub fn queued(id: &str, total: u64, admit_per_s: u32, pass_ttl_s: u64) -> CampaignSpec {
    CampaignSpec {
        queue: Some(seckill_core::campaign::QueueSpec {
            admit_per_s,
            pass_ttl_s,
        }),
        ..spec(id, total, 4, 1)
    }
}

/// Creates and arms a campaign (a waiting room opens), and waits until the node shows it.
pub fn arm(redis: &impl RedisUrl, node: &Node, spec: CampaignSpec) {
    let mut con = redis.con();
    let id = spec.id.clone();
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, &id).expect("arm");
    wait_state(node, &id, "armed");
}

/// Creates, arms and starts a campaign, and waits until the node sells it.
pub fn open_sale(redis: &impl RedisUrl, node: &Node, spec: CampaignSpec) {
    let mut con = redis.con();
    let id = spec.id.clone();
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, &id).expect("arm");
    control::act(&mut con, &id, Action::Start).expect("start");
    wait_state(node, &id, "live");
}

/// Waits until every shard of `node` shows campaign `id` in `state`. Each shard learns
/// of a change on its own, at the latest by its next control-plane poll (`control.poll_ms`,
/// 250 ms); fresh connections land on any shard. Once 16 fresh connections agree, one
/// more poll interval covers a shard none of them reached.
pub fn wait_state(node: &Node, id: &str, state: &str) {
    wait_until(
        &format!("every shard to see {id} {state}"),
        Duration::from_secs(5),
        || {
            (0..16).all(|_| {
                node.client().get(&format!("/api/campaigns/{id}"), None).1["state"] == state
            })
        },
    );
    std::thread::sleep(Duration::from_millis(300));
}

/// Units on a campaign's shelves, from its counters alone (one transaction): what a test
/// can wait on while scripts still move units, where the whole ledger, read a command at a
/// time, could catch a release half-read.
pub fn remaining(redis: &impl RedisUrl, id: &str) -> i64 {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    control::partitions(&mut con, &c)
        .expect("counters")
        .iter()
        .map(|p| p.stock)
        .sum()
}

/// Sets limits in the control plane (`name`, value), as `seckill-dataplane limits set` does;
/// nodes read them within a second.
pub fn limits(redis: &impl RedisUrl, pairs: &[(&str, &str)]) {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    control::set_limits(&mut redis.con(), &pairs).expect("set limits");
}

/// Checks a campaign's ledger, failing the test when it does not hold.
pub fn ledger_holds(redis: &impl RedisUrl, id: &str) -> seckill_core::ledger::Ledger {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    let l = seckill_core::ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
    l
}

/// Polls reconciliation until the pipeline has drained and the ledger holds.
pub fn reconciled(
    redis: &impl RedisUrl,
    campaign: &str,
    stores: &[PathBuf],
) -> seckill_orders::reconcile::Report {
    let mut con = redis.con();
    let start = Instant::now();
    loop {
        let r =
            seckill_orders::reconcile::reconcile(&mut con, campaign, stores).expect("reconcile");
        if (r.drained() && r.holds() && r.missing.is_empty())
            || start.elapsed() > Duration::from_secs(20)
        {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
