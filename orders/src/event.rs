//! Order events as the partition streams carry them.

use redis::streams::StreamId;

use seckill_core::keys::OrderId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Held,
    Paid,
    Expired,
    Delivered,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Held => "held",
            Kind::Paid => "paid",
            Kind::Expired => "expired",
            Kind::Delivered => "delivered",
        }
    }

    /// The order's status once this event has happened.
    pub fn status(self) -> &'static str {
        self.as_str()
    }

    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "held" => Kind::Held,
            "paid" => Kind::Paid,
            "expired" => Kind::Expired,
            "delivered" => Kind::Delivered,
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
    pub license_key: Option<String>,
}

impl Event {
    /// Reads a stream entry; `None` for one that is not an order event.
    pub fn from_entry(stream: &str, entry: &StreamId) -> Option<Event> {
        let s = |k: &str| entry.get::<String>(k);
        let n = |k: &str| entry.get::<i64>(k);
        let order_id = s("order_id")?;
        let oid = OrderId::parse(&order_id)?;
        let (campaign, partition) = (oid.campaign.to_string(), oid.partition);
        Some(Event {
            stream: stream.to_string(),
            entry_id: entry.id.clone(),
            kind: Kind::parse(&s("type")?)?,
            user: s("user")?,
            quantity: n("qty")?,
            pay_by_ms: n("pay_by_ms").unwrap_or(0),
            paid_ms: n("paid_ms"),
            expired_ms: n("expired_ms"),
            delivered_ms: n("delivered_ms"),
            license_key: s("license_key"),
            campaign,
            partition,
            order_id,
        })
    }
}
