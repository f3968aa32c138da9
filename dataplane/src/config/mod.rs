//! Data plane configuration: defaults, then the TOML file, then `SECKILL_*` variables
//! and command-line flags; validated once at start, naming the field that is wrong.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use seckill_core::node_keys::NodeKeys;

mod payments;
mod sections;
mod validate;
pub use sections::{
    AdminConfig, ControlConfig, HttpConfig, IdentityConfig, MetricsConfig, PaymentsConfig,
    RedisClientConfig, ShopWebhooksConfig, TicketConfig, WorkerConfig,
};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// This node's name in the fleet's telemetry; absent means `hostname:port`.
    pub node: Option<String>,
    /// Address every shard listens on (`SO_REUSEPORT`).
    pub listen: String,
    /// Redis URL: `redis://[user@]host:port[/db]` (a password in the URL works too, but
    /// belongs in `redis_password_file`).
    pub redis: String,
    /// File holding the Redis user's password (mode 0600).
    pub redis_password_file: Option<PathBuf>,
    /// Number of shards (executors); absent means one per core.
    pub shards: Option<usize>,
    /// Pin each shard to a core of its own. Right when the node has its cores to itself;
    /// when a load generator or Redis shares them, unpinned shards let the kernel
    /// balance.
    pub pin_shards: bool,
    /// Serve `POST /api/session`, which signs a token for any user id (demos, tests).
    /// Only on a loopback listener.
    pub demo_issuer: bool,
    /// File holding the node secret, which every node and order worker holds and nobody
    /// else (at least 32 bytes, mode 0600): the nodes' own keys derive from it.
    pub secret_file: PathBuf,
    /// Further secrets that verify but never sign: the previous one while a new one is
    /// rolled out, or the next one before it signs.
    pub verify_secret_files: Vec<PathBuf>,
    /// Lifetime of tokens issued by the demo issuer.
    pub token_ttl_s: u64,
    /// A shopper's token is refused when it expires further ahead than this, whatever
    /// its issuer wrote.
    pub max_token_ttl_s: u64,
    /// Where campaigns' downloadable files live.
    pub content_dir: PathBuf,
    /// Lifetime of a signed download link.
    pub download_ttl_s: u64,
    pub identity: IdentityConfig,
    pub payments: PaymentsConfig,
    pub shop_webhooks: ShopWebhooksConfig,
    pub http: HttpConfig,
    pub redis_client: RedisClientConfig,
    pub control: ControlConfig,
    pub worker: WorkerConfig,
    /// Rate limits and automatic blocking; the control plane can override each field live.
    pub limits: crate::guard::Limits,
    pub breaker: crate::guard::breaker::BreakerConfig,
    pub tickets: TicketConfig,
    pub admin: AdminConfig,
    pub metrics: MetricsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node: None,
            listen: "127.0.0.1:8080".into(),
            redis: "redis://127.0.0.1:6390".into(),
            redis_password_file: None,
            shards: None,
            pin_shards: true,
            demo_issuer: false,
            secret_file: "data/secret".into(),
            verify_secret_files: Vec::new(),
            token_ttl_s: 3600,
            max_token_ttl_s: 86_400,
            content_dir: "data/content".into(),
            download_ttl_s: 24 * 3600,
            identity: IdentityConfig::default(),
            payments: PaymentsConfig::default(),
            shop_webhooks: ShopWebhooksConfig::default(),
            http: HttpConfig::default(),
            redis_client: RedisClientConfig::default(),
            control: ControlConfig::default(),
            worker: WorkerConfig::default(),
            limits: crate::guard::Limits::default(),
            breaker: crate::guard::breaker::BreakerConfig::default(),
            tickets: TicketConfig::default(),
            admin: AdminConfig::default(),
            metrics: MetricsConfig::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConfigError {
    pub field: String,
    pub problem: String,
}

fn bad(field: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// Where a Redis node is and how to log in to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTarget {
    pub host: String,
    pub port: u16,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl RedisTarget {
    pub fn parse(url: &str) -> Result<Self, String> {
        use redis::{ConnectionAddr, IntoConnectionInfo};
        let info = url.into_connection_info().map_err(|e| e.to_string())?;
        let ConnectionAddr::Tcp(host, port) = info.addr().clone() else {
            return Err("only redis:// (TCP) URLs are supported".into());
        };
        let r = info.redis_settings();
        Ok(RedisTarget {
            host,
            port,
            db: r.db(),
            username: r.username().map(str::to_string),
            password: r.password().map(str::to_string),
        })
    }
}

/// The dotted name of the `key = value` line holding byte `pos`, with its `[section]`.
fn field_at(text: &str, pos: usize) -> Option<String> {
    let before = text.get(..pos)?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split('=').next()?.trim();
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let section = before[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l.trim_matches(['[', ']']).trim().to_string());
    Some(match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_string(),
    })
}

/// A validated configuration, ready to run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node: String,
    pub started_ms: i64,
    pub listen: SocketAddr,
    /// The Redis URL with the password in it: never to be shown (see [`seckill_core::secrets::redact`]).
    pub redis_url: String,
    /// The Redis server, or seed nodes of a Redis Cluster (`redis` may list several,
    /// separated by commas).
    pub redis: Vec<RedisTarget>,
    pub shards: usize,
    pub pin_shards: bool,
    pub demo_issuer: bool,
    /// The node's keys, one a purpose, derived from `secret_file` (and the older
    /// `verify_secret_files`).
    pub keys: NodeKeys,
    /// Whose tokens name shoppers, and the keys that verify them.
    pub identity: crate::identity::Identity,
    /// Who pays orders: the keys that verify the provider's webhooks, and the demo
    /// provider's signer when it is on.
    pub payments: crate::payments::Payments,
    /// Where the shop's webhooks go, if anywhere.
    pub shop: Option<seckill_orders::shop::ShopOptions>,
    pub token_ttl: Duration,
    pub max_token_ttl: Duration,
    pub content_dir: PathBuf,
    pub download_ttl: Duration,
    pub http: HttpConfig,
    pub redis_client: RedisClientConfig,
    pub control: ControlConfig,
    pub worker: WorkerConfig,
    pub limits: crate::guard::Limits,
    pub breaker: crate::guard::breaker::BreakerConfig,
    pub trusted_proxies: Vec<std::net::IpAddr>,
    pub tickets: TicketConfig,
    /// The admin listener, if on.
    pub admin_listen: Option<SocketAddr>,
    pub admin_token: Option<String>,
    pub metrics: MetricsConfig,
}

impl Settings {
    pub fn worker_options(&self) -> seckill_orders::WorkerOptions {
        seckill_orders::WorkerOptions {
            name: self.worker.name.clone(),
            redis_url: self.redis_url.clone(),
            db: self.worker.db.clone(),
            licences: self.keys.licences().clone(),
            batch: self.worker.batch,
            claim_idle: Duration::from_millis(self.worker.claim_idle_ms),
            metrics: None,
            wait_replicas: self.redis_client.wait_replicas,
            wait_timeout: Duration::from_millis(self.redis_client.wait_timeout_ms),
            shop: self.shop.clone(),
            downloads: Some((self.keys.downloads().clone(), self.download_ttl)),
        }
    }
}

impl Config {
    /// Reads the TOML file. A missing file is an error only when it was named explicitly.
    pub fn load(path: &Path, explicit: bool) -> Result<Config, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_toml(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                Ok(Config::default())
            }
            Err(e) => Err(bad(
                "config",
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .and_then(|s| field_at(text, s.start))
                .unwrap_or_else(|| "config".into());
            bad(&field, e.message().to_string())
        })
    }

    /// Checks every section, naming the first field that is wrong, and gives the
    /// settings to run with.
    pub fn validate(&self) -> Result<Settings, ConfigError> {
        let listen = validate::listen(&self.listen)?;
        let (redis_url, redis) = validate::redis(&self.redis, self.redis_password_file.as_deref())?;
        let shards = validate::shards(self.shards)?;
        let mut secrets = vec![read_secret(&self.secret_file, "secret_file")?];
        for f in &self.verify_secret_files {
            secrets.push(read_secret(f, "verify_secret_files")?);
        }
        let trusted_proxies = validate::http(&self.http)?;
        validate::redis_client(&self.redis_client)?;
        validate::control(&self.control)?;
        validate::lifetimes(self)?;
        validate::worker(&self.worker)?;
        validate::limits(&self.limits)?;
        validate::tickets(&self.tickets)?;
        validate::breaker(&self.breaker, &self.redis_client)?;
        let (admin_listen, admin_token) = validate::admin(&self.admin, listen)?;
        validate::metrics(&self.metrics)?;
        validate::demo_issuer(self.demo_issuer, listen, &trusted_proxies)?;
        let keys = NodeKeys::derive(&secrets);
        let identity = validate::identity(
            &self.identity,
            self.max_token_ttl_s,
            self.demo_issuer.then(|| keys.demo_issuer().public_key()),
        )?;
        let payments = payments::payments(&self.payments, &secrets, listen, &trusted_proxies)?;
        let shop = payments::shop_webhooks(&self.shop_webhooks)?;
        let node = validate::node(self.node.as_deref(), listen)?;
        Ok(Settings {
            node,
            started_ms: seckill_core::now_ms(),
            listen,
            redis_url,
            redis,
            shards,
            pin_shards: self.pin_shards,
            demo_issuer: self.demo_issuer,
            keys,
            identity,
            payments,
            shop,
            token_ttl: Duration::from_secs(self.token_ttl_s),
            max_token_ttl: Duration::from_secs(self.max_token_ttl_s),
            content_dir: self.content_dir.clone(),
            download_ttl: Duration::from_secs(self.download_ttl_s),
            http: self.http.clone(),
            redis_client: self.redis_client.clone(),
            control: self.control.clone(),
            worker: self.worker.clone(),
            limits: self.limits,
            breaker: self.breaker.clone(),
            trusted_proxies,
            tickets: self.tickets.clone(),
            admin_listen,
            admin_token,
            metrics: self.metrics.clone(),
        })
    }
}

/// A node secret from a file only its owner may read, counted in raw bytes.
fn read_secret(path: &Path, field: &str) -> Result<Vec<u8>, ConfigError> {
    seckill_core::secrets::read_secret(path).map_err(|e| bad(field, e))
}

#[cfg(test)]
mod tests;
