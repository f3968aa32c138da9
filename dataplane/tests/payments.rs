//! Payments as a provider sends them: webhooks signed by the Standard Webhooks reference
//! library (PyPI's `standardwebhooks`, which nobody here wrote; `cryptography` for v1a),
//! taken by a real node against a real Redis, and the ledger and the money checked after.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use seckill_testkit::tokens::WEBHOOK_SECRET;

const PATH: &str = "/api/payments/webhook";

/// A webhook to sign: its id, body, and how old its timestamp is.
struct Unsigned<'a> {
    secret: &'a str,
    id: String,
    body: String,
    age_s: i64,
    v1a_seed: Option<&'a str>,
}

fn unsigned(id: &str, body: String) -> Unsigned<'static> {
    Unsigned {
        secret: WEBHOOK_SECRET,
        id: id.into(),
        body,
        age_s: 0,
        v1a_seed: None,
    }
}

fn python(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/payments/sign.py"
        ))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3 ends");
    assert!(
        out.status.success(),
        "{} (just setup installs standardwebhooks and cryptography)",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Each webhook's headers, as the reference library signs them.
fn sign(hooks: &[Unsigned]) -> Vec<Vec<(String, String)>> {
    let list: Vec<serde_json::Value> = hooks
        .iter()
        .map(|h| {
            let mut v = serde_json::json!({
                "secret": h.secret, "id": h.id, "body": h.body, "age_s": h.age_s,
            });
            if let Some(seed) = h.v1a_seed {
                v["v1a_seed"] = seed.into();
            }
            v
        })
        .collect();
    let out = python(&[], &serde_json::Value::from(list).to_string());
    let signed: Vec<std::collections::BTreeMap<String, String>> =
        serde_json::from_str(&out).expect("headers");
    signed
        .into_iter()
        .map(|m| m.into_iter().collect())
        .collect()
}

fn event(kind: &str, order: &str, amount: u64, currency: &str, payment: &str) -> String {
    serde_json::json!({
        "type": kind,
        "timestamp": "2026-12-08T00:00:00Z",
        "data": {"order_id": order, "amount_cents": amount, "currency": currency, "payment_id": payment},
    })
    .to_string()
}

/// Sends one webhook signed by the reference library.
fn send(c: &Client, id: &str, body: String) -> Answer {
    let headers = sign(&[unsigned(id, body.clone())]).remove(0);
    c.post_with(PATH, &headers, &body)
}

fn buy(c: &Client, campaign: &str, user: &str, units: u32) -> (String, String) {
    let token = c.token(user);
    let (code, v) = c.post(
        &format!("/api/campaigns/{campaign}/purchase"),
        Some(&token),
        &format!("{{\"quantity\": {units}}}"),
    );
    assert_eq!(code, 200, "{v}");
    (token, v["order_id"].as_str().expect("id").to_string())
}

fn order(c: &Client, id: &str, token: &str) -> serde_json::Value {
    let (code, v) = c.get(&format!("/api/orders/{id}"), Some(token));
    assert_eq!(code, 200, "{v}");
    v
}

fn delivered(c: &Client, id: &str, token: &str) -> serde_json::Value {
    wait_until("delivery", Duration::from_secs(10), || {
        order(c, id, token)["status"] == "delivered"
    });
    order(c, id, token)
}

#[test]
fn webhooks_signed_by_the_reference_library_pay_once_and_owe_back_the_rest() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let mut s = spec("pay", 20, 2, 3);
    s.price_cents = 1299;
    open_sale(&redis, &node, s);
    let c = node.client();

    // A forged, tampered, stale or unsigned webhook changes nothing: 401.
    let (token, id) = buy(&c, "pay", "ann", 1);
    let good = event("payment.succeeded", &id, 1299, "EUR", "pi_ann");
    let headers = sign(&[unsigned("msg_ann", good.clone())]).remove(0);
    let tampered = good.replace("1299", "1");
    let mut other = unsigned("msg_ann", good.clone());
    other.secret = "whsec_c29tZW9uZSBlbHNlJ3Mgc2VjcmV0IG9mIDMyIGJ5dGVz";
    let mut stale = unsigned("msg_ann", good.clone());
    stale.age_s = 400;
    let refused = sign(&[other, stale]);
    let missing: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| k != "webhook-signature")
        .cloned()
        .collect();
    for (what, h, body) in [
        ("tampered body", &headers, &tampered),
        ("another secret", &refused[0], &good),
        ("stale timestamp", &refused[1], &good),
        ("missing signature", &missing, &good),
    ] {
        let (code, v) = c.post_with(PATH, h, body);
        assert_eq!(
            (code, v["error"].as_str()),
            (401, Some("invalid_signature")),
            "{what}: {v}"
        );
    }
    assert_eq!(order(&c, &id, &token)["status"], "held");

    // The webhook, ten times at once: one payment, the same answer every time.
    let answers: Vec<Answer> = std::thread::scope(|s| {
        let sends: Vec<_> = (0..10)
            .map(|_| s.spawn(|| node.client().post_with(PATH, &headers, &good)))
            .collect();
        sends
            .into_iter()
            .map(|h| h.join().expect("sender"))
            .collect()
    });
    for (code, v) in &answers {
        assert_eq!(code, &200, "{v}");
        assert_eq!(v["outcome"], "paid", "{v}");
    }
    // The same payment again under a new webhook id: nothing twice.
    let (code, v) = send(&c, "msg_ann_retry", good.clone());
    assert_eq!((code, v["outcome"].as_str()), (200, Some("paid")), "{v}");
    let ann = delivered(&c, &id, &token);
    assert!(ann["refunds_due"].is_null(), "{ann}");

    // A second payment of a delivered order: one unit, one refund due.
    let second = event("payment.succeeded", &id, 1299, "EUR", "pi_ann_2");
    let (code, v) = send(&c, "msg_ann_2", second);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("refund_due")),
        "{v}"
    );
    assert_eq!(v["status"], "delivered", "{v}");
    let ann = order(&c, &id, &token);
    assert_eq!(ann["refunds_due"][0]["payment_id"], "pi_ann_2", "{ann}");
    assert_eq!(ann["refunds_due"][0]["reason"], "duplicate", "{ann}");
    // Refunded by the provider: no longer due.
    let refunded = event("payment.refunded", &id, 1299, "EUR", "pi_ann_2");
    let (code, v) = send(&c, "msg_ann_2_refund", refunded);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("refunded")),
        "{v}"
    );
    assert!(order(&c, &id, &token)["refunds_due"].is_null());

    // The wrong amount or currency pays nothing.
    let (token, id) = buy(&c, "pay", "bob", 1);
    for (n, (amount, currency)) in [(1298, "EUR"), (1299, "USD")].into_iter().enumerate() {
        let body = event(
            "payment.succeeded",
            &id,
            amount,
            currency,
            &format!("pi_bob_{n}"),
        );
        let (code, v) = send(&c, &format!("msg_bob_{n}"), body);
        assert_eq!(
            (code, v["outcome"].as_str()),
            (200, Some("mismatch")),
            "{v}"
        );
        assert_eq!(v["status"], "held", "{v}");
    }
    assert_eq!(order(&c, &id, &token)["status"], "held");

    // Three units, three keys of their own.
    let (token, id) = buy(&c, "pay", "cat", 3);
    let (code, v) = send(
        &c,
        "msg_cat",
        event("payment.succeeded", &id, 3 * 1299, "EUR", "pi_cat"),
    );
    assert_eq!((code, v["outcome"].as_str()), (200, Some("paid")), "{v}");
    let cat = delivered(&c, &id, &token);
    let keys: std::collections::HashSet<&str> = cat["license_keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k.as_str())
        .collect();
    assert_eq!(keys.len(), 3, "{cat}");
    assert_eq!(cat["license_key"], cat["license_keys"][0]);

    // A payment for an order nobody knows: recorded, and the provider told to stop.
    let (code, v) = send(
        &c,
        "msg_nobody",
        event("payment.succeeded", "pay.0.999", 1299, "EUR", "pi_nobody"),
    );
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("unmatched")),
        "{v}"
    );
    let unmatched: Option<String> = redis::cmd("HGET")
        .arg(seckill_core::keys::UNMATCHED_PAYMENTS)
        .arg("pi_nobody")
        .query(&mut redis.con())
        .expect("hget");
    assert!(unmatched.is_some_and(|r| r.contains("pay.0.999")));

    let r = reconciled(&redis, "pay", &[node.db()]);
    assert!(r.holds(), "{r}");
    // Ann's unit and Cat's three sold; Bob's held; the rest in stock.
    assert_eq!(
        (r.ledger.sold, r.ledger.held, r.ledger.remaining),
        (4, 1, 15)
    );
}

#[test]
fn money_after_the_hold_is_owed_back_and_never_takes_a_unit() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let mut s = spec("late", 5, 1, 1);
    s.hold_ttl_s = 1;
    open_sale(&redis, &node, s);
    let c = node.client();
    let (token, id) = buy(&c, "late", "dan", 1);
    wait_until("the hold to expire", Duration::from_secs(10), || {
        order(&c, &id, &token)["status"] == "expired"
    });
    let (code, v) = send(
        &c,
        "msg_dan",
        event("payment.succeeded", &id, 500, "EUR", "pi_dan"),
    );
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("refund_due")),
        "{v}"
    );
    let dan = order(&c, &id, &token);
    assert_eq!(dan["status"], "refund_due", "{dan}");
    assert_eq!(dan["refunds_due"][0]["reason"], "expired", "{dan}");
    assert!(dan["license_key"].is_null(), "{dan}");
    assert_eq!(c.get("/api/campaigns/late", None).1["remaining"], 5);

    // A pending payment keeps a hold past its deadline; its failure ends the grace.
    let (token, id) = buy(&c, "late", "eve", 1);
    let (code, v) = send(
        &c,
        "msg_eve_pending",
        event("payment.pending", &id, 500, "EUR", "pi_eve"),
    );
    assert_eq!((code, v["outcome"].as_str()), (200, Some("pending")), "{v}");
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(order(&c, &id, &token)["status"], "held");
    let (code, v) = send(
        &c,
        "msg_eve_paid",
        event("payment.succeeded", &id, 500, "EUR", "pi_eve"),
    );
    assert_eq!((code, v["outcome"].as_str()), (200, Some("paid")), "{v}");
    delivered(&c, &id, &token);

    let (token, id) = buy(&c, "late", "fay", 1);
    send(
        &c,
        "msg_fay_pending",
        event("payment.pending", &id, 500, "EUR", "pi_fay"),
    );
    let (code, v) = send(
        &c,
        "msg_fay_failed",
        event("payment.failed", &id, 500, "EUR", "pi_fay"),
    );
    assert_eq!((code, v["outcome"].as_str()), (200, Some("failed")), "{v}");
    wait_until("the hold to expire", Duration::from_secs(10), || {
        order(&c, &id, &token)["status"] == "expired"
    });

    wait_until("the stores to catch up", Duration::from_secs(10), || {
        reconciled(&redis, "late", &[node.db()]).holds()
    });
    let r = reconciled(&redis, "late", &[node.db()]);
    assert!(r.holds(), "{r}");
    assert_eq!(
        (r.ledger.sold, r.ledger.held, r.ledger.remaining),
        (1, 0, 4)
    );
    assert_eq!(r.orders_in_redis.get("refund_due"), Some(&1));

    // Operators list what is owed back, as a script reads it.
    let out = payments_cli(&redis, &["refunds", "--json"]);
    let due: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(due.as_array().map(Vec::len), Some(1), "{due}");
    assert_eq!(due[0]["payment_id"], "pi_dan");
    assert_eq!(due[0]["amount_cents"], 500);
    assert_eq!(due[0]["currency"], "EUR");
    assert_eq!(due[0]["reason"], "expired");
    let out = payments_cli(&redis, &["list", "--campaign", "late"]);
    assert!(out.contains("pi_eve") && out.contains("paid"), "{out}");
    assert!(out.contains("pi_fay") && out.contains("failed"), "{out}");
}

/// `seckill-dataplane payments …` as an operator runs it.
fn payments_cli(redis: &Redis, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .arg("payments")
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
fn an_ed25519_key_verifies_v1a_webhooks_and_the_shoppers_own_pay_route_is_gone() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let key = python(&["--public", seed], "");
    let file = dir.path().join("provider.pub");
    seckill_core::secrets::create_private(&file, key.trim().as_bytes()).expect("write");
    let extra = format!(
        "[payments]\nprovider = \"webhook\"\nwebhook_secret_files = [\"{}\"]\n",
        file.display()
    );
    let node = Node::start_with(&redis, 1, &extra);
    open_sale(&redis, &node, spec("v1a", 5, 1, 1));
    let c = node.client();
    let (token, id) = buy(&c, "v1a", "gus", 1);
    // Without the demo provider a shopper cannot pay their own order.
    assert_eq!(c.pay(&id, &token).0, 404);
    let body = event("payment.succeeded", &id, 500, "EUR", "pi_gus");
    // The HMAC secret the node does not hold verifies nothing here.
    let (code, _) = send(&c, "msg_gus_v1", body.clone());
    assert_eq!(code, 401);
    let mut hook = unsigned("msg_gus", body.clone());
    hook.v1a_seed = Some(seed);
    let headers = sign(&[hook]).remove(0);
    let (code, v) = c.post_with(PATH, &headers, &body);
    assert_eq!((code, v["outcome"].as_str()), (200, Some("paid")), "{v}");
    delivered(&c, &id, &token);
    let r = reconciled(&redis, "v1a", &[node.db()]);
    assert!(r.holds(), "{r}");
    assert_eq!(r.ledger.sold, 1);
}

#[test]
fn reconciliation_counts_the_money_of_a_sale_paid_by_webhook() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let mut s = spec("till", 20, 2, 3);
    s.price_cents = 1299;
    s.hold_ttl_s = 3;
    open_sale(&redis, &node, s);
    let c = node.client();
    let pay = |id: &str, payment: &str, units: u64| {
        send(
            &c,
            &format!("msg_{payment}"),
            event("payment.succeeded", id, units * 1299, "EUR", payment),
        )
    };

    // Ann pays one unit, Bob two, Cat one: each paid once, each delivered.
    let mut sold = Vec::new();
    for (user, units) in [("ann", 1), ("bob", 2), ("cat", 1)] {
        let (token, id) = buy(&c, "till", user, units as u32);
        let (code, v) = pay(&id, &format!("pi_{user}"), units);
        assert_eq!((code, v["outcome"].as_str()), (200, Some("paid")), "{v}");
        sold.push((token, id));
    }
    for (token, id) in &sold {
        delivered(&c, id, token);
    }
    // Cat pays twice: the second payment is owed back, and takes no unit.
    let (code, v) = pay(&sold[2].1, "pi_cat_again", 1);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("refund_due")),
        "{v}"
    );
    // Dan pays after his hold expired: owed back.
    let (token, id) = buy(&c, "till", "dan", 1);
    wait_until("the hold to expire", Duration::from_secs(10), || {
        order(&c, &id, &token)["status"] == "expired"
    });
    let (code, v) = pay(&id, "pi_dan", 1);
    assert_eq!(
        (code, v["outcome"].as_str()),
        (200, Some("refund_due")),
        "{v}"
    );
    // Money for an order of this sale nobody knows, and for one of another sale.
    for (order, payment) in [("till.1.999", "pi_ghost"), ("elsewhere.0.1", "pi_other")] {
        let (code, v) = send(
            &c,
            &format!("msg_{payment}"),
            event("payment.succeeded", order, 1299, "EUR", payment),
        );
        assert_eq!(
            (code, v["outcome"].as_str()),
            (200, Some("unmatched")),
            "{v}"
        );
    }

    let r = reconciled(&redis, "till", &[node.db()]);
    assert!(r.holds(), "{r}");
    let m = r.money.as_ref().expect("the money section");
    assert_eq!((r.ledger.sold, m.sold), (4, 4), "{r}");
    assert_eq!(m.taken.currency, "EUR");
    assert_eq!(m.taken.paid_cents, 1299 * 4, "{r}");
    assert_eq!(m.sales_cents, m.price_cents * m.sold, "{r}");
    assert_eq!(m.taken.payments, 3, "{r}");
    assert_eq!(
        (m.taken.refunds_due, m.taken.refunds_due_cents),
        (2, 2 * 1299),
        "{r}"
    );
    assert_eq!((m.taken.refunded, m.taken.mismatches), (0, 0), "{r}");
    assert_eq!(m.unmatched, 1, "{r}");
    assert_eq!(m.unmatched_cents.get("EUR"), Some(&1299), "{r}");
    assert!(
        m.unpaid.is_empty() && m.paid_twice.is_empty() && m.paid_unsold.is_empty(),
        "{r}"
    );
    // One refund due for each reason: the second payment, and the late one.
    let records =
        seckill_core::payments::of_campaign(&mut redis.con(), "till", 2).expect("payments");
    let mut due: Vec<(&str, &str)> = records
        .iter()
        .filter(|p| p.status == "refund_due")
        .map(|p| (p.payment_id.as_str(), p.reason.as_str()))
        .collect();
    due.sort_unstable();
    assert_eq!(due, [("pi_cat_again", "duplicate"), ("pi_dan", "expired")]);
    let text = r.to_string();
    assert!(
        text.contains("  paid       51.96 EUR, 3 payments, for 4 units sold at 12.99 EUR\n"),
        "{text}"
    );
    assert!(
        text.contains("  refunds    2 due (25.98 EUR), 0 refunded (0.00 EUR)\n"),
        "{text}"
    );

    // As a script reads it: `reconcile --json`.
    let o = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .args([
            "reconcile",
            "till",
            "--json",
            "--redis",
            &redis.url(),
            "--db",
        ])
        .arg(node.db())
        .output()
        .expect("reconcile");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let money = &v["report"]["money"];
    assert_eq!(money["paid_cents"], 1299 * 4, "{money}");
    assert_eq!(money["sales_cents"], 1299 * 4, "{money}");
    assert_eq!(money["sold"], 4, "{money}");
    assert_eq!(money["refunds_due"], 2, "{money}");
    assert_eq!(money["unmatched"], 1, "{money}");
    assert_eq!(money["currency"], "EUR", "{money}");
}
