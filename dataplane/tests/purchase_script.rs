//! The purchase script as the shards call it: the purchases of one partition that wait
//! while a call of it is on its way go together in the next, each answered as if alone;
//! and a partition of another key layout sells nothing.

mod common;

use common::{get_text, open_sale, shopper_token, spec, Node, Redis};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A counter of the node's `/metrics`, summed over its series.
fn counter(node: &Node, name: &str) -> u64 {
    get_text(
        &format!("http://127.0.0.1:{}/metrics", node.admin_port),
        None,
    )
    .lines()
    .filter(|l| l.starts_with(name) && !l.starts_with('#'))
    .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    .sum()
}

/// A crowd on one partition at once: the shard sends the purchases that wait for the
/// partition together, in fewer script calls than purchases, and each still gets the
/// answer a call of its own would have given it, a resent key its first answer.
#[test]
fn purchases_waiting_for_one_partition_share_a_call_and_each_gets_its_own_answer() {
    const STOCK: u64 = 300;
    const SHOPPERS: usize = 400;
    const THREADS: usize = 64;
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("lane", STOCK, 1, 1));
    let calls_before = counter(&node, "seckill_purchase_calls_total");
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..SHOPPERS)
            .map(|i| shopper_token(&format!("lane-{i}"), seckill_core::now_ms() + 600_000))
            .collect(),
    );
    // Every shopper's purchase is sent twice with the same key, from two threads at once.
    let barrier = Arc::new(std::sync::Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (client, tokens, barrier) = (node.client(), tokens.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mine: Vec<usize> = (0..SHOPPERS)
                    .filter(|i| i % THREADS == t || (i + 1) % THREADS == t)
                    .collect();
                barrier.wait();
                mine.into_iter()
                    .map(|i| {
                        let (status, body) =
                            client.purchase("lane", &tokens[i], Some(&format!("k{i}")));
                        (
                            i,
                            status,
                            body["order_id"].as_str().map(str::to_string),
                            body["error"].to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client thread"))
        .collect();
    assert_eq!(answers.len(), 2 * SHOPPERS);

    // A shopper's two answers agree: the same order, or no unit for either.
    let mut by_shopper: HashMap<usize, Vec<(u16, Option<String>)>> = HashMap::new();
    for (i, status, order, error) in &answers {
        assert!(
            *status == 200 || (*status == 409 && error == "\"sold_out\""),
            "shopper {i}: {status} {error}"
        );
        by_shopper
            .entry(*i)
            .or_default()
            .push((*status, order.clone()));
    }
    let mut orders = HashSet::new();
    for (i, a) in &by_shopper {
        assert_eq!(a[0], a[1], "shopper {i}'s two answers differ");
        if let (200, Some(o)) = &a[0] {
            assert!(
                orders.insert(o.clone()),
                "order {o} answered to two shoppers"
            );
        }
    }
    assert_eq!(orders.len(), STOCK as usize, "every unit held, once");

    // Fewer calls than purchases: the waiting ones went together.
    let calls = counter(&node, "seckill_purchase_calls_total") - calls_before;
    let carried = counter(&node, "seckill_purchase_call_purchases_total");
    eprintln!("{carried} purchases in {calls} calls");
    assert!(calls < carried, "{carried} purchases in {calls} calls");

    let l = common::ledger_holds(&redis, "lane");
    eprintln!("{l}");
    assert!(l.holds(), "{l}");
    assert_eq!((l.remaining, l.in_transit, l.held), (0, 0, STOCK as i64));
    assert_eq!((l.orders, l.buyers), (STOCK as usize, STOCK as usize));

    // A call's orders reach the worker as one event, and the store keeps each of them,
    // with the shopper who was answered it.
    let r = common::reconciled(&redis, "lane", &[node.db()]);
    eprintln!("{r}");
    assert!(r.holds() && r.drained() && r.missing.is_empty(), "{r}");
    assert_eq!(r.orders_in_stores.get("held"), Some(&STOCK));
    let stored: HashMap<String, String> = seckill_orders::OrderDb::open_existing(&node.db())
        .and_then(|db| db.orders("lane"))
        .expect("the store")
        .into_iter()
        .map(|o| (o.order_id, o.user_id))
        .collect();
    for (i, a) in &by_shopper {
        if let (200, Some(o)) = &a[0] {
            assert_eq!(stored.get(o), Some(&format!("lane-{i}")), "order {o}");
        }
    }
}

/// A partition armed by a release of another key layout sells nothing: its purchases
/// answer 503, and no unit moves, until it carries the layout this release reads.
#[test]
fn a_partition_of_another_key_layout_sells_nothing() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("old", 5, 1, 1));
    let part = seckill_core::keys::PartitionKeys::new("old", 0).part();
    let mut con = redis.admin();
    let _: () = redis::cmd("HDEL")
        .arg(&part)
        .arg("layout")
        .query(&mut con)
        .expect("hdel");
    let c = node.client();
    let ann = c.token("ann");
    let (status, body) = c.purchase("old", &ann, Some("k1"));
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("unavailable")),
        "{body}"
    );
    let l = common::ledger_holds(&redis, "old");
    assert_eq!((l.remaining, l.held, l.orders), (5, 0, 0), "{l}");
    assert!(l.holds(), "{l}");

    let _: () = redis::cmd("HSET")
        .arg(&part)
        .arg("layout")
        .arg(2)
        .query(&mut con)
        .expect("hset");
    let (status, body) = c.purchase("old", &ann, Some("k1"));
    assert_eq!(status, 200, "{body}");
    let l = common::ledger_holds(&redis, "old");
    assert_eq!((l.remaining, l.held, l.orders), (4, 1, 1), "{l}");
    assert!(l.holds(), "{l}");
}
