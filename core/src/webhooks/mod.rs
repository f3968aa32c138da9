//! Standard Webhooks (<https://www.standardwebhooks.com>): how a payment provider's
//! webhooks are verified, and how the webhooks a node sends are signed.
//!
//! A webhook carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature`: space-separated `version,base64` signatures over
//! `id.timestamp.body`. `v1` is HMAC-SHA256 under a symmetric secret (`whsec_` + base64 of
//! 24 to 64 bytes), `v1a` Ed25519 under a key pair whose public half is written `whpk_` +
//! base64. A timestamp more than five minutes from now is refused either way, and the id
//! is the idempotency key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How far a webhook's timestamp may be from the receiver's clock, either way.
pub const TOLERANCE_S: i64 = 5 * 60;

/// The spec's bounds on a symmetric secret.
const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// Longest `webhook-id` taken: it is stored as the idempotency key.
pub const MAX_ID_BYTES: usize = 128;

/// One key that verifies webhooks: a `v1` secret, or a `v1a` public key.
#[derive(Clone)]
pub enum WebhookKey {
    Hmac(Vec<u8>),
    Ed25519(Vec<u8>),
}

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WebhookKey::Hmac(_) => "WebhookKey::Hmac(..)",
            WebhookKey::Ed25519(_) => "WebhookKey::Ed25519(..)",
        })
    }
}

impl WebhookKey {
    /// Reads a key as the spec writes it: `whsec_…` (HMAC-SHA256, `v1`) or `whpk_…`
    /// (an Ed25519 public key, `v1a`).
    pub fn parse(text: &str) -> Result<WebhookKey, String> {
        let text = text.trim();
        if let Some(b) = text.strip_prefix("whsec_") {
            let bytes = B64
                .decode(b)
                .map_err(|_| "a whsec_ secret is not base64".to_string())?;
            if !SECRET_BYTES.contains(&bytes.len()) {
                return Err(format!(
                    "a whsec_ secret must hold 24 to 64 bytes, this one holds {}",
                    bytes.len()
                ));
            }
            return Ok(WebhookKey::Hmac(bytes));
        }
        if let Some(b) = text.strip_prefix("whpk_") {
            let bytes = B64
                .decode(b)
                .map_err(|_| "a whpk_ key is not base64".to_string())?;
            if bytes.len() != 32 {
                return Err(format!(
                    "a whpk_ key is an Ed25519 public key of 32 bytes, this one holds {}",
                    bytes.len()
                ));
            }
            return Ok(WebhookKey::Ed25519(bytes));
        }
        Err("a webhook key is written whsec_<base64> (v1) or whpk_<base64> (v1a)".into())
    }

    fn verifies(&self, version: &str, sig: &[u8], signed: &[u8]) -> bool {
        match (self, version) {
            (WebhookKey::Hmac(k), "v1") => {
                let mut mac = hmac_of(k);
                mac.update(signed);
                mac.verify_slice(sig).is_ok()
            }
            (WebhookKey::Ed25519(k), "v1a") => {
                ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, k)
                    .verify(signed, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

fn hmac_of(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"))
}

/// Why a webhook was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("webhook-id is longer than {MAX_ID_BYTES} bytes or not printable ASCII")]
    BadId,
    #[error("webhook-timestamp is not a number of seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is more than five minutes from now")]
    Stale,
    #[error("no signature matches")]
    NoMatch,
}

/// The three headers of a webhook, as received.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// The keys a receiver verifies with: during a rotation, the old and the new.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    keys: Vec<WebhookKey>,
}

impl Verifier {
    pub fn new(keys: Vec<WebhookKey>) -> Verifier {
        Verifier { keys }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks a webhook at `now_s` (Unix seconds): its headers present and well formed,
    /// its timestamp within [`TOLERANCE_S`], and one of its signatures made by one of
    /// the keys over exactly these bytes. Returns its id.
    pub fn verify<'a>(&self, h: Headers<'a>, body: &[u8], now_s: i64) -> Result<&'a str, Invalid> {
        let id = h.id.ok_or(Invalid::Missing("webhook-id"))?;
        let ts = h.timestamp.ok_or(Invalid::Missing("webhook-timestamp"))?;
        let sigs = h.signature.ok_or(Invalid::Missing("webhook-signature"))?;
        if id.is_empty() || id.len() > MAX_ID_BYTES || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Invalid::BadId);
        }
        let at: i64 = ts.parse().map_err(|_| Invalid::BadTimestamp)?;
        if (now_s - at).abs() > TOLERANCE_S {
            return Err(Invalid::Stale);
        }
        let signed = signed_content(id, ts, body);
        let ok = sigs.split(' ').any(|entry| {
            let Some((version, sig)) = entry.split_once(',') else {
                return false;
            };
            let Ok(sig) = B64.decode(sig) else {
                return false;
            };
            self.keys.iter().any(|k| k.verifies(version, &sig, &signed))
        });
        if ok {
            Ok(id)
        } else {
            Err(Invalid::NoMatch)
        }
    }
}

/// What a signature covers: `id.timestamp.body`.
fn signed_content(id: &str, ts: &str, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(id.len() + ts.len() + body.len() + 2);
    m.extend_from_slice(id.as_bytes());
    m.push(b'.');
    m.extend_from_slice(ts.as_bytes());
    m.push(b'.');
    m.extend_from_slice(body);
    m
}

/// Signs webhooks with a symmetric secret (`v1`): the node's to a shop, the demo
/// provider's to its node.
#[derive(Clone)]
pub struct Signer {
    secret: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("webhooks::Signer(..)")
    }
}

impl Signer {
    /// A signer for a `whsec_` secret.
    pub fn new(key: &WebhookKey) -> Option<Signer> {
        match key {
            WebhookKey::Hmac(k) => Some(Signer { secret: k.clone() }),
            WebhookKey::Ed25519(_) => None,
        }
    }

    /// The secret as the spec writes it, for the receiver.
    pub fn secret_text(&self) -> String {
        format!("whsec_{}", B64.encode(&self.secret))
    }

    /// The key that verifies what this signs.
    pub fn key(&self) -> WebhookKey {
        WebhookKey::Hmac(self.secret.clone())
    }

    /// The `webhook-signature` header of `body` sent as `id` at `ts` (Unix seconds).
    pub fn sign(&self, id: &str, ts: i64, body: &[u8]) -> String {
        let mut mac = hmac_of(&self.secret);
        mac.update(&signed_content(id, &ts.to_string(), body));
        format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests;
