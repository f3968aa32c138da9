//! Tickets that cannot be hoarded: one live ticket per user and campaign, a cap that
//! counts live tickets (unused ones that expire go back), none for drafts or long before
//! the opening; and arming that loads a code pool exactly once, however many run it.

mod common;

use common::{buy_with, earn_ticket, ledger_holds, open_sale, spec, wait_state, Node, Redis};
use seckill_core::campaign::Action;
use seckill_core::control;
use seckill_core::keys::{CodeKeys, TicketKeys};
use seckill_core::scripts;
use std::time::Duration;

#[test]
fn one_account_cannot_take_every_ticket_and_an_honest_shopper_still_gets_one() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 2, "[tickets]\ndifficulty = 8\n");
    let mut s = spec("hoard", 3, 2, 1);
    s.require_ticket = true;
    s.ticket_factor = 1;
    let mut con = redis.con();
    control::create(&mut con, s).expect("create");
    control::arm(&mut con, "hoard").expect("arm");
    wait_state(&node, "hoard", "armed");
    let c = node.client();

    // Before the opening, one account solves three challenges: it gets one ticket,
    // the same one each time.
    let mallory = c.token("mallory");
    let tickets: Vec<String> = (0..3)
        .map(|_| {
            let (code, t) = earn_ticket(&c, "hoard", &mallory);
            assert_eq!(code, 200, "{t}");
            t["ticket"].as_str().expect("ticket").to_string()
        })
        .collect();
    assert!(tickets.iter().all(|t| *t == tickets[0]), "{tickets:?}");

    // Honest shoppers still get the other two.
    let honest: Vec<(String, String)> = ["alice", "bob"]
        .iter()
        .map(|u| {
            let token = c.token(u);
            let (code, t) = earn_ticket(&c, "hoard", &token);
            assert_eq!(code, 200, "{u}: {t}");
            (token, t["ticket"].as_str().expect("ticket").to_string())
        })
        .collect();
    let (code, body) = earn_ticket(&c, "hoard", &c.token("carol"));
    assert_eq!(
        (code, body["error"].as_str()),
        (409, Some("tickets_exhausted"))
    );

    control::act(&mut con, "hoard", Action::Start).expect("start");
    wait_state(&node, "hoard", "live");
    assert_eq!(buy_with(&c, "hoard", &mallory, Some(&tickets[0])).0, 200);
    for (token, ticket) in &honest {
        assert_eq!(buy_with(&c, "hoard", token, Some(ticket)).0, 200);
    }
    let l = ledger_holds(&redis, "hoard");
    assert_eq!((l.held, l.buyers), (3, 3), "{l}");
}

#[test]
fn unused_tickets_that_expire_go_back_to_the_pool() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[tickets]\ndifficulty = 8\nticket_ttl_s = 1\n");
    let mut s = spec("expire", 1, 1, 1);
    s.require_ticket = true;
    s.ticket_factor = 1;
    open_sale(&redis, &node, s);
    let c = node.client();
    let (alice, bob) = (c.token("alice"), c.token("bob"));
    let (code, first) = earn_ticket(&c, "expire", &alice);
    assert_eq!(code, 200, "{first}");
    assert_eq!(
        earn_ticket(&c, "expire", &bob).1["error"],
        "tickets_exhausted"
    );
    // Alice never uses hers; once it expires, the cap frees up.
    common::wait_until("alice's ticket to expire", Duration::from_secs(5), || {
        earn_ticket(&c, "expire", &bob).0 == 200
    });
    let (code, second) = earn_ticket(&c, "expire", &bob);
    assert_eq!(code, 200, "the same live ticket again: {second}");
    assert_eq!(
        buy_with(&c, "expire", &alice, first["ticket"].as_str()).1["error"],
        "ticket_invalid",
        "an expired ticket buys nothing"
    );
    assert_eq!(
        buy_with(&c, "expire", &bob, second["ticket"].as_str()).0,
        200
    );
    let l = ledger_holds(&redis, "expire");
    assert_eq!(l.held, 1, "{l}");
}

#[test]
fn no_tickets_for_drafts_or_before_the_window_ahead_of_the_opening() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[tickets]\ndifficulty = 8\nwindow_s = 60\n");
    let mut con = redis.con();
    let mut draft = spec("draft", 5, 1, 1);
    draft.require_ticket = true;
    control::create(&mut con, draft).expect("create");
    let mut later = spec("later", 5, 1, 1);
    later.require_ticket = true;
    let opens = seckill_core::now_ms() + 3_600_000;
    later.starts_at = Some(seckill_core::campaign::format_instant_ms(opens));
    control::create(&mut con, later).expect("create");
    control::arm(&mut con, "later").expect("arm");
    wait_state(&node, "later", "armed");
    let c = node.client();
    let t = c.token("early-bird");
    // A draft is no campaign to a shopper: the same answer as an unknown one.
    let (code, body) = c.post("/api/campaigns/draft/challenge", Some(&t), "");
    assert_eq!(
        (code, body["error"].as_str()),
        (404, Some("unknown_campaign"))
    );
    let (code, body) = c.post("/api/campaigns/later/challenge", Some(&t), "");
    assert_eq!(
        (code, body["error"].as_str()),
        (425, Some("not_started")),
        "{body}"
    );
    assert_eq!(body["starts_at_ms"], opens);

    // The issuing script checks the campaign's state itself, atomically with the cap:
    // whatever a shard believes, a draft gets nothing and the window holds.
    let issue = |con: &mut seckill_core::connection::Connection, id: &str, window_ms: i64| {
        let k = TicketKeys::new(id);
        let _: () = redis::cmd("SET")
            .arg(k.challenge("c1"))
            .arg("x")
            .query(con)
            .expect("challenge");
        let reply: Vec<redis::Value> = scripts::ISSUE_TICKET
            .key(k.challenge("c1"))
            .key(k.live())
            .key(k.tickets())
            .key(k.rules())
            .arg("early-bird")
            .arg("a-ticket")
            .arg(seckill_core::now_ms() + 60_000)
            .arg(window_ms)
            .invoke(con)
            .expect("script");
        seckill_dataplane::store::text(reply.first()).unwrap_or_default()
    };
    assert_eq!(issue(&mut con, "draft", 60_000), "unknown");
    assert_eq!(issue(&mut con, "later", 60_000), "early");
    assert_eq!(issue(&mut con, "later", 2 * 3_600_000), "ok");
    // A campaign whose mirror lacks the cap (armed before the mirror held it) gets it
    // back whole with its next change.
    let _: () = redis::cmd("HDEL")
        .arg(TicketKeys::new("later").rules())
        .arg("cap")
        .query(&mut con)
        .expect("hdel");
    assert_eq!(issue(&mut con, "later", 2 * 3_600_000), "unknown");
    // Started ahead of its opening, it is live: the window still counts.
    control::act(&mut con, "later", Action::Start).expect("start");
    wait_state(&node, "later", "live");
    assert_eq!(issue(&mut con, "later", 60_000), "early");
    assert_eq!(issue(&mut con, "later", 2 * 3_600_000), "same");
    let (code, body) = c.post("/api/campaigns/later/challenge", Some(&t), "");
    assert_eq!(
        (code, body["error"].as_str()),
        (425, Some("not_started")),
        "{body}"
    );
    control::act(&mut con, "later", Action::Stop).expect("stop");
    assert_eq!(issue(&mut con, "later", 60_000), "ended");
}

#[test]
fn arming_twice_at_once_loads_every_code_exactly_once() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let codes: Vec<String> = (0..3000).map(|i| format!("CODE-{i:05}")).collect();
    let file = dir.path().join("codes.txt");
    std::fs::write(&file, codes.join("\n")).expect("codes");
    for round in 0..5 {
        let id = format!("arm{round}");
        let mut s = spec(&id, 3000, 4, 1);
        s.codes_file = Some(file.display().to_string());
        control::create(&mut redis.con(), s).expect("create");
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let (url, id) = (common::RedisUrl::url(&redis), id.clone());
                std::thread::spawn(move || {
                    let mut con = control::connect(&url).expect("connect");
                    control::arm(&mut con, &id).map(|_| ())
                })
            })
            .collect();
        let results: Vec<_> = runs
            .into_iter()
            .map(|r| r.join().expect("arm thread"))
            .collect();
        assert!(results.iter().any(Result::is_ok), "{results:?}");
        for r in &results {
            if let Err(e) = r {
                let e = e.to_string();
                assert!(
                    e.contains("being armed by another run") || e.contains("cannot arm"),
                    "{e}"
                );
            }
        }
        let mut con = redis.con();
        let mut pool: Vec<String> = redis::cmd("LRANGE")
            .arg(CodeKeys::new(&id).pool())
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .expect("pool");
        pool.sort();
        assert_eq!(pool, codes, "round {round}: every code once, none lost");
        let c = control::get(&mut con, &id).expect("campaign");
        assert_eq!(c.state, seckill_core::campaign::State::Armed);
        ledger_holds(&redis, &id);
    }
}
