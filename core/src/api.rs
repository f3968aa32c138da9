//! The shopper API's requests and answers, declared once: the data plane's routes answer
//! with them, the simulator and the tests read them, and the OpenAPI description
//! (`docs/openapi.json`, see [`openapi`]) is generated from them.
//!
//! Text fields are `Cow<str>`: a route answers with what it borrows, and a client reads an
//! answer without copying its strings.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

type Text<'a> = Cow<'a, str>;

/// `POST /api/campaigns/{id}/purchase`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PurchaseBody {
    /// Units to buy, 1 to the campaign's `per_user_limit` (more is refused as over the
    /// limit). Any JSON integer, `2.0` included.
    #[serde(default = "one", deserialize_with = "integer")]
    #[schemars(range(min = 1))]
    pub quantity: i64,
    /// The qualification ticket, for campaigns that require one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
}

fn one() -> i64 {
    1
}

/// A JSON integer: a number without a fraction, however it is written (`2`, `2.0`,
/// `2e0`), as JSON Schema counts integers.
fn integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Integer;
    impl serde::de::Visitor<'_> for Integer {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an integer")
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom("integer out of range"))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<i64, E> {
            // Beyond 2^53 an f64 no longer tells integers apart; i64's range is wider.
            if v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0 {
                Ok(v as i64)
            } else {
                Err(E::custom(format!("{v} is not an integer")))
            }
        }
    }
    d.deserialize_any(Integer)
}

/// `POST /api/session`: the demo issuer's sign-in.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    /// 1-64 of letters, digits and `_ - @ + .`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_@+.-]{1,64}$"))]
    pub user_id: String,
}

/// `POST /api/campaigns/{id}/ticket`: a solved challenge.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SolutionBody {
    pub challenge_id: String,
    pub nonce: String,
}

/// `POST /api/campaigns/{id}/queue`: joining a waiting room.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// The proof-of-work ticket, for a campaign that also has `require_ticket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
}

/// `GET /api/time`: the sale's clock.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Time {
    pub now_ms: i64,
}

/// `POST /api/session`: a token for the user.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Session<'a> {
    #[serde(borrow)]
    pub token: Text<'a>,
    #[serde(borrow)]
    pub user_id: Text<'a>,
    pub expires_at_ms: i64,
}

/// A campaign as shoppers see it (drafts are never shown).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CampaignInfo<'a> {
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub name: Text<'a>,
    /// `armed`, `live`, `sold_out`, `paused` or `ended`.
    #[serde(borrow)]
    pub state: Text<'a>,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    pub total: u64,
    /// Units left, as of the node's last look (a poll interval at most).
    pub remaining: i64,
    pub per_user_limit: u32,
    /// In the currency's minor units.
    pub price_cents: u64,
    /// ISO 4217.
    #[serde(borrow)]
    pub currency: Text<'a>,
    /// The shop's payment page for an order: `{order_id}` stands for the order's id.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub payment_url: Option<Text<'a>>,
    /// Purchases need a ticket earned by proof of work (`/challenge`, then `/ticket`);
    /// with a waiting room, joining it does instead.
    pub require_ticket: bool,
    /// The waiting room, for a campaign that has one: buying takes its pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueInfo>,
}

/// A waiting room's rules and progress, in the campaign's information and its events.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueInfo {
    /// Shoppers let through per second.
    pub admit_per_s: u32,
    /// How long a pass lasts once given.
    pub pass_ttl_s: u64,
    /// Whether the pre-queue has been drawn (the sale opened): places exist from then.
    pub drawn: bool,
    /// Places let through so far: a shopper at place `p` is `p - admitted` from the front.
    pub admitted: u64,
    /// Nothing left to reserve and nothing reserved: everyone still waiting is too late.
    pub sold_out: bool,
    /// SHA-1 of the draw's seed, from the room's first join: the seed shown at the
    /// opening must match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_sha1: Option<String>,
    /// Shoppers in the pre-queue when it was drawn: a shopper whose draw is the fraction
    /// `f` of 2⁵² stands near place `f × pre`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre: Option<u64>,
    /// The draw's seed, once drawn: a shopper's draw is the first 52 bits of
    /// SHA-1(seed ‖ ':' ‖ user id), and the pre-queue's line is in order of draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
}

/// A shopper's standing in a waiting room: `POST` or `GET /api/campaigns/{id}/queue`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueStatus<'a> {
    /// `waiting`, `admitted`, `sold_out`, `ended` or `not_joined`.
    #[serde(borrow)]
    pub state: Text<'a>,
    /// 1 = the next to be let through; `null` in the pre-queue before the draw.
    pub position: Option<u64>,
    /// The estimated wait, from the position and the admission rate.
    pub eta_ms: Option<i64>,
    /// Once admitted: the pass, for the purchase's `ticket`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<Text<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_expires_at_ms: Option<i64>,
    /// The place in line (`position` is `place - admitted` of the campaign's events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<u64>,
    /// The place, signed: send it back as the `Queue-Receipt` header of later looks.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Text<'a>>,
}

/// A held unit: `POST /api/campaigns/{id}/purchase` answered 200.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Held<'a> {
    #[serde(borrow)]
    pub order_id: Text<'a>,
    /// `held`.
    #[serde(borrow)]
    pub status: Text<'a>,
    /// Pay before this, or the unit goes back to stock.
    pub pay_by_ms: i64,
}

/// A paid order: `POST /api/orders/{id}/pay` answered 200.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Paid<'a> {
    #[serde(borrow)]
    pub order_id: Text<'a>,
    /// `paid`.
    #[serde(borrow)]
    pub status: Text<'a>,
    pub paid_ms: i64,
}

/// An order, to its owner: `GET /api/orders/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Order<'a> {
    #[serde(borrow)]
    pub order_id: Text<'a>,
    #[serde(borrow)]
    pub campaign_id: Text<'a>,
    #[serde(borrow)]
    pub user_id: Text<'a>,
    pub quantity: i64,
    /// `held`, `paid`, `delivered`, `expired`, `refund_due` (paid after the hold expired:
    /// the money is owed back) or `refunded`.
    #[serde(borrow)]
    pub status: Text<'a>,
    /// Pay before this, or the unit goes back to stock (a pending payment extends it).
    pub pay_by_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid_ms: Option<i64>,
    /// Once delivered: the first unit's licence key (`license_keys[0]`).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub license_key: Option<Text<'a>>,
    /// Once delivered: a licence key for each unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_keys: Option<Vec<String>>,
    /// Payments of this order that it did not take, still owed back: one that came after
    /// the hold expired, or a second one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refunds_due: Vec<Refund>,
    /// Once delivered, for a campaign with a file: a signed link, fresh on every look.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub download_url: Option<Text<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_expires_at_ms: Option<i64>,
}

/// A payment owed back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Refund {
    pub payment_id: String,
    /// In the currency's minor units.
    pub amount_cents: u64,
    pub currency: String,
    /// `expired` (the money came after the hold) or `duplicate` (a second payment).
    pub reason: String,
}

/// A payment provider's event (Standard Webhooks' envelope): `POST /api/payments/webhook`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PaymentEvent {
    /// `payment.succeeded`, `payment.pending`, `payment.failed` or `payment.refunded`
    /// (others are answered `ignored`).
    #[serde(rename = "type")]
    pub kind: String,
    /// RFC 3339.
    pub timestamp: String,
    pub data: PaymentEventData,
}

/// A payment event's `data`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PaymentEventData {
    pub order_id: String,
    /// In the currency's minor units: the campaign's price times the order's units pays it.
    pub amount_cents: u64,
    /// ISO 4217.
    pub currency: String,
    /// The provider's id of the payment: the same payment again changes nothing.
    pub payment_id: String,
}

/// A shopper's orders, newest first: `GET /api/orders`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderList<'a> {
    #[serde(borrow)]
    pub orders: Vec<Order<'a>>,
}

/// What a payment provider's webhook did: `POST /api/payments/webhook` answered 200.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PaymentTaken {
    /// What the event did: `paid`, `refund_due`, `mismatch`, `pending`, `failed`,
    /// `refunded`, `ignored` or `unmatched` (no such order: recorded for operators).
    pub outcome: String,
    /// The order's status once taken (`absent` for an unmatched payment).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
}

/// A proof-of-work challenge: find a nonce so that SHA-256(prefix ‖ nonce) starts with
/// `difficulty` zero bits.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Challenge<'a> {
    #[serde(borrow)]
    pub challenge_id: Text<'a>,
    #[serde(borrow)]
    pub prefix: Text<'a>,
    pub difficulty: u32,
    pub expires_at_ms: i64,
}

/// A qualification ticket, for the purchase's body.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Ticket<'a> {
    #[serde(borrow)]
    pub ticket: Text<'a>,
    pub expires_at_ms: i64,
}

/// Every refusal's body.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Error<'a> {
    /// The refusal's code: `sold_out`, `rate_limited`, `not_started`, …
    #[serde(borrow)]
    pub error: Text<'a>,
    /// What it means, for people.
    #[serde(borrow)]
    pub message: Text<'a>,
    /// With `not_started`: when the sale opens, if it has a set time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at_ms: Option<i64>,
    /// With `not_enough_stock`: the units left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<i64>,
}

/// What a client reads of any answer's body: the fields it may look at, whichever the
/// answer (a purchase's `order_id`, a refusal's `error`, an order's `status` and
/// `download_url`). Unknown fields are skipped; a body that is no JSON reads as empty.
#[derive(Debug, Default, Deserialize)]
pub struct Glance<'a> {
    #[serde(borrow)]
    pub error: Option<Text<'a>>,
    #[serde(borrow)]
    pub order_id: Option<Text<'a>>,
    #[serde(borrow)]
    pub status: Option<Text<'a>>,
    #[serde(borrow)]
    pub download_url: Option<Text<'a>>,
}

impl<'a> Glance<'a> {
    pub fn of(body: &'a [u8]) -> Glance<'a> {
        serde_json::from_slice(body).unwrap_or_default()
    }
}

mod openapi;
pub use openapi::openapi;
