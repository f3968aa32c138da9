//! A node killed in the middle of a surge and started again: until its shards have read
//! the campaigns it says it is starting (503, Retry-After), never that a live sale does
//! not exist, and the ledger holds.

mod common;

use common::{ledger_holds, open_sale, reconciled, shopper_token, spec, Node, Redis};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn a_node_restarted_in_a_surge_never_calls_the_live_sale_unknown() {
    let redis = Redis::start();
    let mut node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("surge", 100_000, 4, 1));
    let url = node.url("/api/campaigns/surge/purchase");
    let stop = Arc::new(AtomicBool::new(false));
    let next_user = Arc::new(AtomicUsize::new(0));
    // Status and error code of every answer; the orders acknowledged.
    let answers: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();
    let shoppers: Vec<_> = (0..4)
        .map(|_| {
            let (url, stop, next_user) = (url.clone(), stop.clone(), next_user.clone());
            let (answers, acknowledged) = (answers.clone(), acknowledged.clone());
            std::thread::spawn(move || {
                let new_agent =
                    || common::agent_with(|c| c.timeout_global(Some(Duration::from_secs(5))));
                let mut agent = new_agent();
                while !stop.load(Ordering::Relaxed) {
                    let user = format!("u{}", next_user.fetch_add(1, Ordering::Relaxed));
                    let token = shopper_token(&user, seckill_core::now_ms() + 600_000);
                    let reply = agent
                        .post(&url)
                        .header("Authorization", &format!("Bearer {token}"))
                        .send(r#"{"quantity":1}"#);
                    let (code, body): (u16, serde_json::Value) = match reply {
                        Ok(r) => (r.status().as_u16(), common::body_json(r)),
                        Err(_) => {
                            // The node is down: a fresh connection once it is back.
                            agent = new_agent();
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    };
                    if let Some(order) = body["order_id"].as_str() {
                        acknowledged.lock().expect("lock").push(order.to_string());
                    }
                    let what = format!("{code} {}", body["error"].as_str().unwrap_or(""));
                    *answers.lock().expect("lock").entry(what).or_default() += 1;
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(800));
    node.kill();
    std::thread::sleep(Duration::from_millis(200));
    node.restart();
    let back = Instant::now();
    common::wait_until(
        "the node to be ready again",
        Duration::from_secs(20),
        || node.readyz().0 == 200,
    );
    eprintln!("ready {:?} after the restart", back.elapsed());
    std::thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    for s in shoppers {
        s.join().expect("shopper");
    }

    let answers = answers.lock().expect("lock").clone();
    eprintln!("answers: {answers:?}");
    assert!(
        !answers.keys().any(|k| k.starts_with("404")),
        "a live campaign was called unknown: {answers:?}"
    );
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(
        acknowledged.len() > 100,
        "too few purchases to judge: {answers:?}"
    );
    // Every acknowledged purchase is held in Redis; a purchase whose answer the kill cut
    // off may be held too.
    let l = ledger_holds(&redis, "surge");
    assert!(l.held >= acknowledged.len() as i64, "{l}");
    let r = reconciled(&redis, "surge", &[node.db()]);
    assert!(r.holds(), "{r}");
    let mut con = redis.con();
    for order in &acknowledged {
        let id = seckill_core::keys::OrderId::parse(order).expect("order id");
        let key = seckill_core::keys::PartitionKeys::new(id.campaign, id.partition).order(order);
        let status: Option<String> = redis::cmd("HGET")
            .arg(key)
            .arg("status")
            .query(&mut con)
            .expect("order");
        assert_eq!(status.as_deref(), Some("held"), "{order}");
    }
}
