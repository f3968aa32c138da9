//! The blacklist: entries `user:<id>` and `ip:<address>` with an expiry, in one sorted set
//! in Redis (score = expiry in ms). Operators add and remove entries; the automatic rule
//! adds them too; every shard keeps a copy, reloaded when the blacklist's version moves.

use crate::connection::Connection;
use redis::Commands;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use crate::control::ControlError;
use crate::{keys, protocol};

pub fn user_key(user: &str) -> String {
    format!("user:{user}")
}

pub fn ip_key(ip: IpAddr) -> String {
    format!("ip:{ip}")
}

/// Checks an entry name: `user:<valid user id>` or `ip:<address>`.
pub fn parse_entry(entry: &str) -> Result<String, String> {
    if let Some(u) = entry.strip_prefix("user:") {
        if crate::auth::valid_user_id(u) {
            return Ok(user_key(u));
        }
    } else if let Some(ip) = entry.strip_prefix("ip:") {
        if let Ok(ip) = ip.parse::<IpAddr>() {
            return Ok(ip_key(ip));
        }
    }
    Err(format!("'{entry}': expected user:<id> or ip:<address>"))
}

/// A shard's copy: address or user → expiry, as an instant on this machine's clock.
/// Kept by kind, so a lookup needs no key built per request.
#[derive(Debug, Default)]
pub struct Local {
    ips: HashMap<IpAddr, i64>,
    users: HashMap<String, i64>,
    /// The wall clock at `loaded`, to turn expiries in ms into instants.
    loaded_ms: i64,
    loaded: Option<Instant>,
}

impl Local {
    pub fn replace(&mut self, entries: HashMap<String, i64>, now_ms: i64, now: Instant) {
        self.ips.clear();
        self.users.clear();
        for (key, expires_ms) in entries {
            self.insert(key, expires_ms);
        }
        self.loaded_ms = now_ms;
        self.loaded = Some(now);
    }

    /// Adds an entry (`user:<id>` or `ip:<address>`; anything else is ignored) at once,
    /// as the automatic rule does before the reload confirms it.
    pub fn insert(&mut self, key: String, expires_ms: i64) {
        if let Some(ip) = key.strip_prefix("ip:").and_then(|a| a.parse().ok()) {
            self.ips.insert(ip, expires_ms);
        } else if let Some(user) = key.strip_prefix("user:") {
            self.users.insert(user.to_string(), expires_ms);
        }
    }

    pub fn contains_ip(&self, ip: IpAddr, now: Instant) -> bool {
        self.ips.get(&ip).is_some_and(|e| self.live(*e, now))
    }

    pub fn contains_user(&self, user: &str, now: Instant) -> bool {
        self.users.get(user).is_some_and(|e| self.live(*e, now))
    }

    fn live(&self, expires_ms: i64, now: Instant) -> bool {
        let elapsed = self
            .loaded
            .map_or(0, |t| now.saturating_duration_since(t).as_millis() as i64);
        self.loaded_ms + elapsed < expires_ms
    }

    pub fn len(&self) -> usize {
        self.ips.len() + self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Blocks an entry for `ttl_s` seconds.
pub fn add(con: &mut Connection, entry: &str, ttl_s: u64) -> Result<i64, ControlError> {
    let expires = crate::now_ms() + (ttl_s.min(10 * 365 * 86_400) as i64) * 1000;
    for cmd in protocol::block(entry, expires) {
        let _: redis::Value = cmd.query(con)?;
    }
    Ok(expires)
}

pub fn remove(con: &mut Connection, entry: &str) -> Result<bool, ControlError> {
    let n: i64 = con.zrem(keys::BLACKLIST, entry)?;
    for cmd in protocol::blacklist_changed() {
        let _: redis::Value = cmd.query(con)?;
    }
    Ok(n > 0)
}

/// Entries not expired yet, with their expiry (ms); expired ones are dropped on the way.
pub fn list(con: &mut Connection) -> Result<Vec<(String, i64)>, ControlError> {
    let now = crate::now_ms();
    let _: i64 = con.zrembyscore(keys::BLACKLIST, "-inf", now)?;
    let v: redis::Value = protocol::blacklist(now).query(con)?;
    let mut entries: Vec<(String, i64)> = protocol::read_blacklist(&v).into_iter().collect();
    entries.sort_by_key(|(_, until)| *until);
    Ok(entries)
}
