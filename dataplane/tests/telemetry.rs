//! Fleet telemetry: every node and worker writes its record of the last second to Redis,
//! and the records vanish when their writer stops.

mod common;

use common::*;
use seckill_core::telemetry;
use std::time::Duration;

#[test]
fn nodes_and_workers_report_each_second_and_vanish_when_stopped() {
    let redis = Redis::start();
    let mut node = Node::start_with(&redis, 2, "node = \"edge-1\"");
    open_sale(&redis, &node, spec("tele", 5, 2, 1));
    let c = node.client();

    // Ten buyers for five units, one of them paying; a bad request on the side.
    let mut won = Vec::new();
    for i in 0..10 {
        let token = c.token(&format!("u{i}"));
        let (code, body) = c.purchase("tele", &token, None);
        if code == 200 {
            won.push((body["order_id"].as_str().expect("id").to_string(), token));
        }
    }
    assert_eq!(won.len(), 5);
    let (order, token) = &won[0];
    assert_eq!(c.pay(order, token).0, 200);
    assert_eq!(c.get("/api/nope", None).0, 404);

    // Within a few seconds the fleet shows the node, its shards, what they answered, and
    // the worker that delivered the paid order.
    let mut con = redis.con();
    let mut seen: std::collections::BTreeMap<String, f64> = Default::default();
    let mut routes = std::collections::BTreeSet::new();
    let mut fleet = telemetry::Fleet::default();
    wait_until(
        "the records of those answers",
        Duration::from_secs(10),
        || {
            fleet = telemetry::read_fleet(&mut con).expect("fleet");
            for n in &fleet.nodes {
                for (o, r) in &n.outcomes_per_s {
                    *seen.entry(o.clone()).or_default() += r;
                }
                routes.extend(n.routes.keys().cloned());
            }
            let delivered = fleet.workers.iter().any(|w| w.delivered >= 1);
            seen.get("ok").is_some_and(|v| *v >= 1.0)
                && seen.contains_key("sold_out")
                && seen.contains_key("not_found")
                && ["session", "purchase", "pay", "other"]
                    .iter()
                    .all(|r| routes.contains(*r))
                && delivered
        },
    );
    let n = fleet
        .nodes
        .iter()
        .find(|n| n.node == "edge-1")
        .expect("the node");
    assert_eq!((n.shards, n.shards_reporting), (2, 2));
    assert_eq!(n.redis, "up");
    assert!(n.started_ms > 0 && n.at_ms >= n.started_ms);
    let w = &fleet.workers[0];
    assert_eq!((w.lag, w.pending), (0, 0));

    let l = ledger_holds(&redis, "tele");
    assert_eq!((l.held, l.sold), (4, 1), "{l}");

    // A stopped node's record expires.
    node.terminate();
    wait_until(
        "the stopped node to leave the fleet",
        Duration::from_secs(telemetry::RECORD_TTL_S + 5),
        || {
            let f = telemetry::read_fleet(&mut con).expect("fleet");
            f.nodes.is_empty() && f.workers.is_empty()
        },
    );
}
