//! A scenario: what to run against which data plane, from TOML, with every field
//! overridable by a flag ([`Overrides`]).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod overrides;
pub use overrides::Overrides;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The data plane: one URL, or several separated by commas (each source address
    /// talks to one of them, as a load balancer with source affinity would route it).
    pub target: String,
    /// The control plane: `redis://[user@]host:port` (the operators' user). A report shows
    /// it without any password.
    #[serde(serialize_with = "redacted")]
    pub redis: String,
    /// File holding the Redis user's password (mode 0600).
    #[serde(default)]
    pub redis_password_file: Option<PathBuf>,
    /// The shop's private key (`seckill-dataplane keys new`; the file's name is its
    /// `kid`): shoppers' tokens are signed here, as the shop signs them. Without it, the
    /// simulator asks the demo issuer (`POST /api/session`), from 127.0.0.1.
    #[serde(default)]
    pub token_key: Option<PathBuf>,
    /// The `iss` of the tokens signed here: the nodes' `identity.issuer`.
    #[serde(default)]
    pub token_issuer: Option<String>,
    /// The `aud` of the tokens signed here (default `seckill`).
    #[serde(default)]
    pub token_audience: Option<String>,
    /// The payment provider's webhook secret (`whsec_…`, mode 0600; one of the nodes'
    /// `payments.webhook_secret_files`): buyers' payments are `payment.succeeded` webhooks
    /// signed here, as the provider signs them, sent to `/api/payments/webhook`. Without
    /// it, buyers pay through the demo provider's `POST /api/orders/{id}/pay` (nodes with
    /// `payments.provider = "demo"`).
    #[serde(default)]
    pub webhook_secret_file: Option<PathBuf>,
    /// Copies of each payment webhook (the same `webhook-id`, the same body) sent at once
    /// with it, each once, as a provider's retry storm sends them (default 0; at most
    /// 100; needs `webhook_secret_file`). The node must take each payment once.
    #[serde(default)]
    pub webhook_copies: u32,
    pub duration_s: f64,
    #[serde(default)]
    pub threads: Option<usize>,
    /// Sessions in flight per load thread, at most; later arrivals wait for a free one,
    /// and the wait counts in their latency.
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// Order stores (SQLite files of the data plane's workers) to reconcile against at
    /// the end; without them, the ledger is checked in Redis only.
    #[serde(default)]
    pub stores: Vec<PathBuf>,
    pub campaign: CampaignChoice,
    pub arrivals: Arrivals,
    pub population: Population,
    pub personas: Personas,
    /// How the crowd goes through the campaign's waiting room, when it has one.
    #[serde(default)]
    pub queue: Option<Queue>,
    #[serde(default)]
    pub thresholds: Thresholds,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignChoice {
    /// A campaign file: a fresh copy is created, armed and started for the run.
    #[serde(default)]
    pub create: Option<PathBuf>,
    /// An existing, live campaign.
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub starts_in_s: f64,
    /// Open the sale by its clock: the fresh campaign gets `starts_at` at the opening
    /// instant and is started at once, so the nodes' and Redis's clocks decide when the
    /// first unit sells (otherwise `start` is sent at the opening instant).
    #[serde(default)]
    pub scheduled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// The same rate all along.
    Constant,
    /// From zero at the sale start up to the rate over `ramp_s`, then flat.
    Ramp,
    /// The rate for `ramp_s` from the sale start, a tenth of it before and after.
    Spike,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    pub profile: Profile,
    /// Peak purchases per second.
    pub rate: f64,
    #[serde(default = "one")]
    pub ramp_s: f64,
}

/// Distinct shopper addresses by default: a few shoppers share each, as behind home
/// routers, and the connections they need stay well within the open-file limits of
/// both ends.
pub const SHOPPER_ADDRESSES: u32 = 4096;

fn default_addresses() -> u32 {
    SHOPPER_ADDRESSES
}

fn default_connections() -> usize {
    4096
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Population {
    pub users: usize,
    /// Source addresses the shoppers come from (127.1.0.0 and up); shoppers share them
    /// in turn.
    #[serde(default = "default_addresses")]
    pub addresses: u32,
    #[serde(default)]
    pub pay_fraction: f64,
    /// Of the buyers who pay, those who pay after their hold's deadline: the money is
    /// owed back, no unit. This share and the next two need `webhook_secret_file`; the
    /// rest of the buyers pay once, on time, the right amount.
    #[serde(default)]
    pub pay_late_fraction: f64,
    /// Of the buyers who pay, those who pay a second time, with a payment of its own: the
    /// second is owed back.
    #[serde(default)]
    pub pay_twice_fraction: f64,
    /// Of the buyers who pay, those who pay one minor unit too much: a mismatch, nothing
    /// paid.
    #[serde(default)]
    pub pay_wrong_amount_fraction: f64,
    #[serde(default)]
    pub retry_fraction: f64,
    /// How long a shopper whose purchase got no answer, or a 503, keeps sending it again
    /// with the same Idempotency-Key (backing off from 250 ms to 2 s), as the campaign's
    /// page does; 0 gives up at once.
    #[serde(default)]
    pub resend_for_s: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Personas {
    pub shopper: f64,
    pub hammer: f64,
    pub ip_rotator: f64,
    pub forger: f64,
    pub replayer: f64,
    pub skipper: f64,
    pub sybil: f64,
}

/// A sale through a waiting room: each shopper joins once, looks at the line every
/// `poll_ms` (sending back the receipt of the last answer), buys with the pass once let
/// through, and pays as usual. Bots join as the window opens and look every `bot_poll_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Queue {
    /// The room a created campaign gets (over its file's): shoppers let through per
    /// second, and how long a pass lasts.
    pub admit_per_s: Option<u32>,
    pub pass_ttl_s: Option<u64>,
    /// Shoppers join the pre-queue over this many seconds before the opening, spread
    /// evenly at random (default: from the run's start, `campaign.starts_in_s`).
    pub window_s: Option<f64>,
    /// Shoppers who join after the opening instead, spread over `late_s`.
    pub late_fraction: f64,
    pub late_s: f64,
    /// Shoppers' look intervals: each shopper gets one of them at random (the polling
    /// classes of the fairness table).
    pub poll_ms: Vec<u64>,
    /// Bots' look interval.
    pub bot_poll_ms: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            admit_per_s: None,
            pass_ttl_s: None,
            window_s: None,
            late_fraction: 0.0,
            late_s: 1.0,
            poll_ms: vec![250, 1000, 4000],
            bot_poll_ms: 100,
        }
    }
}

impl Queue {
    /// The pre-queue's window, in seconds before the opening.
    pub fn window(&self, s: &Scenario) -> f64 {
        self.window_s.unwrap_or(s.campaign.starts_in_s)
    }

    /// Checks the fields against the scenario, naming the one that is wrong.
    pub fn validate(&self, s: &Scenario) -> anyhow::Result<()> {
        use seckill_core::campaign::{valid_admit_rate, PASS_TTL_S};
        if let Some(rate) = self.admit_per_s {
            valid_admit_rate(rate).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if let Some(ttl) = self.pass_ttl_s {
            if !PASS_TTL_S.contains(&ttl) {
                bail!(
                    "queue.pass_ttl_s: must be between {} and {}",
                    PASS_TTL_S.start(),
                    PASS_TTL_S.end()
                );
            }
        }
        if let Some(w) = self.window_s {
            if !(w > 0.0 && w <= s.campaign.starts_in_s) {
                bail!("queue.window_s: must be above 0 and at most campaign.starts_in_s (the pre-queue is before the opening, within the run)");
            }
        }
        if !(0.0..=1.0).contains(&self.late_fraction) {
            bail!("queue.late_fraction: must be between 0 and 1");
        }
        if !(self.late_s > 0.0 && s.campaign.starts_in_s + self.late_s <= s.duration_s) {
            bail!("queue.late_s: must be above 0, and the late joins must end within duration_s");
        }
        let poll = 10..=60_000;
        if self.poll_ms.is_empty() || self.poll_ms.iter().any(|p| !poll.contains(p)) {
            bail!("queue.poll_ms: one or more intervals, each between 10 and 60000 ms");
        }
        if !poll.contains(&self.bot_poll_ms) {
            bail!("queue.bot_poll_ms: must be between 10 and 60000 ms");
        }
        if s.personas.shopper <= 0.0 {
            bail!("personas.shopper: must be above 0 in a queued sale (the bots' shares are of a crowd of population.users shoppers)");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Largest acceptable p99 purchase latency (from the intended send time).
    pub p99_ms: Option<f64>,
    /// Most units bots may end up with.
    pub max_bot_units: Option<u64>,
    /// Conditions on the report, e.g. `p99<50ms,bot_wins==0,oversell==0`.
    pub fail_on: Option<String>,
}

fn redacted<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&seckill_core::secrets::redact(url))
}

impl Scenario {
    /// The control plane's URL with the password in it: never to be shown.
    pub fn redis_url(&self) -> anyhow::Result<String> {
        seckill_core::secrets::redis_url(&self.redis, self.redis_password_file.as_deref())
            .map_err(|e| anyhow::anyhow!("redis_password_file: {e}"))
    }

    /// Connects to the control plane; an error names the URL without its password.
    pub fn connect(&self) -> anyhow::Result<seckill_core::connection::Connection> {
        let url = self.redis_url()?;
        seckill_core::control::connect(&url).with_context(|| {
            format!(
                "redis: connecting to {}",
                seckill_core::secrets::redact(&url)
            )
        })
    }

    pub fn load(path: &std::path::Path) -> anyhow::Result<Scenario> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The target URLs, without trailing slashes.
    pub fn targets(&self) -> Vec<&str> {
        self.target
            .split(',')
            .map(|t| t.trim().trim_end_matches('/'))
            .collect()
    }

    /// Checks every field, naming the one that is wrong.
    pub fn validate(&self) -> anyhow::Result<()> {
        for t in self.targets() {
            if !t.starts_with("http://") || t.len() <= "http://".len() {
                bail!("target: expected http://host:port (several separated by commas), got '{t}'");
            }
        }
        if self.connections == 0 {
            bail!("connections: must be at least 1");
        }
        if !(self.duration_s > 0.0 && self.duration_s <= 3600.0) {
            bail!("duration_s: must be above 0 and at most 3600");
        }
        if self.threads == Some(0) {
            bail!("threads: must be at least 1");
        }
        if self.campaign.create.is_some() == self.campaign.id.is_some() {
            bail!("campaign: give exactly one of create (a campaign file) or id (an existing campaign)");
        }
        if self.campaign.scheduled && self.campaign.create.is_none() {
            bail!("campaign.scheduled: only a campaign created for the run (campaign.create) can be scheduled");
        }
        if !(self.campaign.starts_in_s >= 0.0 && self.campaign.starts_in_s < self.duration_s) {
            bail!("campaign.starts_in_s: must be 0 or more and less than duration_s");
        }
        if !(self.arrivals.rate > 0.0 && self.arrivals.rate <= 1_000_000.0) {
            bail!("arrivals.rate: must be above 0 and at most 1000000");
        }
        if self.arrivals.ramp_s.is_nan() || self.arrivals.ramp_s <= 0.0 {
            bail!("arrivals.ramp_s: must be above 0");
        }
        if self.population.users == 0 {
            bail!("population.users: must be at least 1");
        }
        if !(0.0..=600.0).contains(&self.population.resend_for_s) {
            bail!("population.resend_for_s: must be between 0 and 600");
        }
        if !(1..=65_536).contains(&self.population.addresses) {
            bail!("population.addresses: must be between 1 and 65536");
        }
        for (field, v) in [
            ("population.pay_fraction", self.population.pay_fraction),
            ("population.retry_fraction", self.population.retry_fraction),
            ("personas.shopper", self.personas.shopper),
            ("personas.hammer", self.personas.hammer),
            ("personas.ip_rotator", self.personas.ip_rotator),
            ("personas.forger", self.personas.forger),
            ("personas.replayer", self.personas.replayer),
            ("personas.skipper", self.personas.skipper),
            ("personas.sybil", self.personas.sybil),
        ] {
            if !(0.0..=1.0).contains(&v) {
                bail!("{field}: must be between 0 and 1");
            }
        }
        self.validate_payments()?;
        if let Some(f) = &self.thresholds.fail_on {
            crate::verdict::parse(f)?;
        }
        if let Some(q) = &self.queue {
            q.validate(self)?;
        }
        let p = &self.personas;
        if p.shopper + p.hammer + p.ip_rotator + p.forger + p.replayer + p.skipper + p.sybil <= 0.0
        {
            bail!("personas: at least one share must be above 0");
        }
        Ok(())
    }

    /// The shares of late, double and wrong-amount payments: each between 0 and 1,
    /// together at most 1, and only with the provider's secret.
    fn validate_payments(&self) -> anyhow::Result<()> {
        let p = &self.population;
        let shares = [
            ("population.pay_late_fraction", p.pay_late_fraction),
            ("population.pay_twice_fraction", p.pay_twice_fraction),
            (
                "population.pay_wrong_amount_fraction",
                p.pay_wrong_amount_fraction,
            ),
        ];
        for (field, v) in &shares {
            if !(0.0..=1.0).contains(v) {
                bail!("{field}: must be between 0 and 1");
            }
        }
        if shares.iter().map(|(_, v)| v).sum::<f64>() > 1.0 {
            bail!(
                "{}: the shares of late, double and wrong-amount payments add up to more than 1",
                shares[0].0
            );
        }
        if self.webhook_copies > 100 {
            bail!("webhook_copies: at most 100");
        }
        if self.webhook_copies > 0 && self.webhook_secret_file.is_none() {
            bail!("webhook_copies: needs webhook_secret_file (--payment-webhook-secret-file): the demo provider sends each payment once");
        }
        if let Some((field, _)) = shares.iter().find(|(_, v)| *v > 0.0) {
            if self.webhook_secret_file.is_none() {
                bail!("{field}: needs webhook_secret_file (--payment-webhook-secret-file): the demo provider pays once, on time, the right amount");
            }
        }
        Ok(())
    }
}
