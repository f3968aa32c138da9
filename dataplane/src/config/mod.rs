//! Data plane configuration: defaults, then the TOML file, then `SECKILL_*` variables
//! and command-line flags; validated once at start, naming the field that is wrong.

use serde::Deserialize;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use seckill_core::auth::Secret;

mod sections;
pub use sections::{
    AdminConfig, ControlConfig, HttpConfig, MetricsConfig, RedisClientConfig, TicketConfig,
    WorkerConfig,
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
    /// File holding the HMAC secret shared by every node and the shop's identity
    /// provider (at least 32 bytes, mode 0600); it signs and verifies.
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
    pub secret: Secret,
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
            secret: self.secret.clone(),
            batch: self.worker.batch,
            claim_idle: Duration::from_millis(self.worker.claim_idle_ms),
            metrics: None,
            wait_replicas: self.redis_client.wait_replicas,
            wait_timeout: Duration::from_millis(self.redis_client.wait_timeout_ms),
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

    pub fn validate(&self) -> Result<Settings, ConfigError> {
        let listen = self
            .listen
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                bad(
                    "listen",
                    format!("'{}' is not a host:port address", self.listen),
                )
            })?;
        let redis_url =
            seckill_core::secrets::redis_url(&self.redis, self.redis_password_file.as_deref())
                .map_err(|e| bad("redis_password_file", e))?;
        let redis = redis_url
            .split(',')
            .map(|u| RedisTarget::parse(u.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("redis", e))?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shards = self.shards.unwrap_or(cores);
        if shards == 0 || shards > 256 {
            return Err(bad("shards", "must be between 1 and 256"));
        }
        let mut secret = read_secret(&self.secret_file, "secret_file")?;
        for f in &self.verify_secret_files {
            secret = secret.also_verifying(read_secret(f, "verify_secret_files")?);
        }
        let h = &self.http;
        for (field, v, min) in [
            ("http.max_header_bytes", h.max_header_bytes, 1024),
            ("http.max_headers", h.max_headers, 4),
            ("http.max_body_bytes", h.max_body_bytes, 64),
            (
                "http.max_connections_per_shard",
                h.max_connections_per_shard,
                1,
            ),
            ("http.listen_backlog", h.listen_backlog as usize, 1),
            (
                "http.max_event_streams_per_client",
                h.max_event_streams_per_client as usize,
                1,
            ),
            (
                "http.max_event_streams_per_shard",
                h.max_event_streams_per_shard,
                1,
            ),
        ] {
            if v < min {
                return Err(bad(field, format!("must be at least {min}")));
            }
        }
        if h.max_event_streams_per_shard >= h.max_connections_per_shard {
            return Err(bad(
                "http.max_event_streams_per_shard",
                "must be below http.max_connections_per_shard",
            ));
        }
        let r = &self.redis_client;
        for (field, v) in [
            ("http.header_timeout_ms", h.header_timeout_ms),
            ("http.idle_timeout_ms", h.idle_timeout_ms),
            ("redis_client.connect_timeout_ms", r.connect_timeout_ms),
            ("redis_client.command_timeout_ms", r.command_timeout_ms),
            ("redis_client.max_backoff_ms", r.max_backoff_ms),
            ("control.poll_ms", self.control.poll_ms),
            ("control.rebalance_ms", self.control.rebalance_ms),
            ("control.max_clock_skew_ms", self.control.max_clock_skew_ms),
            ("token_ttl_s", self.token_ttl_s),
            ("max_token_ttl_s", self.max_token_ttl_s),
            ("download_ttl_s", self.download_ttl_s),
            ("worker.claim_idle_ms", self.worker.claim_idle_ms),
            ("worker.batch", self.worker.batch as u64),
        ] {
            if v == 0 {
                return Err(bad(field, "must be greater than 0"));
            }
        }
        for (field, v, max) in [
            ("http.header_timeout_ms", h.header_timeout_ms, 86_400_000),
            ("http.idle_timeout_ms", h.idle_timeout_ms, 86_400_000),
            ("http.shutdown_grace_ms", h.shutdown_grace_ms, 600_000),
            ("http.drain_ms", h.drain_ms, 600_000),
            (
                "redis_client.connect_timeout_ms",
                r.connect_timeout_ms,
                10_000,
            ),
            (
                "redis_client.command_timeout_ms",
                r.command_timeout_ms,
                60_000,
            ),
            ("redis_client.max_backoff_ms", r.max_backoff_ms, 60_000),
            ("download_ttl_s", self.download_ttl_s, 365 * 86_400),
            ("token_ttl_s", self.token_ttl_s, 365 * 86_400),
            ("max_token_ttl_s", self.max_token_ttl_s, 30 * 86_400),
            ("tickets.window_s", self.tickets.window_s, 7 * 86_400),
            ("worker.nice", u64::from(self.worker.nice), 19),
        ] {
            if v > max {
                return Err(bad(field, format!("must be at most {max}")));
            }
        }
        if r.wait_replicas > 0
            && (r.wait_timeout_ms == 0 || r.wait_timeout_ms >= r.command_timeout_ms)
        {
            return Err(bad(
                "redis_client.wait_timeout_ms",
                "must be between 1 and redis_client.command_timeout_ms - 1",
            ));
        }
        let trusted_proxies = self
            .http
            .trusted_proxies
            .iter()
            .map(|p| {
                p.parse::<std::net::IpAddr>().map_err(|_| {
                    bad(
                        "http.trusted_proxies",
                        format!("'{p}' is not an IP address"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if h.max_tracked_clients < 1000 {
            return Err(bad("http.max_tracked_clients", "must be at least 1000"));
        }
        self.limits
            .validate()
            .map_err(|(field, problem)| bad(&format!("limits.{field}"), problem))?;
        let t = &self.tickets;
        if t.difficulty > 32 {
            return Err(bad("tickets.difficulty", "must be at most 32"));
        }
        if t.challenge_ttl_s == 0
            || t.ticket_ttl_s == 0
            || t.challenge_ttl_s > 86_400
            || t.ticket_ttl_s > 86_400
        {
            return Err(bad(
                "tickets.ticket_ttl_s",
                "challenge_ttl_s and ticket_ttl_s must be between 1 and 86400",
            ));
        }
        let b = &self.breaker;
        if !(b.failure_ratio > 0.0 && b.failure_ratio <= 1.0) {
            return Err(bad(
                "breaker.failure_ratio",
                "must be above 0 and at most 1",
            ));
        }
        if b.open_ms == 0 || b.window_ms == 0 || b.open_ms > 600_000 || b.window_ms > 600_000 {
            return Err(bad(
                "breaker.open_ms",
                "open_ms and window_ms must be between 1 and 600000",
            ));
        }
        if b.min_calls == 0 {
            return Err(bad(
                "breaker.min_calls",
                "must be at least 1 (0 would open the breaker on any call)",
            ));
        }
        if b.slow_call_ms == 0 || b.slow_call_ms >= self.redis_client.command_timeout_ms {
            return Err(bad(
                "breaker.slow_call_ms",
                "must be above 0 and below redis_client.command_timeout_ms",
            ));
        }
        if self.control.max_clock_skew_ms < 100 {
            return Err(bad(
                "control.max_clock_skew_ms",
                "must be at least 100 (the offset is measured to within 20 ms)",
            ));
        }
        if self.worker.name.is_empty()
            || !self
                .worker
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad(
                "worker.name",
                "1 or more of letters, digits, '-' and '_'",
            ));
        }
        if self.control.poll_ms > 1000 {
            return Err(bad(
                "control.poll_ms",
                "must be at most 1000 (nodes apply changes within 1 s)",
            ));
        }
        let admin_listen = match self.admin.listen.trim() {
            "" => None,
            a => Some(a.parse::<SocketAddr>().map_err(|_| {
                bad(
                    "admin.listen",
                    format!("'{a}' is not host:port (or \"\" for off)"),
                )
            })?),
        };
        if admin_listen.is_some_and(|a| a == listen) {
            return Err(bad("admin.listen", "must differ from listen"));
        }
        // Series of campaigns kept longer than a month are a slow leak, not history:
        // history is Prometheus's job.
        if self.metrics.ended_campaign_ttl_s > 30 * 86_400 {
            return Err(bad(
                "metrics.ended_campaign_ttl_s",
                "must be at most 2592000 (30 days)",
            ));
        }
        let admin_token = self.admin.token.clone().filter(|t| !t.is_empty());
        if admin_listen.is_some_and(|a| !a.ip().is_loopback()) && admin_token.is_none() {
            return Err(bad(
                "admin.token",
                "the admin listener is beyond loopback: set admin.token (SECKILL_ADMIN_TOKEN), or listen on 127.0.0.1",
            ));
        }
        if self.demo_issuer && !listen.ip().is_loopback() {
            return Err(bad(
                "demo_issuer",
                format!(
                    "the demo issuer signs a token for any user id, so it serves only on a loopback listener, not {listen}; turn it off (--demo-issuer=false) and let the shop issue tokens"
                ),
            ));
        }
        if self.token_ttl_s > self.max_token_ttl_s {
            return Err(bad("token_ttl_s", "must be at most max_token_ttl_s"));
        }
        let node = match &self.node {
            Some(n)
                if !(1..=64).contains(&n.len())
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(&b)) =>
            {
                return Err(bad(
                    "node",
                    "1 to 64 of letters, digits, '-', '_', ':' and '.'",
                ));
            }
            Some(n) => n.clone(),
            None => format!("{}:{}", hostname(), listen.port()),
        };
        Ok(Settings {
            node,
            started_ms: seckill_core::now_ms(),
            listen,
            redis_url,
            redis,
            shards,
            pin_shards: self.pin_shards,
            demo_issuer: self.demo_issuer,
            secret,
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

/// A signing secret from a file only its owner may read, counted in raw bytes.
fn read_secret(path: &Path, field: &str) -> Result<Secret, ConfigError> {
    seckill_core::secrets::read_secret(path).map_err(|e| bad(field, e))
}

/// This machine's name, for node names.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_secret(text: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        seckill_core::secrets::create_private(&secret, b"a secret of more than thirty-two bytes\n")
            .expect("write");
        let mut c = Config::from_toml(text).expect("parses");
        c.secret_file = secret;
        (dir, c)
    }

    #[test]
    fn defaults_are_valid() {
        let (_d, c) = with_secret("");
        let s = c.validate().expect("valid");
        assert_eq!(s.redis[0].port, 6390);
        assert!(s.shards >= 1);
    }

    #[test]
    fn the_file_sets_nested_fields() {
        let (_d, c) =
            with_secret("listen = \"127.0.0.1:9000\"\nshards = 2\n[http]\nmax_body_bytes = 1000\n");
        let s = c.validate().expect("valid");
        assert_eq!(s.listen.port(), 9000);
        assert_eq!(s.shards, 2);
        assert_eq!(s.http.max_body_bytes, 1000);
    }

    #[test]
    fn invalid_values_name_their_field() {
        let cases = [
            ("listen = \"nowhere\"", "listen"),
            ("redis = \"http://x\"", "redis"),
            ("shards = 0", "shards"),
            ("[control]\npoll_ms = 5000", "control.poll_ms"),
            ("[http]\nmax_body_bytes = 1", "http.max_body_bytes"),
            (
                "[redis_client]\ncommand_timeout_ms = 0",
                "redis_client.command_timeout_ms",
            ),
            ("[breaker]\nmin_calls = 0", "breaker.min_calls"),
            (
                "[redis_client]\ncommand_timeout_ms = 200",
                "breaker.slow_call_ms",
            ),
            (
                "[control]\nmax_clock_skew_ms = 10",
                "control.max_clock_skew_ms",
            ),
            (
                "[http]\nmax_connections_per_shard = 100\nmax_event_streams_per_shard = 100",
                "http.max_event_streams_per_shard",
            ),
            (
                "[http]\nmax_event_streams_per_client = 0",
                "http.max_event_streams_per_client",
            ),
            ("[worker]\nnice = 20", "worker.nice"),
        ];
        for (text, field) in cases {
            let (_d, c) = with_secret(text);
            let err = c.validate().expect_err(text);
            assert_eq!(err.field, field, "{text}: {err}");
        }
    }

    #[test]
    fn unknown_or_mistyped_fields_are_refused_by_name() {
        let err = Config::from_toml("shards = \"two\"").expect_err("type");
        assert_eq!(err.field, "shards", "{err}");
        let err = Config::from_toml("[http]\nmax_headers = -1").expect_err("type");
        assert_eq!(err.field, "http.max_headers", "{err}");
        let err = Config::from_toml("lisen = \"x\"").expect_err("unknown");
        assert!(err.to_string().contains("lisen"), "{err}");
    }

    #[test]
    fn a_missing_short_or_shared_secret_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, mut c) = with_secret("");
        c.secret_file = dir.path().join("absent");
        assert_eq!(c.validate().expect_err("absent").field, "secret_file");
        // Six bytes of 0xff are six bytes, however a lossy conversion would count them.
        for short in [&b"short"[..], &[0xff; 6], &[0xff; 31]] {
            let p = dir.path().join(format!("short{}", short.len()));
            seckill_core::secrets::create_private(&p, short).expect("write");
            c.secret_file = p;
            assert_eq!(c.validate().expect_err("short").field, "secret_file");
        }
        let p = dir.path().join("raw");
        seckill_core::secrets::create_private(&p, &[0xff; 32]).expect("write");
        c.secret_file = p.clone();
        assert!(c.validate().is_ok(), "32 raw bytes are enough");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = c.validate().expect_err("world-readable");
        assert_eq!(err.field, "secret_file");
        assert!(err.problem.contains("chmod 600"), "{err}");
    }

    #[test]
    fn the_demo_issuer_and_an_open_admin_listener_stay_on_loopback() {
        let (_d, c) = with_secret("listen = \"0.0.0.0:8080\"\ndemo_issuer = true");
        let err = c.validate().expect_err("demo issuer beyond loopback");
        assert_eq!(err.field, "demo_issuer");
        assert!(err.problem.contains("loopback"), "{err}");
        let (_d, c) = with_secret("listen = \"127.0.0.1:8080\"\ndemo_issuer = true");
        assert!(c.validate().is_ok());
        let (_d, c) = with_secret("[metrics]\nended_campaign_ttl_s = 2592001");
        assert_eq!(
            c.validate().expect_err("too long").field,
            "metrics.ended_campaign_ttl_s"
        );
        let (_d, c) = with_secret("");
        assert_eq!(c.metrics.ended_campaign_ttl_s, 3600);
        let (_d, c) = with_secret("[admin]\nlisten = \"0.0.0.0:9090\"");
        assert_eq!(c.validate().expect_err("no token").field, "admin.token");
        let (_d, c) = with_secret("[admin]\nlisten = \"0.0.0.0:9090\"\ntoken = \"t0ken\"");
        assert!(c.validate().is_ok());
    }

    #[test]
    fn the_built_in_defaults_are_the_production_ones() {
        let c = Config::default();
        assert!(!c.demo_issuer);
        assert!(c.limits.ip_rate > 0.0 && c.limits.user_rate > 0.0);
        assert_eq!(c.admin.listen, "127.0.0.1:9090");
        // And so is the file a node reads when given none.
        let shipped = Config::from_toml(include_str!("../../../config/dataplane.toml"))
            .expect("config/dataplane.toml parses");
        assert!(!shipped.demo_issuer);
        assert!(shipped.limits.ip_rate > 0.0 && shipped.limits.user_rate > 0.0);
        assert!(shipped
            .admin
            .listen
            .parse::<SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback()));
    }

    #[test]
    fn a_missing_default_file_means_defaults() {
        let p = Path::new("/nonexistent/dataplane.toml");
        assert!(Config::load(p, false).is_ok());
        assert_eq!(Config::load(p, true).expect_err("named").field, "config");
    }
}
