//! The purchase race: a crowd far larger than the stock, skewed onto a few partitions,
//! against a multi-shard node, and twins of keyed purchases racing each other through
//! sell-outs. The ledger must come out exact.

mod common;

use common::{open_sale, shopper_token, spec, Node, Redis};
use seckill_core::keys::partition_of;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

const UNITS: u64 = 1000;
const PARTITIONS: u32 = 8;
const LIMIT: u32 = 2;
const USERS: usize = 5000;
const CONNECTIONS: usize = 200;
const ATTEMPTS: usize = 50_000;

struct Attempt {
    user: usize,
    start: Instant,
    end: Instant,
    status: u16,
    error: String,
    order_id: Option<String>,
    /// A resend of an earlier request's Idempotency-Key, and that request's order id.
    retry_of: Option<Option<String>>,
}

/// 4 of 5 users on partitions 0 and 1, which hold a quarter of the stock.
fn skewed_users() -> Vec<String> {
    let (mut hot, mut cold) = (Vec::new(), Vec::new());
    for i in 0.. {
        let u = format!("shopper-{i}");
        if partition_of(&u, PARTITIONS) < 2 {
            if hot.len() < USERS * 4 / 5 {
                hot.push(u);
            }
        } else if cold.len() < USERS / 5 {
            cold.push(u);
        }
        if hot.len() + cold.len() == USERS {
            break;
        }
    }
    hot.extend(cold);
    hot
}

/// A node of two shards for a crowd of client threads. They share the machine's cores
/// with the node and Redis: when the answers of a call wake many of them at once, the
/// node's shards can wait for a core longer than the breaker's 250 ms. Here the breaker
/// would only turn a slow machine into 503s whose outcome the ledger checks cannot count.
fn crowd_node(redis: &Redis) -> Node {
    Node::start_with(
        redis,
        2,
        "[redis_client]\ncommand_timeout_ms = 10000\n[breaker]\nslow_call_ms = 5000\n",
    )
}

/// A token for each user, valid for ten minutes.
fn tokens(users: impl IntoIterator<Item = String>) -> Arc<Vec<String>> {
    let until = seckill_core::now_ms() + 600_000;
    Arc::new(
        users
            .into_iter()
            .map(|u| shopper_token(&u, until))
            .collect(),
    )
}

#[test]
fn a_skewed_crowd_gets_exactly_the_stock() {
    let redis = Redis::start();
    let node = crowd_node(&redis);
    open_sale(&redis, &node, spec("race", UNITS, PARTITIONS, LIMIT));
    let tokens = tokens(skewed_users());
    let started = Instant::now();
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|t| {
            let client = node.client();
            let tokens = tokens.clone();
            std::thread::spawn(move || {
                // Each connection serves its own users, so one user's requests are ordered.
                let mine: Vec<usize> = (t..USERS).step_by(CONNECTIONS).collect();
                let mut last_key: HashMap<usize, (String, Option<String>)> = HashMap::new();
                let mut log: Vec<Attempt> = Vec::new();
                for n in 0..ATTEMPTS / CONNECTIONS {
                    // Each user tries five times in a row: units, retries, then the limit.
                    let user = mine[(n / 5) % mine.len()];
                    // A request that got a unit is always resent once, as a client that
                    // lost the answer would; others now and then.
                    let got_unit = log
                        .last()
                        .is_some_and(|a| a.status == 200 && a.retry_of.is_none());
                    let retry = (got_unit || n % 7 == 3) && last_key.contains_key(&user);
                    let (key, retry_of) = if retry {
                        let (k, first) = last_key[&user].clone();
                        (k, Some(first))
                    } else {
                        (format!("t{t}-n{n}"), None)
                    };
                    let start = Instant::now();
                    let (status, body) = client.purchase("race", &tokens[user], Some(&key));
                    let end = Instant::now();
                    let order_id = body["order_id"].as_str().map(str::to_string);
                    if retry_of.is_none() {
                        last_key.insert(user, (key, order_id.clone()));
                    }
                    log.push(Attempt {
                        user,
                        start,
                        end,
                        status,
                        error: body["error"].as_str().unwrap_or("").to_string(),
                        order_id,
                        retry_of,
                    });
                }
                log
            })
        })
        .collect();
    let log: Vec<Attempt> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client thread"))
        .collect();
    let wall = started.elapsed();

    let mut by_outcome: HashMap<String, usize> = HashMap::new();
    for a in &log {
        *by_outcome
            .entry(format!("{} {}", a.status, a.error))
            .or_default() += 1;
    }
    eprintln!(
        "purchase race: {} attempts from {USERS} users over {CONNECTIONS} connections in {:.2} s ({:.0}/s): {by_outcome:?}",
        log.len(),
        wall.as_secs_f64(),
        log.len() as f64 / wall.as_secs_f64()
    );
    assert_eq!(log.len(), ATTEMPTS);

    // Every answer is one the API promises for this situation.
    for a in &log {
        assert!(
            matches!(
                (a.status, a.error.as_str()),
                (200, "") | (409, "sold_out") | (409, "limit_reached") | (503, "busy")
            ),
            "unexpected answer {} {}",
            a.status,
            a.error
        );
    }

    // Exactly the stock was held, each unit once.
    let fresh: Vec<&Attempt> = log.iter().filter(|a| a.retry_of.is_none()).collect();
    let orders: HashSet<&str> = fresh.iter().filter_map(|a| a.order_id.as_deref()).collect();
    let held = fresh.iter().filter(|a| a.status == 200).count();
    assert_eq!(held, UNITS as usize, "holds answered");
    assert_eq!(orders.len(), UNITS as usize, "distinct orders");

    // No user above the limit.
    let mut per_user: HashMap<usize, u32> = HashMap::new();
    for a in fresh.iter().filter(|a| a.status == 200) {
        *per_user.entry(a.user).or_default() += 1;
    }
    assert!(
        per_user.values().all(|n| *n <= LIMIT),
        "a user above the limit"
    );

    // A retried key gets its first answer and never a second unit.
    let retries: Vec<&Attempt> = log.iter().filter(|a| a.retry_of.is_some()).collect();
    assert!(
        retries.len() > 1000,
        "too few retries exercised: {}",
        retries.len()
    );
    for a in &retries {
        if let Some(Some(first)) = &a.retry_of {
            assert_eq!(a.status, 200, "retry of a held order answered {}", a.error);
            assert_eq!(a.order_id.as_deref(), Some(first.as_str()));
        }
    }

    // No sold_out while a unit remained: once one sold_out answer was given, no purchase
    // that started afterwards got a unit.
    let first_sold_out = log
        .iter()
        .filter(|a| a.error == "sold_out")
        .map(|a| a.end)
        .min()
        .expect("the crowd exhausted the stock");
    let late = fresh
        .iter()
        .filter(|a| a.status == 200 && a.start > first_sold_out)
        .count();
    assert_eq!(late, 0, "units sold after a sold_out answer");

    let l = common::ledger_holds(&redis, "race");
    eprintln!("{l}");
    assert_eq!((l.remaining, l.in_transit, l.held), (0, 0, UNITS as i64));
    assert_eq!(l.orders, UNITS as usize);
}

const TWIN_PAIRS: usize = 24;
const TWIN_SALES: usize = 20;
const TWIN_PARTITIONS: u32 = 8;

/// What one of a request's twins was told.
struct TwinAnswer {
    sale: usize,
    user: usize,
    status: u16,
    error: String,
    order_id: Option<String>,
}

/// Twins: the same keyed purchase sent at once on two connections, as a client does that
/// resends on a fresh connection before its first answer comes back. Sale after sale of
/// one unit a partition, each sold out by the crowd, so that many twins are in flight as
/// the last units go, found dry, refilled and proven gone. A request's twins are told
/// one story: one unit for both, or a refusal for both (or "busy", which a resend turns
/// into the first answer).
#[test]
fn twins_of_a_keyed_purchase_get_one_answer_through_the_sell_out() {
    let redis = Redis::start();
    let node = crowd_node(&redis);
    let sale = |s: usize| format!("twins-{s}");
    for s in 0..TWIN_SALES {
        let units = u64::from(TWIN_PARTITIONS);
        open_sale(&redis, &node, spec(&sale(s), units, TWIN_PARTITIONS, 1));
    }
    let tokens = tokens((0..TWIN_PAIRS).map(|u| format!("twin-{u}")));
    let key = |s: usize, user: usize| format!("twin-key-{s}-{user}");
    let threads: Vec<_> = (0..TWIN_PAIRS)
        .flat_map(|user| {
            let together = Arc::new(std::sync::Barrier::new(2));
            (0..2).map(move |_| (user, together.clone()))
        })
        .map(|(user, together)| {
            let client = node.client();
            let tokens = tokens.clone();
            std::thread::spawn(move || {
                let mut told = Vec::new();
                for s in 0..TWIN_SALES {
                    together.wait();
                    let (status, body) =
                        client.purchase(&sale(s), &tokens[user], Some(&key(s, user)));
                    told.push(TwinAnswer {
                        sale: s,
                        user,
                        status,
                        error: body["error"].as_str().unwrap_or("").to_string(),
                        order_id: body["order_id"].as_str().map(str::to_string),
                    });
                }
                told
            })
        })
        .collect();
    let mut twins: HashMap<(usize, usize), Vec<TwinAnswer>> = HashMap::new();
    for a in threads
        .into_iter()
        .flat_map(|t| t.join().expect("twin thread"))
    {
        twins.entry((a.sale, a.user)).or_default().push(a);
    }
    assert_eq!(twins.len(), TWIN_SALES * TWIN_PAIRS);

    let mut orders: HashMap<(usize, usize), String> = HashMap::new();
    let mut sold_out = 0;
    for (&(s, user), told) in &twins {
        let [a, b] = told.as_slice() else {
            panic!("sale {s}, user {user}: {} answers", told.len());
        };
        for t in [a, b] {
            assert!(
                matches!(
                    (t.status, t.error.as_str()),
                    (200, "") | (409, "sold_out") | (503, "busy")
                ),
                "sale {s}, user {user}: unexpected answer {} {}",
                t.status,
                t.error
            );
            sold_out += usize::from(t.error == "sold_out");
        }
        let held: HashSet<&str> = [a, b]
            .iter()
            .filter_map(|t| t.order_id.as_deref())
            .collect();
        assert!(
            held.len() <= 1,
            "sale {s}, user {user}: twins held two orders {held:?}"
        );
        if let Some(order) = held.into_iter().next() {
            assert!(
                [a, b].iter().all(|t| t.status != 409),
                "sale {s}, user {user}: one twin held {order}, the other was told sold_out"
            );
            orders.insert((s, user), order.to_string());
        }
    }
    eprintln!(
        "twins: {} units held in {TWIN_SALES} sales, {sold_out} sold_out answers",
        orders.len()
    );

    // A key whose twins were both told "busy" gets an answer of its own now; a key that
    // held gets that order back, once the dust has settled.
    let c = node.client();
    for (&(s, user), told) in &twins {
        if !orders.contains_key(&(s, user)) && told.iter().all(|t| t.status == 503) {
            let (status, body) = c.purchase(&sale(s), &tokens[user], Some(&key(s, user)));
            match body["order_id"].as_str() {
                Some(order) => {
                    orders.insert((s, user), order.to_string());
                }
                None => assert_eq!((status, body["error"].as_str()), (409, Some("sold_out"))),
            }
        }
    }
    for (&(s, user), order) in &orders {
        let (status, body) = c.purchase(&sale(s), &tokens[user], Some(&key(s, user)));
        assert_eq!(
            (status, body["order_id"].as_str()),
            (200, Some(order.as_str()))
        );
    }

    for s in 0..TWIN_SALES {
        let l = common::ledger_holds(&redis, &sale(s));
        let held = orders.keys().filter(|(o, _)| *o == s).count();
        assert_eq!(
            (l.remaining, l.in_transit),
            (0, 0),
            "sold out with units left: {l}"
        );
        assert_eq!(
            (l.held, l.orders),
            (held as i64, held),
            "holds answered: {l}"
        );
    }
}
