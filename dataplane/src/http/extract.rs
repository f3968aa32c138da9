//! What a request's head says of its sender, read below the routes: the client's address
//! and the guard's verdict on it, the user its bearer token names, the `Idempotency-Key`
//! it repeats, and the id its log lines carry. Each header is looked up once; the routes
//! and the quick lane take the values from here and never read the head themselves.

use hyper::header::{HeaderName, AUTHORIZATION};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Instant;

use super::reply::ApiError;
use super::request::{self, Headers};
use crate::guard;
use crate::shard::Shard;
use seckill_core::identity::{self, Refused};

/// Header names looked up or set on every request, parsed once.
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The client's address (`X-Forwarded-For` counts only from trusted proxies) and the
/// shard's verdict on it: blacklist and per-IP bucket.
pub(crate) fn admit_ip(
    shard: &Shard,
    headers: &(impl Headers + ?Sized),
    peer: IpAddr,
    now: Instant,
) -> (IpAddr, Result<(), ApiError>) {
    let trusted = &shard.settings().trusted_proxies;
    // Only a trusted proxy's header counts (`client_ip` checks again), and most peers
    // are none: the header is not looked for.
    let forwarded = if trusted.contains(&peer) {
        headers
            .value(&X_FORWARDED_FOR)
            .and_then(|v| std::str::from_utf8(v).ok())
    } else {
        None
    };
    let ip = guard::client_ip(peer, forwarded, trusted);
    (ip, shard.admit_client(ip, now).map_err(ApiError::from))
}

/// Counts a refusal toward blocking its client: 401, 403 and 429 do.
pub(crate) fn count_refusal(shard: &Shard, ip: IpAddr, e: &ApiError, now: Instant) {
    if matches!(e.status().as_u16(), 401 | 403 | 429) {
        shard.refused(guard::Client::Ip(ip), now);
    }
}

/// A client's own `X-Request-Id` when it is short and plain, else one of the shard's.
pub(crate) fn request_id(shard: &Shard, headers: &(impl Headers + ?Sized)) -> String {
    let given = headers.value(&X_REQUEST_ID);
    match given {
        Some(v)
            if (1..=64).contains(&v.len())
                && v.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b)) =>
        {
            String::from_utf8_lossy(v).into_owned()
        }
        _ => shard.next_request_id(),
    }
}

/// What a shopper's head says of who asks and which earlier request it repeats: the
/// `Authorization` header's value and the `Idempotency-Key`, looked up once and the key
/// checked once, whoever reads them after (the quick lane's look ahead, then the
/// purchase's decision).
pub(crate) struct Asker<'h> {
    authorization: Option<&'h [u8]>,
    idempotency_key: Result<Option<&'h str>, ApiError>,
}

impl<'h> Asker<'h> {
    /// From the two headers' values.
    pub(crate) fn new(authorization: Option<&'h [u8]>, idempotency_key: Option<&'h [u8]>) -> Self {
        Asker {
            authorization,
            idempotency_key: request::idempotency_key(idempotency_key),
        }
    }

    /// From a request's headers.
    pub(crate) fn of(headers: &'h (impl Headers + ?Sized)) -> Self {
        Asker::new(
            headers.value(&AUTHORIZATION),
            headers.value(&IDEMPOTENCY_KEY),
        )
    }

    /// The `Idempotency-Key`, if any; a key that breaks the rules is a bad request.
    pub(crate) fn idempotency_key(&self) -> Result<Option<&'h str>, ApiError> {
        self.idempotency_key.clone()
    }

    /// The user of a token this shard verified before (and not yet expired), found
    /// without checking a signature; `None` for any other.
    pub(crate) fn known_user(&self, shard: &Shard) -> Option<Rc<str>> {
        let token = request::bearer_bytes(self.authorization)?;
        shard.cached_user(token, seckill_core::clock::coarse_now_ms())
    }

    /// The user the bearer token names, admitted by the user's guard (blacklist and
    /// per-user bucket).
    pub(crate) fn user(&self, shard: &Shard) -> Result<Rc<str>, ApiError> {
        let header = self.authorization;
        let now_ms = seckill_core::clock::coarse_now_ms();
        let known = request::bearer_bytes(header).and_then(|t| shard.cached_user(t, now_ms));
        let user = match known {
            Some(user) => user,
            None => {
                let token = request::bearer(header)?;
                let identity = &shard.settings().identity;
                let keys = identity.keyring.keys();
                let shopper =
                    identity::verify(&keys, &identity.rules, token, now_ms).map_err(|why| {
                        if why == Refused::UnknownKey {
                            identity.keyring.unknown_key_seen();
                        }
                        ApiError::Unauthenticated(why.says())
                    })?;
                let user: Rc<str> = shopper.user.into();
                // As long as it verifies: to its expiry and the leeway beyond.
                let until = shopper.expires_ms + identity.rules.leeway_s as i64 * 1000;
                shard.remember_token(token.as_bytes(), user.clone(), until);
                user
            }
        };
        shard.admit_user(&user, Instant::now())?;
        Ok(user)
    }
}

/// The user a request's bearer token names (see [`Asker::user`]), for a route that reads
/// no `Idempotency-Key`.
pub(crate) fn user(shard: &Shard, headers: &(impl Headers + ?Sized)) -> Result<Rc<str>, ApiError> {
    let authorization = headers.value(&AUTHORIZATION);
    Asker {
        authorization,
        idempotency_key: Ok(None),
    }
    .user(shard)
}
