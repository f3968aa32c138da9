//! The shopper API over real HTTP: identity, orders, idempotency and bad input.

mod common;

use common::{body_json, header, open_sale, spec, status_of, Node, Redis};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn requests_without_a_valid_token_are_refused() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("s", 10, 2, 1));
    let c = node.client();
    let good = c.token("alice");
    let forged = {
        let mut t = good.clone();
        t.pop();
        t.push(if good.ends_with('A') { 'B' } else { 'A' });
        t
    };
    for token in [None, Some("garbage"), Some(forged.as_str())] {
        let (code, body) = c.post("/api/campaigns/s/purchase", token, "{}");
        assert_eq!(
            (code, body["error"].as_str()),
            (401, Some("unauthenticated")),
            "{token:?}"
        );
        assert!(body["message"].is_string());
    }
    assert_eq!(c.purchase("s", &good, None).0, 200);
}

#[test]
fn an_order_is_visible_to_its_owner_only() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("s", 10, 4, 1));
    let c = node.client();
    let alice = c.token("alice");
    let (code, held) = c.purchase("s", &alice, None);
    assert_eq!(code, 200);
    let id = held["order_id"].as_str().expect("order id");
    let (code, order) = c.get(&format!("/api/orders/{id}"), Some(&alice));
    assert_eq!(code, 200);
    assert_eq!(order["campaign_id"], "s");
    assert_eq!(order["user_id"], "alice");
    assert_eq!(order["quantity"], 1);
    assert_eq!(order["status"], "held");
    assert_eq!(order["pay_by_ms"], held["pay_by_ms"]);
    let bob = c.token("bob");
    assert_eq!(c.get(&format!("/api/orders/{id}"), Some(&bob)).0, 404);
    assert_eq!(c.get("/api/orders/nonsense", Some(&alice)).0, 404);
    assert_eq!(c.get("/api/orders/s.0.999", Some(&alice)).0, 404);
}

#[test]
fn a_repeated_idempotency_key_gets_the_first_answer() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("s", 1, 1, 1));
    let c = node.client();
    let alice = c.token("alice");
    let first = c.purchase("s", &alice, Some("order-1"));
    assert_eq!(first.0, 200);
    // While the shard still takes the sale for live, the purchase script replays it.
    assert_eq!(c.purchase("s", &alice, Some("order-1")), first);
    // Sold out now, yet the retry gets its unit back, not a second one, not a refusal.
    let bob = c.token("bob");
    assert_eq!(c.purchase("s", &bob, None).1["error"], "sold_out");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(c.purchase("s", &alice, Some("order-1")), first);
    // The same key from another user is that user's own request.
    assert_eq!(
        c.purchase("s", &bob, Some("order-1")).1["error"],
        "sold_out"
    );
    let (code, body) = c.purchase("s", &alice, Some("bad key with spaces"));
    assert_eq!((code, body["error"].as_str()), (400, Some("bad_request")));
}

/// Redis's count of `HGET` calls so far: looking up a key's first answer makes one.
fn hgets(redis: &Redis) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.admin())
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_hget:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_keyed_refusal_after_the_last_unit_ends_on_the_shard_and_retries_keep_their_orders() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let mut s = spec("s", 2, 2, 1);
    s.hold_ttl_s = 2;
    open_sale(&redis, &node, s);
    let c = node.client();
    let (alice, bob, carol) = (c.token("alice"), c.token("bob"), c.token("carol"));
    let a = c.purchase("s", &alice, Some("a-1"));
    let b = c.purchase("s", &bob, Some("b-1"));
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
    assert_eq!(c.purchase("s", &carol, None).1["error"], "sold_out");

    // Once each shard has proven the campaign empty and holds its partitions' leases, a
    // refused purchase with a key asks Redis nothing, on whichever shard it lands.
    let refusals = |n: usize| {
        let before = hgets(&redis);
        for i in 0..n {
            let (code, body) = node.client().purchase("s", &carol, Some(&format!("c-{i}")));
            assert_eq!((code, body["error"].as_str()), (409, Some("sold_out")));
        }
        hgets(&redis) - before
    };
    common::wait_until(
        "keyed refusals to end on the shards",
        Duration::from_secs(5),
        || refusals(16) == 0,
    );
    assert_eq!(refusals(50), 0);
    // A retry still gets its first answer, through Redis, on either shard.
    for _ in 0..8 {
        assert_eq!(node.client().purchase("s", &alice, Some("a-1")), a);
        assert_eq!(node.client().purchase("s", &bob, Some("b-1")), b);
    }

    // The holds run out unpaid: the leases end, the units come back and sell again, and a
    // retry of the new order gets it, before the campaign is sold out again and after.
    let dave = c.token("dave");
    let mut d = (0, serde_json::Value::Null);
    common::wait_until(
        "an expired unit to sell again",
        Duration::from_secs(15),
        || {
            d = c.purchase("s", &dave, Some("d-1"));
            d.0 == 200
        },
    );
    assert_eq!(c.purchase("s", &dave, Some("d-1")), d);
    let erin = c.token("erin");
    assert_eq!(c.purchase("s", &erin, Some("e-1")).0, 200);
    assert_eq!(c.purchase("s", &carol, None).1["error"], "sold_out");
    common::wait_until(
        "keyed refusals to end on the shards",
        Duration::from_secs(5),
        || refusals(16) == 0,
    );
    for _ in 0..8 {
        assert_eq!(node.client().purchase("s", &dave, Some("d-1")), d);
    }
    let l = common::ledger_holds(&redis, "s");
    assert_eq!(l.remaining + l.held + l.sold, 2, "{l}");
}

#[test]
fn bad_requests_get_a_clear_json_error() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("s", 10, 2, 2));
    let c = node.client();
    let t = c.token("alice");
    let p = "/api/campaigns/s/purchase";
    let cases: &[(&str, &str, Option<&str>, u16, &str)] = &[
        ("POST", p, Some("{\"quantity\": 0}"), 400, "bad_request"),
        ("POST", p, Some("{\"quantity\": -1}"), 400, "bad_request"),
        ("POST", p, Some("{\"quantity\": 3}"), 409, "limit_reached"),
        ("POST", p, Some("{\"quantity\": 1.5}"), 400, "bad_request"),
        (
            "POST",
            p,
            Some("{\"quantity\": 99999999999999999999}"),
            400,
            "bad_request",
        ),
        ("POST", p, Some("{\"quantity\": \"1\"}"), 400, "bad_request"),
        (
            "POST",
            p,
            Some("{\"quantity\": 1, \"extra\": 1}"),
            400,
            "bad_request",
        ),
        ("POST", p, Some("not json"), 400, "bad_request"),
        (
            "POST",
            "/api/campaigns/nope/purchase",
            Some("{}"),
            404,
            "unknown_campaign",
        ),
        ("GET", "/api/campaigns/nope", None, 404, "unknown_campaign"),
        ("GET", "/nowhere", None, 404, "not_found"),
        (
            "DELETE",
            "/api/campaigns/s",
            None,
            405,
            "method_not_allowed",
        ),
        ("GET", p, None, 405, "method_not_allowed"),
    ];
    for (method, path, body, status, error) in cases {
        let req = ureq::http::Request::builder()
            .method(*method)
            .uri(node.url(path))
            .header("Authorization", format!("Bearer {t}"));
        let res = match body {
            Some(b) => c.agent.run(req.body(*b).expect("request")),
            None => c.agent.run(req.body(()).expect("request")),
        };
        let (code, v) = match res {
            Ok(r) => (r.status().as_u16(), body_json(r)),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            (code, v["error"].as_str()),
            (*status, Some(*error)),
            "{method} {path} {body:?}"
        );
        assert!(v["message"].is_string(), "{method} {path}");
    }
    // A wrong method is told which ones the route takes.
    for (method, path, allow) in [
        ("DELETE", "/api/campaigns/s", "GET"),
        ("GET", p, "POST"),
        ("PUT", "/api/campaigns/s/queue", "GET, POST"),
    ] {
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(node.url(path))
            .body(())
            .expect("request");
        match c.agent.run(req) {
            Ok(r) if r.status() == 405 => {
                assert_eq!(header(&r, "Allow"), Some(allow), "{method} {path}");
                status_of(r);
            }
            other => panic!("{method} {path}: {other:?}"),
        }
    }
    // A body over the limit.
    let big = format!("{{\"quantity\": 1, \"pad\": \"{}\"}}", "x".repeat(10_000));
    let (code, v) = c.post(p, Some(&t), &big);
    assert_eq!(
        (code, v["error"].as_str()),
        (413, Some("payload_too_large"))
    );
    // Still serving.
    assert_eq!(c.purchase("s", &t, None).0, 200);
}

#[test]
fn the_demo_issuer_validates_user_ids_and_serves_no_proxy() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let c = node.client();
    for bad in [
        "{}",
        "{\"user_id\": \"\"}",
        "{\"user_id\": \"a b\"}",
        "{\"user_id\": 7}",
    ] {
        let (code, v) = c.post("/api/session", None, bad);
        assert_eq!(
            (code, v["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}"
        );
    }
    // A request a proxy forwarded is refused: the issuer is for this machine alone.
    for (header, value) in [
        ("X-Forwarded-For", "198.51.100.7"),
        ("Forwarded", "for=198.51.100.7;proto=https"),
    ] {
        let req = ureq::http::Request::builder()
            .method("POST")
            .uri(node.url("/api/session"))
            .header(header, value)
            .body(r#"{"user_id":"far"}"#)
            .expect("request");
        let (code, v) = match c.agent.run(req) {
            Ok(r) => (r.status().as_u16(), body_json(r)),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            (code, v["error"].as_str()),
            (403, Some("forbidden")),
            "{header}: {v}"
        );
        assert!(v.get("token").is_none(), "{v}");
    }
    let (code, v) = c.get("/api/time", None);
    assert_eq!(code, 200);
    let now = seckill_core::now_ms();
    assert!((v["now_ms"].as_i64().expect("now_ms") - now).abs() < 5_000);
}

#[test]
fn a_slow_client_is_cut_off_at_the_header_timeout() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        1,
        "[http]\nheader_timeout_ms = 500\nidle_timeout_ms = 1000\n",
    );
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let started = std::time::Instant::now();
    // Trickle a request head, one byte every 100 ms, never finishing it.
    let mut closed = false;
    for b in
        b"GET /api/time HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter()
    {
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !closed {
        let mut buf = [0u8; 64];
        closed = matches!(s.read(&mut buf), Ok(0) | Err(_));
    }
    assert!(closed, "the trickling connection was kept open");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "cut off after {:?}",
        started.elapsed()
    );
    // Others are served meanwhile and after.
    assert_eq!(node.client().get("/api/time", None).0, 200);
}

#[test]
fn silent_connections_do_not_keep_a_shopper_waiting_for_a_slot() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        1,
        "[http]\nmax_connections_per_shard = 4\nmax_event_streams_per_shard = 1\n\
         idle_timeout_ms = 20000\n",
    );
    // More silent connections than the shard may hold: had it accepted them at once, they
    // would hold its every slot until the idle timeout, and a shopper would wait for that.
    let silent: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", node.port)).expect("connect"))
        .collect();
    let started = std::time::Instant::now();
    assert_eq!(node.client().get("/api/time", None).0, 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "served after {:?}",
        started.elapsed()
    );
    // One of them speaks later, after the others have left (the shard sees them go), and
    // is served all the same.
    let mut silent = silent.into_iter();
    let mut late = silent.next().expect("a silent connection");
    drop(silent);
    std::thread::sleep(Duration::from_millis(1500));
    late.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    late.write_all(b"GET /api/time HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut reply = String::new();
    let _ = late.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[test]
fn a_body_that_stops_coming_gets_408() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[http]\nheader_timeout_ms = 500\n");
    open_sale(&redis, &node, spec("slow", 5, 1, 1));
    let token = node.client().token("slowpoke");
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let head = format!(
        "POST /api/campaigns/slow/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"qua"
    );
    s.write_all(head.as_bytes()).expect("write");
    let started = std::time::Instant::now();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("\"error\":\"timeout\""), "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let l = common::ledger_holds(&redis, "slow");
    assert_eq!(l.held, 0, "{l}");
}

/// Reads one response off a kept-alive connection: its status and its body.
fn read_response(s: &mut TcpStream) -> (String, String) {
    let (head, body) = read_answer(s);
    (head.get(9..12).unwrap_or_default().to_string(), body)
}

/// One response off a raw connection: its head (lowercased) and its body.
fn read_answer(s: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).expect("read the head"),
            1,
            "closed mid-head"
        );
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("content-length");
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).expect("read the body");
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// A response head's header names and values (the date's value left out), sorted.
fn header_lines(head: &str) -> Vec<String> {
    let mut lines: Vec<String> = head
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(':') {
            Some(("date", _)) => "date".to_string(),
            _ => l.to_string(),
        })
        .collect();
    lines.sort();
    lines
}

/// A node whose one-unit sale `gone` went to `first` (with the key `mine`), and whose
/// shard has heard from the script that it is sold out (refusing `late`); the two
/// users' tokens.
fn sold_out_sale(redis: &Redis) -> (Node, String, String) {
    let node = Node::start_with(redis, 1, "[http]\nheader_timeout_ms = 2000\n");
    open_sale(redis, &node, spec("gone", 1, 1, 1));
    let c = node.client();
    let first = c.token("first");
    assert_eq!(c.purchase("gone", &first, Some("mine")).0, 200);
    let late = c.token("late");
    assert_eq!(c.purchase("gone", &late, None).1["error"], "sold_out");
    (node, first, late)
}

#[test]
fn a_refusal_from_its_head_alone_reads_as_any_answer_and_keeps_its_place_in_line() {
    let redis = Redis::start();
    let (node, first, late) = sold_out_sale(&redis);
    let purchase = |token: &str, extra: &str| {
        format!(
            "POST /api/campaigns/gone/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\n{extra}Content-Length: 15\r\n\r\n{{\"quantity\": 1}}"
        )
    };
    let chunked = |token: &str| {
        format!(
            "POST /api/campaigns/gone/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Transfer-Encoding: chunked\r\n\r\nf\r\n{{\"quantity\": 1}}\r\n0\r\n\r\n"
        )
    };
    let connect = || {
        let s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s
    };
    // The same refusal, its request whole in one write, and its body a moment after its
    // head (read by the HTTP layer): the same answer, header for header.
    let mut whole = connect();
    let request = purchase(&late, "X-Request-Id: same-1\r\n");
    whole.write_all(request.as_bytes()).expect("write");
    let (head_whole, body_whole) = read_answer(&mut whole);
    let mut pieces = connect();
    let (head, body) = request.split_at(request.len() - 15);
    send_in_pieces(&mut pieces, head, body);
    let (head_pieces, body_pieces) = read_answer(&mut pieces);
    assert!(
        head_whole.starts_with("http/1.1 409 conflict\r\n"),
        "{head_whole}"
    );
    assert_eq!(
        header_lines(&head_whole),
        header_lines(&head_pieces),
        "{head_whole}{head_pieces}"
    );
    assert!(
        head_whole.contains("x-request-id: same-1\r\n"),
        "{head_whole}"
    );
    assert!(head_whole.contains("date: "), "{head_whole}");
    assert_eq!(body_whole, body_pieces);
    assert!(
        body_whole.contains("\"error\":\"sold_out\""),
        "{body_whole}"
    );

    // A refusal with a header of its own (over the user's rate: Retry-After), the same
    // answered at once and read by the HTTP layer (on a connection where a chunked body
    // came first: the shard's quick answers are off for the rest of it). The seconds to
    // wait count down, and may tick between the two.
    common::limits(&redis, &[("user_rate", "0.001"), ("user_burst", "1")]);
    let limited = purchase(&late, "X-Request-Id: same-2\r\n");
    common::wait_until("the user limit", Duration::from_secs(2), || {
        let mut s = connect();
        s.write_all(limited.as_bytes()).expect("write");
        read_answer(&mut s).0.starts_with("http/1.1 429 ")
    });
    let mut whole = connect();
    whole.write_all(limited.as_bytes()).expect("write");
    let (head_whole, body_whole) = read_answer(&mut whole);
    let mut by_layer = connect();
    by_layer
        .write_all(chunked(&late).as_bytes())
        .expect("write");
    assert!(read_answer(&mut by_layer).0.starts_with("http/1.1 429 "));
    by_layer.write_all(limited.as_bytes()).expect("write");
    let (head_layer, body_layer) = read_answer(&mut by_layer);
    let waits = |head: &str| -> (Vec<String>, u64) {
        let lines = header_lines(head);
        let wait = lines.iter().find_map(|l| l.strip_prefix("retry-after: "));
        let wait = wait.and_then(|v| v.parse().ok());
        let others = lines.iter().filter(|l| !l.starts_with("retry-after:"));
        (others.cloned().collect(), wait.unwrap_or(0))
    };
    let ((whole_lines, whole_wait), (layer_lines, layer_wait)) =
        (waits(&head_whole), waits(&head_layer));
    assert_eq!(whole_lines, layer_lines, "{head_whole}{head_layer}");
    assert!(
        whole_wait > 990 && whole_wait.abs_diff(layer_wait) <= 1,
        "{head_whole}{head_layer}"
    );
    assert_eq!(body_whole, body_layer);
    common::limits(&redis, &[("user_rate", "0")]);
    common::wait_until("the limit lifted", Duration::from_secs(2), || {
        let mut s = connect();
        s.write_all(limited.as_bytes()).expect("write");
        read_answer(&mut s).0.starts_with("http/1.1 409 ")
    });

    let count = |outcome: &str| {
        let metrics = common::get_text(
            &format!("http://127.0.0.1:{}/metrics", node.admin_port),
            None,
        );
        let series =
            format!("seckill_http_requests_total{{route=\"purchase\",outcome=\"{outcome}\"}} ");
        let n = metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.parse::<u64>().ok());
        n.unwrap_or_else(|| panic!("no {outcome} in {metrics}"))
    };
    // At least one while waiting for the limit, then whole, chunked and by the layer.
    assert!(count("rate_limited") >= 4, "rate limited");
    // The sale's last buyer's, whole, in pieces, and the last wait's.
    let sold_out_before = count("sold_out");
    assert!(sold_out_before >= 4, "sold out");

    // Pipelined in one write: refusals the shard gives at once, a retry whose first answer
    // is in Redis, a bad token, a GET, a chunked body (read by the HTTP layer, and every
    // request after it): answered in the order they came.
    let mut line = connect();
    let requests = [
        purchase(&late, ""),
        purchase(&first, "Idempotency-Key: mine\r\n"),
        purchase(&late, "Idempotency-Key: other\r\n"),
        purchase("forged", ""),
        "GET /api/time HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
        purchase(&late, ""),
        chunked(&late),
        purchase(&late, ""),
    ];
    line.write_all(requests.concat().as_bytes()).expect("write");
    let answers: Vec<(String, String)> = (0..requests.len())
        .map(|_| read_response(&mut line))
        .collect();
    let statuses: Vec<&str> = answers.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        statuses,
        ["409", "200", "409", "401", "200", "409", "409", "409"],
        "{answers:?}"
    );
    assert!(answers[1].1.contains("\"status\":\"held\""), "{answers:?}");
    assert!(answers[4].1.contains("now_ms"), "{answers:?}");

    // Counted as every answer is: the refusals by their outcome.
    let sold_out_after = count("sold_out");
    assert_eq!(sold_out_after, sold_out_before + 5, "sold out");
    assert_eq!(count("unauthenticated"), 1, "unauthenticated");
    // A target the HTTP layer refuses is refused however whole the request came.
    let mut odd = connect();
    let request = purchase(&late, "").replacen("purchase ", "purchase?a=< ", 1);
    odd.write_all(request.as_bytes()).expect("write");
    let (status, answer) = read_response(&mut odd);
    assert_eq!(status, "400", "{answer}");
    let l = common::ledger_holds(&redis, "gone");
    assert!(l.holds(), "{l}");
    assert_eq!((l.held, l.remaining, l.buyers), (1, 0, 1), "{l}");
}

/// Sends a request's head, then its body in two writes, each a moment after the last.
fn send_in_pieces(s: &mut TcpStream, head: &str, body: &str) {
    s.write_all(head.as_bytes()).expect("write");
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(&body.as_bytes()[..5]).expect("write");
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(&body.as_bytes()[5..]).expect("write");
}

#[test]
fn a_body_sent_in_pieces_or_chunks_is_read_whole_and_the_connection_serves_on() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        1,
        "[http]\nheader_timeout_ms = 2000\nmax_body_bytes = 64\n",
    );
    open_sale(&redis, &node, spec("pieces", 10, 1, 1));
    let c = node.client();
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let head = |token: &str, framing: &str| {
        format!(
            "POST /api/campaigns/pieces/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\n{framing}\r\n"
        )
    };
    let chunked = |token: &str, chunks: &str| {
        format!("{}{chunks}", head(token, "Transfer-Encoding: chunked\r\n"))
    };
    // The head, then the body in two writes a moment apart.
    let body = "{\"quantity\": 1}";
    let framing = format!("Content-Length: {}\r\n", body.len());
    send_in_pieces(&mut s, &head(&c.token("piecemeal"), &framing), body);
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "200", "{answer}");
    assert!(answer.contains("\"status\":\"held\""), "{answer}");
    // The same connection: a chunked body in three chunks.
    let three = "5\r\n{\"qua\r\n6\r\nntity\"\r\n4\r\n: 1}\r\n0\r\n\r\n";
    s.write_all(chunked(&c.token("chunky"), three).as_bytes())
        .expect("write");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "200", "{answer}");
    // A chunked body over the limit, whose size no header declared.
    let pad = "x".repeat(33);
    let over = format!("21\r\n{pad}\r\n21\r\n{pad}\r\n0\r\n\r\n");
    s.write_all(chunked(&c.token("chunky"), &over).as_bytes())
        .expect("write");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "413", "{answer}");
    // Two held, one each, and nothing else taken.
    let l = common::ledger_holds(&redis, "pieces");
    assert!(l.holds(), "{l}");
    assert_eq!((l.held, l.remaining, l.buyers), (2, 8, 2), "{l}");
}

#[test]
fn a_refusal_decided_before_its_body_is_answered_whether_the_body_came_or_comes_later() {
    let redis = Redis::start();
    let (node, _, late) = sold_out_sale(&redis);
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let head = |len: usize, key: &str| {
        format!(
            "POST /api/campaigns/gone/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {late}\r\n\
             Content-Type: application/json\r\nIdempotency-Key: {key}\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let body = "{\"quantity\": 1}";
    // The body with its head: refused at once.
    s.write_all(format!("{}{body}", head(body.len(), "k1")).as_bytes())
        .expect("write");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "409", "{answer}");
    // The head, then the body in two writes a moment apart: refused once it came, and the
    // connection serves on.
    send_in_pieces(&mut s, &head(body.len(), "k2"), body);
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "409", "{answer}");
    assert!(answer.contains("\"error\":\"sold_out\""), "{answer}");
    // Whatever the body says: the sale's answer does not depend on it, and it is not read.
    let odd = "{\"quantity\": 0}";
    s.write_all(format!("{}{odd}", head(odd.len(), "k3")).as_bytes())
        .expect("write");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "409", "{answer}");
    s.write_all(b"GET /api/time HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "200", "{answer}");
    let l = common::ledger_holds(&redis, "gone");
    assert!(l.holds(), "{l}");
    assert_eq!((l.held, l.remaining, l.buyers), (1, 0, 1), "{l}");
}

#[test]
fn a_purchase_whose_client_shuts_its_sending_side_is_still_answered() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("halfway", 10, 1, 1));
    let c = node.client();
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let body = "{\"quantity\": 1}";
    let request = format!(
        "POST /api/campaigns/halfway/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        c.token("leaving"),
        body.len()
    );
    s.write_all(request.as_bytes()).expect("write");
    // Nothing more to send: the client says so, and waits for its answer (HTTP/1.1 lets
    // it; the request in flight is not taken for one abandoned).
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let (status, answer) = read_response(&mut s);
    assert_eq!(status, "200", "{answer}");
    assert!(answer.contains("\"status\":\"held\""), "{answer}");
    let l = common::ledger_holds(&redis, "halfway");
    assert!(l.holds(), "{l}");
    assert_eq!((l.held, l.remaining, l.buyers), (1, 9, 1), "{l}");
}

#[test]
fn a_declared_body_over_the_limit_gets_413_before_it_is_sent() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[http]\nheader_timeout_ms = 5000\n");
    open_sale(&redis, &node, spec("big", 5, 1, 1));
    let token = node.client().token("bigmouth");
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // A million bytes announced, a few sent: the answer must not wait for the rest.
    let head = format!(
        "POST /api/campaigns/big/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{{\"quantity\":1}}"
    );
    s.write_all(head.as_bytes()).expect("write");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("\"error\":\"payload_too_large\""), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
    let l = common::ledger_holds(&redis, "big");
    assert_eq!(l.held, 0, "{l}");
}

#[test]
fn sigterm_drains_and_exits_cleanly() {
    let redis = Redis::start();
    let mut node = Node::start_with(&redis, 2, "[http]\ndrain_ms = 1500\n");
    common::wait_until("the node to be ready", Duration::from_secs(5), || {
        node.readyz().0 == 200
    });
    let c = node.client();
    assert_eq!(c.get("/api/time", None).0, 200);
    // A load balancer sees the node not ready at once, while it still serves, so it
    // takes the node out before the listener closes.
    node.sigterm();
    common::wait_until("not ready", Duration::from_millis(500), || {
        node.readyz().0 == 503
    });
    let (_, why) = node.readyz();
    assert!(
        why["reason"]
            .as_str()
            .is_some_and(|r| r.contains("stopping")),
        "{why}"
    );
    assert_eq!(
        c.get("/api/time", None).0,
        200,
        "still serving while it drains"
    );
    let status = node.terminate();
    assert!(status.success(), "exit status {status}");
}

#[test]
fn keep_alive_connections_live_for_the_idle_timeout_not_the_header_timeout() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        1,
        "[http]\nheader_timeout_ms = 300\nidle_timeout_ms = 1500\n",
    );
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let get = b"GET /api/time HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut buf = [0u8; 1024];
    s.write_all(get).expect("write");
    assert!(s.read(&mut buf).expect("first answer") > 0);
    // Idle for longer than the header timeout, well within the idle timeout.
    std::thread::sleep(Duration::from_millis(800));
    s.write_all(get).expect("write");
    let n = s
        .read(&mut buf)
        .expect("second answer on the same connection");
    assert!(std::str::from_utf8(&buf[..n])
        .unwrap_or("")
        .starts_with("HTTP/1.1 200"));
    // Past the idle timeout the server closes it.
    std::thread::sleep(Duration::from_millis(1_800));
    assert!(
        matches!(s.read(&mut buf), Ok(0) | Err(_)),
        "idle connection kept open"
    );
}

#[test]
fn a_body_that_trickles_in_gets_408() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[http]\nheader_timeout_ms = 400\n");
    open_sale(&redis, &node, spec("s", 10, 1, 1));
    let token = node.client().token("alice");
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let head = format!(
        "POST /api/campaigns/s/purchase HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).expect("write");
    let started = std::time::Instant::now();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"error\":\"timeout\""), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // Nothing was taken.
    assert_eq!(
        node.client().get("/api/campaigns/s", None).1["remaining"],
        10
    );
}

#[test]
fn malformed_http_costs_only_its_own_connection() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let many_headers: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: Vec<(String, &str, &str)> = vec![
        ("NOT HTTP AT ALL\r\n\r\n".into(), "400", "bad_request"),
        (
            "GET /api/time HTTP/1.1\r\nHost x\r\n\r\n".into(),
            "400",
            "bad_request",
        ),
        (
            format!("GET /api/time HTTP/1.1\r\n{many_headers}\r\n"),
            "431",
            "headers_too_large",
        ),
        (
            format!(
                "GET /api/time HTTP/1.1\r\nX-Big: {}\r\n\r\n",
                "a".repeat(20_000)
            ),
            "431",
            "headers_too_large",
        ),
        (
            "POST /api/session HTTP/1.1\r\nContent-Length: -5\r\n\r\n".into(),
            "400",
            "bad_request",
        ),
    ];
    for (raw, status, code) in cases {
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = s.write_all(raw.as_bytes());
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{:?} answered {answer:?}",
            &raw[..raw.len().min(40)]
        );
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(v["error"], code, "{answer:?}");
        assert!(v["message"].is_string());
    }
    // Valid JSON, wrong shapes: a JSON error each; the node serves on.
    let c = node.client();
    for body in [
        "[]",
        "{\"user_id\": null}",
        "{\"user_id\": \"x\", \"user_id\": \"y\"}",
        "\"str\"",
    ] {
        let (code, v) = c.post("/api/session", None, body);
        assert_eq!(
            (code, v["error"].as_str()),
            (400, Some("bad_request")),
            "{body}"
        );
    }
    assert_eq!(c.get("/api/time", None).0, 200);
}

/// Reads an answer as its API type and writes it back: the same JSON, so the route
/// answers exactly the documented shape, no field more or less.
fn same_shape<'a, T>(text: &'a str)
where
    T: serde::Deserialize<'a> + serde::Serialize,
{
    let typed: T = serde_json::from_str(text).expect(text);
    let original: serde_json::Value = serde_json::from_str(text).expect("json");
    assert_eq!(
        serde_json::to_value(&typed).expect("json"),
        original,
        "{}",
        std::any::type_name::<T>()
    );
}

#[test]
fn every_answer_has_the_shape_of_its_api_type() {
    use seckill_core::api;
    let redis = Redis::start();
    let node = common::Node::start_with(&redis, 1, "[tickets]\ndifficulty = 4\n");
    let mut s = spec("shape", 10, 1, 1);
    s.content_file = Some("album.zip".into());
    open_sale(&redis, &node, s);
    let mut t = spec("shape-t", 10, 1, 1);
    t.require_ticket = true;
    open_sale(&redis, &node, t);
    std::fs::write(node.content_dir().join("album.zip"), b"bytes").expect("content");
    let c = node.client();
    let text = |(_, v): common::Answer| v.to_string();

    same_shape::<api::Time>(&text(c.get("/api/time", None)));
    let session = text(c.post("/api/session", None, r#"{"user_id":"shaper"}"#));
    same_shape::<api::Session>(&session);
    let token = c.token("shaper");
    same_shape::<Vec<api::CampaignInfo>>(&text(c.get("/api/campaigns", None)));
    same_shape::<api::CampaignInfo>(&text(c.get("/api/campaigns/shape", None)));
    let held = c.purchase("shape", &token, None);
    let order_id = held.1["order_id"].as_str().expect("order").to_string();
    same_shape::<api::Held>(&text(held));
    same_shape::<api::Order>(&text(
        c.get(&format!("/api/orders/{order_id}"), Some(&token)),
    ));
    same_shape::<api::Paid>(&text(c.pay(&order_id, &token)));
    common::wait_until("the delivery", Duration::from_secs(10), || {
        c.get(&format!("/api/orders/{order_id}"), Some(&token)).1["status"] == "delivered"
    });
    same_shape::<api::Order>(&text(
        c.get(&format!("/api/orders/{order_id}"), Some(&token)),
    ));
    let challenge = c.post("/api/campaigns/shape-t/challenge", Some(&token), "");
    same_shape::<api::Challenge>(&text(challenge));
    let (code, ticket) = common::earn_ticket(&c, "shape-t", &token);
    assert_eq!(code, 200, "{ticket}");
    same_shape::<api::Ticket>(&ticket.to_string());
    // Refusals: the bare body, and those that carry more.
    same_shape::<api::Error>(&text(c.get("/api/campaigns/none", None)));
    same_shape::<api::Error>(&text(c.purchase("shape", &token, None)));
    common::ledger_holds(&redis, "shape");
}
