//! The same code on a Redis Cluster: 3 masters and 3 replicas started by the test
//! (`scripts/cluster.sh`), two data plane processes each with its own worker and order
//! store, campaigns whose partitions spread over the masters. Through a plain surge, a
//! master killed and its replica promoted, and slots migrated under load, the ledger must
//! come out exact, no acknowledged purchase may be lost, and every order must reconcile
//! with the stores.

mod common;

use common::{open_sale, reconciled, spec, wait_until, Cluster, Node, RedisUrl};
use seckill_core::campaign::Action;
use seckill_core::control;
use seckill_core::keys::{partition_of, PartitionKeys};
use seckill_core::telemetry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 8;

/// What a surge came to.
#[derive(Default)]
struct Surge {
    /// Order ids each shopper was answered 200 with.
    won: HashMap<usize, HashSet<String>>,
    /// 503s (Redis unreachable, or outcome unknown), each retried with the same key.
    unavailable: usize,
    /// Purchases still answered 503 after 30 s of retries.
    gave_up: usize,
    /// When the last shopper was done.
    ended: Option<Instant>,
}

/// `users` shoppers, alternately on each node, each buying with two keys (the second
/// sent twice); a 503 is retried with the same key, as a client should. `during` runs
/// meanwhile; until it is over, the shoppers keep resending their first key (each
/// resend runs the purchase script on the shopper's partition, and must get the first
/// answer back).
fn surge(nodes: [&Node; 2], campaign: &str, users: usize, during: impl FnOnce()) -> Surge {
    let out = Mutex::new(Surge::default());
    let over = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..24 {
            let (out, over) = (&out, &over);
            s.spawn(move || {
                let tokens = nodes[0].client();
                let agent = common::agent_with(|c| c.timeout_global(Some(Duration::from_secs(10))));
                let mine: Vec<(usize, String)> = (t..users)
                    .step_by(24)
                    .map(|u| (u, tokens.token(&format!("orbiter-{u}"))))
                    .collect();
                let buy = |user: usize, token: &str, key: &str| {
                    let url = nodes[user % 2].url(&format!("/api/campaigns/{campaign}/purchase"));
                    let first = Instant::now();
                    loop {
                        if first.elapsed() > Duration::from_secs(30) {
                            out.lock().expect("lock").gave_up += 1;
                            return;
                        }
                        let res = agent
                            .post(&url)
                            .header("Authorization", &format!("Bearer {token}"))
                            .header("Idempotency-Key", key)
                            .send("{}");
                        match res {
                            Ok(mut r) if r.status().as_u16() < 400 => {
                                let v: serde_json::Value = r.body_mut().read_json().expect("json");
                                let id = v["order_id"].as_str().expect("order id");
                                let mut o = out.lock().expect("lock");
                                o.won.entry(user).or_default().insert(id.to_string());
                                return;
                            }
                            Ok(r) if r.status() == 503 => {
                                common::status_of(r);
                                out.lock().expect("lock").unavailable += 1;
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            Ok(r) => {
                                let code = r.status().as_u16();
                                let v = common::body_json(r);
                                assert_eq!(code, 409, "user {user}, key {key}: {v}");
                                return;
                            }
                            Err(e) => panic!("transport: {e}"),
                        }
                    }
                };
                for (user, token) in &mine {
                    for key in ["k1", "k2", "k2"] {
                        buy(*user, token, key);
                    }
                }
                while !over.load(Ordering::Relaxed) {
                    for (user, token) in &mine {
                        buy(*user, token, "k1");
                    }
                }
                let mut o = out.lock().expect("lock");
                o.ended = o.ended.max(Some(Instant::now()));
            });
        }
        during();
        over.store(true, Ordering::Relaxed);
    });
    out.into_inner().expect("lock")
}

/// Every unit went to exactly one order, within the per-user limit; every acknowledged
/// order exists in Redis; half the winners pay; the ledger holds and every order is in
/// one of the stores.
fn check(
    cluster: &Cluster,
    nodes: [&Node; 2],
    campaign: &str,
    units: u64,
    limit: usize,
    s: &Surge,
) {
    let orders: Vec<(usize, &String)> = s
        .won
        .iter()
        .flat_map(|(u, ids)| ids.iter().map(move |id| (*u, id)))
        .collect();
    assert_eq!(s.gave_up, 0, "purchases still unavailable after 30 s");
    let ledger = common::ledger_holds(cluster, campaign);
    assert_eq!(ledger.total, units as i64);
    assert_eq!(
        orders.len() as i64,
        ledger.held + ledger.sold,
        "every unit taken was acknowledged to one shopper, none twice: {ledger}"
    );
    assert_eq!(
        ledger.remaining + ledger.in_transit,
        0,
        "every unit went: {ledger}"
    );
    assert!(s.won.values().all(|o| o.len() <= limit), "per-user limit");
    let mut con = cluster.con();
    for (user, id) in &orders {
        let keys = PartitionKeys::new(
            campaign,
            partition_of(&format!("orbiter-{user}"), PARTITIONS),
        );
        let status: Option<String> = redis::cmd("HGET")
            .arg(keys.order(id))
            .arg("status")
            .query(&mut con)
            .expect("read order");
        assert!(status.is_some(), "acknowledged order {id} lost");
    }
    // Paying is idempotent, so a 503 (a master just promoted, its new replica still
    // syncing) is retried as a client would, for as long as a purchase is.
    let client = nodes[0].client();
    for (user, id) in orders.iter().filter(|(u, _)| u % 2 == 0) {
        let token = client.token(&format!("orbiter-{user}"));
        let first = Instant::now();
        let (code, v) = loop {
            let (code, v) = client.pay(id, &token);
            if code != 503 || first.elapsed() > Duration::from_secs(30) {
                break (code, v);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(code, 200, "{v}");
    }
    let report = reconciled(cluster, campaign, &[nodes[0].db(), nodes[1].db()]);
    assert!(
        report.holds() && report.missing.is_empty() && report.drained(),
        "{report}"
    );
    common::ledger_holds(cluster, campaign);
}

fn sale(cluster: &Cluster, nodes: [&Node; 2], id: &str, units: u64, limit: u32) {
    open_sale(cluster, nodes[0], spec(id, units, PARTITIONS, limit));
    common::wait_state(nodes[1], id, "live");
}

#[test]
fn a_crowd_across_two_nodes_and_three_masters_gets_exactly_the_stock() {
    let cluster = Cluster::start();
    assert_eq!(cluster.masters().len(), 3);
    assert!(cluster.con().is_cluster());
    let (a, b) = (Node::start(&cluster, 2), Node::start(&cluster, 1));
    sale(&cluster, [&a, &b], "orbit", 600, 2);
    let spread: HashSet<u16> = (0..PARTITIONS)
        .map(|p| cluster.master_of(&PartitionKeys::new("orbit", p).part()))
        .collect();
    assert_eq!(spread.len(), 3, "partitions on every master");
    let s = surge([&a, &b], "orbit", 1500, || {});
    assert_eq!(s.unavailable, 0);
    check(&cluster, [&a, &b], "orbit", 600, 2, &s);

    // The fleet as the console sees it: both nodes and both workers.
    let mut con = cluster.con();
    wait_until(
        "both nodes and workers in the fleet",
        Duration::from_secs(5),
        || {
            let fleet = telemetry::read_fleet(&mut con).expect("fleet");
            fleet.nodes.len() == 2 && fleet.workers.len() == 2
        },
    );
    // A control-plane change reaches every node within a second.
    control::act(&mut con, "orbit", Action::Pause).expect("pause");
    let took = wait_until(
        "every node to see the pause",
        Duration::from_secs(1),
        || {
            [&a, &b]
                .iter()
                .all(|n| n.client().get("/api/campaigns/orbit", None).1["state"] == "paused")
        },
    );
    eprintln!("pause seen by both nodes after {took:?}");
}

#[test]
fn a_master_killed_mid_surge_loses_no_acknowledged_purchase() {
    let cluster = Cluster::start();
    // Replies wait for a replica (`WAIT 1`): what the promoted replica must have.
    let durable = "[redis_client]\nwait_replicas = 1\nwait_timeout_ms = 200\n";
    let (a, b) = (
        Node::start_with(&cluster, 2, durable),
        Node::start_with(&cluster, 1, durable),
    );
    sale(&cluster, [&a, &b], "fail", 2000, 1);
    let victim = cluster.master_of(&PartitionKeys::new("fail", 0).part());
    let mut restarted = None;
    let s = surge([&a, &b], "fail", 3000, || {
        std::thread::sleep(Duration::from_millis(700));
        cluster.kill(victim);
        let killed = Instant::now();
        wait_until("a replica to take over", Duration::from_secs(20), || {
            !cluster.masters().contains(&victim) && cluster.masters().len() == 3
        });
        eprintln!("failover took {:?}", killed.elapsed());
        // Back as a replica of the promoted one, so writes there can be confirmed again.
        cluster.restart(victim);
        restarted = Some(Instant::now());
    });
    assert!(s.ended > restarted, "the surge outlasted the failover");
    eprintln!("503s retried: {}", s.unavailable);
    check(&cluster, [&a, &b], "fail", 2000, 1, &s);
}

#[test]
fn slots_migrated_under_a_surge_keep_the_ledger_exact() {
    let cluster = Cluster::start();
    let (a, b) = (Node::start(&cluster, 2), Node::start(&cluster, 1));
    sale(&cluster, [&a, &b], "move", 2000, 1);
    let key = PartitionKeys::new("move", 0).part();
    let from = cluster.master_of(&key);
    let to = *cluster
        .masters()
        .iter()
        .find(|m| **m != from)
        .expect("another master");
    let mut moved = None;
    let s = surge([&a, &b], "move", 3000, || {
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        // Every slot of that master moves, partition 0's among them, key by key.
        cluster.reshard(from, to, 5461);
        eprintln!("reshard took {:?}", started.elapsed());
        moved = Some(Instant::now());
    });
    assert!(s.ended > moved, "the surge outlasted the migration");
    assert_eq!(cluster.master_of(&key), to, "the partition moved");
    eprintln!("503s retried: {}", s.unavailable);
    check(&cluster, [&a, &b], "move", 2000, 1, &s);
}

#[test]
fn a_waiting_room_on_its_own_slot_reserves_units_on_every_master() {
    let cluster = Cluster::start();
    let (a, b) = (Node::start(&cluster, 2), Node::start(&cluster, 1));
    let id = "queued";
    let mut con = cluster.con();
    let spec = common::queued(id, 30, 1_000, 60);
    let spec = seckill_core::campaign::CampaignSpec {
        partitions: PARTITIONS,
        ..spec
    };
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, id).expect("arm");
    for n in [&a, &b] {
        common::wait_state(n, id, "armed");
    }
    let spread: HashSet<u16> = (0..PARTITIONS)
        .map(|p| cluster.master_of(&PartitionKeys::new(id, p).part()))
        .collect();
    assert_eq!(spread.len(), 3, "partitions on every master");

    // 90 shoppers join the pre-queue on either node; 30 are let through and buy.
    let (ca, cb) = (a.client(), b.client());
    let tokens: Vec<String> = (0..90).map(|i| ca.token(&format!("q{i}"))).collect();
    for (i, t) in tokens.iter().enumerate() {
        let c = if i % 2 == 0 { &ca } else { &cb };
        let (code, v) = c.post(&format!("/api/campaigns/{id}/queue"), Some(t), "");
        assert_eq!(code, 200, "{v}");
    }
    control::act(&mut con, id, Action::Start).expect("start");
    let mut bought = HashSet::new();
    wait_until(
        "every unit bought with a pass",
        Duration::from_secs(20),
        || {
            for (i, t) in tokens.iter().enumerate() {
                if bought.contains(&i) {
                    continue;
                }
                let c = if i % 2 == 0 { &cb } else { &ca };
                let (_, v) = c.get(&format!("/api/campaigns/{id}/queue"), Some(t));
                if v["state"] == "admitted" {
                    let (code, r) = common::buy_with(c, id, t, v["ticket"].as_str());
                    assert_eq!(code, 200, "a pass holder buys: {r}");
                    bought.insert(i);
                }
                let c = control::get(&mut con, id).expect("campaign");
                let (left, passes) = control::reservation(&mut con, &c).expect("reservation");
                assert!(passes as i64 <= left, "{passes} passes for {left} units");
            }
            bought.len() == 30
        },
    );
    wait_until("the rest told sold_out", Duration::from_secs(5), || {
        (0..90).filter(|i| !bought.contains(i)).all(|i| {
            ca.get(&format!("/api/campaigns/{id}/queue"), Some(&tokens[i]))
                .1["state"]
                == "sold_out"
        })
    });
    common::ledger_holds(&cluster, id);
}
