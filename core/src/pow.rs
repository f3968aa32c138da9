//! Proof of work and qualification tickets. A shopper asks for a challenge, finds a nonce
//! so that SHA-256(prefix ‖ nonce) starts with `difficulty` zero bits, and trades it for
//! a ticket: signed, bound to the user and the campaign, short-lived, used once.

use sha2::{Digest, Sha256};

use crate::auth::{self, Secret, TokenError};

/// Leading zero bits of a hash.
pub fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut n = 0;
    for b in hash {
        if *b == 0 {
            n += 8;
        } else {
            return n + b.leading_zeros();
        }
    }
    n
}

pub fn solves(prefix: &str, nonce: &str, difficulty: u32) -> bool {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update(nonce.as_bytes());
    leading_zero_bits(&h.finalize()) >= difficulty
}

/// Finds a nonce (what a shopper's browser does); for tests and the simulator.
pub fn solve(prefix: &str, difficulty: u32) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|n| solves(prefix, n, difficulty))
        .unwrap_or_default()
}

/// What a ticket grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub campaign: String,
    pub user: String,
    /// Recorded when the ticket is used, so it is used once.
    pub id: String,
}

pub fn sign_ticket(secret: &Secret, t: &Ticket, expires_ms: i64) -> String {
    auth::sign(
        secret,
        b"ticket",
        &format!("{}|{}|{}", t.campaign, t.user, t.id),
        expires_ms,
    )
}

pub fn verify_ticket(secret: &Secret, token: &str, now_ms: i64) -> Result<Ticket, TokenError> {
    verify_ticket_until(secret, token, now_ms).map(|(t, _)| t)
}

/// A ticket and when it expires (ms).
pub fn verify_ticket_until(
    secret: &Secret,
    token: &str,
    now_ms: i64,
) -> Result<(Ticket, i64), TokenError> {
    let (subject, expires) = auth::verify_until(secret, b"ticket", token, now_ms)?;
    let mut it = subject.split('|');
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(c), Some(u), Some(id), None) => Ok((
            Ticket {
                campaign: c.to_string(),
                user: u.to_string(),
                id: id.to_string(),
            },
            expires,
        )),
        _ => Err(TokenError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bits_are_counted_across_bytes() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10, 0xff]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
    }

    #[test]
    fn a_solved_challenge_verifies_and_a_wrong_nonce_does_not() {
        let nonce = solve("abc123", 12);
        assert!(solves("abc123", &nonce, 12));
        let wrong = (0u64..)
            .map(|n| n.to_string())
            .find(|n| !solves("abc123", n, 12))
            .unwrap_or_default();
        assert!(!solves("abc123", &wrong, 12));
    }

    #[test]
    fn tickets_are_bound_to_campaign_and_user() {
        let s = Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).expect("secret");
        let t = Ticket {
            campaign: "c".into(),
            user: "alice".into(),
            id: "t1".into(),
        };
        let signed = sign_ticket(&s, &t, 1_000);
        assert_eq!(verify_ticket(&s, &signed, 999), Ok(t));
        assert_eq!(verify_ticket(&s, &signed, 1_000), Err(TokenError::Expired));
        let link = auth::sign_download(&s, "c.1.1", 1_000);
        assert!(verify_ticket(&s, &link, 0).is_err());
    }
}
