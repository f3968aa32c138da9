//! The shop hears of every order: webhooks received by an endpoint written with the
//! Standard Webhooks reference library (PyPI's `standardwebhooks`), which verifies each
//! one, through the endpoint being down for 30 s and refusing some for good.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

const SHOP_SECRET: &str = "whsec_dGhlIHNob3AncyBvd24gd2ViaG9vayBzZWNyZXQgMzI=";

/// What the shop's endpoint logged: each verified webhook's id, type and order.
fn received(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn metric(node: &Node, name: &str) -> f64 {
    let text = get_text(
        &format!("http://127.0.0.1:{}/metrics", node.admin_port),
        None,
    );
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn webhooks_cli(redis: &Redis, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .arg("webhooks")
        .args([
            "--redis",
            &format!("redis://seckill-ops@127.0.0.1:{}", redis.port),
        ])
        .arg("--redis-password-file")
        .arg(redis.users().join("ops.password"))
        .args(args)
        .output()
        .expect("run seckill-dataplane");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_shop_hears_of_every_order_through_an_outage_and_a_refusal() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, refuse) = (dir.path().join("shop.log"), dir.path().join("refuse"));
    // The shop refuses expiries for good until told otherwise.
    std::fs::write(&refuse, "order.expired").expect("refuse");
    let port = free_port();
    let _shop = Process::new(
        Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/payments/shop.py"
            ))
            .args([&port.to_string(), SHOP_SECRET, "30"])
            .arg(&log)
            .arg(&refuse)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs (just setup installs standardwebhooks)"),
    );
    let secret = dir.path().join("shop.secret");
    seckill_core::secrets::create_private(&secret, SHOP_SECRET.as_bytes()).expect("secret");
    let extra = format!(
        "[shop_webhooks]\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret_file = \"{}\"\nmax_backoff_s = 2\n",
        secret.display()
    );
    let node = Node::start_with(&redis, 2, &extra);
    let mut s = spec("told", 10, 2, 3);
    s.hold_ttl_s = 2;
    open_sale(&redis, &node, s);
    let c = node.client();
    // Six buyers, one of three units; four pay, two let their holds expire.
    let mut orders = BTreeMap::new();
    for (i, units) in [3, 1, 1, 1, 1, 1].into_iter().enumerate() {
        let user = format!("buyer-{i}");
        let token = c.token(&user);
        let (code, v) = c.post(
            "/api/campaigns/told/purchase",
            Some(&token),
            &format!("{{\"quantity\": {units}}}"),
        );
        assert_eq!(code, 200, "{v}");
        let id = v["order_id"].as_str().expect("id").to_string();
        if i < 4 {
            assert_eq!(c.pay(&id, &token).0, 200);
        }
        orders.insert(id, (i < 4, units));
    }
    // While the shop is down, its webhooks wait.
    wait_until("webhooks to wait", Duration::from_secs(20), || {
        metric(&node, "seckill_shop_webhooks_backlog") > 0.0
    });
    assert!(received(&log).is_empty());

    let expected = |with_expiry: bool| -> BTreeSet<(String, String)> {
        orders
            .iter()
            .flat_map(|(id, (paid, _))| {
                let kinds: &[&str] = match (paid, with_expiry) {
                    (true, _) => &["order.held", "order.paid", "order.delivered"],
                    (false, true) => &["order.held", "order.expired"],
                    (false, false) => &["order.held"],
                };
                kinds.iter().map(move |k| (id.clone(), k.to_string()))
            })
            .collect()
    };
    let got = || -> BTreeSet<(String, String)> {
        received(&log)
            .iter()
            .filter_map(|e| {
                Some((
                    e["data"]["order_id"].as_str()?.to_string(),
                    e["type"].as_str()?.to_string(),
                ))
            })
            .collect()
    };
    wait_until(
        "every webhook but the refused",
        Duration::from_secs(60),
        || got() == expected(false),
    );
    // The refused ones wait as dead letters; replayed once the shop takes them.
    wait_until("the dead letters", Duration::from_secs(20), || {
        let list: serde_json::Value =
            serde_json::from_str(&webhooks_cli(&redis, &["list", "--json"])).expect("JSON");
        list.as_array().map(Vec::len) == Some(2)
    });
    std::fs::remove_file(&refuse).expect("accept");
    let out = webhooks_cli(&redis, &["replay", "--all"]);
    assert!(out.contains("2 webhook"), "{out}");
    wait_until("the replayed webhooks", Duration::from_secs(20), || {
        got() == expected(true)
    });

    // Every one verified; duplicates only under the same id; the data as the order's.
    let all = received(&log);
    assert!(all.iter().all(|e| e.get("invalid").is_none()), "{all:?}");
    let mut by_id: BTreeMap<&str, &serde_json::Value> = BTreeMap::new();
    for e in &all {
        let id = e["id"].as_str().expect("id");
        if let Some(before) = by_id.insert(id, e) {
            assert_eq!(
                (&before["type"], &before["data"]["order_id"]),
                (&e["type"], &e["data"]["order_id"]),
                "{id}"
            );
        }
    }
    assert_eq!(by_id.len(), expected(true).len());
    for e in &all {
        let (paid, units) = orders[e["data"]["order_id"].as_str().expect("order")];
        assert_eq!(e["data"]["quantity"], units, "{e}");
        assert_eq!(e["data"]["campaign_id"], "told");
        if e["type"] == "order.delivered" {
            assert!(paid);
            assert_eq!(
                e["data"]["license_keys"].as_array().map(Vec::len),
                Some(units as usize),
                "{e}"
            );
        }
        if e["type"] == "order.paid" {
            assert_eq!(e["data"]["amount_cents"], 500 * units, "{e}");
            assert_eq!(e["data"]["currency"], "EUR");
        }
    }
    wait_until("the backlog to drain", Duration::from_secs(10), || {
        metric(&node, "seckill_shop_webhooks_backlog") == 0.0
    });
    let r = reconciled(&redis, "told", &[node.db()]);
    assert!(r.holds(), "{r}");
    assert_eq!((r.ledger.sold, r.ledger.remaining), (6, 4));
}
