//! The live stock stream: Server-Sent Events that follow the campaign and stay open.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn the_event_stream_follows_the_stock_and_outlives_the_idle_timeout() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[http]\nidle_timeout_ms = 1000");
    open_sale(&redis, &node, spec("live", 3, 1, 1));

    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /api/campaigns/live/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut lines = BufReader::new(s).lines().map(|l| l.expect("a line"));
    let head: Vec<String> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
    assert!(head[0].starts_with("HTTP/1.1 200"), "{head:?}");
    assert!(
        head.iter()
            .any(|h| h.eq_ignore_ascii_case("content-type: text/event-stream")),
        "{head:?}"
    );
    // Chunked framing: chunk sizes and data lines alternate; keep the data.
    let next_data = |lines: &mut dyn Iterator<Item = String>| -> serde_json::Value {
        for l in lines {
            if let Some(json) = l.strip_prefix("data: ") {
                return serde_json::from_str(json).expect("json data");
            }
        }
        panic!("the stream ended");
    };
    let first = next_data(&mut lines);
    assert_eq!(
        (first["state"].as_str(), first["remaining"].as_i64()),
        (Some("live"), Some(3))
    );

    // Quiet for three idle timeouts: comments keep the stream open.
    let quiet = Instant::now();
    let mut beats = 0;
    while quiet.elapsed() < Duration::from_secs(3) {
        let l = lines.next().expect("the stream stays open");
        if l.starts_with(": keep-alive") {
            beats += 1;
        }
        assert!(
            !l.starts_with("data: "),
            "an update while nothing changed: {l}"
        );
    }
    assert!(beats >= 3, "{beats} heartbeats");

    // A purchase: the next update has one unit less.
    let c = node.client();
    let t = c.token("buyer");
    assert_eq!(c.purchase("live", &t, None).0, 200);
    let next = next_data(&mut lines);
    assert_eq!(next["remaining"].as_i64(), Some(2), "{next}");

    // An unknown campaign is a plain 404.
    assert_eq!(c.get("/api/campaigns/nope/events", None).0, 404);
    let _ = ledger_holds(&redis, "live");
}

#[test]
fn the_page_and_its_files_are_cacheable() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    for path in ["/c/any-sale", "/static/app.js", "/static/app.css"] {
        let r = agent().get(&node.url(path)).call().expect(path);
        assert_eq!(r.status(), 200, "{path}");
        let etag = header(&r, "etag").expect("an ETag").to_string();
        assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
        assert!(
            header(&r, "cache-control").is_some_and(|c| c.starts_with("public, max-age=")),
            "{path}"
        );
        let again = agent()
            .get(&node.url(path))
            .header("If-None-Match", &etag)
            .call()
            .expect("revalidation");
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(body_text(again), "");
    }
    let page = agent().get(&node.url("/c/any-sale")).call().expect("page");
    assert_eq!(page.status(), 200);
    assert!(header(&page, "content-type").is_some_and(|t| t.starts_with("text/html")));
    let c = node.client();
    assert_eq!(c.get("/static/secrets.txt", None).0, 404);
    assert_eq!(c.get("/c/Not%20An%20Id", None).0, 404);
}

/// An event stream's request on a fresh connection, with the client address a trusted
/// proxy would forward; returns the open socket, the status and, for a refusal, its
/// `Retry-After` and JSON body.
fn open_stream(
    node: &Node,
    campaign: &str,
    forwarded_for: Option<&str>,
) -> (TcpStream, u16, Option<String>, serde_json::Value) {
    use std::io::Read;
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let xff = forwarded_for.map_or(String::new(), |a| format!("X-Forwarded-For: {a}\r\n"));
    write!(
        s,
        "GET /api/campaigns/{campaign}/events HTTP/1.1\r\nHost: x\r\n{xff}\r\n"
    )
    .expect("write");
    let mut reader = BufReader::new(s.try_clone().expect("clone"));
    let mut head = Vec::new();
    loop {
        let mut l = String::new();
        reader.read_line(&mut l).expect("a head line");
        let l = l.trim_end().to_string();
        if l.is_empty() {
            break;
        }
        head.push(l);
    }
    let status: u16 = head[0]
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    let header = |name: &str| {
        head.iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let mut body = serde_json::Value::Null;
    if status != 200 {
        let len: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("a refusal has a length: {head:?}"));
        let mut bytes = vec![0; len];
        reader.read_exact(&mut bytes).expect("the body");
        body = serde_json::from_slice(&bytes).expect("a JSON body");
    }
    (s, status, header("retry-after"), body)
}

#[test]
fn event_streams_are_capped_per_client_address_and_per_shard() {
    let redis = Redis::start();
    // The heartbeat (half the idle timeout) finds a closed stream within a second.
    let node = Node::start_with(
        &redis,
        1,
        "[http]\nmax_event_streams_per_client = 2\nmax_event_streams_per_shard = 3\n\
         idle_timeout_ms = 1000\ntrusted_proxies = [\"127.0.0.1\"]\n",
    );
    open_sale(&redis, &node, spec("capped", 5, 1, 1));

    // One client: two streams, and the third is refused.
    let (first, code, ..) = open_stream(&node, "capped", None);
    assert_eq!(code, 200);
    let (_second, code, ..) = open_stream(&node, "capped", None);
    assert_eq!(code, 200);
    let (_, code, retry, body) = open_stream(&node, "capped", None);
    assert_eq!(
        (code, body["error"].as_str()),
        (429, Some("too_many_streams")),
        "{body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(retry.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));

    // Another client may still open one, up to the shard's cap of three in all; a
    // client with no stream at all is then told the shard is busy.
    let (other, code, ..) = open_stream(&node, "capped", Some("10.0.0.2"));
    assert_eq!(code, 200);
    let (_, code, retry, body) = open_stream(&node, "capped", Some("10.0.0.3"));
    assert_eq!(
        (code, body["error"].as_str()),
        (503, Some("busy")),
        "{body}"
    );
    assert!(retry.is_some());

    // A closed stream gives its slot back: the first client opens one again.
    drop(first);
    let mut reopened = None;
    wait_until(
        "a closed stream's slot back",
        Duration::from_secs(10),
        || {
            let (s, code, ..) = open_stream(&node, "capped", None);
            assert!([200, 429].contains(&code), "{code}");
            reopened = (code == 200).then_some(s);
            reopened.is_some()
        },
    );
    let (_, code, ..) = open_stream(&node, "capped", None);
    assert_eq!(code, 429, "the client is at its cap again");
    // And the shard's slot likewise, for a client of its own.
    drop(other);
    wait_until("the shard's slot back", Duration::from_secs(10), || {
        let (_, code, ..) = open_stream(&node, "capped", Some("10.0.0.3"));
        assert!([200, 503].contains(&code), "{code}");
        code == 200
    });

    // The refusals are counted under their own outcome, not as "other".
    let metrics = get_text(
        &format!("http://127.0.0.1:{}/metrics", node.admin_port),
        None,
    );
    let count = |outcome: &str| -> u64 {
        let prefix =
            format!("seckill_http_requests_total{{route=\"events\",outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or(0)
    };
    assert!(count("too_many_streams") >= 2, "{metrics}");
    assert!(count("busy") >= 1, "{metrics}");
    assert_eq!(count("other"), 0, "{metrics}");
    let _ = ledger_holds(&redis, "capped");
}
