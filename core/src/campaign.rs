//! The campaign model: its definition, its lifecycle and their validation.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A campaign as an operator writes it in TOML (`config/campaigns/*.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignSpec {
    pub id: String,
    pub name: String,
    pub total: u64,
    pub partitions: u32,
    pub per_user_limit: u32,
    pub hold_ttl_s: u64,
    /// The price of a unit in the currency's minor units (ISO 4217: cents of a euro, yen
    /// as they are).
    pub price_cents: u64,
    /// ISO 4217 code of the currency buyers pay in.
    #[serde(default = "default_currency")]
    pub currency: String,
    /// The shop's payment page a buyer is sent to: an `http(s)://` address with
    /// `{order_id}` in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_url: Option<String>,
    /// RFC 3339; absent means "when started".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// Licence codes, one per line, loaded into the pool at arm time. Without it, keys
    /// are derived from the order id under the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codes_file: Option<String>,
    /// The file buyers download, a name inside the data plane's content directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_file: Option<String>,
    /// Purchases need a qualification ticket, earned by solving a proof-of-work challenge.
    #[serde(default)]
    pub require_ticket: bool,
    /// At most `ticket_factor × total` tickets are ever issued.
    #[serde(default = "default_ticket_factor")]
    pub ticket_factor: u32,
    /// A waiting room: shoppers join a line and are let through with a pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSpec>,
}

/// A campaign's waiting room (`[queue]`): everyone who joins before the opening is drawn
/// into a random order at the opening, later joiners queue behind them, and shoppers are
/// let through at `admit_per_s`, each with a pass that reserves a unit for `pass_ttl_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub admit_per_s: u32,
    pub pass_ttl_s: u64,
}

/// Bounds of a waiting room's settings.
pub const MAX_ADMIT_PER_S: u32 = 100_000;
pub const PASS_TTL_S: std::ops::RangeInclusive<u64> = 10..=3600;

/// Checks an admission rate, an operator's or a campaign file's.
pub fn valid_admit_rate(rate: u32) -> Result<(), SpecError> {
    if rate == 0 || rate > MAX_ADMIT_PER_S {
        return Err(spec_err(
            "queue.admit_per_s",
            format!("must be between 1 and {MAX_ADMIT_PER_S}"),
        ));
    }
    Ok(())
}

fn default_ticket_factor() -> u32 {
    3
}

/// The currency of a campaign whose file names none.
pub const DEFAULT_CURRENCY: &str = "EUR";

fn default_currency() -> String {
    DEFAULT_CURRENCY.to_string()
}

/// The shape of an ISO 4217 code: three capital letters.
pub fn valid_currency(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {problem}")]
pub struct SpecError {
    pub field: &'static str,
    pub problem: String,
}

fn spec_err(field: &'static str, problem: impl Into<String>) -> SpecError {
    SpecError {
        field,
        problem: problem.into(),
    }
}

pub const MAX_PARTITIONS: u32 = 1024;

/// Campaign ids appear in keys and order ids: lowercase letters, digits, `_` and `-`.
pub fn valid_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A plain file name: no directories, nothing hidden, nothing odd.
pub fn valid_file_name(f: &str) -> bool {
    (1..=128).contains(&f.len())
        && !f.starts_with('.')
        && f.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Milliseconds since the Unix epoch of an RFC 3339 instant.
pub fn parse_instant_ms(s: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

pub fn format_instant_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

impl CampaignSpec {
    pub fn from_toml(text: &str) -> Result<Self, SpecError> {
        let spec: CampaignSpec =
            toml::from_str(text).map_err(|e| spec_err("campaign", e.message().to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        if !valid_id(&self.id) {
            return Err(spec_err(
                "id",
                "1-32 characters of lowercase letters, digits, '_' or '-'",
            ));
        }
        if self.name.trim().is_empty() || self.name.len() > 200 {
            return Err(spec_err("name", "must be 1-200 characters"));
        }
        if self.total == 0 || self.total > 1_000_000_000 {
            return Err(spec_err("total", "must be between 1 and 1000000000"));
        }
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return Err(spec_err(
                "partitions",
                format!("must be between 1 and {MAX_PARTITIONS}"),
            ));
        }
        if self.per_user_limit == 0 {
            return Err(spec_err("per_user_limit", "must be at least 1"));
        }
        if self.hold_ttl_s == 0 || self.hold_ttl_s > 7 * 24 * 3600 {
            return Err(spec_err("hold_ttl_s", "must be between 1 and 604800"));
        }
        if !valid_currency(&self.currency) {
            return Err(spec_err(
                "currency",
                "an ISO 4217 code: three capital letters, such as EUR, USD or JPY",
            ));
        }
        if let Some(u) = &self.payment_url {
            let scheme = u.starts_with("https://") || u.starts_with("http://");
            if !scheme
                || !u.contains("{order_id}")
                || u.len() > 500
                || u.chars().any(char::is_whitespace)
            {
                return Err(spec_err(
                    "payment_url",
                    "an http(s):// address of at most 500 characters with {order_id} in it",
                ));
            }
        }
        if let Some(f) = &self.content_file {
            if !valid_file_name(f) {
                return Err(spec_err(
                    "content_file",
                    "a file name inside the content directory (no '/' or '..')",
                ));
            }
        }
        if self
            .codes_file
            .as_ref()
            .is_some_and(|f| f.trim().is_empty())
        {
            return Err(spec_err("codes_file", "must not be empty"));
        }
        if let Some(q) = &self.queue {
            valid_admit_rate(q.admit_per_s)?;
            if !PASS_TTL_S.contains(&q.pass_ttl_s) {
                return Err(spec_err(
                    "queue.pass_ttl_s",
                    format!(
                        "must be between {} and {}",
                        PASS_TTL_S.start(),
                        PASS_TTL_S.end()
                    ),
                ));
            }
            // A pass reserves one unit: a shopper let through buys one.
            if self.per_user_limit != 1 {
                return Err(spec_err(
                    "per_user_limit",
                    "must be 1 in a campaign with a [queue]: each pass reserves one unit",
                ));
            }
        }
        let starts = self.starts_at_ms()?;
        let ends = self.ends_at_ms()?;
        if let (Some(s), Some(e)) = (starts, ends) {
            if e <= s {
                return Err(spec_err("ends_at", "must be after starts_at"));
            }
        }
        Ok(())
    }

    pub fn starts_at_ms(&self) -> Result<Option<i64>, SpecError> {
        instant(&self.starts_at, "starts_at")
    }

    pub fn ends_at_ms(&self) -> Result<Option<i64>, SpecError> {
        instant(&self.ends_at, "ends_at")
    }

    /// Units given to each partition at arm time: an even split, the remainder to the first.
    pub fn allocation(&self) -> Vec<u64> {
        let p = u64::from(self.partitions);
        (0..p)
            .map(|i| self.total / p + u64::from(i < self.total % p))
            .collect()
    }
}

fn instant(v: &Option<String>, field: &'static str) -> Result<Option<i64>, SpecError> {
    match v {
        None => Ok(None),
        Some(s) => parse_instant_ms(s)
            .map(Some)
            .ok_or_else(|| spec_err(field, format!("'{s}' is not an RFC 3339 instant"))),
    }
}

/// Lifecycle: draft → armed → live ⇄ paused → ended. `sold_out` is not stored: it is
/// what a live campaign with no unit left reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Draft,
    /// Stock is being loaded into the partitions; `arm` resumes it after a crash.
    Arming,
    Armed,
    Live,
    Paused,
    Ended,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Draft => "draft",
            State::Arming => "arming",
            State::Armed => "armed",
            State::Live => "live",
            State::Paused => "paused",
            State::Ended => "ended",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "draft" => State::Draft,
            "arming" => State::Arming,
            "armed" => State::Armed,
            "live" => State::Live,
            "paused" => State::Paused,
            "ended" => State::Ended,
            _ => return None,
        })
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operator's lifecycle action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start,
    Pause,
    Resume,
    Stop,
}

impl Action {
    /// The states an action may be taken from, and the state it leads to.
    pub fn transition(self) -> (&'static [State], State) {
        match self {
            Action::Start => (&[State::Armed], State::Live),
            Action::Pause => (&[State::Live], State::Paused),
            Action::Resume => (&[State::Paused], State::Live),
            Action::Stop => (&[State::Armed, State::Live, State::Paused], State::Ended),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Stop => "stop",
        }
    }
}

/// A campaign as stored in the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Campaign {
    pub spec: CampaignSpec,
    pub state: State,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
}

impl Campaign {
    pub fn new(spec: CampaignSpec) -> Result<Self, SpecError> {
        spec.validate()?;
        Ok(Campaign {
            starts_at_ms: spec.starts_at_ms()?,
            ends_at_ms: spec.ends_at_ms()?,
            spec,
            state: State::Draft,
        })
    }

    /// Field/value pairs of the campaign's Redis hash.
    pub fn to_fields(&self) -> Vec<(&'static str, String)> {
        let s = &self.spec;
        let mut f = vec![
            ("id", s.id.clone()),
            ("name", s.name.clone()),
            ("total", s.total.to_string()),
            ("partitions", s.partitions.to_string()),
            ("per_user_limit", s.per_user_limit.to_string()),
            ("hold_ttl_s", s.hold_ttl_s.to_string()),
            ("price_cents", s.price_cents.to_string()),
            ("currency", s.currency.clone()),
            ("state", self.state.as_str().to_string()),
            ("starts_at_ms", self.starts_at_ms.unwrap_or(0).to_string()),
            ("ends_at_ms", self.ends_at_ms.unwrap_or(0).to_string()),
        ];
        if let Some(v) = &s.starts_at {
            f.push(("starts_at", v.clone()));
        }
        if let Some(v) = &s.ends_at {
            f.push(("ends_at", v.clone()));
        }
        if let Some(v) = &s.payment_url {
            f.push(("payment_url", v.clone()));
        }
        if let Some(v) = &s.codes_file {
            f.push(("codes_file", v.clone()));
        }
        f.push(("require_ticket", u8::from(s.require_ticket).to_string()));
        f.push(("ticket_factor", s.ticket_factor.to_string()));
        if let Some(v) = &s.content_file {
            f.push(("content_file", v.clone()));
        }
        if let Some(q) = &s.queue {
            f.push(("queue_admit_per_s", q.admit_per_s.to_string()));
            f.push(("queue_pass_ttl_s", q.pass_ttl_s.to_string()));
        }
        f
    }

    /// Rebuilds a campaign from its Redis hash; `None` when a field is missing or invalid.
    pub fn from_fields(h: &HashMap<String, String>) -> Option<Self> {
        let num = |k: &str| h.get(k)?.parse::<u64>().ok();
        let ms = |k: &str| h.get(k)?.parse::<i64>().ok().filter(|v| *v > 0);
        let spec = CampaignSpec {
            id: h.get("id")?.clone(),
            name: h.get("name")?.clone(),
            total: num("total")?,
            partitions: u32::try_from(num("partitions")?).ok()?,
            per_user_limit: u32::try_from(num("per_user_limit")?).ok()?,
            hold_ttl_s: num("hold_ttl_s")?,
            price_cents: num("price_cents")?,
            currency: h.get("currency").cloned().unwrap_or_else(default_currency),
            payment_url: h.get("payment_url").cloned(),
            starts_at: h.get("starts_at").cloned(),
            ends_at: h.get("ends_at").cloned(),
            codes_file: h.get("codes_file").cloned(),
            content_file: h.get("content_file").cloned(),
            require_ticket: h.get("require_ticket").is_some_and(|v| v == "1"),
            ticket_factor: h
                .get("ticket_factor")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(default_ticket_factor),
            queue: match (num("queue_admit_per_s"), num("queue_pass_ttl_s")) {
                (Some(rate), Some(ttl)) => Some(QueueSpec {
                    admit_per_s: u32::try_from(rate).ok()?,
                    pass_ttl_s: ttl,
                }),
                _ => None,
            },
        };
        // A record outside the bounds an operator could create is not trusted.
        spec.validate().ok()?;
        Some(Campaign {
            state: State::parse(h.get("state")?)?,
            starts_at_ms: ms("starts_at_ms"),
            ends_at_ms: ms("ends_at_ms"),
            spec,
        })
    }
}

#[cfg(test)]
mod tests;
