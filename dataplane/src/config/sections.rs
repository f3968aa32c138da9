//! The configuration's sections (`[http]`, `[redis_client]`, `[control]`, `[worker]`,
//! `[tickets]`, `[admin]`, `[metrics]`, `[identity]`, `[payments]`) and their defaults:
//! what each setting means, in one place.

use serde::Deserialize;
use std::path::PathBuf;

/// The admin listener: `/metrics`, `/healthz`, `/readyz`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Address of the admin listener (shard 0 serves it); empty turns it off.
    pub listen: String,
    /// When set, every admin request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: "127.0.0.1:9090".into(),
            token: None,
        }
    }
}

/// What `/metrics` shows beyond the node's own counters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// An ended campaign's series stay this long after the node first sees it ended, so
    /// the last values get scraped, then leave `/metrics` (0: at once).
    pub ended_campaign_ttl_s: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            ended_campaign_ttl_s: 3600,
        }
    }
}

/// Proof-of-work challenges and the tickets they earn (campaigns with `require_ticket`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TicketConfig {
    /// Leading zero bits a solution's SHA-256 needs (each bit doubles the work).
    pub difficulty: u32,
    pub challenge_ttl_s: u64,
    pub ticket_ttl_s: u64,
    /// Tickets are issued from this long before a campaign's `starts_at` (and while it
    /// is live), never earlier.
    pub window_s: u64,
}

impl Default for TicketConfig {
    fn default() -> Self {
        TicketConfig {
            difficulty: 18,
            challenge_ttl_s: 120,
            ticket_ttl_s: 300,
            window_s: 300,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// Run the order worker inside `serve` (its own thread, off the shards).
    pub enabled: bool,
    /// Consumer name; each worker of a fleet needs its own, stable across restarts.
    pub name: String,
    /// The worker's own SQLite file.
    pub db: PathBuf,
    pub batch: usize,
    /// Entries pending this long on a silent consumer are taken over.
    pub claim_idle_ms: u64,
    /// The nice value of the worker inside `serve` (0-19): below the shards, with which
    /// it shares the cores, so that writing a sale's burst of orders does not take a
    /// shard's core from its requests. It keeps a share of a busy core all the same.
    pub nice: u8,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            enabled: true,
            name: "main".into(),
            db: "data/orders/main.sqlite".into(),
            batch: 512,
            claim_idle_ms: 5_000,
            nice: 10,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    pub max_header_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: usize,
    /// A request's head must arrive within this time of its first byte.
    pub header_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout_ms: u64,
    pub max_connections_per_shard: usize,
    /// Connections the kernel keeps waiting for each shard to accept them; past it, it
    /// drops new ones, and their clients try again a second later. The kernel caps it at
    /// `net.core.somaxconn`.
    pub listen_backlog: u32,
    /// How long a stopping node keeps serving, reporting itself not ready, before it
    /// stops accepting: time for a load balancer's health checks to take it out.
    pub drain_ms: u64,
    /// How long a stopping node lets in-flight requests finish.
    pub shutdown_grace_ms: u64,
    /// Peers whose `X-Forwarded-For` names the client (load balancers, proxies).
    pub trusted_proxies: Vec<String>,
    /// Client IPs and users a shard tracks for rate limits at most (memory bound).
    pub max_tracked_clients: usize,
    /// Event streams one client address may hold open on a shard: each holds a
    /// connection for as long as the client likes.
    pub max_event_streams_per_client: u32,
    /// Event streams a shard holds open in all; below `max_connections_per_shard`, so that
    /// purchases always find a connection.
    pub max_event_streams_per_shard: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisClientConfig {
    pub connect_timeout_ms: u64,
    /// A command without a reply by then fails, and the request answers 503.
    pub command_timeout_ms: u64,
    /// Longest wait between reconnection attempts.
    pub max_backoff_ms: u64,
    /// Replicas that must confirm a batch of commands (`WAIT`) before its replies are
    /// acknowledged; 0 acknowledges on the master's word. With a replica that will be
    /// promoted when its master dies, 1 is what makes an acknowledged purchase survive.
    pub wait_replicas: u32,
    /// How long `WAIT` waits for them; a batch not confirmed by then answers 503
    /// (outcome unknown). Below `command_timeout_ms`.
    pub wait_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// How often each shard polls the control plane (pub/sub usually tells it sooner).
    pub poll_ms: u64,
    /// How often the rebalancer evens out stock and replays unfinished transfers.
    pub rebalance_ms: u64,
    /// How far this node's clock may be from Redis's before the node reports itself not
    /// ready. Sales open by Redis's clock whatever the offset (see `clock`).
    pub max_clock_skew_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_header_bytes: 8 * 1024,
            max_headers: 32,
            max_body_bytes: 4 * 1024,
            header_timeout_ms: 5_000,
            idle_timeout_ms: 30_000,
            max_connections_per_shard: 20_000,
            listen_backlog: 4096,
            drain_ms: 2_000,
            shutdown_grace_ms: 5_000,
            trusted_proxies: Vec::new(),
            max_tracked_clients: 100_000,
            max_event_streams_per_client: 4,
            max_event_streams_per_shard: 10_000,
        }
    }
}

impl Default for RedisClientConfig {
    fn default() -> Self {
        RedisClientConfig {
            connect_timeout_ms: 100,
            command_timeout_ms: 1_000,
            max_backoff_ms: 1_000,
            wait_replicas: 0,
            wait_timeout_ms: 100,
        }
    }
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            poll_ms: 250,
            rebalance_ms: 1_000,
            max_clock_skew_ms: 1_000,
        }
    }
}

/// `[identity]`: whose tokens name shoppers. The shop's identity provider signs JWTs
/// and publishes its public keys as a JWKS, in a file the node re-reads when it changes
/// or at an `https://` address.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    /// The shop's JWKS, re-read within seconds of a change.
    pub jwks_file: Option<PathBuf>,
    /// The shop's JWKS at an `https://` address, fetched at start, every few minutes,
    /// and early when a token names a key it lacks.
    pub jwks_url: Option<String>,
    /// PEM certificates that alone are trusted for `jwks_url` (default: the system's
    /// roots).
    pub jwks_ca_file: Option<PathBuf>,
    /// A token's `iss` must equal this: required with the shop's keys.
    pub issuer: Option<String>,
    /// A token's `aud` must be or contain this.
    pub audience: String,
    /// `exp`, `nbf` and `iat` are honoured this many seconds either way.
    pub leeway_s: u64,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig {
            jwks_file: None,
            jwks_url: None,
            jwks_ca_file: None,
            issuer: None,
            audience: "seckill".into(),
            leeway_s: 30,
        }
    }
}

/// Payments: the provider's signed webhooks (Standard Webhooks) are what pays an order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PaymentsConfig {
    /// `webhook`: a payment provider's webhooks, verified with `webhook_secret_files`.
    /// `demo`: also a shopper's own `POST /api/orders/{id}/pay`, which has the node sign
    /// a webhook to itself (loopback listeners only, as the demo issuer).
    pub provider: String,
    /// Files of mode 0600, each holding one key as the spec writes it: `whsec_…`
    /// (HMAC-SHA256, `v1`) or `whpk_…` (an Ed25519 public key, `v1a`). Several verify,
    /// for a rotation.
    pub webhook_secret_files: Vec<PathBuf>,
    /// Replicas of the order's master that must hold a payment's outcome before the
    /// webhook is answered 2xx (`WAIT`), where the master has replicas; 0 answers on the
    /// master's word.
    pub wait_replicas: u32,
    /// How long `WAIT` waits for them; a payment not confirmed by then answers 503 and
    /// the provider retries.
    pub wait_timeout_ms: u64,
    /// How much longer a hold keeps its unit once the provider says a payment of it is
    /// pending (`payment.pending`, before the hold's deadline).
    pub pending_grace_s: u64,
    /// Webhooks a shard takes per second (and as a burst): the route is exempt from the
    /// per-address limits, since a provider's retries come from few addresses.
    pub webhooks_per_s: u32,
}

impl Default for PaymentsConfig {
    fn default() -> Self {
        PaymentsConfig {
            provider: "webhook".into(),
            webhook_secret_files: Vec::new(),
            wait_replicas: 1,
            wait_timeout_ms: 500,
            pending_grace_s: 120,
            webhooks_per_s: 2_000,
        }
    }
}

/// The shop's webhooks: every order event told to the shop's endpoint, signed as
/// Standard Webhooks (`v1`) with the shop's secret.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShopWebhooksConfig {
    /// The shop's endpoint: `https://`, or `http://` to a loopback address. None: the
    /// shop hears nothing.
    pub url: Option<String>,
    /// A file of mode 0600 holding the shop's secret, `whsec_…`.
    pub secret_file: Option<PathBuf>,
    /// Certificates that alone are trusted for the endpoint (default: the system's).
    pub ca_file: Option<PathBuf>,
    /// Most webhooks waiting for the shop: beyond it, the oldest go.
    pub max_backlog: u64,
    /// Longest wait between two tries while the shop fails.
    pub max_backoff_s: u64,
    /// A try the shop has not answered by then failed.
    pub timeout_ms: u64,
}

impl Default for ShopWebhooksConfig {
    fn default() -> Self {
        ShopWebhooksConfig {
            url: None,
            secret_file: None,
            ca_file: None,
            max_backlog: 1_000_000,
            max_backoff_s: 300,
            timeout_ms: 5_000,
        }
    }
}
