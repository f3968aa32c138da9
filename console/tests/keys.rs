//! Keys in the console change the control plane of a real redis-server as they say, and
//! refuse what the campaign's state does not allow.

mod common;

use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use redis::Commands;

use seckill_console::app::{App, Popup, View};
use seckill_console::command::{execute, Stores};
use seckill_console::data;
use seckill_core::campaign::State;

/// The console's loop without a terminal: keys in, commands run, the picture refreshed.
struct Console {
    app: App,
    con: seckill_core::connection::Connection,
    stores: Stores,
}

impl Console {
    fn new(redis: &Redis, stores: Stores) -> Console {
        let mut c = Console {
            app: App::new(&seckill_core::secrets::redact(&redis.url())),
            con: redis.con(),
            stores,
        };
        c.refresh();
        c
    }

    fn refresh(&mut self) {
        let s = data::fetch(&mut self.con).map_err(|e| e.to_string());
        self.app.on_data(s);
    }

    fn press(&mut self, code: KeyCode) {
        if let Some(cmd) = self.app.on_key(KeyEvent::new(code, KeyModifiers::NONE)) {
            let done = execute(&mut self.con, &cmd, &self.stores).map_err(|e| format!("{e:#}"));
            self.app.on_done(done);
        }
        self.refresh();
    }

    fn type_line(&mut self, text: &str) {
        for ch in text.chars() {
            self.press(KeyCode::Char(ch));
        }
        self.press(KeyCode::Enter);
    }

    fn state(&mut self, id: &str) -> State {
        seckill_core::control::get(&mut self.con, id)
            .expect("campaign")
            .state
    }

    fn status(&self) -> String {
        self.app.status.clone().map(|s| s.0).unwrap_or_default()
    }

    /// What an 80×24 terminal shows, every run of blanks made one space.
    fn screen(&self) -> String {
        let mut t = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
        t.draw(|f| seckill_console::ui::draw(&self.app, f))
            .expect("draw");
        format!("{}", t.backend())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[test]
fn a_campaign_is_created_armed_started_paused_resumed_and_stopped_from_keys() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = campaign_file(dir.path(), "drop-1");
    let mut c = Console::new(&redis, Stores::default());

    // n: a prompt prefilled with config/campaigns/; clear it and give the file.
    c.press(KeyCode::Char('n'));
    for _ in 0.."config/campaigns/".len() {
        c.press(KeyCode::Backspace);
    }
    c.type_line(&file.display().to_string());
    assert!(c.status().starts_with("created drop-1"), "{}", c.status());
    assert_eq!(c.state("drop-1"), State::Draft);

    // Starting a draft is refused here, before Redis.
    c.press(KeyCode::Char('s'));
    assert!(c.app.popup.is_none());
    assert!(
        c.status().contains("start needs it armed"),
        "{}",
        c.status()
    );

    c.press(KeyCode::Char('a'));
    assert_eq!(c.state("drop-1"), State::Armed);
    let row = &c.app.snapshot.campaigns[0];
    assert_eq!((row.remaining(), row.partitions.len()), (100, 4));

    // s asks first; n leaves it armed, y opens the sale.
    c.press(KeyCode::Char('s'));
    assert!(matches!(c.app.popup, Some(Popup::Confirm { .. })));
    c.press(KeyCode::Char('n'));
    assert_eq!(c.state("drop-1"), State::Armed);
    c.press(KeyCode::Char('s'));
    c.press(KeyCode::Char('y'));
    assert_eq!(c.state("drop-1"), State::Live);

    c.press(KeyCode::Char('p'));
    c.press(KeyCode::Char('y'));
    assert_eq!(c.state("drop-1"), State::Paused);
    // Resuming does not ask.
    c.press(KeyCode::Char('r'));
    assert_eq!(c.state("drop-1"), State::Live);

    // From the detail view too.
    c.press(KeyCode::Enter);
    assert_eq!(c.app.view, View::Detail);
    c.press(KeyCode::Char('x'));
    c.press(KeyCode::Char('y'));
    assert_eq!(c.state("drop-1"), State::Ended);
    c.press(KeyCode::Char('x'));
    assert!(c.app.popup.is_none());
    assert!(c.status().contains("is ended"), "{}", c.status());

    // A file that is not a campaign says why, and creates nothing.
    std::fs::write(dir.path().join("bad.toml"), "id = \"x\"\ntotal = -1\n").expect("write");
    c.press(KeyCode::Char('n'));
    for _ in 0.."config/campaigns/".len() {
        c.press(KeyCode::Backspace);
    }
    c.type_line(&dir.path().join("bad.toml").display().to_string());
    assert!(c.app.status.as_ref().is_some_and(|s| s.1), "{}", c.status());
    assert_eq!(c.app.snapshot.campaigns.len(), 1);
}

#[test]
fn limits_and_the_blacklist_change_from_keys() {
    let redis = Redis::start();
    let mut c = Console::new(&redis, Stores::default());
    let mut con = redis.con();

    c.press(KeyCode::Char('l'));
    c.type_line("ip_rate=7 user_burst=3");
    let limits: std::collections::HashMap<String, String> =
        con.hgetall(seckill_core::keys::LIMITS).expect("limits");
    assert_eq!(limits.get("ip_rate").map(String::as_str), Some("7"));
    assert_eq!(limits.get("user_burst").map(String::as_str), Some("3"));

    // A bad value is refused in the prompt, which stays open; Esc leaves it.
    c.press(KeyCode::Char('l'));
    c.type_line("ip_rate=-2");
    assert!(matches!(c.app.popup, Some(Popup::Input { .. })));
    assert!(c.status().contains("ip_rate"), "{}", c.status());
    c.press(KeyCode::Esc);
    assert!(c.app.popup.is_none());

    // L asks, then drops every override.
    c.press(KeyCode::Char('L'));
    c.press(KeyCode::Char('y'));
    let limits: std::collections::HashMap<String, String> =
        con.hgetall(seckill_core::keys::LIMITS).expect("limits");
    assert!(limits.is_empty());

    c.press(KeyCode::Char('b'));
    c.type_line("ip:10.1.2.3 120");
    assert_eq!(c.app.snapshot.blacklist.len(), 1);
    assert_eq!(c.app.snapshot.blacklist[0].0, "ip:10.1.2.3");
    c.press(KeyCode::Char('u'));
    c.type_line("ip:10.1.2.3");
    assert!(c.app.snapshot.blacklist.is_empty());
    c.press(KeyCode::Char('u'));
    c.type_line("ip:10.1.2.3");
    assert!(c.status().contains("was not blocked"), "{}", c.status());
}

#[test]
fn reconciliation_opens_a_scrollable_report() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("orders.sqlite");
    drop(seckill_orders::OrderDb::open(&db).expect("an order store"));
    let mut con = redis.con();
    let spec = seckill_core::campaign::CampaignSpec::from_toml(
        &std::fs::read_to_string(campaign_file(dir.path(), "rec")).expect("read"),
    )
    .expect("spec");
    seckill_core::control::create(&mut con, spec).expect("create");
    seckill_core::control::arm(&mut con, "rec").expect("arm");
    let mut c = Console::new(&redis, Stores(vec![db]));

    c.press(KeyCode::Char('c'));
    let Some(Popup::Report { title, lines, .. }) = &c.app.popup else {
        panic!("no report: {}", c.status());
    };
    assert!(title.contains("the ledger holds"), "{title}");
    assert!(
        lines.iter().any(|l| l.contains("remaining 100")),
        "{lines:?}"
    );
    c.press(KeyCode::Char('j'));
    assert!(matches!(c.app.popup, Some(Popup::Report { scroll: 1, .. })));
    c.press(KeyCode::Esc);
    assert!(c.app.popup.is_none());
}

#[test]
fn reconciliation_shows_the_money_and_names_a_payment_without_a_sale() {
    use seckill_core::keys::{PartitionKeys, UNMATCHED_PAYMENTS};

    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("orders.sqlite");
    drop(seckill_orders::OrderDb::open(&db).expect("an order store"));
    let mut con = redis.con();
    let spec = seckill_core::campaign::CampaignSpec::from_toml(
        &std::fs::read_to_string(campaign_file(dir.path(), "till")).expect("read"),
    )
    .expect("spec");
    seckill_core::control::create(&mut con, spec).expect("create");
    seckill_core::control::arm(&mut con, "till").expect("arm");
    // Payments as the node records them: one for an order of this sale nobody knows,
    // one for another sale's.
    let record = |order: &str, payment: &str, status: &str| {
        serde_json::json!({
            "order_id": order, "payment_id": payment, "amount_cents": "500",
            "currency": "EUR", "status": status, "reason": "", "ms": "1795982400000",
        })
        .to_string()
    };
    for (order, payment) in [("till.2.9", "pi_ghost"), ("other.0.1", "pi_other")] {
        let _: () = con
            .hset(
                UNMATCHED_PAYMENTS,
                payment,
                record(order, payment, "unmatched"),
            )
            .expect("plant");
    }
    let mut c = Console::new(&redis, Stores(vec![db]));

    c.press(KeyCode::Char('c'));
    let Some(Popup::Report { title, lines, .. }) = &c.app.popup else {
        panic!("no report: {}", c.status());
    };
    assert!(title.contains("the ledger holds"), "{title}");
    for shown in [
        "  paid       0.00 EUR, 0 payments, for 0 units sold at 5.00 EUR",
        "  refunds    0 due (0.00 EUR), 0 refunded (0.00 EUR)",
        "  unmatched  1 (5.00 EUR): payments for orders nobody knows",
        "  mismatches 0: payments of another amount or currency, which paid nothing",
    ] {
        assert!(lines.iter().any(|l| l == shown), "{shown}: {lines:?}");
    }

    // A payment that paid an order the sale has no record of: named, and the verdict
    // says so.
    let _: () = con
        .hset(
            PartitionKeys::new("till", 0).payments(),
            "pi_stray",
            record("till.0.1", "pi_stray", "paid"),
        )
        .expect("plant");
    c.press(KeyCode::Esc);
    c.press(KeyCode::Char('c'));
    let Some(Popup::Report { title, lines, .. }) = &c.app.popup else {
        panic!("no report: {}", c.status());
    };
    assert!(title.contains("VIOLATIONS"), "{title}");
    for shown in [
        "  paid       5.00 EUR, 1 payments, for 0 units sold at 5.00 EUR",
        "  paid unsold 1: pi_stray for till.0.1 (no order)",
    ] {
        assert!(lines.iter().any(|l| l == shown), "{shown}: {lines:?}");
    }
    let verdict = lines.last().expect("a verdict");
    assert!(
        verdict.contains("payments paid 5.00 EUR for 0 units sold at 5.00 EUR")
            && verdict.contains("1 payments that paid an order not sold"),
        "{verdict}"
    );
}

#[test]
fn a_waiting_room_shows_what_redis_holds_and_its_rate_changes_from_keys() {
    use seckill_core::campaign::{Action, CampaignSpec};
    use seckill_core::control;
    use seckill_core::keys::QueueKeys;

    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut con = redis.con();
    let text = std::fs::read_to_string(campaign_file(dir.path(), "doors")).expect("read");
    let queued = format!("{text}[queue]\nadmit_per_s = 200\npass_ttl_s = 60\n");
    control::create(&mut con, CampaignSpec::from_toml(&queued).expect("spec")).expect("create");
    control::arm(&mut con, "doors").expect("arm");
    control::act(&mut con, "doors", Action::Start).expect("start");
    let plain = std::fs::read_to_string(campaign_file(dir.path(), "plain")).expect("read");
    control::create(&mut con, CampaignSpec::from_toml(&plain).expect("spec")).expect("create");

    // The room five seconds after its opening: 40 drawn from the pre-queue and 25
    // joined since, 30 let through; 22 of them bought, 3 let their pass lapse, 5 hold one.
    let k = QueueKeys::new("doors");
    let drawn_ms = seckill_core::now_ms() - 5_000;
    let _: () = con
        .hset_multiple(
            k.meta(),
            &[
                ("pre", "40".to_string()),
                ("seq", "25".into()),
                ("admitted", "30".into()),
                ("drawn_ms", drawn_ms.to_string()),
                ("seed", "5eed0f0ddba11c0ffee5eed0f0ddba11".into()),
                ("used", "22".into()),
                ("expired", "3".into()),
                ("sold_out", "0".into()),
            ],
        )
        .expect("meta");
    for user in ["ann", "bob", "cy", "dee", "eve"] {
        let _: () = con.zadd(k.passes(), user, drawn_ms + 60_000).expect("pass");
    }
    let _: () = con.set(k.lease(), "edge-1:8080/0").expect("lease");

    let mut c = Console::new(&redis, Stores::default());
    assert_eq!(c.app.current().map(|r| r.id()), Some("doors"));
    c.press(KeyCode::Enter);
    let screen = c.screen();
    for shown in [
        "waiting 35 admitted 30",
        "passes out 5 rate 200/s",
        "used 22 expired 3",
        "run by edge-1:8080/0",
        "5eed0f0ddba11c0ffee5eed0f0ddba11",
    ] {
        assert!(screen.contains(shown), "{shown}: {screen}");
    }

    // w asks for the rate; what is typed lands in the room's hash, and on screen.
    c.press(KeyCode::Char('w'));
    assert!(matches!(c.app.popup, Some(Popup::Input { .. })));
    c.type_line("350");
    assert!(c.app.popup.is_none(), "{}", c.status());
    let rate: String = con.hget(k.meta(), "admit_per_s").expect("rate");
    assert_eq!(rate, "350");
    assert!(c.status().contains("350"), "{}", c.status());
    assert!(c.screen().contains("rate 350/s"), "{}", c.screen());

    // A rate that is no number, or out of bounds, is named; the prompt stays open and
    // Redis keeps the rate.
    for bad in ["fast", "0", "100001"] {
        c.press(KeyCode::Char('w'));
        c.type_line(bad);
        assert!(matches!(c.app.popup, Some(Popup::Input { .. })), "{bad}");
        assert!(
            c.status().contains("queue.admit_per_s"),
            "{bad}: {}",
            c.status()
        );
        c.press(KeyCode::Esc);
    }
    let rate: String = con.hget(k.meta(), "admit_per_s").expect("rate");
    assert_eq!(rate, "350");

    // A campaign without a room is refused on the spot.
    c.press(KeyCode::Esc);
    c.press(KeyCode::Char('j'));
    assert_eq!(c.app.current().map(|r| r.id()), Some("plain"));
    c.press(KeyCode::Char('w'));
    assert!(c.app.popup.is_none());
    assert!(
        c.status().contains("plain has no waiting room"),
        "{}",
        c.status()
    );
}
