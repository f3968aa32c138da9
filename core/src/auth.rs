//! The node's HMAC-SHA256 signed tokens (download links, tickets, passes, receipts) and
//! the user-id rules.
//!
//! A token is `<subject, base64url>.<expiry ms>.<signature, base64url>`; the signature
//! covers a domain of its purpose, the subject and the expiry, so none can be changed
//! without the key.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The keys of one purpose (see [`crate::node_keys`]): the first signs, every one
/// verifies, so a key can be rotated without refusing what the previous one signed. Each is kept as the MAC's state once the key is taken in, so a token costs
/// only the hashing of its own bytes.
#[derive(Clone)]
pub struct Secret(Vec<HmacSha256>);

/// 256 bits: as long as the HMAC-SHA256 output, counted in raw bytes.
pub const MIN_SECRET_BYTES: usize = 32;

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Option<Self> {
        // HMAC takes keys of any length; the error case cannot happen.
        (bytes.len() >= MIN_SECRET_BYTES).then(|| {
            Secret(vec![
                HmacSha256::new_from_slice(&bytes).unwrap_or_else(|_| unreachable!())
            ])
        })
    }

    /// Accepts what `older` signed too; this secret still signs.
    pub fn also_verifying(mut self, older: Secret) -> Secret {
        self.0.extend(older.0);
        self
    }

    fn mac_with(key: &HmacSha256, parts: &[&[u8]]) -> HmacSha256 {
        let mut m = key.clone();
        for p in parts {
            m.update(&(p.len() as u64).to_be_bytes());
            m.update(p);
        }
        m
    }

    /// The MAC under the signing secret.
    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        Self::mac_with(&self.0[0], parts)
    }

    /// Whether any of the secrets signed `parts` as `sig`.
    fn verifies(&self, parts: &[&[u8]], sig: &[u8]) -> bool {
        self.0
            .iter()
            .any(|k| Self::mac_with(k, parts).verify_slice(sig).is_ok())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// User ids: 1-64 printable ASCII characters, no spaces or separators used in keys.
pub fn valid_user_id(u: &str) -> bool {
    (1..=64).contains(&u.len())
        && u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'@' | b'+' | b'.'))
}

/// Signs `subject` until `expires_ms`: `<subject, base64url>.<expiry ms>.<signature>`.
/// `domain` keeps a signature for one purpose from passing for another.
pub(crate) fn sign(secret: &Secret, domain: &[u8], subject: &str, expires_ms: i64) -> String {
    let exp = expires_ms.to_string();
    let sig = secret
        .mac(&[domain, subject.as_bytes(), exp.as_bytes()])
        .finalize()
        .into_bytes();
    // Encoded in place, into a string made once at its full length.
    let mut token = String::with_capacity(subject.len() * 4 / 3 + exp.len() + 48);
    B64.encode_string(subject, &mut token);
    token.push('.');
    token.push_str(&exp);
    token.push('.');
    B64.encode_string(sig, &mut token);
    token
}

pub(crate) fn verify(
    secret: &Secret,
    domain: &[u8],
    token: &str,
    now_ms: i64,
) -> Result<String, TokenError> {
    verify_until(secret, domain, token, now_ms).map(|(subject, _)| subject)
}

/// The subject a token signs and its expiry.
pub(crate) fn verify_until(
    secret: &Secret,
    domain: &[u8],
    token: &str,
    now_ms: i64,
) -> Result<(String, i64), TokenError> {
    let mut it = token.split('.');
    let (Some(s), Some(exp), Some(sig), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return Err(TokenError::Malformed);
    };
    // Decoded without zeroed allocations (the allocator's slow path, which every
    // shopper's first request would take twice): the subject into a vector made at its
    // length, the signature onto the stack.
    let mut subject = Vec::with_capacity(s.len() * 3 / 4 + 3);
    B64.decode_vec(s, &mut subject)
        .map_err(|_| TokenError::Malformed)?;
    let subject = String::from_utf8(subject).map_err(|_| TokenError::Malformed)?;
    let expires: i64 = exp.parse().map_err(|_| TokenError::Malformed)?;
    let mut sig_bytes = [0u8; 64];
    let n = B64
        .decode_slice(sig, &mut sig_bytes)
        .map_err(|_| TokenError::Malformed)?;
    if !secret.verifies(
        &[domain, subject.as_bytes(), exp.as_bytes()],
        &sig_bytes[..n],
    ) {
        return Err(TokenError::BadSignature);
    }
    if expires <= now_ms {
        return Err(TokenError::Expired);
    }
    Ok((subject, expires))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("malformed token")]
    Malformed,
    #[error("bad signature")]
    BadSignature,
    #[error("token expired")]
    Expired,
}

/// A download link's token: the order it serves, until `expires_ms`.
pub fn sign_download(secret: &Secret, order_id: &str, expires_ms: i64) -> String {
    sign(secret, b"download", order_id, expires_ms)
}

/// The order a download token serves.
pub fn verify_download(secret: &Secret, token: &str, now_ms: i64) -> Result<String, TokenError> {
    verify(secret, b"download", token, now_ms)
}

/// The licence key of an order when the campaign has no code pool: derived under the
/// secret, so it can be recomputed and checked but not guessed.
pub fn derive_license(secret: &Secret, order_id: &str) -> String {
    let mac = secret
        .mac(&[b"license", order_id.as_bytes()])
        .finalize()
        .into_bytes();
    mac[..8]
        .chunks(2)
        .map(|c| format!("{:02X}{:02X}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).expect("long enough")
    }

    #[test]
    fn a_token_names_its_user_until_it_expires() {
        let t = sign_download(&secret(), "alice", 2_000);
        assert_eq!(
            verify_download(&secret(), &t, 1_999).as_deref(),
            Ok("alice")
        );
        assert_eq!(
            verify_download(&secret(), &t, 2_000),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn forged_tokens_are_refused() {
        let t = sign_download(&secret(), "alice", 2_000);
        let other =
            Secret::new(b"another secret, just as long as the first".to_vec()).expect("long");
        assert_eq!(
            verify_download(&other, &t, 0),
            Err(TokenError::BadSignature)
        );
        // Same signature, different user.
        let sig = t.rsplit('.').next().expect("3 parts");
        let forged = format!("{}.2000.{sig}", B64.encode("mallory"));
        assert_eq!(
            verify_download(&secret(), &forged, 0),
            Err(TokenError::BadSignature)
        );
        // Extended expiry.
        let forged = t.replace(".2000.", ".9999999.");
        assert_eq!(
            verify_download(&secret(), &forged, 0),
            Err(TokenError::BadSignature)
        );
        for bad in ["", "a.b", "a.b.c.d", "!!.1.x", &t[..t.len() - 3]] {
            assert!(verify_download(&secret(), bad, 0).is_err(), "{bad}");
        }
        // A signature longer than any MAC, and a subject that is not text: malformed.
        let long = format!("{}.2000.{}", B64.encode("alice"), B64.encode([7u8; 200]));
        let binary = format!("{}.2000.{sig}", B64.encode([0xffu8, 0xfe]));
        for bad in [long, binary] {
            assert_eq!(
                verify_download(&secret(), &bad, 0),
                Err(TokenError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_token_of_one_purpose_is_refused_for_another() {
        let d = sign_download(&secret(), "demo.1.7", 2_000);
        assert_eq!(verify_download(&secret(), &d, 0).as_deref(), Ok("demo.1.7"));
        let other = sign(&secret(), b"pass", "demo.1.7", 2_000);
        assert_eq!(
            verify_download(&secret(), &other, 0),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            verify_download(&secret(), &d, 2_000),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn derived_licences_are_stable_and_distinct() {
        let a = derive_license(&secret(), "demo.1.7");
        assert_eq!(a, derive_license(&secret(), "demo.1.7"));
        assert_ne!(a, derive_license(&secret(), "demo.1.8"));
        assert_eq!(a.len(), 19);
        assert_eq!(a.matches('-').count(), 3);
    }

    #[test]
    fn a_rotated_secret_still_verifies_what_the_old_one_signed() {
        let old = secret();
        let new = Secret::new(b"the next secret, thirty-two bytes or more".to_vec()).expect("long");
        let rotated = new.clone().also_verifying(old.clone());
        let before = sign_download(&old, "alice", 2_000);
        let after = sign_download(&rotated, "alice", 2_000);
        assert_eq!(
            verify_download(&rotated, &before, 0).as_deref(),
            Ok("alice")
        );
        assert_eq!(verify_download(&new, &after, 0).as_deref(), Ok("alice"));
        // The new secret signs; a node that has not rotated yet refuses its tokens.
        assert_eq!(
            verify_download(&old, &after, 0),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn short_secrets_and_odd_user_ids_are_refused() {
        assert!(Secret::new(b"short".to_vec()).is_none());
        assert!(Secret::new(vec![0xff; 31]).is_none());
        assert!(Secret::new(vec![0xff; 32]).is_some());
        assert!(valid_user_id("user-42@example.com"));
        for bad in ["", "a b", "a:b", "ü", &"x".repeat(65)] {
            assert!(!valid_user_id(bad), "{bad}");
        }
    }
}
