//! The admin listener: Prometheus metrics summed over the shards, health and readiness,
//! and its token.

mod common;

use common::*;
use std::time::Duration;

fn admin(node: &Node, path: &str, token: Option<&str>) -> (u16, String) {
    let mut req = agent().get(&format!("http://127.0.0.1:{}{path}", node.admin_port));
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    match req.call() {
        Ok(r) => (r.status().as_u16(), body_text(r)),
        Err(e) => panic!("admin listener: {e}"),
    }
}

/// The value of the sample line that starts with `series ` (labels included).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_every_answer_and_readiness_follows_redis() {
    let mut redis = Redis::start();
    let node = Node::start(&redis, 2);
    assert_eq!(admin(&node, "/healthz", None).0, 200);
    wait_until("the node to be ready", Duration::from_secs(10), || {
        admin(&node, "/readyz", None).0 == 200
    });
    open_sale(&redis, &node, spec("met", 3, 2, 1));
    let c = node.client();
    let mut held = 0;
    for i in 0..8 {
        let token = c.token(&format!("m{i}"));
        if c.purchase("met", &token, None).0 == 200 {
            held += 1;
        }
    }
    assert_eq!(held, 3);
    assert_eq!(c.get("/api/nope", None).0, 404);

    let (code, text) = admin(&node, "/metrics", None);
    assert_eq!(code, 200);
    let ok = sample(
        &text,
        "seckill_http_requests_total{route=\"purchase\",outcome=\"ok\"}",
    );
    assert_eq!(ok, Some(3.0), "{text}");
    let refused = sample(
        &text,
        "seckill_http_requests_total{route=\"purchase\",outcome=\"sold_out\"}",
    )
    .unwrap_or(0.0)
        + sample(
            &text,
            "seckill_http_requests_total{route=\"purchase\",outcome=\"limit_reached\"}",
        )
        .unwrap_or(0.0);
    assert_eq!(refused, 5.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "seckill_http_request_duration_seconds_count{route=\"purchase\"}"
        ),
        Some(8.0)
    );
    assert_eq!(
        sample(
            &text,
            "seckill_http_requests_total{route=\"other\",outcome=\"not_found\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "seckill_campaign_held_units{campaign=\"met\"}"),
        Some(3.0),
        "{text}"
    );
    // The state is a series of its own: sold out or still live, never both.
    let state = |s: &str| {
        sample(
            &text,
            &format!("seckill_campaign_state{{campaign=\"met\",state=\"{s}\"}}"),
        )
    };
    assert_eq!(
        state("sold_out").unwrap_or(0.0) + state("live").unwrap_or(0.0),
        1.0,
        "{text}"
    );
    assert_eq!(state("ended"), Some(0.0));
    assert!(sample(&text, "process_open_fds").is_some_and(|n| n > 0.0));
    assert!(sample(&text, "process_resident_memory_bytes").is_some_and(|n| n > 0.0));
    assert!(text.contains("seckill_build_info{version=\""));
    assert!(sample(&text, "seckill_redis_round_trip_seconds_count").is_some_and(|n| n > 0.0));
    assert_eq!(sample(&text, "seckill_redis_up{shard=\"1\"}"), Some(1.0));
    assert!(text.contains("# TYPE seckill_worker_pay_to_delivered_seconds histogram"));

    // Without Redis the node is alive but not ready; it is ready again once Redis is back.
    redis.kill();
    wait_until("readyz to fail", Duration::from_secs(10), || {
        admin(&node, "/readyz", None).0 == 503
    });
    assert_eq!(admin(&node, "/healthz", None).0, 200);
    redis.restart();
    wait_until("readyz to pass again", Duration::from_secs(15), || {
        admin(&node, "/readyz", None).0 == 200
    });
    let _ = ledger_holds(&redis, "met");
}

#[test]
fn a_configured_token_guards_the_admin_routes() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[admin]\ntoken = \"s3cret-admin\"");
    let (code, body) = admin(&node, "/metrics", None);
    assert_eq!(code, 401);
    assert!(body.contains("\"unauthenticated\""), "{body}");
    assert_eq!(admin(&node, "/metrics", Some("wrong")).0, 401);
    assert_eq!(admin(&node, "/healthz", Some("s3cret-admin")).0, 200);
    let (code, text) = admin(&node, "/metrics", Some("s3cret-admin"));
    assert_eq!(code, 200);
    assert!(text.contains("seckill_node_info"));
    assert_eq!(admin(&node, "/nope", Some("s3cret-admin")).0, 404);
}

#[test]
fn json_logs_carry_the_request_id_and_no_token() {
    let mut redis = Redis::start();
    let node = Node::start_logging(&redis, 1, "json", "info,seckill_dataplane=debug");
    open_sale(&redis, &node, spec("logs", 5, 1, 1));
    let c = node.client();
    let token = c.token("logger");

    // With Redis gone, a purchase fails on its way to Redis: that is logged inside the
    // request.
    redis.kill();
    let res = agent()
        .post(&node.url("/api/campaigns/logs/purchase"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Idempotency-Key", "k-1")
        .header("X-Request-Id", "trace-abc.123")
        .send("{}");
    let r = match res {
        Ok(r) if r.status() == 503 => r,
        other => panic!("expected 503, got {other:?}"),
    };
    assert_eq!(header(&r, "x-request-id"), Some("trace-abc.123"));
    // An id the node makes up when the client sends none (or a bad one).
    let r = agent()
        .get(&node.url("/api/time"))
        .header("X-Request-Id", "no spaces allowed")
        .call()
        .expect("time");
    assert_eq!(r.status(), 200);
    let made = header(&r, "x-request-id").expect("an id").to_string();
    assert!(made.contains('-') && !made.contains(' '), "{made}");

    let mut lines = Vec::new();
    wait_until("the request's log line", Duration::from_secs(5), || {
        lines = node
            .log()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("every line is JSON"))
            .collect();
        lines.iter().any(|l| l["span"]["id"] == "trace-abc.123")
    });
    let line = lines
        .iter()
        .find(|l| l["span"]["id"] == "trace-abc.123")
        .expect("a line of the request");
    assert!(line["fields"]["message"].is_string(), "{line}");
    assert!(
        line["level"].is_string() && line["timestamp"].is_string(),
        "{line}"
    );
    let log = node.log();
    assert!(!log.contains(&token), "a token in the logs");
    assert!(!log.contains(SECRET), "the secret in the logs");
    redis.restart();
}
