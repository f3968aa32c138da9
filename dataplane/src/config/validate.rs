//! The configuration's checks, one function per section: each names the field that is
//! wrong, the way an operator would write it in the file (`http.max_body_bytes`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;

use seckill_core::identity::{KeySet, PublicKey, Rules};

use super::{
    bad, AdminConfig, Config, ConfigError, ControlConfig, HttpConfig, IdentityConfig,
    MetricsConfig, RedisClientConfig, RedisTarget, TicketConfig, WorkerConfig,
};
use crate::guard::breaker::BreakerConfig;
use crate::guard::Limits;
use crate::identity::{Identity, KeySource, Keyring};

fn at_least(field: &str, v: usize, min: usize) -> Result<(), ConfigError> {
    if v < min {
        return Err(bad(field, format!("must be at least {min}")));
    }
    Ok(())
}

pub(super) fn positive(field: &str, v: u64) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(bad(field, "must be greater than 0"));
    }
    Ok(())
}

fn at_most(field: &str, v: u64, max: u64) -> Result<(), ConfigError> {
    if v > max {
        return Err(bad(field, format!("must be at most {max}")));
    }
    Ok(())
}

/// The address every shard listens on.
pub(super) fn listen(listen: &str) -> Result<SocketAddr, ConfigError> {
    listen
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| bad("listen", format!("'{listen}' is not a host:port address")))
}

/// The Redis URL with its password, and the servers it names.
pub(super) fn redis(
    url: &str,
    password_file: Option<&Path>,
) -> Result<(String, Vec<RedisTarget>), ConfigError> {
    let redis_url = seckill_core::secrets::redis_url(url, password_file)
        .map_err(|e| bad("redis_password_file", e))?;
    let targets = redis_url
        .split(',')
        .map(|u| RedisTarget::parse(u.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("redis", e))?;
    Ok((redis_url, targets))
}

/// The number of shards: one per core unless set.
pub(super) fn shards(shards: Option<usize>) -> Result<usize, ConfigError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = shards.unwrap_or(cores);
    if shards == 0 || shards > 256 {
        return Err(bad("shards", "must be between 1 and 256"));
    }
    Ok(shards)
}

/// `[http]`; gives the trusted proxies' addresses.
pub(super) fn http(h: &HttpConfig) -> Result<Vec<IpAddr>, ConfigError> {
    at_least("http.max_header_bytes", h.max_header_bytes, 1024)?;
    at_least("http.max_headers", h.max_headers, 4)?;
    at_least("http.max_body_bytes", h.max_body_bytes, 64)?;
    at_least(
        "http.max_connections_per_shard",
        h.max_connections_per_shard,
        1,
    )?;
    at_least("http.listen_backlog", h.listen_backlog as usize, 1)?;
    at_least(
        "http.max_event_streams_per_client",
        h.max_event_streams_per_client as usize,
        1,
    )?;
    at_least(
        "http.max_event_streams_per_shard",
        h.max_event_streams_per_shard,
        1,
    )?;
    if h.max_event_streams_per_shard >= h.max_connections_per_shard {
        return Err(bad(
            "http.max_event_streams_per_shard",
            "must be below http.max_connections_per_shard",
        ));
    }
    positive("http.header_timeout_ms", h.header_timeout_ms)?;
    positive("http.idle_timeout_ms", h.idle_timeout_ms)?;
    at_most("http.header_timeout_ms", h.header_timeout_ms, 86_400_000)?;
    at_most("http.idle_timeout_ms", h.idle_timeout_ms, 86_400_000)?;
    at_most("http.shutdown_grace_ms", h.shutdown_grace_ms, 600_000)?;
    at_most("http.drain_ms", h.drain_ms, 600_000)?;
    let trusted_proxies = h
        .trusted_proxies
        .iter()
        .map(|p| {
            p.parse::<IpAddr>().map_err(|_| {
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
    Ok(trusted_proxies)
}

/// `[redis_client]`.
pub(super) fn redis_client(r: &RedisClientConfig) -> Result<(), ConfigError> {
    positive("redis_client.connect_timeout_ms", r.connect_timeout_ms)?;
    positive("redis_client.command_timeout_ms", r.command_timeout_ms)?;
    positive("redis_client.max_backoff_ms", r.max_backoff_ms)?;
    at_most(
        "redis_client.connect_timeout_ms",
        r.connect_timeout_ms,
        10_000,
    )?;
    at_most(
        "redis_client.command_timeout_ms",
        r.command_timeout_ms,
        60_000,
    )?;
    at_most("redis_client.max_backoff_ms", r.max_backoff_ms, 60_000)?;
    if r.wait_replicas > 0 && (r.wait_timeout_ms == 0 || r.wait_timeout_ms >= r.command_timeout_ms)
    {
        return Err(bad(
            "redis_client.wait_timeout_ms",
            "must be between 1 and redis_client.command_timeout_ms - 1",
        ));
    }
    Ok(())
}

/// `[control]`.
pub(super) fn control(c: &ControlConfig) -> Result<(), ConfigError> {
    positive("control.poll_ms", c.poll_ms)?;
    positive("control.rebalance_ms", c.rebalance_ms)?;
    positive("control.max_clock_skew_ms", c.max_clock_skew_ms)?;
    if c.max_clock_skew_ms < 100 {
        return Err(bad(
            "control.max_clock_skew_ms",
            "must be at least 100 (the offset is measured to within 20 ms)",
        ));
    }
    if c.poll_ms > 1000 {
        return Err(bad(
            "control.poll_ms",
            "must be at most 1000 (nodes apply changes within 1 s)",
        ));
    }
    Ok(())
}

/// The lifetimes of tokens and download links.
pub(super) fn lifetimes(c: &Config) -> Result<(), ConfigError> {
    positive("token_ttl_s", c.token_ttl_s)?;
    positive("max_token_ttl_s", c.max_token_ttl_s)?;
    positive("download_ttl_s", c.download_ttl_s)?;
    at_most("download_ttl_s", c.download_ttl_s, 365 * 86_400)?;
    at_most("token_ttl_s", c.token_ttl_s, 365 * 86_400)?;
    at_most("max_token_ttl_s", c.max_token_ttl_s, 30 * 86_400)?;
    if c.token_ttl_s > c.max_token_ttl_s {
        return Err(bad("token_ttl_s", "must be at most max_token_ttl_s"));
    }
    Ok(())
}

/// `[worker]`.
pub(super) fn worker(w: &WorkerConfig) -> Result<(), ConfigError> {
    positive("worker.claim_idle_ms", w.claim_idle_ms)?;
    positive("worker.batch", w.batch as u64)?;
    at_most("worker.nice", u64::from(w.nice), 19)?;
    if w.name.is_empty()
        || !w
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(bad(
            "worker.name",
            "1 or more of letters, digits, '-' and '_'",
        ));
    }
    Ok(())
}

/// `[limits]`: the guard's own checks, named under the section.
pub(super) fn limits(l: &Limits) -> Result<(), ConfigError> {
    l.validate()
        .map_err(|(field, problem)| bad(&format!("limits.{field}"), problem))
}

/// `[tickets]`.
pub(super) fn tickets(t: &TicketConfig) -> Result<(), ConfigError> {
    at_most("tickets.window_s", t.window_s, 7 * 86_400)?;
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
    Ok(())
}

/// `[breaker]`: a slow call is one well before Redis's command timeout.
pub(super) fn breaker(
    b: &BreakerConfig,
    redis_client: &RedisClientConfig,
) -> Result<(), ConfigError> {
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
    if b.slow_call_ms == 0 || b.slow_call_ms >= redis_client.command_timeout_ms {
        return Err(bad(
            "breaker.slow_call_ms",
            "must be above 0 and below redis_client.command_timeout_ms",
        ));
    }
    Ok(())
}

/// `[admin]`: its address (none when off) and its token. A listener beyond loopback
/// needs a token.
pub(super) fn admin(
    a: &AdminConfig,
    listen: SocketAddr,
) -> Result<(Option<SocketAddr>, Option<String>), ConfigError> {
    let admin_listen = match a.listen.trim() {
        "" => None,
        addr => Some(addr.parse::<SocketAddr>().map_err(|_| {
            bad(
                "admin.listen",
                format!("'{addr}' is not host:port (or \"\" for off)"),
            )
        })?),
    };
    if admin_listen.is_some_and(|a| a == listen) {
        return Err(bad("admin.listen", "must differ from listen"));
    }
    let admin_token = a.token.clone().filter(|t| !t.is_empty());
    if admin_listen.is_some_and(|a| !a.ip().is_loopback()) && admin_token.is_none() {
        return Err(bad(
            "admin.token",
            "the admin listener is beyond loopback: set admin.token (SECKILL_ADMIN_TOKEN), or listen on 127.0.0.1",
        ));
    }
    Ok((admin_listen, admin_token))
}

/// `[metrics]`. Series of campaigns kept longer than a month are a slow leak, not
/// history: history is Prometheus's job.
pub(super) fn metrics(m: &MetricsConfig) -> Result<(), ConfigError> {
    if m.ended_campaign_ttl_s > 30 * 86_400 {
        return Err(bad(
            "metrics.ended_campaign_ttl_s",
            "must be at most 2592000 (30 days)",
        ));
    }
    Ok(())
}

/// The demo issuer signs a token for any user id: it serves only on loopback, and not
/// behind a proxy, which would bring it requests from anywhere.
pub(super) fn demo_issuer(
    on: bool,
    listen: SocketAddr,
    trusted_proxies: &[std::net::IpAddr],
) -> Result<(), ConfigError> {
    if on && !trusted_proxies.is_empty() {
        return Err(bad(
            "demo_issuer",
            "the demo issuer signs a token for any user id, so it does not serve behind a proxy (http.trusted_proxies is set); turn it off (--demo-issuer=false) and let the shop issue tokens",
        ));
    }
    if on && !listen.ip().is_loopback() {
        return Err(bad(
            "demo_issuer",
            format!(
                "the demo issuer signs a token for any user id, so it serves only on a loopback listener, not {listen}; turn it off (--demo-issuer=false) and let the shop issue tokens"
            ),
        ));
    }
    Ok(())
}

/// This node's name in the fleet's telemetry: as set, or `hostname:port`.
pub(super) fn node(node: Option<&str>, listen: SocketAddr) -> Result<String, ConfigError> {
    match node {
        Some(n)
            if !(1..=64).contains(&n.len())
                || !n
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(&b)) =>
        {
            Err(bad(
                "node",
                "1 to 64 of letters, digits, '-', '_', ':' and '.'",
            ))
        }
        Some(n) => Ok(n.to_string()),
        None => Ok(format!("{}:{}", hostname(), listen.port())),
    }
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

/// `[identity]`: where the shop's keys come from and the claims their tokens must
/// carry; with the demo issuer alone, its key. A node serving shoppers reads the shop's
/// keys at start and needs them, or the demo issuer ([`Identity::load_keys`]); an order
/// worker, which reads the same file, needs neither.
pub(super) fn identity(
    c: &IdentityConfig,
    max_token_ttl_s: u64,
    demo: Option<PublicKey>,
) -> Result<Identity, ConfigError> {
    let source = match (&c.jwks_file, &c.jwks_url) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "identity.jwks_url",
                "give the shop's keys one way: jwks_file or jwks_url",
            ))
        }
        (Some(path), None) => Some(KeySource::File(path.clone())),
        (None, Some(url)) => {
            if !url.starts_with("https://") {
                return Err(bad(
                    "identity.jwks_url",
                    format!("{url}: the shop's keys are fetched over https:// only"),
                ));
            }
            Some(KeySource::Url {
                url: url.clone(),
                ca_file: c.jwks_ca_file.clone(),
            })
        }
        (None, None) => None,
    };
    if c.jwks_ca_file.is_some() && c.jwks_url.is_none() {
        return Err(bad(
            "identity.jwks_ca_file",
            "trusts the server of jwks_url, which is not set",
        ));
    }
    at_most("identity.leeway_s", c.leeway_s, 300)?;
    if c.audience.is_empty() {
        return Err(bad("identity.audience", "must not be empty"));
    }
    // Without the shop's keys, the demo issuer's tokens carry an issuer of its own; with
    // them, the shop's, which `load_keys` requires.
    let issuer = match (&c.issuer, &source) {
        (Some(i), _) => i.clone(),
        (None, Some(_)) => String::new(),
        (None, None) => "seckill-demo".into(),
    };
    Ok(Identity {
        rules: Rules {
            issuer,
            audience: c.audience.clone(),
            leeway_s: c.leeway_s,
            max_ttl_s: max_token_ttl_s,
        },
        keyring: Arc::new(Keyring::new(KeySet::default(), demo)),
        source,
    })
}
