//! The defences over real HTTP: rate limits with Retry-After and live changes, trusted
//! proxies, the blacklist and automatic blocking, admission, and the circuit breaker.

mod common;

use common::{buy_with, earn_ticket, ledger_holds, limits, open_sale, spec, Client, Node, Redis};
use seckill_core::control;
use seckill_dataplane::guard::blacklist;
use std::time::{Duration, Instant};

/// Waits until `ok` holds, at most a second (the promise for live changes).
fn within_a_second(what: &str, ok: impl FnMut() -> bool) {
    common::wait_until(what, Duration::from_secs(1), ok);
}

fn get_with(
    c: &Client,
    node: &Node,
    path: &str,
    xff: Option<&str>,
) -> (u16, Option<String>, serde_json::Value) {
    let mut req = c.agent.get(&node.url(path));
    if let Some(x) = xff {
        req = req.header("X-Forwarded-For", x);
    }
    match req.call() {
        Ok(r) => {
            let code = r.status().as_u16();
            let retry = match code {
                400.. => common::header(&r, "retry-after").map(str::to_string),
                _ => None,
            };
            (code, retry, common::body_json(r))
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_users_bucket_refills_and_says_when_to_retry_and_changes_live() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("s", 1000, 2, 100));
    let c = node.client();
    let alice = c.token("alice");
    limits(&redis, &[("user_rate", "2"), ("user_burst", "2")]);
    within_a_second("the user limit", || {
        (0..3).any(|_| c.purchase("s", &alice, None).0 == 429)
    });
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.purchase("s", &alice, None).0, 200);
    assert_eq!(c.purchase("s", &alice, None).0, 200);
    let r = c
        .agent
        .post(&node.url("/api/campaigns/s/purchase"))
        .header("Authorization", &format!("Bearer {alice}"))
        .send("{}");
    let mut r = r.expect("an answer");
    assert_eq!(r.status(), 429, "expected 429");
    assert_eq!(common::header(&r, "retry-after"), Some("1"));
    let v: serde_json::Value = r.body_mut().read_json().expect("json");
    assert_eq!(v["error"], "rate_limited");
    // Other users have buckets of their own.
    assert_eq!(c.purchase("s", &c.token("bob"), None).0, 200);
    // Lifted live.
    limits(&redis, &[("user_rate", "0")]);
    within_a_second("lifting the limit", || {
        (0..5).all(|_| c.purchase("s", &alice, None).0 == 200)
    });
    ledger_holds(&redis, "s");
}

#[test]
fn client_ips_come_from_forwarded_for_only_behind_a_trusted_proxy() {
    let redis = Redis::start();
    let trusted = Node::start_with(&redis, 1, "[http]\ntrusted_proxies = [\"127.0.0.1\"]\n");
    let direct = Node::start(&redis, 1);
    limits(&redis, &[("ip_rate", "0.01"), ("ip_burst", "2")]);
    let (ct, cd) = (trusted.client(), direct.client());
    within_a_second("the IP limit", || {
        get_with(&cd, &direct, "/api/time", None).0 == 429
    });
    // Behind the trusted proxy each forwarded client has its own bucket.
    for xff in ["198.51.100.1", "198.51.100.2", "203.0.113.9, 198.51.100.3"] {
        assert_eq!(
            get_with(&ct, &trusted, "/api/time", Some(xff)).0,
            200,
            "{xff}"
        );
        assert_eq!(
            get_with(&ct, &trusted, "/api/time", Some(xff)).0,
            200,
            "{xff}"
        );
        let (code, retry, body) = get_with(&ct, &trusted, "/api/time", Some(xff));
        assert_eq!(
            (code, body["error"].as_str()),
            (429, Some("rate_limited")),
            "{xff}"
        );
        assert!(retry.is_some());
    }
    // From an untrusted peer the header is ignored: still the peer's (empty) bucket.
    assert_eq!(
        get_with(&cd, &direct, "/api/time", Some("192.0.2.77")).0,
        429
    );
}

#[test]
fn blacklisted_users_and_ips_are_refused_until_their_entry_expires() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("s", 100, 2, 5));
    let c = node.client();
    let (alice, bob) = (c.token("alice"), c.token("bob"));
    let mut con = redis.con();
    blacklist::add(&mut con, "user:alice", 2).expect("add");
    within_a_second("the user block", || {
        c.purchase("s", &alice, None).1["error"] == "blocked"
    });
    assert_eq!(c.purchase("s", &bob, None).0, 200, "others are served");
    assert_eq!(blacklist::list(&mut con).expect("list").len(), 1);
    std::thread::sleep(Duration::from_millis(2_100));
    assert_eq!(c.purchase("s", &alice, None).0, 200, "the entry expired");
    assert!(blacklist::list(&mut con).expect("list").is_empty());

    blacklist::add(&mut con, "ip:127.0.0.1", 600).expect("add");
    within_a_second("the IP block", || {
        get_with(&c, &node, "/api/time", None).0 == 403
    });
    blacklist::remove(&mut con, "ip:127.0.0.1").expect("remove");
    within_a_second("the IP unblock", || {
        get_with(&c, &node, "/api/time", None).0 == 200
    });
    assert!(blacklist::parse_entry("host:x").is_err());
    ledger_holds(&redis, "s");
}

#[test]
fn a_client_that_keeps_getting_refused_is_blocked_automatically() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    limits(
        &redis,
        &[("auto_block_refusals", "20"), ("auto_block_ttl_s", "60")],
    );
    let c = node.client();
    std::thread::sleep(Duration::from_millis(600));
    for _ in 0..20 {
        let (code, _) = c.post("/api/campaigns/x/purchase", Some("forged"), "{}");
        assert_eq!(code, 401);
    }
    let (code, _, body) = get_with(&c, &node, "/api/time", None);
    assert_eq!((code, body["error"].as_str()), (403, Some("blocked")));
    let entries = blacklist::list(&mut redis.con()).expect("list");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, "ip:127.0.0.1");
}

#[test]
fn purchases_over_the_admission_rate_get_503_busy() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("s", 100, 2, 100));
    limits(&redis, &[("admission_rate", "1"), ("admission_burst", "3")]);
    let c = node.client();
    let t = c.token("alice");
    within_a_second("admission", || {
        (0..4).any(|_| c.purchase("s", &t, None).1["error"] == "busy")
    });
    // With a full bucket again, a burst of ten gets three through (and maybe one more
    // token refilled meanwhile); the rest are told to come back.
    std::thread::sleep(Duration::from_millis(3_100));
    let answers: Vec<(u16, serde_json::Value)> =
        (0..10).map(|_| c.purchase("s", &t, None)).collect();
    let through = answers.iter().filter(|(code, _)| *code == 200).count();
    assert!(
        (3..=4).contains(&through),
        "{through} let through: {answers:?}"
    );
    for (code, body) in answers.iter().filter(|(code, _)| *code != 200) {
        assert_eq!((*code, body["error"].as_str()), (503, Some("busy")));
    }
    ledger_holds(&redis, "s");
}

#[test]
fn the_breaker_opens_on_a_slow_redis_and_closes_when_it_recovers() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        1,
        "[breaker]\nmin_calls = 3\nslow_call_ms = 100\nopen_ms = 500\n[redis_client]\ncommand_timeout_ms = 2000\n",
    );
    open_sale(&redis, &node, spec("s", 1000, 2, 1000));
    let c = node.client();
    let t = c.token("alice");
    assert_eq!(c.purchase("s", &t, None).0, 200);

    // Redis answers, but every answer waits behind a 300 ms sleep.
    let url = redis.admin_url();
    let slow = std::thread::spawn(move || {
        let mut con = control::connect(&url).expect("connect");
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(0.3)
                .query(&mut con)
                .expect("debug sleep");
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut fast_refusals = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        let t0 = Instant::now();
        let (code, body) = c.purchase("s", &t, None);
        if code == 503 && t0.elapsed() < Duration::from_millis(50) {
            assert_eq!(body["error"], "unavailable");
            fast_refusals += 1;
        }
    }
    assert!(
        fast_refusals > 10,
        "the breaker did not open: {fast_refusals} fast refusals"
    );
    slow.join().expect("sleeper");
    let back = Instant::now();
    while c.purchase("s", &t, None).0 != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the breaker did not close"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "{fast_refusals} fast refusals while open; closed {:?} after recovery",
        back.elapsed()
    );
    ledger_holds(&redis, "s");
}

#[test]
fn tickets_are_earned_by_work_bound_to_their_owner_used_once_and_capped() {
    use seckill_dataplane::guard::pow::{sign_ticket, Ticket};

    let redis = Redis::start();
    let node = Node::start_with(&redis, 2, "[tickets]\ndifficulty = 8\n");
    let mut s = spec("t", 3, 2, 2);
    s.require_ticket = true;
    s.ticket_factor = 1;
    open_sale(&redis, &node, s);
    open_sale(&redis, &node, spec("plain", 5, 1, 1));
    let c = node.client();
    let (alice, bob) = (c.token("alice"), c.token("bob"));

    assert_eq!(buy_with(&c, "t", &alice, None).1["error"], "ticket_invalid");
    let (code, t) = earn_ticket(&c, "t", &alice);
    assert_eq!(code, 200, "{t}");
    let ticket = t["ticket"].as_str().expect("ticket").to_string();
    // Another user's ticket, a forged one, and one for another campaign are refused.
    assert_eq!(
        buy_with(&c, "t", &bob, Some(&ticket)).1["error"],
        "ticket_invalid"
    );
    let mut forged = ticket.clone();
    forged.pop();
    forged.push('x');
    assert_eq!(
        buy_with(&c, "t", &alice, Some(&forged)).1["error"],
        "ticket_invalid"
    );
    let keys = common::node_keys();
    let now = seckill_core::now_ms();
    let other = sign_ticket(
        keys.tickets(),
        &Ticket {
            campaign: "other".into(),
            user: "alice".into(),
            id: "x1".into(),
        },
        now + 60_000,
    );
    assert_eq!(
        buy_with(&c, "t", &alice, Some(&other)).1["error"],
        "ticket_invalid"
    );
    let expired = sign_ticket(
        keys.tickets(),
        &Ticket {
            campaign: "t".into(),
            user: "alice".into(),
            id: "x2".into(),
        },
        now - 1,
    );
    assert_eq!(
        buy_with(&c, "t", &alice, Some(&expired)).1["error"],
        "ticket_invalid"
    );
    // The real one buys once; replayed, it is refused.
    assert_eq!(buy_with(&c, "t", &alice, Some(&ticket)).0, 200);
    assert_eq!(
        buy_with(&c, "t", &alice, Some(&ticket)).1["error"],
        "ticket_invalid"
    );

    // Challenges: bound to their user, a wrong nonce fails, used once.
    let (_, ch) = c.post("/api/campaigns/t/challenge", Some(&bob), "");
    let solution = serde_json::json!({
        "challenge_id": ch["challenge_id"],
        "nonce": seckill_dataplane::guard::pow::solve(ch["prefix"].as_str().expect("p"), 8),
    })
    .to_string();
    let wrong = (0u64..)
        .map(|n| n.to_string())
        .find(|n| !seckill_dataplane::guard::pow::solves(ch["prefix"].as_str().expect("p"), n, 8))
        .expect("a wrong nonce");
    let bad = serde_json::json!({ "challenge_id": ch["challenge_id"], "nonce": wrong }).to_string();
    assert_eq!(
        c.post("/api/campaigns/t/ticket", Some(&bob), &bad).1["error"],
        "challenge_invalid"
    );
    assert_eq!(
        c.post("/api/campaigns/t/ticket", Some(&alice), &solution).1["error"],
        "challenge_invalid"
    );
    let (code, bobs) = c.post("/api/campaigns/t/ticket", Some(&bob), &solution);
    assert_eq!(code, 200, "{bobs}");
    assert_eq!(
        c.post("/api/campaigns/t/ticket", Some(&bob), &solution).1["error"],
        "challenge_invalid"
    );
    assert_eq!(buy_with(&c, "t", &bob, bobs["ticket"].as_str()).0, 200);

    // The cap: 1 × 3 tickets in all; two were issued.
    let carol = c.token("carol");
    assert_eq!(earn_ticket(&c, "t", &carol).0, 200);
    let (code, body) = earn_ticket(&c, "t", &c.token("dave"));
    assert_eq!(
        (code, body["error"].as_str()),
        (409, Some("tickets_exhausted"))
    );
    // Campaigns without tickets have no challenges, and need no ticket.
    assert_eq!(
        c.post("/api/campaigns/plain/challenge", Some(&alice), "").1["error"],
        "no_tickets"
    );
    assert_eq!(buy_with(&c, "plain", &alice, None).0, 200);
    let l = ledger_holds(&redis, "t");
    assert_eq!(l.held, 2);
}
