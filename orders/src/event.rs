//! Order events as the partition streams carry them.

use redis::streams::StreamId;

use seckill_core::keys::{event as field, OrderId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Held,
    Paid,
    Expired,
    Delivered,
    /// Money came for the order that it does not take (late, or a second payment).
    RefundDue,
    /// Money owed back went back.
    Refunded,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Held => "held",
            Kind::Paid => "paid",
            Kind::Expired => "expired",
            Kind::Delivered => "delivered",
            Kind::RefundDue => "refund_due",
            Kind::Refunded => "refunded",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "held" => Kind::Held,
            "paid" => Kind::Paid,
            "expired" => Kind::Expired,
            "delivered" => Kind::Delivered,
            "refund_due" => Kind::RefundDue,
            "refunded" => Kind::Refunded,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub stream: String,
    pub entry_id: String,
    pub kind: Kind,
    pub order_id: String,
    pub campaign: String,
    pub partition: u32,
    pub user: String,
    pub quantity: i64,
    pub pay_by_ms: i64,
    pub paid_ms: Option<i64>,
    pub expired_ms: Option<i64>,
    pub delivered_ms: Option<i64>,
    /// Its licence keys, a line each.
    pub license_key: Option<String>,
    /// The order's status after the event, where the event says (a refund's: a second
    /// payment of a delivered order leaves it delivered).
    pub order_status: Option<String>,
    /// The payment of a `paid`, `refund_due` or `refunded` event.
    pub payment: Option<Payment>,
}

/// A payment as an order event carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub payment_id: String,
    /// In the currency's minor units.
    pub amount_cents: i64,
    pub currency: String,
    /// Why money is owed back: `expired` or `duplicate`.
    pub reason: Option<String>,
}

impl Event {
    /// The order's status once this event has happened.
    pub fn status(&self) -> &str {
        self.order_status
            .as_deref()
            .unwrap_or_else(|| self.kind.as_str())
    }

    /// Reads a stream entry: the orders a purchase call held (a line each in `orders`), or
    /// one order's event. One item an order the entry names, `None` for one it cannot
    /// read (an entry that is no order event at all reads as one `None`): a bad line costs
    /// its own order, not the call's others.
    pub fn from_entry(stream: &str, entry: &StreamId) -> Vec<Option<Event>> {
        let s = |k: &str| entry.get::<String>(k);
        let n = |k: &str| entry.get::<i64>(k);
        let Some(kind) = s(field::TYPE).as_deref().and_then(Kind::parse) else {
            return vec![None];
        };
        let event = |order_id: String, user: String, quantity: i64, pay_by_ms: i64| {
            let oid = OrderId::parse(&order_id)?;
            Some(Event {
                stream: stream.to_string(),
                entry_id: entry.id.clone(),
                kind,
                campaign: oid.campaign.to_string(),
                partition: oid.partition,
                order_id,
                user,
                quantity,
                pay_by_ms,
                paid_ms: n(field::PAID_MS),
                expired_ms: n(field::EXPIRED_MS),
                delivered_ms: n(field::DELIVERED_MS),
                license_key: s(field::LICENSE_KEYS).or_else(|| s(field::LICENSE_KEY)),
                order_status: s(field::STATUS),
                payment: s(field::PAYMENT_ID).map(|payment_id| Payment {
                    payment_id,
                    amount_cents: n(field::AMOUNT_CENTS).unwrap_or(0),
                    currency: s(field::CURRENCY).unwrap_or_default(),
                    reason: s(field::REASON),
                }),
            })
        };
        match s(field::ORDERS) {
            Some(lines) if kind == Kind::Held => lines
                .split('\n')
                .map(|line| {
                    let mut f = line.split(' ');
                    let (oid, user, qty, pay_by) = (f.next()?, f.next()?, f.next()?, f.next()?);
                    if f.next().is_some() {
                        return None;
                    }
                    event(
                        oid.into(),
                        user.into(),
                        qty.parse().ok()?,
                        pay_by.parse().ok()?,
                    )
                })
                .collect(),
            _ => vec![s(field::ORDER_ID)
                .zip(s(field::USER))
                .zip(n(field::QTY))
                .and_then(|((oid, user), qty)| {
                    event(oid, user, qty, n(field::PAY_BY_MS).unwrap_or(0))
                })],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn entry(fields: &[(&str, &str)]) -> StreamId {
        StreamId {
            id: "7-0".into(),
            map: fields
                .iter()
                .map(|(k, v)| (k.to_string(), Value::BulkString(v.as_bytes().to_vec())))
                .collect(),
            ..StreamId::default()
        }
    }

    #[test]
    fn a_purchase_calls_orders_come_from_one_entry_in_order() {
        let e = entry(&[
            ("type", "held"),
            ("orders", "c.2.7 alice 1 1000\nc.2.8 bob@x 3 1001"),
        ]);
        let events: Vec<Event> = Event::from_entry("s", &e).into_iter().flatten().collect();
        let got: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.order_id.as_str(),
                    e.user.as_str(),
                    e.quantity,
                    e.pay_by_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            [("c.2.7", "alice", 1, 1000), ("c.2.8", "bob@x", 3, 1001)]
        );
        assert!(events.iter().all(|e| e.kind == Kind::Held
            && e.entry_id == "7-0"
            && e.campaign == "c"
            && e.partition == 2));
    }

    #[test]
    fn one_orders_event_reads_as_before() {
        let e = entry(&[
            ("type", "paid"),
            ("order_id", "c.0.1"),
            ("user", "alice"),
            ("qty", "1"),
            ("pay_by_ms", "10"),
            ("paid_ms", "5"),
        ]);
        let events = Event::from_entry("s", &e);
        assert_eq!(events.len(), 1);
        let paid = events[0].as_ref().expect("readable");
        assert_eq!((paid.kind, paid.paid_ms), (Kind::Paid, Some(5)));
    }

    #[test]
    fn a_bad_line_is_set_aside_and_the_calls_other_orders_kept() {
        for bad in [
            "c.0.1 alice 1",
            "c.0.1 alice x 10",
            "c.0.1 alice 1 10 extra",
            "nope alice 1 10",
        ] {
            let e = entry(&[
                ("type", "held"),
                ("orders", &format!("c.0.2 bob 1 10\n{bad}\nc.0.3 eve 1 10")),
            ]);
            let read: Vec<_> = Event::from_entry("s", &e)
                .into_iter()
                .map(|e| e.map(|e| e.order_id))
                .collect();
            let want = [Some("c.0.2".to_string()), None, Some("c.0.3".to_string())];
            assert_eq!(read, want, "{bad}");
        }
        let not_an_order = entry(&[("type", "refund"), ("order_id", "c.0.1")]);
        assert_eq!(Event::from_entry("s", &not_an_order), [None]);
    }
}
