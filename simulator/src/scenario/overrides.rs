//! The flags of `seckill-sim run`, each overriding a field of the scenario file.

use clap::Args;
use seckill_core::cli_args::{redis_flag, RedisArgs};
use std::path::PathBuf;

use super::{Profile, Queue, Scenario};

/// Flags that override the scenario file: `--redis` among them, without a default of
/// its own, so that the file's stands unless the flag is given.
#[derive(Args, Debug, Clone, Default)]
#[command(mut_args(redis_flag(|a| a.default_value(None))))]
pub struct Overrides {
    /// The data plane's URL; several nodes: comma-separated (scenario: `target`).
    #[arg(long, env = "SECKILL_TARGET")]
    pub target: Option<String>,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub shop: crate::shop::ShopArgs,
    #[command(flatten)]
    pub payment: crate::provider::PaymentArgs,
    /// How long the run lasts, in seconds.
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Load threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Sessions in flight per thread, at most.
    #[arg(long)]
    pub connections: Option<usize>,
    /// An order store to reconcile against (repeat for several).
    #[arg(long = "db", visible_alias = "store", value_name = "FILE")]
    pub stores: Vec<PathBuf>,
    /// Campaign file to create a fresh copy of.
    #[arg(long)]
    pub create: Option<PathBuf>,
    /// Existing live campaign to use.
    #[arg(long)]
    pub campaign: Option<String>,
    /// The created campaign opens this many seconds after the run starts.
    #[arg(long)]
    pub starts_in_s: Option<f64>,
    /// Open the created campaign by its `starts_at` rather than by `start`.
    #[arg(long)]
    pub scheduled: bool,
    /// The arrivals' shape over the run.
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Arrivals per second (the peak, for a shaped profile).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds the arrivals take to reach their rate.
    #[arg(long)]
    pub ramp_s: Option<f64>,
    /// Distinct shoppers.
    #[arg(long)]
    pub users: Option<usize>,
    /// Source addresses the shoppers come from (127.1.0.0 and up).
    #[arg(long)]
    pub addresses: Option<u32>,
    /// Shoppers who pay for what they hold (0 to 1).
    #[arg(long)]
    pub pay_fraction: Option<f64>,
    /// Of the buyers who pay, those who pay after their hold's deadline (0 to 1).
    #[arg(long)]
    pub pay_late_fraction: Option<f64>,
    /// Of the buyers who pay, those who pay a second time (0 to 1).
    #[arg(long)]
    pub pay_twice_fraction: Option<f64>,
    /// Of the buyers who pay, those who pay one minor unit too much (0 to 1).
    #[arg(long)]
    pub pay_wrong_amount_fraction: Option<f64>,
    /// Copies of each payment webhook (the same webhook-id, the same body) sent at once
    /// with it, as a provider's retry storm sends them (0 to 100; needs the provider's
    /// secret).
    #[arg(long)]
    pub webhook_copies: Option<u32>,
    /// Shoppers who resend their purchase with the same Idempotency-Key (0 to 1).
    #[arg(long)]
    pub retry_fraction: Option<f64>,
    /// Seconds a shopper whose purchase got no answer or a 503 keeps resending it with
    /// the same Idempotency-Key (0: gives up at once).
    #[arg(long)]
    pub resend_for_s: Option<f64>,
    /// Share of honest shoppers in the crowd.
    #[arg(long)]
    pub shopper: Option<f64>,
    /// Share of hammers: one account, many tabs at once.
    #[arg(long)]
    pub hammer: Option<f64>,
    /// Share of IP rotators: one account from many source addresses.
    #[arg(long)]
    pub ip_rotator: Option<f64>,
    /// Share of forgers: forged tokens and tickets.
    #[arg(long)]
    pub forger: Option<f64>,
    /// Share of replayers: a ticket or pass used twice.
    #[arg(long)]
    pub replayer: Option<f64>,
    /// Share of skippers: buying before the opening, or without a ticket or pass.
    #[arg(long)]
    pub skipper: Option<f64>,
    /// Share of sybils: fresh accounts from a few addresses.
    #[arg(long)]
    pub sybil: Option<f64>,
    /// The waiting room a created campaign gets: shoppers let through per second.
    #[arg(long)]
    pub admit_per_s: Option<u32>,
    /// The waiting room a created campaign gets: how long a pass lasts.
    #[arg(long)]
    pub pass_ttl_s: Option<u64>,
    /// Shoppers join the pre-queue over this many seconds before the opening.
    #[arg(long)]
    pub window_s: Option<f64>,
    /// Shoppers who join the waiting room after the opening.
    #[arg(long)]
    pub late_fraction: Option<f64>,
    /// Late joins spread over this many seconds after the opening.
    #[arg(long)]
    pub late_s: Option<f64>,
    /// Shoppers' look intervals in the waiting room, ms, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub poll_ms: Option<Vec<u64>>,
    /// Bots' look interval in the waiting room, ms.
    #[arg(long)]
    pub bot_poll_ms: Option<u64>,
    /// The purchases' p99 latency the run must stay under, in ms.
    #[arg(long)]
    pub p99_ms: Option<f64>,
    /// Units bots may win at most before the run fails.
    #[arg(long)]
    pub max_bot_units: Option<u64>,
    /// Conditions that fail the run: `metric op value`, comma-separated, e.g.
    /// `p99<50ms,bot_wins==0,oversell==0`.
    #[arg(long)]
    pub fail_on: Option<String>,
}

impl Scenario {
    /// Lays the flags given over the file's fields.
    pub fn apply(&mut self, o: &Overrides) {
        macro_rules! set {
            ($($field:expr => $value:expr),* $(,)?) => {
                $(if let Some(v) = $value.clone() { $field = v; })*
            };
        }
        set! {
            self.target => o.target,
            self.redis => o.redis.url,
            self.duration_s => o.duration_s,
            self.connections => o.connections,
            self.campaign.starts_in_s => o.starts_in_s,
            self.arrivals.profile => o.profile,
            self.arrivals.rate => o.rate,
            self.arrivals.ramp_s => o.ramp_s,
            self.population.users => o.users,
            self.population.addresses => o.addresses,
            self.population.pay_fraction => o.pay_fraction,
            self.population.pay_late_fraction => o.pay_late_fraction,
            self.population.pay_twice_fraction => o.pay_twice_fraction,
            self.population.pay_wrong_amount_fraction => o.pay_wrong_amount_fraction,
            self.webhook_copies => o.webhook_copies,
            self.population.retry_fraction => o.retry_fraction,
            self.population.resend_for_s => o.resend_for_s,
            self.personas.shopper => o.shopper,
            self.personas.hammer => o.hammer,
            self.personas.ip_rotator => o.ip_rotator,
            self.personas.forger => o.forger,
            self.personas.replayer => o.replayer,
            self.personas.skipper => o.skipper,
            self.personas.sybil => o.sybil,
        }
        if o.shop.token_key.is_some() {
            self.token_key = o.shop.token_key.clone();
        }
        if o.shop.token_issuer.is_some() {
            self.token_issuer = o.shop.token_issuer.clone();
        }
        if o.shop.token_audience.is_some() {
            self.token_audience = o.shop.token_audience.clone();
        }
        if o.payment.payment_webhook_secret_file.is_some() {
            self.webhook_secret_file = o.payment.payment_webhook_secret_file.clone();
        }
        if o.redis.password_file.is_some() {
            self.redis_password_file = o.redis.password_file.clone();
        }
        if !o.stores.is_empty() {
            self.stores = o.stores.clone();
        }
        if o.threads.is_some() {
            self.threads = o.threads;
        }
        if let Some(c) = &o.create {
            self.campaign.create = Some(c.clone());
            self.campaign.id = None;
        }
        if let Some(id) = &o.campaign {
            self.campaign.id = Some(id.clone());
            self.campaign.create = None;
        }
        if o.p99_ms.is_some() {
            self.thresholds.p99_ms = o.p99_ms;
        }
        if o.max_bot_units.is_some() {
            self.thresholds.max_bot_units = o.max_bot_units;
        }
        if o.scheduled {
            self.campaign.scheduled = true;
        }
        if o.fail_on.is_some() {
            self.thresholds.fail_on = o.fail_on.clone();
        }
        let queued = o.admit_per_s.is_some()
            || o.pass_ttl_s.is_some()
            || o.window_s.is_some()
            || o.late_fraction.is_some()
            || o.late_s.is_some()
            || o.poll_ms.is_some()
            || o.bot_poll_ms.is_some();
        if queued {
            let q = self.queue.get_or_insert_with(Queue::default);
            if o.admit_per_s.is_some() {
                q.admit_per_s = o.admit_per_s;
            }
            if o.pass_ttl_s.is_some() {
                q.pass_ttl_s = o.pass_ttl_s;
            }
            if o.window_s.is_some() {
                q.window_s = o.window_s;
            }
            set! {
                q.late_fraction => o.late_fraction,
                q.late_s => o.late_s,
                q.poll_ms => o.poll_ms,
                q.bot_poll_ms => o.bot_poll_ms,
            }
        }
    }
}
