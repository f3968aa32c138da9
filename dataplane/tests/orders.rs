//! After the hold: payment, expiry, delivery, downloads and reconciliation, against a real
//! redis-server, real data plane and worker processes, and real SQLite files.

mod common;

use common::{get_text, node_keys, open_sale, reconciled, spec, Client, Node, Redis, WorkerProc};
use seckill_core::auth::sign_download;
use seckill_core::keys::PartitionKeys;
use seckill_core::{control, scripts};
use seckill_orders::OrderDb;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// Each user buys once, from `threads` connections at a time; returns the held orders as
/// (user token, order id).
fn crowd(
    node: &Node,
    campaign: &str,
    users: std::ops::Range<usize>,
    threads: usize,
) -> Vec<(String, String)> {
    let users: Arc<Vec<usize>> = Arc::new(users.collect());
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (c, users, campaign) = (node.client(), users.clone(), campaign.to_string());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for u in users.iter().skip(t).step_by(threads) {
                    let token = c.token(&format!("buyer-{u}"));
                    // A client told "busy" retries after a moment, with the same key.
                    let key = format!("buy-{u}");
                    let (code, body) = loop {
                        let (code, body) = c.purchase(&campaign, &token, Some(&key));
                        if body["error"] != "busy" {
                            break (code, body);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    };
                    if code == 200 {
                        held.push((token, body["order_id"].as_str().expect("id").to_string()));
                    } else {
                        assert_eq!(body["error"], "sold_out", "{code} {body}");
                    }
                }
                held
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("buyer"))
        .collect()
}

/// Orders of `campaign` in the store at `db` so far (none before the worker made it).
fn stored(db: &std::path::Path, campaign: &str) -> usize {
    OrderDb::open_existing(db)
        .and_then(|db| db.orders(campaign))
        .map(|o| o.len())
        .unwrap_or(0)
}

fn order(c: &Client, id: &str, token: &str) -> serde_json::Value {
    let (code, body) = c.get(&format!("/api/orders/{id}"), Some(token));
    assert_eq!(code, 200, "{body}");
    body
}

fn wait_for(what: &str, limit: Duration, ok: impl FnMut() -> bool) {
    common::wait_until(what, limit, ok);
}

#[test]
fn unpaid_holds_expire_and_sell_again_and_paid_ones_are_delivered_once() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let mut s = spec("drop", 200, 4, 1);
    s.hold_ttl_s = 2;
    open_sale(&redis, &node, s);
    let c = node.client();

    let first = crowd(&node, "drop", 0..400, 16);
    assert_eq!(first.len(), 200);
    let (pay, abandon) = first.split_at(100);
    for (token, id) in pay {
        let (code, body) = c.pay(id, token);
        assert_eq!(
            (code, body["status"].as_str()),
            (200, Some("paid")),
            "{body}"
        );
        // Paying again answers the same and changes nothing.
        assert_eq!(c.pay(id, token), (code, body));
    }
    // The abandoned holds run out; their units come back and the sale is live again.
    wait_for(
        "expired holds to be released",
        Duration::from_secs(10),
        || c.get("/api/campaigns/drop", None).1["remaining"] == 100,
    );
    assert_eq!(c.get("/api/campaigns/drop", None).1["state"], "live");
    for (token, id) in abandon.iter().take(5) {
        let (code, body) = c.pay(id, token);
        assert_eq!((code, body["error"].as_str()), (410, Some("expired")));
        // The money came after the hold: owed back, the unit stays in stock.
        let late = order(&c, id, token);
        assert_eq!(late["status"], "refund_due", "{late}");
        assert_eq!(late["refunds_due"][0]["reason"], "expired", "{late}");
        assert_eq!(late["refunds_due"][0]["amount_cents"], 500, "{late}");
    }
    assert_eq!(c.get("/api/campaigns/drop", None).1["remaining"], 100);
    // An abandoning buyer may try again: the expired hold no longer counts.
    let (token, _) = &abandon[0];
    let (code, retry) = c.purchase("drop", token, None);
    assert_eq!(code, 200, "{retry}");
    let retry_id = retry["order_id"].as_str().expect("id").to_string();
    assert_eq!(c.pay(&retry_id, token).0, 200);

    let second = crowd(&node, "drop", 1000..1300, 16);
    assert_eq!(
        second.len(),
        99,
        "the released units, less the one bought again"
    );
    for (token, id) in &second {
        assert_eq!(c.pay(id, token).0, 200);
    }
    assert_eq!(
        c.purchase("drop", &c.token("late"), None).1["error"],
        "sold_out"
    );

    // Every paid order is delivered, with a licence key of its own.
    let mut keys = std::collections::HashSet::new();
    for (token, id) in pay
        .iter()
        .chain(&second)
        .chain([&(token.clone(), retry_id.clone())])
    {
        wait_for("delivery", Duration::from_secs(10), || {
            order(&c, id, token)["status"] == "delivered"
        });
        let o = order(&c, id, token);
        assert!(keys.insert(o["license_key"].as_str().expect("key").to_string()));
    }
    assert_eq!(keys.len(), 200);

    let r = reconciled(&redis, "drop", &[node.db()]);
    eprintln!("{r}");
    assert!(r.holds(), "{r}");
    assert_eq!(r.orders_in_redis.get("delivered"), Some(&200));
    // The five paid late are owed their money back; the store follows Redis.
    assert_eq!(r.orders_in_redis.get("expired"), Some(&95));
    assert_eq!(r.orders_in_redis.get("refund_due"), Some(&5));
    wait_for("the stores to catch up", Duration::from_secs(10), || {
        reconciled(&redis, "drop", &[node.db()]).orders_in_stores == r.orders_in_redis
    });
    assert_eq!(
        (r.ledger.sold, r.ledger.held, r.ledger.remaining),
        (200, 0, 0)
    );
}

#[test]
fn a_worker_killed_mid_batch_loses_nothing_and_writes_nothing_twice() {
    let redis = Redis::start();
    let node = Node::start_without_worker(&redis, 2);
    open_sale(&redis, &node, spec("crash", 3000, 8, 1));
    let mut first = WorkerProc::start(&redis, "w1");
    let stored = |db: &std::path::Path| stored(db, "crash");
    let buyers = std::thread::scope(|s| {
        let h = s.spawn(|| crowd(&node, "crash", 0..3000, 32));
        // Kill the worker while it is busy with the surge's events: once it has stored
        // its first batch, however fast the machine runs the crowd.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while stored(&first.db) < 64 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        first.kill();
        h.join().expect("crowd")
    });
    assert_eq!(buyers.len(), 3000);
    let stored_by_first = stored(&first.db);
    let c = node.client();
    for (token, id) in buyers.iter().step_by(2) {
        assert_eq!(c.pay(id, token).0, 200);
    }
    let second = WorkerProc::start(&redis, "w2");
    let r = reconciled(&redis, "crash", &[first.db.clone(), second.db.clone()]);
    eprintln!("first worker stored {stored_by_first} orders before SIGKILL\n{r}");
    assert!(
        stored_by_first < 3000,
        "the worker was not killed mid-surge"
    );
    assert!(r.holds(), "{r}");
    assert!(r.drained());
    assert!(r.missing.is_empty() && r.delivered_twice.is_empty());
    assert_eq!(r.orders_in_redis.get("delivered"), Some(&1500));
    assert_eq!(r.orders_in_stores, r.orders_in_redis);
}

#[test]
fn a_worker_that_waits_for_a_replica_stores_nothing_the_replica_lacks() {
    let redis = Redis::start();
    let node = Node::start_without_worker(&redis, 1);
    open_sale(&redis, &node, spec("wait", 20, 2, 1));
    let held = crowd(&node, "wait", 0..20, 4);
    assert_eq!(held.len(), 20);
    let stored = |db: &std::path::Path| stored(db, "wait");
    // No replica yet: what the worker reads could vanish with its master in a failover,
    // so nothing of it is stored.
    let worker = WorkerProc::start_with(
        &redis,
        "w1",
        "[redis_client]\nwait_replicas = 1\nwait_timeout_ms = 100\n",
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        stored(&worker.db),
        0,
        "stored before any replica had the events"
    );

    // A replica joins: once it has the events, the worker stores them all.
    let dir = tempfile::tempdir().expect("tempdir");
    let users = redis.users();
    let replica_port = common::free_port();
    let mut replica = Command::new("redis-server")
        .arg(users.join("replication.conf"))
        .args(["--port", &replica_port.to_string(), "--bind", "127.0.0.1"])
        .args(["--replicaof", "127.0.0.1", &redis.port.to_string()])
        .arg("--aclfile")
        .arg(users.join("users.acl"))
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start replica");
    let took = common::wait_until(
        "the worker to store every order",
        Duration::from_secs(20),
        || stored(&worker.db) == 20,
    );
    eprintln!("stored every order {took:?} after the replica started");
    let _ = replica.kill();
    let _ = replica.wait();
    let r = reconciled(&redis, "wait", std::slice::from_ref(&worker.db));
    assert!(r.holds() && r.drained(), "{r}");
    assert!(r.missing.is_empty() && r.unknown.is_empty(), "{r}");
}

#[test]
fn a_payment_racing_the_expiry_of_its_hold_either_pays_or_expires() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let mut s = spec("race", 120, 2, 1);
    s.hold_ttl_s = 1;
    open_sale(&redis, &node, s);
    let held = crowd(&node, "race", 0..120, 8);
    assert_eq!(held.len(), 120);
    let pay_by: i64 = node
        .client()
        .get(&format!("/api/orders/{}", held[0].1), Some(&held[0].0))
        .1["pay_by_ms"]
        .as_i64()
        .expect("pay_by");

    // A releaser hammering every partition across the deadline, beside the node's own.
    let url = redis.url();
    let releaser = std::thread::spawn(move || {
        let mut con = control::connect(&url).expect("connect");
        while seckill_core::now_ms() < pay_by + 300 {
            for p in 0..2 {
                let k = PartitionKeys::new("race", p);
                let _: i64 = scripts::RELEASE
                    .key(k.part())
                    .key(k.holds())
                    .key(k.buyers())
                    .key(k.events())
                    .arg(k.order_prefix())
                    .arg(100)
                    .invoke(&mut con)
                    .expect("release");
            }
        }
    });
    // Payments spread from 100 ms before the deadline to 100 ms after it.
    let payers: Vec<_> = held
        .chunks(15)
        .enumerate()
        .map(|(i, chunk)| {
            let (c, chunk) = (node.client(), chunk.to_vec());
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                for (j, (token, id)) in chunk.iter().enumerate() {
                    let at = pay_by - 100 + ((i * 15 + j) as i64 * 200 / 120);
                    while seckill_core::now_ms() < at {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // A hold past its deadline on a partition lent to a shard answers
                    // 503 until the lease ends: tried again, as a provider does.
                    let mut code = c.pay(id, token).0;
                    for _ in 0..50 {
                        if code != 503 {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                        code = c.pay(id, token).0;
                    }
                    answers.push((token.clone(), id.clone(), code));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(String, String, u16)> = payers
        .into_iter()
        .flat_map(|h| h.join().expect("payer"))
        .collect();
    releaser.join().expect("releaser");
    let c = node.client();
    let (mut paid, mut expired) = (0, 0);
    for (token, id, code) in &answers {
        let status = || {
            order(&c, id, token)["status"]
                .as_str()
                .expect("status")
                .to_string()
        };
        match code {
            200 => {
                paid += 1;
                let status = status();
                assert!(
                    status == "paid" || status == "delivered",
                    "{id}: paid but {status}"
                );
            }
            410 => {
                expired += 1;
                // Released by the next release its partition allows: the sale is sold
                // out, and a partition lent to a shard releases once the lease is over.
                // Its money is owed back.
                common::wait_until(&format!("{id} to expire"), Duration::from_secs(5), || {
                    status() == "refund_due"
                });
            }
            other => panic!("{id}: pay answered {other}"),
        }
    }
    eprintln!("{paid} paid, {expired} expired");
    assert!(
        paid > 0 && expired > 0,
        "the race was not run: {paid} paid, {expired} expired"
    );
    let r = reconciled(&redis, "race", &[node.db()]);
    assert!(r.holds(), "{r}");
    assert_eq!(r.ledger.sold, paid);
    assert_eq!(r.ledger.remaining, expired);
}

#[test]
fn download_links_serve_the_file_only_when_valid() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    std::fs::write(node.content_dir().join("album.zip"), b"the album's bytes").expect("content");
    let mut s = spec("dl", 10, 2, 1);
    s.content_file = Some("album.zip".into());
    open_sale(&redis, &node, s);
    let c = node.client();
    let alice = c.token("alice");
    let (_, held) = c.purchase("dl", &alice, None);
    let id = held["order_id"].as_str().expect("id").to_string();
    assert!(
        order(&c, &id, &alice).get("download_url").is_none(),
        "no link before payment"
    );
    assert_eq!(c.pay(&id, &alice).0, 200);
    wait_for("delivery", Duration::from_secs(10), || {
        order(&c, &id, &alice)["status"] == "delivered"
    });
    let o = order(&c, &id, &alice);
    let url = o["download_url"].as_str().expect("link").to_string();

    let r = c.agent.get(&node.url(&url)).call().expect("download");
    assert_eq!(r.status(), 200);
    assert_eq!(
        common::header(&r, "content-type"),
        Some("application/octet-stream")
    );
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut r.into_body().into_reader(), &mut body).expect("body");
    assert_eq!(body, b"the album's bytes");

    // Tampered: one character of the signature changed.
    let mut tampered = url.clone();
    let last = tampered.pop().expect("char");
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let (code, v) = c.get(&tampered, None);
    assert_eq!((code, v["error"].as_str()), (403, Some("link_invalid")));
    // Another order's link cannot be made from this one: the order id is signed.
    let token = url.trim_start_matches("/dl/");
    let mut parts: Vec<&str> = token.split('.').collect();
    let other = base64_url("dl.0.999");
    parts[0] = &other;
    let (code, _) = c.get(&format!("/dl/{}", parts.join(".")), None);
    assert_eq!(code, 403);
    // Expired: a correctly signed link whose time is up.
    let keys = node_keys();
    let old = sign_download(keys.downloads(), &id, seckill_core::now_ms() - 1);
    let (code, v) = c.get(&format!("/dl/{old}"), None);
    assert_eq!((code, v["error"].as_str()), (410, Some("link_expired")));
    assert_eq!(c.get("/dl/garbage", None).0, 403);
}

fn base64_url(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

/// A partition lent to a shard releases no hold until the lease is over. The repair
/// waits a lease out rather than report nothing released, and names the partitions whose
/// holds still wait when a lease outlasts its patience.
#[test]
fn repair_waits_out_a_lease_before_it_releases_overdue_holds() {
    let redis = Redis::start();
    let mut node = Node::start(&redis, 1);
    let mut s = spec("lent", 6, 2, 1);
    s.hold_ttl_s = 2;
    open_sale(&redis, &node, s);
    let c = node.client();
    let held = crowd(&node, "lent", 0..6, 2);
    assert_eq!(held.len(), 6, "the sale sells out");
    let pay_by = held
        .iter()
        .map(|(token, id)| order(&c, id, token)["pay_by_ms"].as_i64().expect("pay_by"))
        .max()
        .expect("orders");
    let r = reconciled(&redis, "lent", &[node.db()]);
    assert!(r.holds() && r.ledger.held == 6, "{r}");
    // No worker of the node releases them now.
    node.kill();
    while seckill_core::now_ms() < pay_by + 100 {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Each partition lent as a sold-out shard takes one: the first for 7 s, longer than
    // the repair waits (three turns of at most 2 s), the second for 2.5 s.
    let mut con = redis.con();
    for (p, ms) in [(0, 7_000), (1, 2_500)] {
        let k = PartitionKeys::new("lent", p);
        let lent: Vec<redis::Value> = scripts::LEASE
            .key(k.part())
            .key(k.once())
            .arg(ms)
            .arg("")
            .arg(100)
            .invoke(&mut con)
            .expect("lease");
        assert_eq!(
            lent.first(),
            Some(&redis::Value::Int(1)),
            "partition {p} lent"
        );
    }
    let repair = || {
        Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
            .args([
                "reconcile",
                "lent",
                "--repair",
                "--redis",
                &redis.url(),
                "--db",
            ])
            .arg(node.db())
            .output()
            .expect("reconcile")
    };
    let o = repair();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "partition 0's holds are still overdue: {out}"
    );
    assert!(out.contains("3 holds released"), "{out}");
    assert!(
        out.contains("overdue holds of partition(s) 0 still wait for a shard's lease to end"),
        "{out}"
    );
    let o = repair();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("3 holds released"), "{out}");
    assert!(!out.contains("still wait"), "{out}");
    let r =
        seckill_orders::reconcile::reconcile(&mut con, "lent", &[node.db()]).expect("reconcile");
    assert!(r.holds(), "{r}");
    assert_eq!(
        (r.ledger.remaining, r.ledger.held, r.ledger.sold),
        (6, 0, 0),
        "{r}"
    );
}

#[test]
fn reconciliation_finds_planted_faults_and_repairs_only_what_it_may() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("audit", 50, 4, 1));
    let c = node.client();
    let held = crowd(&node, "audit", 0..50, 4);
    for (token, id) in &held[..20] {
        assert_eq!(c.pay(id, token).0, 200);
    }
    let r = reconciled(&redis, "audit", &[node.db()]);
    assert!(r.holds(), "{r}");
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
            .args(["reconcile", "audit", "--redis", &redis.url(), "--db"])
            .arg(node.db())
            .args(args)
            .output()
            .expect("reconcile")
    };
    let o = cli(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));

    // An order deleted from SQLite: found, exit 1, and --repair puts it back.
    let victim = &held[3].1;
    assert_eq!(
        OrderDb::open_existing(&node.db())
            .expect("db")
            .delete(victim)
            .expect("delete"),
        1
    );
    let o = cli(&["--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["report"]["missing"], serde_json::json!([victim]));
    let o = cli(&["--repair"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("1 orders replayed"), "{out}");
    assert_eq!(
        OrderDb::open_existing(&node.db())
            .expect("db")
            .order(victim)
            .expect("row")
            .as_deref(),
        Some("delivered")
    );

    // A stock counter changed by hand: conservation fails, and repair does not paper over it.
    let mut con = redis.con();
    let _: i64 = redis::cmd("HINCRBY")
        .arg(PartitionKeys::new("audit", 1).part())
        .arg("stock")
        .arg(1)
        .query(&mut con)
        .expect("tamper");
    let o = cli(&[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("conservation"), "{out}");
    let o = cli(&["--repair"]);
    assert_eq!(o.status.code(), Some(1), "repair must not invent stock");

    // A file no worker has made a store of: named, with what it lacks, and not touched.
    let dir = tempfile::tempdir().expect("tempdir");
    let blank = dir.path().join("blank.sqlite");
    std::fs::write(&blank, b"").expect("blank file");
    let o = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .args(["reconcile", "audit", "--redis", &redis.url(), "--db"])
        .arg(&blank)
        .output()
        .expect("reconcile");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("blank.sqlite") && err.contains("no order tables"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&blank).expect("blank").len(), 0);
}

#[test]
fn reconciliation_sees_a_sale_without_an_order_and_a_lost_hold_behind_a_stale_one() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("books", 40, 1, 1));
    let c = node.client();
    let held = crowd(&node, "books", 0..20, 4);
    for (token, id) in &held[..10] {
        assert_eq!(c.pay(id, token).0, 200);
    }
    let r = reconciled(&redis, "books", &[node.db()]);
    assert!(r.holds(), "{r}");
    // Drained: from here on, what reconciliation reads at once is the verdict.
    let read = || {
        seckill_orders::reconcile::reconcile(&mut redis.con(), "books", &[node.db()])
            .expect("reconcile")
    };
    let k = PartitionKeys::new("books", 0);
    let mut con = redis.admin();
    let hincr =
        |con: &mut seckill_core::connection::Connection, key: &str, field: &str, by: i64| {
            let _: i64 = redis::cmd("HINCRBY")
                .arg(key)
                .arg(field)
                .arg(by)
                .query(con)
                .expect("plant");
        };

    // A sale without an order record: stock down, sold and a buyer up, no order. Every
    // sum the counters make still balances; only the orders tell.
    hincr(&mut con, &k.part(), "stock", -1);
    hincr(&mut con, &k.part(), "sold", 1);
    hincr(&mut con, &k.buyers(), "ghost", 1);
    assert!(common::ledger_holds(&redis, "books").holds());
    let r = read();
    assert!(!r.holds(), "{r}");
    let said = r.violations.join("; ");
    assert!(
        said.contains("paid and delivered orders carry 10 units, its counter says 11 sold"),
        "{said}"
    );
    assert!(said.contains("ghost credited 1, orders 0"), "{said}");
    hincr(&mut con, &k.part(), "stock", 1);
    hincr(&mut con, &k.part(), "sold", -1);
    let _: i64 = redis::cmd("HDEL")
        .arg(k.buyers())
        .arg("ghost")
        .query(&mut con)
        .expect("undo");
    assert!(read().holds());

    // A held order's index entry lost, and a stale entry of a paid order of the same
    // quantity in its place: the index still carries as many units as the counter.
    let (lost, stale) = (&held[15].1, &held[0].1);
    let _: i64 = redis::cmd("ZREM")
        .arg(k.holds())
        .arg(lost)
        .query(&mut con)
        .expect("plant");
    let _: i64 = redis::cmd("ZADD")
        .arg(k.holds())
        .arg(seckill_core::now_ms() + 60_000)
        .arg(stale)
        .query(&mut con)
        .expect("plant");
    let r = read();
    assert!(!r.holds(), "{r}");
    assert_eq!(r.unindexed_holds, vec![lost.clone()], "{r}");
    assert_eq!(r.orphaned_holds, vec![stale.clone()], "{r}");
    // The ledger alone (`campaign show`) sees it too: a stale entry backs no held unit.
    let mut ops = redis.con();
    let campaign = control::get(&mut ops, "books").expect("campaign");
    let l = seckill_core::ledger::check(&mut ops, &campaign).expect("ledger");
    assert!(
        l.violations
            .iter()
            .any(|v| v.contains("held orders carry 9 units, counters say 10")),
        "{l}"
    );
}

#[test]
fn codes_from_the_pool_go_to_one_order_each() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let codes_path = dir.path().join("codes.txt");
    let codes: Vec<String> = (0..40).map(|i| format!("CODE-{i:04}")).collect();

    // Fewer codes than units: arming is refused, naming the file.
    std::fs::write(&codes_path, codes[..10].join("\n")).expect("codes");
    let mut s = spec("keys", 30, 3, 1);
    s.codes_file = Some(codes_path.display().to_string());
    let mut con = redis.con();
    control::create(&mut con, s.clone()).expect("create");
    let err = control::arm(&mut con, "keys").expect_err("too few codes");
    assert!(err.to_string().contains("codes_file"), "{err}");

    std::fs::write(&codes_path, codes.join("\n")).expect("codes");
    control::arm(&mut con, "keys").expect("arm");
    control::act(&mut con, "keys", seckill_core::campaign::Action::Start).expect("start");
    let c = node.client();
    common::wait_state(&node, "keys", "live");
    let held = crowd(&node, "keys", 0..30, 6);
    for (token, id) in &held {
        assert_eq!(c.pay(id, token).0, 200);
    }
    let mut given = std::collections::HashSet::new();
    for (token, id) in &held {
        wait_for("delivery", Duration::from_secs(10), || {
            order(&c, id, token)["status"] == "delivered"
        });
        let key = order(&c, id, token)["license_key"]
            .as_str()
            .expect("key")
            .to_string();
        assert!(codes.contains(&key), "{key} is not from the pool");
        assert!(given.insert(key), "a code went to two orders");
    }
    assert_eq!(given.len(), 30);
    let r = reconciled(&redis, "keys", &[node.db()]);
    assert!(r.holds() && r.codes_reused.is_empty(), "{r}");
}

/// A sample of the node's `/metrics`, 0 when absent.
fn metric(node: &Node, name: &str) -> f64 {
    let text = get_text(
        &format!("http://127.0.0.1:{}/metrics", node.admin_port),
        None,
    );
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Entries read by a worker and not acknowledged, over the campaign's streams.
fn pending(con: &mut seckill_core::connection::Connection, id: &str, parts: u32) -> i64 {
    (0..parts)
        .map(|p| {
            let summary: Vec<redis::Value> = redis::cmd("XPENDING")
                .arg(PartitionKeys::new(id, p).events())
                .arg(seckill_core::keys::WORKER_GROUP)
                .query(con)
                .expect("xpending");
            match summary.first() {
                Some(redis::Value::Int(n)) => *n,
                other => panic!("XPENDING summary: {other:?}"),
            }
        })
        .sum()
}

#[test]
fn paid_orders_the_pool_cannot_serve_stay_pending_until_codes_come() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let codes_path = dir.path().join("codes.txt");
    let codes: Vec<String> = (0..12).map(|i| format!("CODE-{i:04}")).collect();
    std::fs::write(&codes_path, codes.join("\n")).expect("codes");
    let mut s = spec("short", 12, 3, 1);
    s.codes_file = Some(codes_path.display().to_string());
    open_sale(&redis, &node, s);

    // Four codes go missing from the pool before anyone pays.
    let mut con = redis.con();
    let pool = seckill_core::keys::CodeKeys::new("short").pool();
    let taken: Vec<String> = redis::cmd("LPOP")
        .arg(&pool)
        .arg(4)
        .query(&mut con)
        .expect("lpop");
    assert_eq!(taken.len(), 4);

    let c = node.client();
    let held = crowd(&node, "short", 0..12, 4);
    assert_eq!(held.len(), 12);
    for (token, id) in &held {
        assert_eq!(c.pay(id, token).0, 200);
    }
    let statuses = |held: &[(String, String)]| -> Vec<String> {
        held.iter()
            .map(|(token, id)| order(&c, id, token)["status"].to_string())
            .collect()
    };
    let delivered = |held: &[(String, String)]| {
        statuses(held)
            .iter()
            .filter(|s| *s == "\"delivered\"")
            .count()
    };
    wait_for(
        "the pool's eight codes to go out",
        Duration::from_secs(10),
        || delivered(&held) == 8,
    );
    // The other four stay paid, their events pending, and the worker says so; it keeps
    // trying them (each retry fails and counts) without acknowledging.
    wait_for("the worker to report them", Duration::from_secs(10), || {
        metric(&node, "seckill_worker_undelivered_orders") == 4.0
    });
    wait_for(
        "retries after claim_idle_ms",
        Duration::from_secs(15),
        || metric(&node, "seckill_worker_delivery_failures_total") >= 8.0,
    );
    assert_eq!(pending(&mut con, "short", 3), 4);
    let st = statuses(&held);
    assert_eq!(st.iter().filter(|s| *s == "\"paid\"").count(), 4, "{st:?}");
    assert_eq!(metric(&node, "seckill_worker_undelivered_orders"), 4.0);
    // The worker's telemetry record, which the console reads, carries the same count.
    let record_key = seckill_core::keys::worker(&format!("w{}", node.port));
    wait_for("the worker's record", Duration::from_secs(5), || {
        let json: Option<String> = redis::cmd("GET")
            .arg(&record_key)
            .query(&mut con)
            .expect("get");
        json.and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
            .is_some_and(|r| r["undelivered"] == 4)
    });

    // Codes pushed back into the pool reach the waiting orders by themselves.
    let _: i64 = redis::cmd("RPUSH")
        .arg(&pool)
        .arg(&taken)
        .query(&mut con)
        .expect("rpush");
    wait_for("every order delivered", Duration::from_secs(15), || {
        delivered(&held) == 12
    });
    let mut given = std::collections::HashSet::new();
    for (token, id) in &held {
        let key = order(&c, id, token)["license_key"]
            .as_str()
            .expect("key")
            .to_string();
        assert!(codes.contains(&key), "{key} is not from the pool");
        assert!(given.insert(key), "a code went to two orders");
    }
    wait_for("the worker to report none", Duration::from_secs(10), || {
        metric(&node, "seckill_worker_undelivered_orders") == 0.0
    });
    assert_eq!(pending(&mut con, "short", 3), 0);
    let r = reconciled(&redis, "short", &[node.db()]);
    assert!(r.holds() && r.codes_reused.is_empty(), "{r}");
    assert_eq!(r.orders_in_redis.get("delivered"), Some(&12));
    assert_eq!(r.orders_in_stores, r.orders_in_redis);
    let _ = common::ledger_holds(&redis, "short");
}

/// `XREADGROUP` calls Redis has answered so far.
fn stream_reads(redis: &Redis) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.admin())
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_xreadgroup:calls="))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_quiet_campaign_is_read_a_few_times_a_second_and_its_late_payment_still_delivered() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("quiet", 10, 8, 1));
    let c = node.client();
    let token = c.token("late-payer");
    let (code, held) = c.purchase("quiet", &token, None);
    assert_eq!(code, 200, "{held}");
    let id = held["order_id"].as_str().expect("order id").to_string();

    // Nothing comes for a while: the worker reads the 8 streams a few times a second each,
    // not at every pass (about 200 a second each).
    std::thread::sleep(Duration::from_millis(2500));
    let before = stream_reads(&redis);
    std::thread::sleep(Duration::from_secs(2));
    let reads = stream_reads(&redis) - before;
    eprintln!("{reads} stream reads in 2 s");
    assert!(reads <= 8 * 15 * 2, "{reads} stream reads in 2 s");

    // A payment on a quiet stream is read and delivered all the same.
    assert_eq!(c.pay(&id, &token).0, 200);
    wait_for("delivery", Duration::from_secs(5), || {
        order(&c, &id, &token)["status"] == "delivered"
    });
    let r = reconciled(&redis, "quiet", &[node.db()]);
    assert!(r.holds(), "{r}");
    assert_eq!(r.orders_in_stores, r.orders_in_redis);
    assert_eq!((r.ledger.sold, r.ledger.remaining), (1, 9));
}

#[test]
fn a_shopper_lists_their_own_orders_newest_first() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("one", 10, 2, 1));
    open_sale(&redis, &node, spec("two", 10, 2, 1));
    let c = node.client();
    let (ann, bob) = (c.token("ann"), c.token("bob"));
    let (_, first) = c.purchase("one", &ann, None);
    let first = first["order_id"].as_str().expect("id").to_string();
    std::thread::sleep(Duration::from_millis(5));
    let (_, second) = c.purchase("two", &ann, None);
    let second = second["order_id"].as_str().expect("id").to_string();
    assert_eq!(c.pay(&second, &ann).0, 200);
    c.purchase("one", &bob, None);
    let listed = |token: &str, query: &str| -> Vec<String> {
        let (code, v) = c.get(&format!("/api/orders{query}"), Some(token));
        assert_eq!(code, 200, "{v}");
        v["orders"]
            .as_array()
            .expect("orders")
            .iter()
            .map(|o| o["order_id"].as_str().expect("id").to_string())
            .collect()
    };
    wait_for("the orders indexed", Duration::from_secs(10), || {
        listed(&ann, "").len() == 2
    });
    assert_eq!(listed(&ann, ""), [second.clone(), first.clone()]);
    assert_eq!(listed(&ann, "?campaign=one"), std::slice::from_ref(&first));
    assert_eq!(listed(&bob, "?campaign=two"), Vec::<String>::new());
    wait_for("delivery", Duration::from_secs(10), || {
        let (_, v) = c.get("/api/orders?campaign=two", Some(&ann));
        v["orders"][0]["status"] == "delivered"
    });
    let (code, v) = c.get("/api/orders?campaign=../x", Some(&ann));
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("bad_request")),
        "{v}"
    );
    assert_eq!(c.get("/api/orders", None).0, 401);
}
