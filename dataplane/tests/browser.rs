//! The campaign page in a real browser: headless Chromium driven through chromedriver
//! (WebDriver over HTTP), against a node and redis-server started here. Screenshots go
//! to the test's temp dir under target/ (printed at the end of each test).

mod common;

use common::*;
use seckill_core::campaign::Action;
use seckill_core::control;
use seckill_core::keys::QueueKeys;
use seckill_testkit::webdriver::Browser;
use serde_json::json;
use std::path::PathBuf;

/// The page's window, the size the screenshots show.
fn browser() -> Browser {
    Browser::start(900, 1100)
}

/// Opens the campaign's page, signs in as `user` and joins the waiting room.
fn join_as(b: &Browser, node: &Node, id: &str, user: &str) {
    b.open(&node.url(&format!("/c/{id}")));
    b.wait("the page to show the waiting room", |b| b.shown("room"));
    b.type_into("#user", user);
    b.click("#signin button");
    b.wait("the sign-in to enable Join", |b| !b.disabled("join"));
    b.click("#join");
    b.wait("the pre-queue", |b| b.text("room-status") == PRE_QUEUE);
}

/// Saves what the window shows as `name`.png under the tests' temp dir, and says where.
fn screenshot(b: &Browser, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let path = dir.join(format!("{name}.png"));
    b.screenshot(&path);
    eprintln!("screenshot: {}", path.display());
    path
}

#[test]
fn a_shopper_waits_for_the_start_buys_pays_and_downloads() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    std::fs::write(node.content_dir().join("album.zip"), vec![42u8; 20_000]).expect("content");
    // Far enough ahead that a slow start of the browser still sees the countdown.
    let starts = seckill_core::now_ms() + 15_000;
    let mut s = spec("page", 5, 2, 1);
    s.name = "Midnight Sessions".into();
    s.price_cents = 1299;
    s.content_file = Some("album.zip".into());
    s.starts_at = Some(seckill_core::campaign::format_instant_ms(starts));
    open_sale(&redis, &node, s);

    let b = browser();
    b.open(&node.url("/c/page"));
    b.wait("the page to load the campaign", |b| {
        b.text("name") == "Midnight Sessions"
    });
    assert_eq!(b.text("price"), "12.99");
    assert_eq!(b.text("remaining"), "5");
    b.type_into("#user", "alice");
    b.click("#signin button");
    b.wait("the sign-in", |b| b.text("who").contains("alice"));

    // Before the start: a countdown on the server's clock, and no buying.
    b.wait("the countdown", |b| {
        b.text("countdown").starts_with("Opens in 00:00:")
    });
    assert!(b.disabled("buy"));
    assert_eq!(b.text("state"), "Opens soon");
    assert!(b
        .js("return document.getElementById('signin').offsetParent === null")
        .as_bool()
        .unwrap_or(false));
    screenshot(&b, "1-countdown");

    // At the start the button wakes up; one click buys, a second click does nothing.
    b.wait("the sale to open", |b| !b.disabled("buy"));
    assert!(seckill_core::now_ms() >= starts - 1000, "opened early");
    b.click("#buy");
    let _ = b.js("document.getElementById('buy').click()");
    b.wait("the hold", |b| b.text("order-status") == "held for you");
    assert_eq!(b.text("state"), "On sale");
    assert!(b.disabled("buy"));
    screenshot(&b, "2-held");
    let l = ledger_holds(&redis, "page");
    assert_eq!((l.held, l.buyers), (1, 1), "{l}");

    // Pay; the worker delivers; the page shows the key and the link, which downloads.
    b.click("#pay");
    b.wait("the delivery", |b| !b.text("license").is_empty());
    let key = b.text("license");
    assert!(key.len() >= 16, "{key}");
    let size = b.js("const r = new XMLHttpRequest(); \
         r.open('GET', document.getElementById('download').href, false); \
         r.overrideMimeType('text/plain; charset=x-user-defined'); r.send(); \
         return [r.status, r.responseText.length];");
    assert_eq!(size, json!([200, 20_000]), "the download");
    screenshot(&b, "3-delivered");
    let l = ledger_holds(&redis, "page");
    assert_eq!((l.sold, l.held, l.remaining), (1, 0, 4), "{l}");
}

#[test]
fn a_shopper_the_shop_hands_over_in_the_fragment_buys_and_the_token_leaves_the_address() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("handed", 3, 1, 1));
    // The shop's backend signs its shopper's token and links to the page with it.
    let token = shopper_token("carol", seckill_core::now_ms() + 600_000);

    let b = browser();
    b.open(&format!("{}#token={token}", node.url("/c/handed")));
    b.wait("the page, open for the shop's shopper", |b| {
        b.text("remaining") == "3" && !b.disabled("buy")
    });
    // Out of the address bar (and its history), kept in this tab's storage only.
    assert_eq!(b.js("return location.href"), json!(node.url("/c/handed")));
    assert_eq!(
        b.js("return sessionStorage.getItem('seckill.token')"),
        json!(token)
    );
    assert_eq!(
        b.js("return localStorage.getItem('seckill.token')"),
        json!(null)
    );
    assert!(b
        .js("return document.getElementById('signin').offsetParent === null")
        .as_bool()
        .unwrap_or(false));
    b.click("#buy");
    b.wait("the hold", |b| b.text("order-status") == "held for you");
    // A reload in the tab keeps the shopper signed in, with nothing in the address.
    b.open(&node.url("/c/handed"));
    b.wait("the page after the reload", |b| b.text("remaining") == "2");
    assert!(b.text("who").contains("Signed in"), "{}", b.text("who"));
    let l = ledger_holds(&redis, "handed");
    assert_eq!((l.held, l.buyers, l.remaining), (1, 1, 2), "{l}");
}

#[test]
fn the_page_follows_the_stock_live_and_says_sold_out() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    open_sale(&redis, &node, spec("last", 1, 1, 1));

    let b = browser();
    b.open(&node.url("/c/last"));
    b.type_into("#user", "bob");
    b.click("#signin button");
    b.wait("the page, open for bob", |b| {
        b.text("remaining") == "1" && !b.disabled("buy")
    });

    // Someone else takes the last unit: the event stream tells the page.
    let c = node.client();
    let rival = c.token("rival");
    assert_eq!(c.purchase("last", &rival, None).0, 200);
    b.wait("the page to show it sold out", |b| {
        b.text("state") == "Sold out" && b.text("remaining") == "0"
    });
    assert!(b.disabled("buy"));
    assert!(
        b.text("message").starts_with("Sold out"),
        "{}",
        b.text("message")
    );
    screenshot(&b, "4-sold-out");

    // A shop with nothing at that address says so.
    b.open(&node.url("/c/nothing-here"));
    b.wait("the missing sale", |b| b.text("name") == "No such sale");
    let l = ledger_holds(&redis, "last");
    assert_eq!((l.held, l.remaining), (1, 0), "{l}");
}

#[test]
fn behind_proof_of_work_the_browser_earns_its_ticket() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 1, "[tickets]\ndifficulty = 12");
    let mut s = spec("pow", 3, 1, 1);
    s.require_ticket = true;
    open_sale(&redis, &node, s);

    let b = browser();
    b.open(&node.url("/c/pow"));
    b.type_into("#user", "carol");
    b.click("#signin button");
    b.wait("the page, open for carol", |b| !b.disabled("buy"));
    b.click("#buy");
    // Challenge, about 4,000 SHA-256 digests in Web Crypto, ticket, purchase.
    b.wait("the hold", |b| b.text("order-status") == "held for you");
    screenshot(&b, "5-ticket-held");
    let l = ledger_holds(&redis, "pow");
    assert_eq!((l.held, l.buyers), (1, 1), "{l}");
    // The ticket was used: the data plane recorded it beside the order it made.
    let mut con = redis.admin();
    let keys = seckill_core::keys::PartitionKeys::new("pow", 0);
    let once: Vec<String> = redis::cmd("HKEYS")
        .arg(keys.once())
        .query(&mut con)
        .expect("hkeys");
    assert!(
        once.iter().any(|f| f.starts_with("t:")),
        "no ticket recorded: {once:?}"
    );
}

const PRE_QUEUE: &str = "You are in the pre-queue; places are drawn at the opening.";

#[test]
fn a_shopper_queues_before_the_opening_buys_in_their_turn_and_the_one_behind_hears_sold_out() {
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    let id = "line";
    // Five units, one shopper let through a second: alice is fifth in line, one more
    // shopper behind her.
    let mut s = queued(id, 5, 1, 60);
    s.name = "Encore Edition".into();
    arm(&redis, &node, s);

    let b = browser();
    b.open(&node.url("/c/line"));
    b.wait("the page to load the campaign", |b| {
        b.text("name") == "Encore Edition"
    });
    // Signed out: the room is shown, joining waits for a sign-in, and there is no Buy.
    assert_eq!(
        b.text("room-status"),
        "This sale has a waiting room: sign in to join it."
    );
    assert!(b.disabled("join"));
    assert!(!b.shown("buy"));
    join_as(&b, &node, id, "alice");
    assert!(!b.shown("join"));
    assert!(!b.shown("buy"));
    assert_eq!(b.text("countdown"), "Opens when the shop starts the sale");
    screenshot(&b, "6-pre-queue");

    // The draw is random. The test reads the room's seed (secret from shoppers until the
    // opening) to pick four rivals drawn ahead of alice and a shopper drawn behind her.
    let seed: String = redis::cmd("HGET")
        .arg(QueueKeys::new(id).meta())
        .arg("seed")
        .query(&mut redis.admin())
        .expect("the room's seed");
    let alice = control::draw(&seed, "alice");
    let names = || (0..).map(|i| format!("shopper{i}"));
    let ahead: Vec<String> = names()
        .filter(|u| control::draw(&seed, u) < alice)
        .take(4)
        .collect();
    let behind = names()
        .find(|u| control::draw(&seed, u) > alice)
        .expect("a name");
    let c = node.client();
    let rivals: Vec<String> = ahead
        .iter()
        .map(|u| {
            let token = c.token(u);
            let (code, v) = c.post(&format!("/api/campaigns/{id}/queue"), Some(&token), "{}");
            assert_eq!((code, v["state"].as_str()), (200, Some("waiting")), "{v}");
            token
        })
        .collect();
    let b2 = browser();
    join_as(&b2, &node, id, &behind);

    // The opening draws the line: alice learns her place, and follows the line's
    // progress from the event stream until her turn.
    control::act(&mut redis.con(), id, Action::Start).expect("start");
    b.wait("alice's place in line", |b| {
        b.text("room-status").starts_with("Place 5 in line: ")
    });
    assert!(b.shown("room-bar"));
    assert!(
        b.text("room-eta").starts_with("Estimated wait: "),
        "{}",
        b.text("room-eta")
    );
    screenshot(&b, "7-in-line");
    let mut statuses = vec![b.text("room-status")];
    b.wait("alice's turn", |b| {
        let now = b.text("room-status");
        if statuses.last() != Some(&now) {
            statuses.push(now);
        }
        b.shown("buy") && !b.disabled("buy")
    });
    let in_line = statuses
        .iter()
        .filter(|s| s.starts_with("Place 5 in line"))
        .count();
    assert!(in_line >= 2, "the line moved on the page: {statuses:?}");

    // Her turn: the pass's countdown and the Buy button; one click buys with the pass.
    b.wait("the pass's countdown", |b| {
        b.text("pass").starts_with("Buy within 00:5")
    });
    assert!(!b.shown("room-bar"));
    screenshot(&b, "8-your-turn");
    b.click("#buy");
    b.wait("the hold", |b| b.text("order-status") == "held for you");
    assert!(!b.text("order-id").is_empty());
    assert!(b.shown("pay"));
    assert!(b.disabled("buy"));
    assert!(!b.shown("pass"));
    assert_eq!(b.text("room-status"), "You have had your turn.");
    screenshot(&b, "9-bought-in-turn");

    // Every unit is reserved by a pass: the shopper behind is next, and waits.
    b2.wait("the one behind to be next", |b| {
        b.text("room-status") == "Place 6 in line: you are next."
    });
    assert!(!b2.shown("buy"));

    // The rivals buy with their passes: nothing is left, the one behind is told at once.
    for token in &rivals {
        let (code, v) = c.get(&format!("/api/campaigns/{id}/queue"), Some(token));
        assert_eq!((code, v["state"].as_str()), (200, Some("admitted")), "{v}");
        let (code, r) = buy_with(&c, id, token, v["ticket"].as_str());
        assert_eq!(code, 200, "{r}");
    }
    b2.wait("sold out for the one behind", |b| {
        b.text("room-status") == "Sold out: every unit went to shoppers ahead of you in line."
    });
    assert_eq!(b2.text("state"), "Sold out");
    assert!(!b2.shown("buy"));
    screenshot(&b2, "10-sold-out-in-line");
    let l = ledger_holds(&redis, id);
    assert_eq!((l.held, l.buyers, l.remaining), (5, 5, 0), "{l}");
}

#[test]
fn a_reload_keeps_the_place_in_line_and_a_pass_left_unused_runs_out_on_the_page() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let id = "brief";
    arm(&redis, &node, queued(id, 1, 10, 10));
    let b = browser();
    join_as(&b, &node, id, "dora");

    // The page keeps the room's receipt: after a reload the node answers from it.
    b.open(&node.url("/c/brief"));
    b.wait("the pre-queue after a reload", |b| {
        b.text("room-status") == PRE_QUEUE
    });
    assert!(!b.shown("join"));

    control::act(&mut redis.con(), id, Action::Start).expect("start");
    b.wait("dora's turn", |b| !b.disabled("buy"));
    assert!(
        b.text("pass").starts_with("Buy within 00:"),
        "{}",
        b.text("pass")
    );
    // The pass lasts ten seconds; dora lets it run out.
    b.wait("the pass to run out", |b| {
        b.text("room-status") == "Your turn has passed: your pass ran out before you bought."
    });
    assert!(b.disabled("buy"));
    assert!(!b.shown("pass"));
    screenshot(&b, "11-pass-ran-out");
    let l = ledger_holds(&redis, id);
    assert_eq!((l.held, l.sold), (0, 0), "{l}");
}
