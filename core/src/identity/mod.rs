//! Shoppers' identity: JWT access tokens (RFC 7519, profile RFC 9068) from the shop's
//! identity provider, checked as RFC 8725 says against the public keys the shop publishes
//! as a JWKS (RFC 7517).
//!
//! - [`KeySet`]: the keys a node trusts, each pinned to one algorithm by its `kty`/`crv`
//!   (Ed25519 → EdDSA, P-256 → ES256, RSA of 2048 bits or more → RS256). No symmetric key
//!   is ever taken: a node holds the shop's public keys only.
//! - [`verify`]: a token's header names its key (`kid`) and an algorithm, which must be its
//!   key's; then the signature (ES256 and RS256 checked with ring), the issuer, the audience and the
//!   times.
//! - [`Signer`]: a private key that mints such tokens: the demo issuer's, a shop's key
//!   file made by `seckill-dataplane keys new`, the simulator's and the tests'.

mod jwks;
mod ring_verify;
mod signer;

pub use jwks::{KeySet, PublicKey};
pub use signer::{Alg, Signer};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::Validation;
use serde::Deserialize;

use crate::auth::valid_user_id;

/// What a shopper's token must say of its issuer, audience and times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// `iss` must equal this.
    pub issuer: String,
    /// `aud` must be or contain this.
    pub audience: String,
    /// Clocks disagree: `exp`, `nbf` and `iat` are honoured this far either way.
    pub leeway_s: u64,
    /// A token expiring further ahead than this is refused, whatever its issuer wrote.
    pub max_ttl_s: u64,
}

/// A verified token's shopper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shopper {
    pub user: String,
    /// The token's `exp`, in ms since the epoch.
    pub expires_ms: i64,
}

/// Why a token is refused; [`Refused::says`] is what the shopper is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("malformed token")]
    Malformed,
    #[error("the token's algorithm is not taken")]
    Algorithm,
    #[error("the token's key is not known")]
    UnknownKey,
    #[error("bad signature")]
    Signature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("token lives longer than allowed")]
    TooLong,
    #[error("wrong issuer")]
    Issuer,
    #[error("wrong audience")]
    Audience,
    #[error("a required claim is missing")]
    MissingClaim,
    #[error("the subject is not a valid user id")]
    Subject,
}

impl Refused {
    /// The message of a `401`.
    pub fn says(self) -> &'static str {
        match self {
            Refused::Malformed => "malformed token",
            Refused::Algorithm => "token algorithm not accepted",
            Refused::UnknownKey => "token signed by an unknown key",
            Refused::Signature => "invalid token signature",
            Refused::Expired => "token expired",
            Refused::NotYetValid => "token not yet valid",
            Refused::TooLong => "token lives longer than max_token_ttl_s allows",
            Refused::Issuer => "token from another issuer",
            Refused::Audience => "token for another audience",
            Refused::MissingClaim => "token lacks a required claim (sub, iss, aud, exp)",
            Refused::Subject => "token subject is not a valid user id",
        }
    }
}

/// The claims read from a shopper's token; `iss` and `aud` are checked by the JOSE
/// library, the times here, on the node's clock.
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    /// One string (RFC 7519 §4.1.1): a list, which the library would search, is refused.
    #[allow(dead_code)]
    iss: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
    iat: Option<f64>,
}

/// The shopper a token names, when its key is one of `keys`, its algorithm is its key's,
/// its signature holds and its claims meet `rules` at `now_ms`.
pub fn verify(keys: &KeySet, rules: &Rules, token: &str, now_ms: i64) -> Result<Shopper, Refused> {
    ring_verify::install();
    let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::InvalidAlgorithmName | ErrorKind::MissingAlgorithm => Refused::Algorithm,
        _ => Refused::Malformed,
    })?;
    if !Alg::ALL.iter().any(|a| a.jose() == header.alg) {
        return Err(Refused::Algorithm);
    }
    let key = header
        .kid
        .as_deref()
        .and_then(|kid| keys.get(kid))
        .ok_or(Refused::UnknownKey)?;
    if key.alg().jose() != header.alg {
        return Err(Refused::Algorithm);
    }
    let claims =
        jsonwebtoken::decode::<Claims>(token, key.decoding(), &validation(key.alg(), rules))
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature => Refused::Signature,
                ErrorKind::InvalidIssuer => Refused::Issuer,
                ErrorKind::InvalidAudience => Refused::Audience,
                ErrorKind::MissingRequiredClaim(_) => Refused::MissingClaim,
                ErrorKind::InvalidAlgorithm => Refused::Algorithm,
                _ => Refused::Malformed,
            })?
            .claims;
    // Present: the library refuses a token without them.
    let (Some(user), Some(exp)) = (claims.sub, claims.exp) else {
        return Err(Refused::MissingClaim);
    };
    times(exp, claims.nbf, claims.iat, rules, now_ms)?;
    if !valid_user_id(&user) {
        return Err(Refused::Subject);
    }
    Ok(Shopper {
        user,
        expires_ms: (exp * 1000.0) as i64,
    })
}

/// The JOSE library's checks: one algorithm, the issuer, the audience, the claims a
/// shopper's token must carry. The times are [`times`]'.
fn validation(alg: Alg, rules: &Rules) -> Validation {
    let mut v = Validation::new(alg.jose());
    v.set_issuer(&[&rules.issuer]);
    v.set_audience(&[&rules.audience]);
    v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    v.validate_exp = false;
    v.validate_nbf = false;
    v
}

/// `exp` ahead of now, and no further than the cap; `nbf` and `iat` not ahead of now:
/// each with the leeway.
fn times(
    exp: f64,
    nbf: Option<f64>,
    iat: Option<f64>,
    rules: &Rules,
    now_ms: i64,
) -> Result<(), Refused> {
    let now = now_ms as f64 / 1000.0;
    let leeway = rules.leeway_s as f64;
    if !exp.is_finite() || exp + leeway <= now {
        return Err(Refused::Expired);
    }
    if exp > now + rules.max_ttl_s as f64 + leeway {
        return Err(Refused::TooLong);
    }
    let ahead = |t: Option<f64>| t.is_some_and(|t| !t.is_finite() || t > now + leeway);
    if ahead(nbf) || ahead(iat) {
        return Err(Refused::NotYetValid);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
