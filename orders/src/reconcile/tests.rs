//! The verdict on money, judged from evidence built by hand: a settled sale paid once an
//! order balances and shows its money; each fault planted in it is named, and a payment
//! taken between the reads is none.

use std::collections::HashMap;

use seckill_core::ledger::Ledger;
use seckill_core::payments::PaymentRecord;

use super::{amount, judge, Evidence, PartitionBooks, Payments, RedisOrder, Report};

const SHOP: &str = "shop";
const NOW: i64 = 1_750_000_000_000;
const PRICE: u64 = 1299;

fn order(seq: u32, quantity: i64, status: &str) -> RedisOrder {
    let order_id = format!("{SHOP}.0.{seq}");
    let delivered = status == "delivered";
    RedisOrder {
        license_key: delivered.then(|| {
            (1..=quantity)
                .map(|n| format!("K-{order_id}-{n}"))
                .collect::<Vec<_>>()
                .join("\n")
        }),
        order_id,
        user: format!("u{seq}"),
        quantity,
        status: status.into(),
        pay_by_ms: if status == "held" {
            NOW + 60_000
        } else {
            NOW - 600_000
        },
        paid_ms: matches!(status, "paid" | "delivered").then_some(NOW - 500_000),
        delivered_ms: delivered.then_some(NOW - 499_000),
    }
}

fn payment(seq: u32, id: &str, cents: u64, status: &str, reason: &str) -> PaymentRecord {
    PaymentRecord {
        order_id: format!("{SHOP}.0.{seq}"),
        payment_id: id.into(),
        amount_cents: cents.to_string(),
        currency: "EUR".into(),
        status: status.into(),
        reason: reason.into(),
        ms: (NOW - 500_000).to_string(),
    }
}

/// A settled sale of one partition as reconciliation reads it: its books, stores and
/// streams in step with its orders, and its payments.
fn sale(orders: Vec<RedisOrder>, records: Vec<PaymentRecord>) -> Evidence {
    let units = |statuses: &[&str]| -> i64 {
        orders
            .iter()
            .filter(|o| statuses.contains(&o.status.as_str()))
            .map(|o| o.quantity)
            .sum()
    };
    let (held, sold) = (units(&["held"]), units(&["paid", "delivered"]));
    let hold_index: Vec<String> = orders
        .iter()
        .filter(|o| o.status == "held")
        .map(|o| o.order_id.clone())
        .collect();
    let books = PartitionBooks {
        partition: 0,
        held,
        sold,
        seq: orders.len() as u64,
        buyers: orders
            .iter()
            .filter(|o| matches!(o.status.as_str(), "held" | "paid" | "delivered"))
            .map(|o| (o.user.clone(), o.quantity))
            .collect(),
        hold_index: hold_index.clone(),
        orders: orders.clone(),
    };
    Evidence {
        campaign: SHOP.into(),
        ledger: Ledger {
            campaign: SHOP.into(),
            total: 20,
            remaining: 20 - held - sold,
            held,
            sold,
            orders: orders.len(),
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
        stores: vec!["orders.sqlite".into()],
        deliveries: orders
            .iter()
            .filter(|o| o.status == "delivered")
            .map(|o| (o.order_id.clone(), 1))
            .collect(),
        hold_index,
        taken: HashMap::from([(0, orders.len() as u64)]),
        books: vec![books],
        orders,
        payments: Some(Payments {
            currency: "EUR".into(),
            price_cents: PRICE,
            records,
            unmatched: vec![],
        }),
        ..Evidence::default()
    }
}

fn money(r: &Report) -> &super::MoneyReport {
    r.money.as_ref().expect("a money section")
}

#[test]
fn a_sale_paid_once_an_order_balances_and_shows_its_money() {
    let mut e = sale(
        vec![
            order(1, 1, "delivered"),
            order(2, 2, "delivered"),
            order(3, 1, "held"),
            order(4, 1, "refund_due"),
            order(5, 1, "refunded"),
        ],
        vec![
            payment(1, "pi_1", PRICE, "paid", ""),
            payment(2, "pi_2", 2 * PRICE, "paid", ""),
            payment(1, "pi_1_again", PRICE, "refund_due", "duplicate"),
            payment(3, "pi_3_short", PRICE - 1, "mismatch", "amount"),
            payment(3, "pi_3", PRICE, "pending", ""),
            payment(4, "pi_4", PRICE, "refund_due", "expired"),
            payment(5, "pi_5", PRICE, "refunded", "expired"),
        ],
    );
    if let Some(p) = &mut e.payments {
        p.unmatched = vec![payment(99, "pi_nobody", PRICE, "unmatched", "")];
    }
    let r = judge(e, NOW);
    assert!(r.holds(), "{r}");
    let m = money(&r);
    assert_eq!(
        (m.taken.paid_cents, m.taken.payments, m.sold, m.sales_cents),
        (3 * PRICE, 2, 3, 3 * PRICE)
    );
    assert_eq!(
        (m.taken.refunds_due, m.taken.refunds_due_cents),
        (2, 2 * PRICE)
    );
    assert_eq!((m.taken.refunded, m.taken.refunded_cents), (1, PRICE));
    assert_eq!((m.taken.mismatches, m.unmatched), (1, 1));
    assert_eq!(m.unmatched_cents.get("EUR"), Some(&PRICE));
    assert!(m.unpaid.is_empty() && m.paid_twice.is_empty() && m.paid_unsold.is_empty());

    let text = r.to_string();
    for line in [
        "  paid       38.97 EUR, 2 payments, for 3 units sold at 12.99 EUR\n",
        "  refunds    2 due (25.98 EUR), 1 refunded (12.99 EUR)\n",
        "  unmatched  1 (12.99 EUR): payments for orders nobody knows\n",
        "  mismatches 1: payments of another amount or currency, which paid nothing\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    let json = serde_json::to_value(&r).expect("JSON");
    assert_eq!(json["money"]["currency"], "EUR");
    assert_eq!(json["money"]["paid_cents"], 3 * PRICE);
    assert_eq!(json["money"]["sales_cents"], 3 * PRICE);
    assert_eq!(json["money"]["refunds_due_cents"], 2 * PRICE);
    assert_eq!(json["money"]["unmatched_cents"]["EUR"], PRICE);
}

#[test]
fn each_fault_in_the_money_is_named() {
    let e = sale(
        vec![
            order(1, 1, "delivered"),
            order(2, 1, "delivered"),
            order(3, 1, "delivered"),
            order(4, 1, "expired"),
        ],
        vec![
            payment(1, "pi_1", PRICE, "paid", ""),
            // Order 2 sold without a payment; order 3 paid twice; order 4 paid, not sold.
            payment(3, "pi_3a", PRICE, "paid", ""),
            payment(3, "pi_3b", PRICE, "paid", ""),
            payment(4, "pi_4", PRICE, "paid", ""),
        ],
    );
    let r = judge(e, NOW);
    let m = money(&r);
    assert_eq!(m.unpaid, ["shop.0.2"]);
    assert_eq!(m.paid_twice, ["shop.0.3 (2 payments)"]);
    assert_eq!(m.paid_unsold, ["pi_4 for shop.0.4 (expired)"]);
    assert_eq!(
        r.violations,
        [
            "payments paid 51.96 EUR for 3 units sold at 12.99 EUR, which come to 38.97 EUR",
            "1 sold orders no payment paid",
            "1 sold orders paid by more than one payment",
            "1 payments that paid an order not sold",
        ]
    );
    let text = r.to_string();
    assert!(text.contains("  unpaid     1: shop.0.2\n"), "{text}");
    assert!(
        text.contains("  paid twice 1: shop.0.3 (2 payments)\n"),
        "{text}"
    );
    assert!(
        text.contains("  paid unsold 1: pi_4 for shop.0.4 (expired)\n"),
        "{text}"
    );
}

#[test]
fn a_payment_short_of_the_price_is_named_by_the_sum() {
    let e = sale(
        vec![order(1, 2, "delivered")],
        vec![payment(1, "pi_1", PRICE, "paid", "")],
    );
    let r = judge(e, NOW);
    assert_eq!(
        r.violations,
        ["payments paid 12.99 EUR for 2 units sold at 12.99 EUR, which come to 25.98 EUR"]
    );
}

#[test]
fn a_payment_taken_between_the_reads_is_no_fault() {
    // Held when the orders were read; paid, and another order taken and delivered,
    // before the payments were.
    let mut e = sale(
        vec![order(1, 1, "held")],
        vec![
            payment(1, "pi_1", PRICE, "paid", ""),
            payment(2, "pi_2", PRICE, "paid", ""),
        ],
    );
    e.read_again = HashMap::from([
        ("shop.0.1".to_string(), "paid".to_string()),
        ("shop.0.2".to_string(), "delivered".to_string()),
    ]);
    let r = judge(e.clone(), NOW);
    assert!(r.holds(), "{r}");
    let m = money(&r);
    assert_eq!(
        (m.taken.paid_cents, m.sold, m.paid_since_read),
        (2 * PRICE, 0, 2)
    );
    assert!(
        r.to_string()
            .contains("; 2 of them (25.98 EUR) paid since the orders were read"),
        "{r}"
    );

    // Read again and still held: the payment paid an order Redis does not show sold.
    e.read_again
        .insert("shop.0.1".to_string(), "held".to_string());
    let r = judge(e, NOW);
    assert_eq!(money(&r).paid_unsold, ["pi_1 for shop.0.1 (held)"]);
    assert_eq!(
        r.violations,
        [
            "payments paid 12.99 EUR for 0 units sold at 12.99 EUR, which come to 0.00 EUR",
            "1 payments that paid an order not sold",
        ]
    );
}

#[test]
fn evidence_without_payments_judges_no_money() {
    let mut e = sale(vec![order(1, 1, "delivered")], vec![]);
    e.payments = None;
    let r = judge(e, NOW);
    assert!(r.holds(), "{r}");
    assert!(r.money.is_none());
    assert!(!r.to_string().contains("  paid "), "{r}");
}

#[test]
fn amounts_read_as_people_write_them() {
    assert_eq!(amount(1299, "EUR"), "12.99 EUR");
    assert_eq!(amount(5, "USD"), "0.05 USD");
    assert_eq!(amount(0, "EUR"), "0.00 EUR");
    assert_eq!(amount(1299, "JPY"), "1299 JPY");
    assert_eq!(amount(1299, "KWD"), "1.299 KWD");
}
