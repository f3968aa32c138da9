//! A campaign's lifecycle as shoppers see it: not started, live, paused, sold out, ended —
//! and every change reaching a running node within a second.

mod common;

use common::{open_sale, spec, Node, Redis};
use seckill_core::campaign::{format_instant_ms, Action};
use seckill_core::control;
use std::time::Duration;

/// Polls until the node shows a change, at most `limit`; returns how long that took.
fn seen_within(limit: Duration, probe: impl FnMut() -> bool) -> Duration {
    common::wait_until("the change", limit, probe)
}

#[test]
fn a_sale_opens_at_its_start_and_closes_when_stopped_or_sold_out() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let c = node.client();
    let mut con = redis.con();
    let alice = c.token("alice");

    // Starts in two seconds: live, but 425 until then, with the instant to wait for.
    let starts_at_ms = seckill_core::now_ms() + 2_000;
    let mut s = spec("launch", 4, 2, 1);
    s.starts_at = Some(format_instant_ms(starts_at_ms));
    control::create(&mut con, s).expect("create");
    assert_eq!(
        c.purchase("launch", &alice, None).0,
        404,
        "a draft is not for sale"
    );
    control::arm(&mut con, "launch").expect("arm");
    seen_within(Duration::from_secs(1), || {
        c.purchase("launch", &alice, None).0 == 425
    });
    control::act(&mut con, "launch", Action::Start).expect("start");
    seen_within(Duration::from_secs(1), || {
        c.get("/api/campaigns/launch", None).1["state"] == "live"
    });
    let (code, body) = c.purchase("launch", &alice, None);
    assert_eq!((code, body["error"].as_str()), (425, Some("not_started")));
    assert_eq!(body["starts_at_ms"].as_i64(), Some(starts_at_ms));
    while seckill_core::now_ms() < starts_at_ms {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, body) = c.purchase("launch", &alice, None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "held");

    // Paused and resumed, each seen by the node within a second.
    let (code, first) = c.purchase("launch", &c.token("zoe"), Some("zoe-1"));
    assert_eq!(code, 200, "{first}");
    control::act(&mut con, "launch", Action::Pause).expect("pause");
    let bob = c.token("bob");
    let t = seen_within(Duration::from_secs(1), || {
        c.purchase("launch", &bob, None).1["error"] == "paused"
    });
    eprintln!("pause seen after {t:?}");
    // A retry of a request that got a unit gets that answer, paused or not.
    assert_eq!(
        c.purchase("launch", &c.token("zoe"), Some("zoe-1")),
        (200, first)
    );
    control::act(&mut con, "launch", Action::Resume).expect("resume");
    seen_within(Duration::from_secs(1), || {
        c.purchase("launch", &bob, None).0 == 200
    });

    // The last unit, then sold out: 409, and the campaign says so.
    assert_eq!(c.purchase("launch", &c.token("carol"), None).0, 200);
    let (code, body) = c.purchase("launch", &c.token("dave"), None);
    assert_eq!((code, body["error"].as_str()), (409, Some("sold_out")));
    let (_, info) = c.get("/api/campaigns/launch", None);
    assert_eq!(
        (info["state"].as_str(), info["remaining"].as_i64()),
        (Some("sold_out"), Some(0))
    );

    // Stopped: 410 for everyone, within a second.
    control::act(&mut con, "launch", Action::Stop).expect("stop");
    seen_within(Duration::from_secs(1), || {
        c.purchase("launch", &c.token("erin"), None).0 == 410
    });
    assert_eq!(c.get("/api/campaigns/launch", None).1["state"], "ended");
    assert!(
        control::act(&mut con, "launch", Action::Resume).is_err(),
        "ended is final"
    );

    let l = common::ledger_holds(&redis, "launch");
    assert_eq!((l.held, l.remaining), (4, 0));
}

#[test]
fn a_campaign_past_its_end_is_gone() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let c = node.client();
    let mut s = spec("brief", 10, 2, 1);
    s.ends_at = Some(format_instant_ms(seckill_core::now_ms() + 1_500));
    open_sale(&redis, &node, s);
    assert_eq!(c.purchase("brief", &c.token("alice"), None).0, 200);
    std::thread::sleep(Duration::from_millis(1_600));
    let (code, body) = c.purchase("brief", &c.token("bob"), None);
    assert_eq!((code, body["error"].as_str()), (410, Some("ended")));
}

#[test]
fn a_new_campaign_reaches_a_running_node_within_a_second() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let c = node.client();
    let mut con = redis.con();
    control::create(&mut con, spec("fresh", 5, 1, 1)).expect("create");
    control::arm(&mut con, "fresh").expect("arm");
    let t = seen_within(Duration::from_secs(1), || {
        c.get("/api/campaigns/fresh", None).0 == 200
    });
    eprintln!("new campaign seen after {t:?}");
    assert_eq!(c.get("/api/campaigns", None).1[0]["id"], "fresh");
}

#[test]
fn units_that_come_back_sell_again_on_every_shard_at_once_not_at_the_next_poll() {
    let redis = Redis::start();
    // Shards poll a second apart: only the reaper's announcement brings the units back
    // sooner.
    let node = Node::start_with(&redis, 2, "[control]\npoll_ms = 1000\nrebalance_ms = 100\n");
    let c = node.client();
    let mut s = spec("back", 2, 1, 1);
    // Long enough for a shard that sold nothing to learn from two polls (a second apart)
    // that it is out, with room for a loaded machine.
    s.hold_ttl_s = 5;
    open_sale(&redis, &node, s);
    let every_shard_says = |state: &str| {
        (0..16).all(|_| node.client().get("/api/campaigns/back", None).1["state"] == state)
    };
    let mut lags = Vec::new();
    // Two buyers take both units and never pay; each round, two more take them back.
    for u in 0..2 {
        let (code, body) = c.purchase("back", &c.token(&format!("first-{u}")), None);
        assert_eq!(code, 200, "{body}");
    }
    for round in 0..3 {
        let (code, body) = c.purchase("back", &c.token(&format!("r{round}-late")), None);
        assert_eq!((code, body["error"].as_str()), (409, Some("sold_out")));
        common::wait_until(
            "every shard to cache sold_out",
            Duration::from_secs(5),
            || every_shard_says("sold_out"),
        );
        // The holds run out and the reaper returns their units to Redis's stock, once
        // the partition's lease to the shards (a second) is over.
        common::wait_until("the holds' release", Duration::from_secs(8), || {
            common::remaining(&redis, "back") == 2
        });
        common::ledger_holds(&redis, "back");
        lags.push(seen_within(Duration::from_secs(2), || {
            every_shard_says("live")
        }));
        for u in 0..2 {
            let (code, body) = c.purchase("back", &c.token(&format!("r{round}-{u}")), None);
            assert_eq!(code, 200, "a returned unit sells again: {body}");
        }
    }
    eprintln!("every shard sold again {lags:?} after the release");
    // A poll a second apart would take 500 ms on average; the announcement takes one
    // round trip.
    assert!(
        lags.iter().all(|t| *t < Duration::from_millis(400)),
        "{lags:?}"
    );
    let l = common::ledger_holds(&redis, "back");
    assert_eq!((l.held + l.sold + l.remaining, l.held), (2, 2), "{l}");
}

#[test]
fn the_ledger_read_while_holds_run_out_shows_no_disagreement() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let c = node.client();
    let mut s = spec("busy", 300, 2, 1);
    s.hold_ttl_s = 1;
    open_sale(&redis, &node, s);
    for u in 0..150 {
        let (code, body) = c.purchase("busy", &c.token(&format!("u{u}")), None);
        assert_eq!(code, 200, "{body}");
    }
    // The reaper releases the holds while the ledger is read over and over: each read
    // must hold, whichever holds it caught released.
    let mut reads = 0;
    common::wait_until("every hold released", Duration::from_secs(15), || {
        reads += 1;
        common::ledger_holds(&redis, "busy").remaining == 300
    });
    eprintln!("{reads} ledger reads while the holds ran out");
    let l = common::ledger_holds(&redis, "busy");
    assert_eq!(
        (l.remaining, l.held, l.sold, l.orders),
        (300, 0, 0, 150),
        "{l}"
    );
}

/// The shards' reads of campaign `id`'s stock Redis receives in `window`, seen through
/// `MONITOR`: `HMGET`s of its partitions that ask for their arrivals, sent by a client
/// (a script's own calls are marked `lua`).
fn stock_reads(redis: &Redis, id: &str, window: Duration) -> usize {
    let client = redis::Client::open(redis.admin_url()).expect("the admin's URL");
    let mut con = client.get_connection().expect("a connection for MONITOR");
    con.send_packed_command(&redis::cmd("MONITOR").get_packed_command())
        .expect("MONITOR");
    let partition = format!(":{{{id}.");
    let end = std::time::Instant::now() + window;
    let mut reads = 0;
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        con.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("a read timeout");
        let line = match con.recv_response() {
            Ok(redis::Value::SimpleString(line)) => line,
            Ok(_) => continue,
            Err(_) => break,
        };
        if line.contains("\"HMGET\" ")
            && line.contains(&partition)
            && line.contains("\"inflow\"")
            && !line.contains(" lua]")
        {
            reads += 1;
        }
    }
    reads
}

/// Shoppers who try to buy campaign `id` every 20 ms for `window`, each refused as sold
/// out.
fn keep_asking(node: &Node, id: &str, window: Duration) {
    let end = std::time::Instant::now() + window;
    let mut n = 0;
    while std::time::Instant::now() < end {
        let c = node.client();
        let (code, body) = c.purchase(id, &c.token(&format!("asker-{n}")), None);
        assert_eq!((code, body["error"].as_str()), (409, Some("sold_out")));
        n += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sold_out_sale_nobody_asks_for_is_read_less_often_and_its_returned_units_still_sell_at_once() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 2, "[control]\npoll_ms = 100\nrebalance_ms = 100\n");
    let c = node.client();
    let mut s = spec("idle", 2, 2, 1);
    // The holds run out after the quiet, the asking and the quiet again.
    s.hold_ttl_s = 22;
    open_sale(&redis, &node, s);
    for u in 0..2 {
        let (code, body) = c.purchase("idle", &c.token(&format!("first-{u}")), None);
        assert_eq!(code, 200, "{body}");
    }
    let (code, body) = c.purchase("idle", &c.token("late"), None);
    assert_eq!((code, body["error"].as_str()), (409, Some("sold_out")));
    common::wait_state(&node, "idle", "sold_out");

    // 40 polls (4 s and more) after the last refusal, each shard reads the stock once a
    // second; shoppers who ask again have it read at every poll.
    std::thread::sleep(Duration::from_secs(6));
    let quiet = stock_reads(&redis, "idle", Duration::from_secs(4));
    let asked = std::thread::scope(|scope| {
        let shoppers = scope.spawn(|| keep_asking(&node, "idle", Duration::from_secs(2)));
        let reads = stock_reads(&redis, "idle", Duration::from_secs(2));
        shoppers.join().expect("the shoppers");
        reads
    });
    eprintln!("stock reads: {quiet} in 4 s of quiet, {asked} in 2 s while asked");
    // 2 shards × 2 partitions: 4 reads a second in the quiet, 40 at every poll.
    assert!(
        quiet >= 8,
        "a quiet sold-out sale is still read: {quiet} in 4 s"
    );
    assert!(
        asked >= 40,
        "the stock is read at every poll while asked: {asked} in 2 s"
    );
    assert!(
        asked >= 2 * quiet,
        "a quiet sold-out sale is read at a quarter of the pace or less: {quiet} in 4 s, {asked} in 2 s"
    );

    // Quiet again, the holds run out and the reaper returns the units: its announcement
    // has every shard read the stock at once, not at its next read in the quiet.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        common::remaining(&redis, "idle"),
        0,
        "the holds outlast the quiet"
    );
    common::wait_until("the holds' release", Duration::from_secs(15), || {
        common::remaining(&redis, "idle") == 2
    });
    let lag = seen_within(Duration::from_secs(3), || {
        (0..16).all(|_| node.client().get("/api/campaigns/idle", None).1["state"] == "live")
    });
    eprintln!("every shard sold again {lag:?} after the release");
    assert!(lag < Duration::from_millis(300), "{lag:?}");
    for u in 0..2 {
        let (code, body) = c.purchase("idle", &c.token(&format!("back-{u}")), None);
        assert_eq!(code, 200, "a returned unit sells again: {body}");
    }
    let l = common::ledger_holds(&redis, "idle");
    assert_eq!((l.held + l.sold + l.remaining, l.held), (2, 2), "{l}");
}
