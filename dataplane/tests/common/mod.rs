//! What only the data plane's tests share: earning a ticket, which solves the node's
//! proof of work with the data plane's own solver. The rest comes from the workspace's
//! test kit.
#![allow(dead_code)]

pub use seckill_testkit::*;

use std::time::{Duration, Instant};

/// Asks for a challenge, solves it, and trades it for a ticket; from the start again, as
/// a client told to retry would, while the node answers 503 `unavailable` (its Redis did
/// not answer in time: with `appendfsync always` on a busy disk, an fsync can hold it
/// past the node's command timeout).
pub fn earn_ticket(c: &Client, campaign: &str, token: &str) -> (u16, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = earn_ticket_once(c, campaign, token);
        if code != 503 || body["error"] != "unavailable" || Instant::now() > deadline {
            return (code, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn earn_ticket_once(c: &Client, campaign: &str, token: &str) -> (u16, serde_json::Value) {
    let (code, ch) = c.post(
        &format!("/api/campaigns/{campaign}/challenge"),
        Some(token),
        "",
    );
    if code == 503 {
        return (code, ch);
    }
    assert_eq!(code, 200, "{ch}");
    let nonce = seckill_dataplane::guard::pow::solve(
        ch["prefix"].as_str().expect("prefix"),
        ch["difficulty"].as_u64().expect("difficulty") as u32,
    );
    let body = serde_json::json!({ "challenge_id": ch["challenge_id"], "nonce": nonce });
    c.post(
        &format!("/api/campaigns/{campaign}/ticket"),
        Some(token),
        &body.to_string(),
    )
}

/// A purchase of one unit with `ticket`.
pub fn buy_with(
    c: &Client,
    campaign: &str,
    token: &str,
    ticket: Option<&str>,
) -> (u16, serde_json::Value) {
    let body = serde_json::json!({ "quantity": 1, "ticket": ticket });
    c.post(
        &format!("/api/campaigns/{campaign}/purchase"),
        Some(token),
        &body.to_string(),
    )
}
