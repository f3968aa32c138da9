//! The defences a shard applies before Redis: token buckets per client IP, per user and
//! per campaign (admission), the blacklist, and automatic blocking of keys that keep
//! getting refused. All of it is shard-local; limits and the blacklist come from the
//! control plane and change live.

pub mod breaker;
pub mod bucket;
pub mod tokens;

pub use seckill_core::limits::Limits;
pub use seckill_core::{blacklist, pow};

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use bucket::BucketMap;

/// Why the guard refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Blocked,
    RateLimited { retry_after: Duration },
    Busy { retry_after: Duration },
}

/// A client that a refusal counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client<'a> {
    Ip(IpAddr),
    User(&'a str),
}

impl Client<'_> {
    /// Its blacklist entry: `ip:<address>` or `user:<id>`.
    pub fn key(&self) -> String {
        match self {
            Client::Ip(ip) => blacklist::ip_key(*ip),
            Client::User(user) => blacklist::user_key(user),
        }
    }
}

/// Refusals counted in the current window: when it began, and how many.
type Window = (Instant, u32);

/// A shard's defences.
pub struct Guard {
    pub limits: Limits,
    shards: usize,
    ips: BucketMap<IpAddr>,
    users: BucketMap<String>,
    admission: HashMap<String, bucket::Bucket>,
    /// Refusals per client in the current window, for automatic blocking.
    refused_ips: HashMap<IpAddr, Window>,
    refused_users: HashMap<String, Window>,
    pub blacklist: blacklist::Local,
    max_keys: usize,
}

impl Guard {
    pub fn new(limits: Limits, shards: usize, max_keys: usize) -> Self {
        Guard {
            limits,
            shards: shards.max(1),
            ips: BucketMap::new(max_keys),
            users: BucketMap::new(max_keys),
            admission: HashMap::new(),
            refused_ips: HashMap::new(),
            refused_users: HashMap::new(),
            blacklist: blacklist::Local::default(),
            max_keys,
        }
    }

    pub fn check_ip(&mut self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        if self.blacklist.contains_ip(ip, now) {
            return Err(Refusal::Blocked);
        }
        let l = self.limits;
        self.ips
            .take(&ip, now, l.ip_rate, l.ip_burst)
            .map_err(|retry_after| Refusal::RateLimited { retry_after })
    }

    pub fn check_user(&mut self, user: &str, now: Instant) -> Result<(), Refusal> {
        if self.blacklist.contains_user(user, now) {
            return Err(Refusal::Blocked);
        }
        let l = self.limits;
        self.users
            .take(user, now, l.user_rate, l.user_burst)
            .map_err(|retry_after| Refusal::RateLimited { retry_after })
    }

    /// A purchase about to go to Redis: this shard's share of the campaign's admission.
    pub fn admit(&mut self, campaign: &str, now: Instant) -> Result<(), Refusal> {
        let l = self.limits;
        if l.admission_rate <= 0.0 {
            return Ok(());
        }
        let (rate, burst) = (
            l.admission_rate / self.shards as f64,
            (l.admission_burst / self.shards as f64).max(1.0),
        );
        let bucket = match self.admission.get_mut(campaign) {
            Some(b) => b,
            None => self
                .admission
                .entry(campaign.to_string())
                .or_insert_with(|| bucket::Bucket::full(burst, now)),
        };
        bucket
            .take(now, rate, burst)
            .map_err(|retry_after| Refusal::Busy { retry_after })
    }

    /// Counts a refusal against a client; true when it crossed the automatic blocking
    /// threshold just now. Nothing is allocated for a client already counted.
    pub fn refused(&mut self, client: Client<'_>, now: Instant) -> bool {
        let l = self.limits;
        if l.auto_block_refusals == 0 {
            return false;
        }
        let window = Duration::from_secs(l.auto_block_window_s.max(1));
        let count = match client {
            Client::Ip(ip) => count(&mut self.refused_ips, &ip, now, window, self.max_keys),
            Client::User(u) => count(&mut self.refused_users, u, now, window, self.max_keys),
        };
        count == Some(l.auto_block_refusals)
    }
}

/// Counts one refusal of `key` in `map`'s current window and returns the window's count;
/// `None` when the map holds `max_keys` clients refused within their windows and `key`
/// is not one of them.
fn count<K, Q>(
    map: &mut HashMap<K, Window>,
    key: &Q,
    now: Instant,
    window: Duration,
    max_keys: usize,
) -> Option<u32>
where
    K: Borrow<Q> + Hash + Eq,
    Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
{
    let e = match map.get_mut(key) {
        Some(e) => e,
        None => {
            if map.len() >= max_keys {
                map.retain(|_, (start, _)| now.saturating_duration_since(*start) < window);
                if map.len() >= max_keys {
                    return None;
                }
            }
            map.entry(key.to_owned()).or_insert((now, 0))
        }
    };
    if now.saturating_duration_since(e.0) >= window {
        *e = (now, 0);
    }
    e.1 += 1;
    Some(e.1)
}

/// The client's address: the peer, or — only when the peer is a trusted proxy — the
/// nearest address in `X-Forwarded-For` that is not a trusted proxy itself.
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[IpAddr]) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let Some(chain) = forwarded_for else {
        return peer;
    };
    chain
        .rsplit(',')
        .map(|a| a.trim().parse::<IpAddr>())
        .take_while(Result::is_ok)
        .flatten()
        .find(|a| !trusted.contains(a))
        .unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn forwarded_for_counts_only_from_trusted_proxies() {
        let trusted = [ip("10.0.0.1"), ip("10.0.0.2")];
        let xff = Some("203.0.113.7, 198.51.100.3, 10.0.0.2");
        assert_eq!(client_ip(ip("10.0.0.1"), xff, &trusted), ip("198.51.100.3"));
        assert_eq!(client_ip(ip("192.0.2.9"), xff, &trusted), ip("192.0.2.9"));
        assert_eq!(client_ip(ip("10.0.0.1"), None, &trusted), ip("10.0.0.1"));
        assert_eq!(
            client_ip(ip("10.0.0.1"), Some("garbage"), &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn limits_are_set_by_name_and_checked() {
        let mut l = Limits::default();
        l.set("ip_rate", "7.5").expect("set");
        assert_eq!(l.ip_rate, 7.5);
        assert!(l.set("ip_rate", "-1").is_err());
        assert!(l.set("ip_rate", "NaN").is_err());
        assert!(l.set("auto_block_ttl_s", "1.5").is_err());
        assert!(l
            .set("colour", "1")
            .expect_err("unknown")
            .contains("colour"));
    }

    #[test]
    fn admission_is_split_over_the_shards() {
        let t0 = Instant::now();
        let limits = Limits {
            admission_rate: 10.0,
            admission_burst: 4.0,
            ..Limits::default()
        };
        let mut g = Guard::new(limits, 2, 100);
        assert!(g.admit("c", t0).is_ok());
        assert!(g.admit("c", t0).is_ok());
        assert!(matches!(g.admit("c", t0), Err(Refusal::Busy { .. })));
        assert!(g.admit("other", t0).is_ok(), "per campaign");
    }

    #[test]
    fn a_full_map_counts_no_new_client_until_a_window_ends() {
        let t0 = Instant::now();
        let limits = Limits {
            auto_block_refusals: 2,
            auto_block_window_s: 10,
            ..Limits::default()
        };
        let mut g = Guard::new(limits, 1, 2);
        assert!(!g.refused(Client::User("a"), t0));
        assert!(!g.refused(Client::User("b"), t0));
        assert!(!g.refused(Client::User("c"), t0));
        assert!(!g.refused(Client::User("c"), t0), "c is not counted");
        assert!(g.refused(Client::User("a"), t0), "a still is");
        let later = t0 + Duration::from_secs(11);
        assert!(!g.refused(Client::User("c"), later));
        assert!(
            g.refused(Client::User("c"), later),
            "counted once a window ended"
        );
    }

    #[test]
    fn a_key_refused_often_enough_is_flagged_once() {
        let t0 = Instant::now();
        let limits = Limits {
            auto_block_refusals: 3,
            auto_block_window_s: 10,
            ..Limits::default()
        };
        let mut g = Guard::new(limits, 1, 100);
        let client = Client::Ip(ip("1.2.3.4"));
        let flags: Vec<bool> = (0..5).map(|_| g.refused(client, t0)).collect();
        assert_eq!(flags, [false, false, true, false, false]);
        // A user is counted apart from the address it comes from.
        assert!(!g.refused(Client::User("alice"), t0));
        // A new window starts over.
        assert!(!g.refused(client, t0 + Duration::from_secs(11)));
        assert_eq!(client.key(), "ip:1.2.3.4");
        assert_eq!(Client::User("alice").key(), "user:alice");
    }
}
