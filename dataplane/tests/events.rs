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
        let r = ureq::get(&node.url(path)).call().expect(path);
        assert_eq!(r.status(), 200, "{path}");
        let etag = r.header("etag").expect("an ETag").to_string();
        assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
        assert!(
            r.header("cache-control")
                .is_some_and(|c| c.starts_with("public, max-age=")),
            "{path}"
        );
        let again = ureq::get(&node.url(path))
            .set("If-None-Match", &etag)
            .call()
            .expect("revalidation");
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.into_string().unwrap_or_default(), "");
    }
    let page = ureq::get(&node.url("/c/any-sale")).call().expect("page");
    assert!(page
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/html")));
    let c = node.client();
    assert_eq!(c.get("/static/secrets.txt", None).0, 404);
    assert_eq!(c.get("/c/Not%20An%20Id", None).0, 404);
}
