//! The waiting room on a real Redis and real nodes: the pre-queue drawn at random
//! whatever the join time or the polling, later joiners behind it, passes that never
//! outnumber the units left and never meet `sold_out`, the crowd told `sold_out` as soon
//! as nothing is left to reserve, and nobody's place or pass lost to a node's SIGKILL or
//! a Redis restart from its append-only file.

mod common;

use common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use seckill_core::campaign::{Action, CampaignSpec};
use seckill_core::control;

fn start(redis: &Redis, id: &str) {
    control::act(&mut redis.con(), id, Action::Start).expect("start");
}

fn join(c: &Client, id: &str, token: &str) -> Value {
    let (code, v) = c.post(&format!("/api/campaigns/{id}/queue"), Some(token), "");
    assert_eq!(code, 200, "{v}");
    v
}

/// A look, with the receipt of an earlier answer when there is one.
fn look(c: &Client, id: &str, token: &str, receipt: Option<&str>) -> Value {
    let mut req = c
        .agent
        .get(&format!("{}/api/campaigns/{id}/queue", c.base()))
        .header("Authorization", &format!("Bearer {token}"));
    if let Some(r) = receipt {
        req = req.header("Queue-Receipt", r);
    }
    match req.call() {
        Ok(mut r) if r.status().as_u16() < 400 => r.body_mut().read_json().expect("json"),
        Ok(r) => panic!("look failed: {}", r.status()),
        Err(e) => panic!("look failed: {e}"),
    }
}

/// Units left and passes outstanding, checking that the passes never outnumber the units.
fn reserve_holds(redis: &Redis, id: &str) -> (i64, u64) {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    let (left, passes) = control::reservation(&mut con, &c).expect("reservation");
    assert!(
        passes as i64 <= left,
        "{passes} passes outstanding with {left} units left"
    );
    (left, passes)
}

/// Waits until `user` is let through, and returns their pass.
fn pass_of(c: &Client, id: &str, token: &str, timeout: Duration) -> (u64, String, i64) {
    let start = Instant::now();
    loop {
        let v = look(c, id, token, None);
        if v["state"] == "admitted" {
            return (
                v["place"].as_u64().expect("place"),
                v["ticket"].as_str().expect("pass").to_string(),
                v["ticket_expires_at_ms"].as_i64().expect("expiry"),
            );
        }
        assert!(start.elapsed() < timeout, "never admitted: {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A purchase with a pass and an `Idempotency-Key`.
fn buy_keyed(c: &Client, id: &str, token: &str, pass: Option<&str>, key: &str) -> Answer {
    let body = serde_json::json!({ "quantity": 1, "ticket": pass }).to_string();
    let res = c
        .agent
        .post(&format!("{}/api/campaigns/{id}/purchase", c.base()))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Idempotency-Key", key)
        .send(&body);
    match res {
        Ok(r) => (r.status().as_u16(), body_json(r)),
        Err(e) => panic!("transport error: {e}"),
    }
}

/// Chi-square of counts against equal shares.
fn chi_square(counts: &[u64]) -> f64 {
    let n: u64 = counts.iter().sum();
    let e = n as f64 / counts.len() as f64;
    counts.iter().map(|c| (*c as f64 - e).powi(2) / e).sum()
}

#[test]
fn the_pre_queue_is_drawn_at_random_whatever_the_join_time_or_the_polling_and_late_joiners_queue_behind_it(
) {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let id = "fair";
    // 100 units for 400 early shoppers: a quarter of them win.
    arm(&redis, &node, queued(id, 100, 5_000, 60));
    let c = node.client();

    // Ten waves of forty join before the opening; every other shopper looks again and
    // again (with and without the receipt), the rest never look.
    let mut early = Vec::new();
    for i in 0..400 {
        let user = format!("early{i:03}");
        let token = c.token(&user);
        let v = join(&c, id, &token);
        assert_eq!(v["state"], "waiting", "{v}");
        assert!(v["position"].is_null(), "no place before the draw: {v}");
        let receipt = v["receipt"].as_str().expect("receipt").to_string();
        if i % 2 == 0 {
            for _ in 0..3 {
                let again = look(&c, id, &token, Some(&receipt));
                assert!(again["position"].is_null(), "{again}");
                assert_eq!(join(&c, id, &token)["state"], "waiting");
            }
        }
        early.push((user, token, i / 40, i % 2 == 0));
    }
    // Nothing drawn and nobody admitted while the campaign is armed.
    std::thread::sleep(Duration::from_millis(400));
    let q = control::queue_progress(&mut redis.con(), id).expect("queue");
    assert_eq!(
        (q.admitted, q.pre, q.drawn_ms, q.seed),
        (0, 400, None, None)
    );

    let info = c.get(&format!("/api/campaigns/{id}"), None).1;
    let commitment = info["queue"]["seed_sha1"].clone();
    assert!(
        commitment.is_string(),
        "the seed is committed to in public: {info}"
    );
    assert!(
        info["queue"]["seed"].is_null(),
        "and kept until the opening: {info}"
    );

    start(&redis, id);
    wait_state(&node, id, "live");
    let late: Vec<(String, String)> = (0..40)
        .map(|i| {
            let user = format!("late{i:02}");
            let token = c.token(&user);
            (user, token)
        })
        .collect();
    let mut late_places = Vec::new();
    for (_, token) in &late {
        let v = join(&c, id, token);
        late_places.push(v["place"].as_u64().expect("a late joiner's place is known"));
    }
    assert!(
        late_places.iter().all(|p| *p > 400),
        "late joiners queue behind the whole pre-queue: {late_places:?}"
    );
    assert!(
        late_places.windows(2).all(|w| w[0] < w[1]),
        "late joiners keep their joining order: {late_places:?}"
    );

    // Every early shopper learns their place; the first hundred are let through.
    let mut places = HashMap::new();
    for (user, token, _, _) in &early {
        let v = look(&c, id, token, None);
        places.insert(user.clone(), v["place"].as_u64().expect("drawn place"));
    }
    let mut sorted: Vec<u64> = places.values().copied().collect();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=400).collect::<Vec<u64>>(), "one place each");

    // Any shopper can check the line from what the campaign shows: the seed, and each
    // place the rank of its holder's draw.
    let info = c.get(&format!("/api/campaigns/{id}"), None).1;
    assert_eq!(info["queue"]["seed_sha1"], commitment, "{info}");
    assert_eq!(info["queue"]["pre"], 400, "{info}");
    let seed = info["queue"]["seed"]
        .as_str()
        .expect("the seed, once drawn");
    let mut by_draw: Vec<(u64, &String)> =
        places.keys().map(|u| (control::draw(seed, u), u)).collect();
    by_draw.sort();
    for (rank, (_, user)) in by_draw.iter().enumerate() {
        assert_eq!(places[*user], rank as u64 + 1, "{user}");
    }

    let mut wins_by_wave = [0u64; 10];
    let (mut wins_polling, mut wins_quiet) = (0u64, 0u64);
    let mut bought = 0;
    for (user, token, wave, polls) in &early {
        if places[user] > 100 {
            continue;
        }
        let (place, pass, _) = pass_of(&c, id, token, Duration::from_secs(10));
        assert_eq!(place, places[user]);
        let (code, v) = buy_with(&c, id, token, Some(&pass));
        assert_eq!(code, 200, "a pass holder buys: {v}");
        bought += 1;
        wins_by_wave[*wave] += 1;
        if *polls {
            wins_polling += 1;
        } else {
            wins_quiet += 1;
        }
        reserve_holds(&redis, id);
    }
    assert_eq!(bought, 100);

    // Equal shares for every wave of joiners (chi-square, 9 degrees of freedom, p = 1e-4:
    // 33.7) and for those who polled and those who did not (1 degree, p = 1e-4: 15.1).
    let by_wave = chi_square(&wins_by_wave);
    let by_polling = chi_square(&[wins_polling, wins_quiet]);
    assert!(
        by_wave < 33.7,
        "wins by join time {wins_by_wave:?}: chi2 {by_wave:.1}"
    );
    assert!(
        by_polling < 15.1,
        "wins by polling {wins_polling}/{wins_quiet}: chi2 {by_polling:.1}"
    );

    // The draw is auditable: every rank is what the seed gives.
    let audit = control::audit_draw(&mut redis.con(), id).expect("audit");
    assert!(audit.fair(), "{audit:?}");
    assert_eq!((audit.checked, audit.drawn), (400, 400));
    // A wrong pass, a pass of another shopper, no pass: all refused.
    let (_, loser_token, _, _) = early.iter().find(|e| places[&e.0] > 100).expect("a loser");
    let (_, winner_pass) = {
        let (u, t, _, _) = early
            .iter()
            .find(|e| places[&e.0] <= 100)
            .expect("a winner");
        (
            u,
            look(&c, id, t, None)["ticket"]
                .as_str()
                .expect("pass")
                .to_string(),
        )
    };
    for ticket in [None, Some(winner_pass.as_str()), Some("q1.1.x")] {
        let (code, v) = buy_with(&c, id, loser_token, ticket);
        assert_eq!(
            (code, v["error"].as_str()),
            (403, Some("ticket_invalid")),
            "{v}"
        );
    }
    let l = ledger_holds(&redis, id);
    assert_eq!(l.held + l.sold, 100, "{l}");
}

#[test]
fn passes_never_outnumber_the_units_left_a_pass_holder_never_hears_sold_out_and_the_crowd_hears_it_at_once(
) {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let id = "scarce";
    // 20 units for 60 shoppers; passes last 10 s.
    arm(&redis, &node, queued(id, 20, 1_000, 10));
    let c = node.client();
    let shoppers: Vec<(String, String)> = (0..60)
        .map(|i| {
            let user = format!("s{i:02}");
            let token = c.token(&user);
            join(&c, id, &token);
            (user, token)
        })
        .collect();
    start(&redis, id);
    wait_state(&node, id, "live");

    // Twenty are let through at once, and no more, however long the rest wait.
    let mut standing: Vec<(usize, Value)> = Vec::new();
    wait_until("twenty passes", Duration::from_secs(5), || {
        control::queue_progress(&mut redis.con(), id)
            .expect("queue")
            .outstanding
            == 20
    });
    std::thread::sleep(Duration::from_millis(500));
    for (i, (_, token)) in shoppers.iter().enumerate() {
        standing.push((i, look(&c, id, token, None)));
    }
    let admitted: Vec<usize> = standing
        .iter()
        .filter(|(_, v)| v["state"] == "admitted")
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(admitted.len(), 20, "passes for the units, not beyond");
    assert_eq!(reserve_holds(&redis, id), (20, 20));

    // Nineteen buy; one lets the pass run out. Nobody with a pass hears sold_out.
    let (idle, buyers) = admitted.split_last().expect("twenty");
    let mut orders = HashMap::new();
    for i in buyers {
        let v = &standing[*i].1;
        let (code, r) = buy_keyed(
            &c,
            id,
            &shoppers[*i].1,
            v["ticket"].as_str(),
            &format!("k{i}"),
        );
        assert_eq!(code, 200, "{r}");
        orders.insert(*i, r["order_id"].clone());
        reserve_holds(&redis, id);
    }
    // A pass is used once.
    let first = buyers[0];
    let (code, r) = buy_with(
        &c,
        id,
        &shoppers[first].1,
        standing[first].1["ticket"].as_str(),
    );
    assert_ne!(code, 200, "{r}");

    // The idle pass expires (10 s, and the grace the admission allows every clock):
    // its unit goes to the next in line, who buys it.
    let next = wait_until(
        "the idle pass's unit to go to the next in line",
        Duration::from_secs(20),
        || {
            control::queue_progress(&mut redis.con(), id)
                .expect("queue")
                .expired
                == 1
        },
    );
    assert!(
        next >= Duration::from_secs(5),
        "the pass lived its time: {next:?}"
    );
    let mut newcomer = None;
    wait_until("the next shopper admitted", Duration::from_secs(5), || {
        newcomer = shoppers
            .iter()
            .enumerate()
            .find(|(i, (_, t))| {
                !admitted.contains(i) && look(&c, id, t, None)["state"] == "admitted"
            })
            .map(|(i, _)| i);
        newcomer.is_some()
    });
    // A buyer whose answer was lost retries with the same key after the pass ran out:
    // the first answer, not a refusal.
    let first = buyers[1];
    let (code, r) = buy_keyed(
        &c,
        id,
        &shoppers[first].1,
        standing[first].1["ticket"].as_str(),
        &format!("k{first}"),
    );
    assert_eq!((code, &r["order_id"]), (200, &orders[&first]), "{r}");
    let n = newcomer.expect("admitted");
    let v = look(&c, id, &shoppers[n].1, None);
    let (code, r) = buy_with(&c, id, &shoppers[n].1, v["ticket"].as_str());
    assert_eq!(code, 200, "{r}");
    let last_reservation = Instant::now();
    // The idle shopper's pass is gone.
    let (code, r) = buy_with(
        &c,
        id,
        &shoppers[*idle].1,
        standing[*idle].1["ticket"].as_str(),
    );
    assert_eq!(
        (code, r["error"].as_str()),
        (403, Some("ticket_invalid")),
        "{r}"
    );

    // Nothing left and nothing reserved: a waiting shopper hears sold_out within a second,
    // with a receipt (answered by the node) and without (answered from Redis).
    let waiter = shoppers
        .iter()
        .enumerate()
        .find(|(i, _)| !admitted.contains(i) && *i != n)
        .map(|(_, s)| s.1.clone())
        .expect("a waiting shopper");
    let receipt = look(&c, id, &waiter, None)["receipt"]
        .as_str()
        .map(str::to_string);
    wait_until("sold_out for the waiting", Duration::from_secs(5), || {
        look(&c, id, &waiter, receipt.as_deref())["state"] == "sold_out"
            && look(&c, id, &waiter, None)["state"] == "sold_out"
    });
    let told = last_reservation.elapsed();
    assert!(
        told < Duration::from_secs(1),
        "told sold_out after {told:?}"
    );
    assert_eq!(
        c.get(&format!("/api/campaigns/{id}"), None).1["state"],
        "sold_out"
    );
    assert_eq!(reserve_holds(&redis, id), (0, 0));
    let q = control::queue_progress(&mut redis.con(), id).expect("queue");
    assert_eq!((q.admitted, q.used, q.expired), (21, 20, 1));
    let l = ledger_holds(&redis, id);
    assert_eq!(l.held + l.sold, 20, "{l}");
}

#[test]
fn a_node_killed_mid_admission_and_redis_restarted_from_its_log_lose_nobody_their_place_or_pass() {
    let mut redis = Redis::start();
    let mut a = Node::start(&redis, 1);
    let b = Node::start(&redis, 1);
    let id = "steady";
    // 40 units, 120 shoppers, 15 let through a second: the admission is mid-way when
    // the node that runs it dies.
    arm(&redis, &a, queued(id, 40, 15, 120));
    wait_state(&b, id, "armed");
    let (ca, cb) = (a.client(), b.client());
    let shoppers: Vec<String> = (0..120)
        .map(|i| {
            let token = cb.token(&format!("k{i:03}"));
            join(&cb, id, &token);
            token
        })
        .collect();
    start(&redis, id);
    wait_state(&a, id, "live");
    wait_until("some shoppers let through", Duration::from_secs(5), || {
        control::queue_progress(&mut redis.con(), id)
            .expect("queue")
            .admitted
            >= 10
    });

    // Kill whichever node holds the lease.
    let leader = control::queue_progress(&mut redis.con(), id)
        .expect("queue")
        .leader
        .expect("a leader");
    // The node whose metrics count admissions holds the lease.
    let metrics = get_text(&format!("http://127.0.0.1:{}/metrics", a.admin_port), None);
    let a_leads = metrics
        .lines()
        .any(|l| l.starts_with("seckill_queue_wait_seconds_count") && !l.ends_with(" 0"));
    let (survivor, cs) = if a_leads {
        a.kill();
        (&b, &cb)
    } else {
        drop(b);
        (&a, &ca)
    };
    let before = control::queue_progress(&mut redis.con(), id).expect("queue");

    // Everyone's standing, as the survivor tells it.
    let standings: Vec<Value> = shoppers.iter().map(|t| look(cs, id, t, None)).collect();

    // Redis goes down and comes back from its append-only file.
    redis.kill();
    redis.restart();
    survivor.wait_synced();
    // Until its link to Redis is back, a look (which reads Redis) is 503.
    wait_until(
        "the survivor answers looks again",
        Duration::from_secs(10),
        || {
            cs.get(&format!("/api/campaigns/{id}/queue"), Some(&shoppers[0]))
                .0
                == 200
        },
    );
    for (t, was) in shoppers.iter().zip(&standings) {
        let now = look(cs, id, t, None);
        assert_eq!(now["place"], was["place"], "place kept: {was} → {now}");
        if was["state"] == "admitted" {
            assert_eq!(now["ticket"], was["ticket"], "pass kept");
        }
    }

    // The survivor takes the lease over and the line moves on.
    wait_until("the admission to go on", Duration::from_secs(10), || {
        let q = control::queue_progress(&mut redis.con(), id).expect("queue");
        q.admitted > before.admitted + 5 && q.leader.is_some_and(|l| l != leader)
    });
    // Everyone admitted buys; the room and the ledger hold.
    let mut bought = std::collections::HashSet::new();
    wait_until(
        "every unit bought with a pass",
        Duration::from_secs(20),
        || {
            for (i, t) in shoppers.iter().enumerate() {
                if bought.contains(&i) {
                    continue;
                }
                let v = look(cs, id, t, None);
                if v["state"] == "admitted" {
                    let (code, r) = buy_with(cs, id, t, v["ticket"].as_str());
                    assert_eq!(code, 200, "a pass holder buys: {r}");
                    bought.insert(i);
                }
                reserve_holds(&redis, id);
            }
            bought.len() == 40
        },
    );
    wait_until("the rest told sold_out", Duration::from_secs(5), || {
        shoppers
            .iter()
            .enumerate()
            .filter(|(i, _)| !bought.contains(i))
            .all(|(_, t)| look(cs, id, t, None)["state"] == "sold_out")
    });
    let bought = bought.len();
    assert_eq!(bought, 40);
    let l = ledger_holds(&redis, id);
    assert_eq!(l.held + l.sold, 40, "{l}");
}

#[test]
fn the_room_refuses_what_it_should() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let c = node.client();
    open_sale(&redis, &node, spec("plain", 5, 1, 1));
    let token = c.token("ann");
    let (code, v) = c.post("/api/campaigns/plain/queue", Some(&token), "");
    assert_eq!((code, v["error"].as_str()), (404, Some("no_queue")), "{v}");
    let (code, v) = c.post("/api/campaigns/nope/queue", Some(&token), "");
    assert_eq!(
        (code, v["error"].as_str()),
        (404, Some("unknown_campaign")),
        "{v}"
    );
    let (code, v) = c.post("/api/campaigns/plain/queue", None, "");
    assert_eq!(
        (code, v["error"].as_str()),
        (401, Some("unauthenticated")),
        "{v}"
    );

    arm(&redis, &node, queued("room", 5, 100, 60));
    let (code, v) = c.post("/api/campaigns/room/queue", Some(&token), "{\"seat\": 1}");
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("bad_request")),
        "{v}"
    );
    assert_eq!(look(&c, "room", &token, None)["state"], "not_joined");
    // A forged receipt is no place: the look goes to Redis.
    assert_eq!(
        look(&c, "room", &token, Some("x.1.y"))["state"],
        "not_joined"
    );
    let v = join(&c, "room", &token);
    // Another shopper's receipt does not carry over.
    let bob = c.token("bob");
    assert_eq!(
        look(&c, "room", &bob, v["receipt"].as_str())["state"],
        "not_joined"
    );
    // Buying before the opening, or without a pass: refused as usual.
    let (code, _) = buy_with(&c, "room", &token, None);
    assert_eq!(code, 425);
    // Even a node that would not know the room cannot sell past it: the partitions
    // themselves want a pass once the campaign is live.
    start(&redis, "room");
    wait_state(&node, "room", "live");
    let k = seckill_core::keys::PartitionKeys::new("room", 0);
    let reply: Vec<String> = seckill_core::scripts::PURCHASE
        .key(k.part())
        .key(k.buyers())
        .key(k.holds())
        .key(k.events())
        .key(k.once())
        .key(k.pass_log())
        .arg("room")
        .arg(0)
        .arg(k.order_prefix())
        .arg("mallory")
        .arg(1)
        .arg("")
        .arg("")
        .arg("")
        .invoke(&mut redis.con())
        .expect("the purchase script runs");
    assert_eq!(reply, ["pass_required", "", ""]);
    control::act(&mut redis.con(), "room", Action::Stop).expect("stop");
    wait_state(&node, "room", "ended");
    assert_eq!(join(&c, "room", &token)["state"], "ended");
    let l = ledger_holds(&redis, "room");
    assert_eq!(l.held + l.sold, 0, "{l}");
}

#[test]
fn with_proof_of_work_the_work_buys_a_place_in_the_pre_queue_however_early() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let c = node.client();
    // The sale opens in an hour, far beyond the ticket window before an opening.
    let starts = seckill_core::campaign::format_instant_ms(seckill_core::now_ms() + 3_600_000);
    let spec = CampaignSpec {
        require_ticket: true,
        starts_at: Some(starts),
        ..queued("worked", 5, 100, 60)
    };
    arm(&redis, &node, spec);
    let token = c.token("ann");
    let (code, v) = c.post("/api/campaigns/worked/queue", Some(&token), "");
    assert_eq!(
        (code, v["error"].as_str()),
        (403, Some("ticket_invalid")),
        "{v}"
    );
    let (code, t) = earn_ticket(&c, "worked", &token);
    assert_eq!(code, 200, "{t}");
    let body = serde_json::json!({ "ticket": t["ticket"] }).to_string();
    let (code, v) = c.post("/api/campaigns/worked/queue", Some(&token), &body);
    assert_eq!((code, v["state"].as_str()), (200, Some("waiting")), "{v}");
    assert!(v["position"].is_null(), "{v}");
    // Another shopper's ticket buys nothing.
    let bob = c.token("bob");
    let (code, _) = c.post("/api/campaigns/worked/queue", Some(&bob), &body);
    assert_eq!(code, 403);
    let l = ledger_holds(&redis, "worked");
    assert_eq!(l.held + l.sold, 0, "{l}");
}
