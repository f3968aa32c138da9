//! Every view drawn from fixed data at 80×24 (and one larger), compared with the
//! snapshots in `tests/snapshots/`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::collections::BTreeMap;

use seckill_console::app::{App, Link, Popup, View};
use seckill_console::data::{CampaignRow, Snapshot};
use seckill_core::campaign::{Campaign, CampaignSpec, QueueSpec, State};
use seckill_core::control::{PartitionStock, QueueProgress};
use seckill_core::telemetry::{Fleet, NodeView, RouteStats, WorkerRecord};

/// 2026-11-29 20:00:00 UTC.
const NOW: i64 = 1_795_982_400_000;

fn campaign(id: &str, total: u64, state: State, parts: &[(i64, i64, i64, i64)]) -> CampaignRow {
    let spec = CampaignSpec {
        name: format!("{id} edition"),
        price_cents: 1299,
        ..seckill_testkit::campaign::spec(id, total, parts.len().max(1) as u32, 1)
    };
    let mut campaign = Campaign::new(spec).expect("valid spec");
    campaign.state = state;
    let partitions = parts
        .iter()
        .enumerate()
        .map(|(i, &(stock, held, sold, transit))| PartitionStock {
            partition: i as u32,
            initial: total as i64 / parts.len() as i64,
            stock,
            held,
            sold,
            transit,
        })
        .collect();
    CampaignRow {
        campaign,
        partitions,
        queue: None,
    }
}

fn fleet() -> Fleet {
    let node = |name: &str, ok: f64, sold_out: f64, limited: f64| NodeView {
        node: name.into(),
        shards: 2,
        shards_reporting: 2,
        started_ms: NOW - 3_725_000,
        at_ms: NOW - 400,
        outcomes_per_s: BTreeMap::from([
            ("ok".into(), ok),
            ("sold_out".into(), sold_out),
            ("rate_limited".into(), limited),
        ]),
        routes: BTreeMap::from([
            (
                "purchase".into(),
                RouteStats {
                    count: 9000,
                    p50_ms: 0.41,
                    p99_ms: 3.2,
                },
            ),
            (
                "pay".into(),
                RouteStats {
                    count: 300,
                    p50_ms: 0.3,
                    p99_ms: 1.7,
                },
            ),
        ]),
        redis_p99_ms: 0.9,
        redis: "up".into(),
    };
    Fleet {
        nodes: vec![
            node("edge-1:8080", 310.0, 8200.0, 450.0),
            node("edge-2:8080", 290.0, 7900.0, 380.0),
        ],
        workers: vec![WorkerRecord {
            name: "main".into(),
            started_ms: NOW - 3_725_000,
            at_ms: NOW - 300,
            lag: 12,
            pending: 40,
            events_per_s: 1450.0,
            delivered_per_s: 480.0,
            delivered: 5120,
            pay_to_delivered_p99_ms: 38.0,
            undelivered: 0,
        }],
    }
}

/// A sale under way, another about to start, a draft.
fn app() -> App {
    let mut live = campaign(
        "midnight",
        1000,
        State::Live,
        &[
            (20, 40, 190, 0),
            (0, 50, 200, 0),
            (5, 45, 195, 5),
            (0, 60, 190, 0),
        ],
    );
    live.campaign.ends_at_ms = Some(NOW + 250_000);
    let mut armed = campaign(
        "encore",
        500,
        State::Armed,
        &[(250, 0, 0, 0), (250, 0, 0, 0)],
    );
    armed.campaign.starts_at_ms = Some(NOW + 42_000);
    let draft = campaign("keys-2027", 200, State::Draft, &[(0, 0, 0, 0)]);
    let mut app = App::new("redis://127.0.0.1:6390");
    // Thirty seconds of history: the live sale sells 20 units a second.
    for s in 0..30i64 {
        let mut row = live.clone();
        row.partitions[0].sold -= (30 - s) * 20;
        let snapshot = Snapshot {
            at_ms: NOW - (29 - s) * 1000,
            campaigns: vec![row, armed.clone(), draft.clone()],
            fleet: Fleet {
                nodes: fleet()
                    .nodes
                    .into_iter()
                    .map(|mut n| {
                        for v in n.outcomes_per_s.values_mut() {
                            *v *= (s as f64 + 10.0) / 40.0;
                        }
                        n
                    })
                    .collect(),
                workers: fleet().workers,
            },
            limits: vec![],
            blacklist: vec![],
        };
        app.on_data(Ok(snapshot));
    }
    app.on_data(Ok(Snapshot {
        at_ms: NOW,
        campaigns: vec![live, armed, draft],
        fleet: fleet(),
        limits: vec![("ip_rate".into(), "50".into())],
        blacklist: vec![("ip:10.0.0.9".into(), NOW + 600_000)],
    }));
    app
}

/// A sale behind a waiting room, 95 s after its opening: 12,345 shoppers still in line,
/// 3,000 let through, of whom 2,790 bought, 90 let their pass run out and 120 hold one.
fn queued(progress: QueueProgress) -> App {
    let mut row = campaign(
        "doors",
        5000,
        State::Live,
        &[
            (560, 40, 650, 0),
            (550, 30, 670, 0),
            (540, 50, 660, 0),
            (560, 30, 660, 0),
        ],
    );
    row.campaign.spec.queue = Some(QueueSpec {
        admit_per_s: 200,
        pass_ttl_s: 60,
    });
    row.queue = Some(progress);
    let mut app = App::new("redis://127.0.0.1:6390");
    app.on_data(Ok(Snapshot {
        at_ms: NOW,
        campaigns: vec![row],
        fleet: fleet(),
        limits: vec![],
        blacklist: vec![],
    }));
    app
}

fn drawn() -> QueueProgress {
    QueueProgress {
        admitted: 3000,
        line: 15_345,
        pre: 12_000,
        drawn_ms: Some(NOW - 95_000),
        seed: Some("9f86d081884c7d659a2feaa0c55ad015".into()),
        seed_sha1: Some("5d1e2a3f0b6c7d8e9f00112233445566778899aa".into()),
        admit_per_s: 350,
        pass_ttl_ms: 60_000,
        used: 2790,
        expired: 90,
        outstanding: 120,
        sold_out: false,
        leader: Some("edge-1:8080/0".into()),
    }
}

fn screen(app: &App, w: u16, h: u16) -> TestBackend {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| seckill_console::ui::draw(app, f)).expect("draw");
    t.backend().clone()
}

/// The screen's text with every run of blanks made one space: what it says, not where.
fn said(screen: &TestBackend) -> String {
    format!("{screen}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn key(app: &mut App, code: KeyCode) {
    let _ = app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

#[test]
fn campaigns_table() {
    insta::assert_snapshot!(screen(&app(), 80, 24));
}

#[test]
fn campaign_detail_with_the_ledger_holding() {
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.view, View::Detail);
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn campaign_detail_with_the_ledger_broken() {
    let mut a = app();
    // One unit too many sold in partition 1.
    a.snapshot.campaigns[0].partitions[1].sold += 1;
    key(&mut a, KeyCode::Enter);
    let s = screen(&a, 80, 24);
    let text = format!("{s}");
    assert!(text.contains("ledger ✗"), "{text}");
    insta::assert_snapshot!(s);
}

#[test]
fn fleet_view() {
    let mut a = app();
    key(&mut a, KeyCode::Char('2'));
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn stopping_asks_first() {
    let mut a = app();
    key(&mut a, KeyCode::Char('x'));
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn keys_of_the_view() {
    let mut a = app();
    key(&mut a, KeyCode::Char('?'));
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn a_prompt_with_a_mistake() {
    let mut a = app();
    key(&mut a, KeyCode::Char('l'));
    for ch in "ip_rate=fast".chars() {
        key(&mut a, KeyCode::Char(ch));
    }
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn redis_gone_keeps_the_last_picture() {
    let mut a = app();
    a.on_data(Err("Connection refused (os error 111)".into()));
    assert!(matches!(a.link, Link::Lost { .. }));
    if let Link::Lost { since_ms, .. } = &mut a.link {
        *since_ms = NOW + 1000;
    }
    insta::assert_snapshot!(screen(&a, 80, 24));
}

#[test]
fn a_larger_terminal_shows_more() {
    let mut a = app();
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!(screen(&a, 120, 32));
}

#[test]
fn campaign_detail_with_its_waiting_room() {
    let mut a = queued(drawn());
    key(&mut a, KeyCode::Enter);
    let s = screen(&a, 80, 24);
    let text = said(&s);
    for shown in [
        "waiting 12,345 admitted 3,000",
        "passes out 120 rate 350/s",
        "used 2,790 expired 90",
        "run by edge-1:8080/0",
        "drawn 19:58:25, seed:",
        "9f86d081884c7d659a2feaa0c55ad015",
    ] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
    insta::assert_snapshot!(s);
}

#[test]
fn a_waiting_room_before_its_draw_keeps_its_seed() {
    let mut a = queued(QueueProgress {
        admitted: 0,
        line: 0,
        pre: 4321,
        drawn_ms: None,
        seed: None,
        admit_per_s: 0,
        outstanding: 0,
        used: 0,
        expired: 0,
        leader: None,
        ..drawn()
    });
    a.snapshot.campaigns[0].campaign.state = State::Armed;
    key(&mut a, KeyCode::Enter);
    let text = said(&screen(&a, 80, 24));
    // Everyone in the pre-queue waits; the rate is the campaign file's until Redis has one.
    for shown in [
        "waiting 4,321 admitted 0",
        "rate 200/s",
        "seed: drawn at the opening",
        "its SHA-1 5d1e2a3f",
        "no node runs the admission",
    ] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
    assert!(!text.contains("─ sold out ┐"), "{text}");
}

#[test]
fn a_sold_out_waiting_room_says_so() {
    let mut a = queued(QueueProgress {
        sold_out: true,
        ..drawn()
    });
    key(&mut a, KeyCode::Enter);
    let text = said(&screen(&a, 80, 24));
    assert!(text.contains("┌ waiting room ─"), "{text}");
    assert!(text.contains("─ sold out ┐"), "{text}");
}

#[test]
fn an_admission_rate_out_of_bounds() {
    let mut a = queued(drawn());
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('w'));
    for ch in "0".chars() {
        key(&mut a, KeyCode::Char(ch));
    }
    key(&mut a, KeyCode::Enter);
    assert!(matches!(a.popup, Some(Popup::Input { .. })));
    insta::assert_snapshot!(screen(&a, 80, 24));
}

/// The reconciliation of a settled sale of 10 units at 12.99 EUR, as `c` shows it: two
/// orders paid once each (one unit, two), a second payment given back, a late one owed
/// back, one of the wrong amount, one for an order nobody knows.
fn reconciled_sale() -> seckill_orders::reconcile::Report {
    use seckill_core::ledger::Ledger;
    use seckill_core::payments::PaymentRecord;
    use seckill_orders::reconcile::{judge, Evidence, PartitionBooks, Payments, RedisOrder};

    let order = |seq: u32, quantity: i64, status: &str| RedisOrder {
        order_id: format!("drop.0.{seq}"),
        user: format!("u{seq}"),
        quantity,
        status: status.into(),
        pay_by_ms: NOW - 600_000,
        paid_ms: (status == "delivered").then_some(NOW - 590_000),
        delivered_ms: (status == "delivered").then_some(NOW - 589_000),
        license_key: (status == "delivered").then(|| {
            (0..quantity)
                .map(|n| format!("K-{seq}-{n}"))
                .collect::<Vec<_>>()
                .join("\n")
        }),
    };
    let payment = |seq: u32, id: &str, cents: u64, status: &str, reason: &str| PaymentRecord {
        order_id: format!("drop.0.{seq}"),
        payment_id: id.into(),
        amount_cents: cents.to_string(),
        currency: "EUR".into(),
        status: status.into(),
        reason: reason.into(),
        ms: (NOW - 590_000).to_string(),
    };
    let orders = vec![
        order(1, 1, "delivered"),
        order(2, 2, "delivered"),
        order(3, 1, "refund_due"),
    ];
    let e = Evidence {
        campaign: "drop".into(),
        ledger: Ledger {
            campaign: "drop".into(),
            total: 10,
            remaining: 7,
            sold: 3,
            buyers: 2,
            orders: 3,
            ..Ledger::default()
        },
        stored: orders
            .iter()
            .map(|o| {
                (
                    o.order_id.clone(),
                    (o.status.clone(), o.license_key.clone()),
                )
            })
            .collect(),
        stores: vec!["data/orders/main.sqlite".into()],
        deliveries: [("drop.0.1".to_string(), 1), ("drop.0.2".to_string(), 1)].into(),
        taken: [(0, 3)].into(),
        books: vec![PartitionBooks {
            partition: 0,
            sold: 3,
            seq: 3,
            buyers: [("u1".to_string(), 1), ("u2".to_string(), 2)].into(),
            orders: orders.clone(),
            ..PartitionBooks::default()
        }],
        orders,
        payments: Some(Payments {
            currency: "EUR".into(),
            price_cents: 1299,
            records: vec![
                payment(1, "pi_1", 1299, "paid", ""),
                payment(2, "pi_2", 2598, "paid", ""),
                payment(2, "pi_2_again", 2598, "refunded", "duplicate"),
                payment(3, "pi_3", 1299, "refund_due", "expired"),
                payment(3, "pi_3_short", 999, "mismatch", "amount"),
            ],
            unmatched: vec![payment(9, "pi_9", 1299, "unmatched", "")],
        }),
        ..Evidence::default()
    };
    judge(e, NOW)
}

#[test]
fn a_reconciliation_shows_the_money() {
    use seckill_console::command::Done;

    let r = reconciled_sale();
    assert!(r.holds(), "{r}");
    let mut a = app();
    a.on_done(Ok(Done::Report {
        title: "reconciliation of drop: the ledger holds".into(),
        text: r.to_string(),
    }));
    let s = screen(&a, 80, 24);
    let text = said(&s);
    for shown in [
        "paid 38.97 EUR, 2 payments, for 3 units sold at 12.99 EUR",
        "refunds 1 due (12.99 EUR), 1 refunded (25.98 EUR)",
        "unmatched 1 (12.99 EUR): payments for orders nobody knows",
        "mismatches 1: payments of another amount or currency, which paid nothing",
    ] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
    insta::assert_snapshot!(s);
}
