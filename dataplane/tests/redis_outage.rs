//! Redis killed in the middle of a sale: purchases fail fast and clearly, service comes
//! back by itself, and nothing acknowledged is lost.

mod common;

use common::{open_sale, spec, Node, Redis};
use seckill_dataplane::{control, ledger};
use std::time::{Duration, Instant};

#[test]
fn purchases_answer_503_fast_while_redis_is_down_and_resume_after() {
    let mut redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("outage", 500, 4, 1));
    let c = node.client();
    let mut held = 0;
    let mut user = 0;
    let mut buy = |c: &common::Client| {
        user += 1;
        let t = c.token(&format!("user-{user}"));
        let start = Instant::now();
        let (code, body) = c.purchase("outage", &t, None);
        (code, body, start.elapsed())
    };
    for _ in 0..50 {
        assert_eq!(buy(&c).0, 200);
        held += 1;
    }

    redis.kill();
    let mut slowest = Duration::ZERO;
    for _ in 0..50 {
        let (code, body, took) = buy(&c);
        assert_eq!(
            (code, body["error"].as_str()),
            (503, Some("unavailable")),
            "{body}"
        );
        slowest = slowest.max(took);
    }
    eprintln!("slowest 503 while redis was down: {slowest:?}");
    assert!(
        slowest < Duration::from_millis(100),
        "a 503 took {slowest:?}"
    );

    redis.restart();
    let back = Instant::now();
    loop {
        let (code, _, _) = buy(&c);
        if code == 200 {
            held += 1;
            break;
        }
        assert_eq!(code, 503);
        assert!(back.elapsed() < Duration::from_secs(5), "no recovery");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("recovered {:?} after redis came back", back.elapsed());
    for _ in 0..50 {
        assert_eq!(buy(&c).0, 200);
        held += 1;
    }

    let mut con = redis.con();
    let camp = control::get(&mut con, "outage").expect("campaign");
    let l = ledger::check(&mut con, &camp).expect("ledger");
    assert!(l.holds(), "{l}");
    assert_eq!(l.held, held, "every acknowledged hold survived");
}

#[test]
fn a_node_started_before_redis_serves_once_redis_is_up() {
    let mut redis = Redis::start();
    redis.kill();
    // Node::start waits for /api/time, which does not need Redis.
    let node = Node::start(&redis, 1);
    let c = node.client();
    let t = c.token("early");
    assert_eq!(
        c.purchase("late", &t, None).0,
        404,
        "no campaigns known yet"
    );
    redis.restart();
    open_sale(&redis, &node, spec("late", 5, 1, 1));
    assert_eq!(c.purchase("late", &t, None).0, 200);
}
