//! A sale through a waiting room, run in-process against real nodes and a redis-server
//! started here: every unit sold through passes, the fairness table shows equal shares
//! whatever the join time or the polling, bots get no more than their share of the
//! pre-queue, and the ledger holds.

mod common;

use common::Stack;
use seckill_simulator::run::{execute, summary};
use seckill_simulator::scenario::{Queue, Scenario};

/// A small launch through a waiting room: 200 units, 600 shoppers (a tenth of them late)
/// and a few bots of every kind; the pre-queue fills over the 1.5 s before the opening.
/// Bots look twice as fast as the per-user limit lets through; much faster, and they are
/// blocked, and the passes they were given hold their units until they run out (10 s),
/// beyond this run's end.
fn queued(dir: &std::path::Path, target: &str, redis: &str) -> Scenario {
    let campaign = dir.join("q.toml");
    std::fs::write(
        &campaign,
        "id = \"simq\"\nname = \"sim queue test\"\ntotal = 200\npartitions = 4\nper_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 1\ncontent_file = \"album.zip\"\n",
    )
    .expect("campaign file");
    let text = format!(
        r#"
target = "{target}"
redis = "{redis}"
redis_password_file = "{d}/users/ops.password"
token_key = "{d}/test-shop.pem"
token_issuer = "https://shop.test"
stores = ["{d}/orders-a.sqlite", "{d}/orders-b.sqlite"]
duration_s = 4
threads = 2
[campaign]
create = "{campaign}"
starts_in_s = 1.5
[arrivals]
profile = "constant"
rate = 100
[population]
users = 600
pay_fraction = 0.5
retry_fraction = 0.1
[personas]
shopper = 0.9
hammer = 0.01
ip_rotator = 0.01
forger = 0.02
replayer = 0.01
skipper = 0.01
sybil = 0.04
[queue]
admit_per_s = 200
pass_ttl_s = 10
window_s = 1.5
late_fraction = 0.1
late_s = 0.5
poll_ms = [250, 600, 1500]
bot_poll_ms = 100
[thresholds]
fail_on = "oversell==0,violations==0,retry_mismatches==0"
"#,
        d = dir.display(),
        campaign = campaign.display(),
    );
    let s: Scenario = toml::from_str(&text).expect("scenario");
    s.validate().expect("valid");
    s
}

#[test]
fn a_queued_launch_sells_every_unit_through_passes_and_its_fairness_table_shows_equal_shares() {
    let stack = Stack::start(&["a", "b"]);
    let s = queued(stack.path(), &stack.target, &stack.redis);
    let r = execute(&s, 11).expect("run");
    let text = summary(&r);
    eprintln!("{text}");

    // Every unit sold, each to one account, the ledger and the stores agreeing.
    assert!(r.ledger.holds(), "{}", r.ledger);
    assert_eq!(r.ledger.held + r.ledger.sold, 200, "{}", r.ledger);
    assert_eq!(r.units_to_people + r.units_to_bots, 200, "{:?}", r.outcomes);
    let rec = r.reconciliation.as_ref().expect("stores given");
    assert!(rec.holds(), "{:?}", rec.violations);
    assert!(r.paid > 0 && r.delivered == r.paid && r.downloaded == r.paid);
    assert!(r.passed(), "{:?}", r.failures);

    // The room: everyone let through with a pass, the draw the seed's.
    let q = r.queue.as_ref().expect("a queued sale");
    let draw = q.draw.as_ref().expect("drawn at the opening");
    assert!(draw.fair, "{draw:?}");
    assert!(q.room.admitted >= 200, "{:?}", q.room);
    assert!(r.requests_by_route["join"] > 0 && r.requests_by_route["look"] > 0);

    // The table counts what the room counted: the pre-queue's accounts, and the units
    // they won (late joiners queue behind all of them, so none of theirs).
    let f = &q.fairness;
    assert_eq!(f.pre_queue, q.room.pre, "{}", f.text());
    assert_eq!(f.pre_queue_won, 200);
    assert_eq!(f.late.won, 0);
    assert!(f.late.joined > 0);
    let shoppers: u64 = f.by_join_time.rows.iter().map(|r| r.joined).sum();
    assert_eq!(
        shoppers,
        f.by_polling.rows.iter().map(|r| r.joined).sum::<u64>()
    );
    assert_eq!(shoppers, f.bots.rows[0].joined);
    assert!(shoppers > 450, "{}", f.text());
    // Fast pollers looked more often than slow ones.
    let rates: Vec<f64> = f.by_polling.rows.iter().map(|r| r.looks_per_s).collect();
    assert!(rates[0] > rates[2], "{rates:?}");
    // The HTML report shows the same table.
    let page = seckill_simulator::html::page(&r);
    assert!(page.contains("<h2>Waiting room</h2>"));
    for t in [&f.by_join_time, &f.by_polling, &f.bots] {
        assert!(page.contains(&t.test.line()), "{}", t.test.line());
        let row = &t.rows[0];
        assert!(page.contains(&format!(
            "<td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            row.class, row.joined, row.won
        )));
    }

    // Equal shares, generously: each statistic below its critical value at p = 1e-4
    // (9 degrees of freedom: 33.72; 2: 18.42; 1: 15.14).
    let tests = [
        ("join time", &f.by_join_time.test, 9, 33.72),
        ("polling", &f.by_polling.test, 2, 18.42),
        ("bots", &f.bots.test, 1, 15.14),
    ];
    for (what, t, dof, bound) in tests {
        assert_eq!(t.dof, dof, "{what}");
        assert!(t.statistic < bound, "{what}: {t:?}\n{}", f.text());
        assert!((0.0..=1.0).contains(&t.p_value), "{what}: {t:?}");
    }
    // Bots' units stay near their share of the pre-queue.
    assert!(
        f.bots_share_of_units < f.bots_share_of_pre_queue * 2.0 + 0.05,
        "{}",
        f.text()
    );

    // The defences hold in the room too: no pass, no unit; a pass buys once.
    assert_eq!(r.units_won.get("skipper"), None);
    assert_eq!(r.units_won.get("forger"), None);
    assert!(
        r.outcomes["skipper"].contains_key("403 ticket_invalid"),
        "{:?}",
        r.outcomes["skipper"]
    );
    for one_account in ["hammer", "ip_rotator", "replayer"] {
        assert!(
            r.units_won.get(one_account).copied().unwrap_or(0) <= 1,
            "{one_account}: {:?}",
            r.outcomes
        );
    }
    // Every shopper's session ended with a unit or the room's word, none gave up.
    assert!(
        r.outcomes["shopper"]
            .keys()
            .all(|o| o == "200" || o.starts_with("room sold_out") || o.starts_with("429")),
        "{:?}",
        r.outcomes["shopper"]
    );

    // The text and the JSON carry the table.
    for line in [
        "waiting room:",
        "draw: fair",
        "fairness:",
        "shoppers, joined",
        "shoppers, looked",
        "bots:",
        "late:",
    ] {
        assert!(text.contains(line), "{line}");
    }
    let json = serde_json::to_value(&r).expect("json");
    let by_join = &json["queue"]["fairness"]["by_join_time"];
    assert_eq!(by_join["rows"].as_array().map(Vec::len), Some(10));
    assert!(by_join["test"]["statistic"].is_f64());
    assert!(json["queue"]["fairness"]["by_polling"]["test"]["p_value"].is_f64());
    assert!(r.metric("join_p") > 0.0 && r.metric("bot_p") > 0.0);
}

/// A change that makes a valid queued scenario invalid.
type Change = fn(&mut Queue);

#[test]
fn invalid_queue_settings_name_their_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = queued(dir.path(), "http://127.0.0.1:1", "redis://127.0.0.1:1");
    let cases: Vec<(&str, Change)> = vec![
        ("queue.admit_per_s", |q| q.admit_per_s = Some(0)),
        ("queue.pass_ttl_s", |q| q.pass_ttl_s = Some(1)),
        ("queue.window_s", |q| q.window_s = Some(2.0)),
        ("queue.window_s", |q| q.window_s = Some(0.0)),
        ("queue.late_fraction", |q| q.late_fraction = 1.5),
        ("queue.late_s", |q| q.late_s = 10.0),
        ("queue.poll_ms", |q| q.poll_ms.clear()),
        ("queue.poll_ms", |q| q.poll_ms = vec![250, 1]),
        ("queue.bot_poll_ms", |q| q.bot_poll_ms = 0),
    ];
    for (field, change) in cases {
        let mut s = base.clone();
        if let Some(q) = s.queue.as_mut() {
            change(q);
        }
        let err = s.validate().expect_err(field).to_string();
        assert!(err.starts_with(field), "{field}: {err}");
    }
    let mut s = base.clone();
    s.personas.shopper = 0.0;
    let err = s.validate().expect_err("no shoppers").to_string();
    assert!(err.starts_with("personas.shopper"), "{err}");
}

#[test]
fn the_shipped_queue_scenario_is_valid() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/scenarios/queue.toml"
    );
    let s = Scenario::load(std::path::Path::new(path)).expect("parses");
    s.validate().expect("valid");
    let q = s.queue.as_ref().expect("a waiting room");
    assert!(q.admit_per_s.is_some() && q.poll_ms.len() > 1);
}
