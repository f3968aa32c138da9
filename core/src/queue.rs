//! A waiting room's signed papers and arithmetic, shared by the nodes that hand them out
//! and the clients that read them.
//!
//! - A **pass** is a qualification ticket (see [`crate::pow`]) whose id is `q<place>`:
//!   any node derives the same one from the place and expiry the admission recorded, and
//!   the purchase script records its use once, like any ticket's.
//! - A **receipt** is a shopper's place in line, signed: sent back with a look
//!   (`Queue-Receipt`), it lets a node answer from the admission counter it follows,
//!   without asking Redis.

use crate::auth::{self, Secret};
use crate::pow::{self, Ticket};

/// Signs the pass of the shopper let through at `place`.
pub fn sign_pass(
    secret: &Secret,
    campaign: &str,
    user: &str,
    place: u64,
    expires_ms: i64,
) -> String {
    pow::sign_ticket(
        secret,
        &Ticket {
            campaign: campaign.to_string(),
            user: user.to_string(),
            id: format!("q{place}"),
        },
        expires_ms,
    )
}

/// Whether a ticket's id is a pass's.
pub fn is_pass(ticket_id: &str) -> bool {
    ticket_id
        .strip_prefix('q')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Signs a shopper's place in line (0: in the pre-queue, not drawn yet).
pub fn sign_receipt(
    secret: &Secret,
    campaign: &str,
    user: &str,
    place: u64,
    expires_ms: i64,
) -> String {
    auth::sign(
        secret,
        b"queue",
        &format!("{campaign}|{user}|{place}"),
        expires_ms,
    )
}

/// The place a receipt gives `user` in `campaign`'s line, if it is theirs, genuine and
/// current.
pub fn verify_receipt(
    secret: &Secret,
    token: &str,
    campaign: &str,
    user: &str,
    now_ms: i64,
) -> Option<u64> {
    let subject = auth::verify(secret, b"queue", token, now_ms).ok()?;
    let mut it = subject.rsplitn(2, '|');
    let place = it.next()?.parse().ok()?;
    let owner = it.next()?;
    (owner.split_once('|') == Some((campaign, user))).then_some(place)
}

/// The wait, at `admit_per_s`, of the shopper `position` places from the front.
pub fn eta_ms(position: u64, admit_per_s: u32) -> i64 {
    (position.saturating_mul(1000) / u64::from(admit_per_s.max(1))) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).expect("secret")
    }

    #[test]
    fn a_pass_is_a_ticket_for_its_holder_with_the_place_as_id() {
        let pass = sign_pass(&secret(), "drop", "ann", 42, 5_000);
        let (t, exp) = pow::verify_ticket_until(&secret(), &pass, 0).expect("valid");
        assert_eq!(
            (t.campaign.as_str(), t.user.as_str(), t.id.as_str(), exp),
            ("drop", "ann", "q42", 5_000)
        );
        assert!(is_pass(&t.id));
        for id in ["q", "0a1b", "qx", "q1x", ""] {
            assert!(!is_pass(id), "{id}");
        }
        // Derived, not drawn: any node signs the same pass.
        assert_eq!(pass, sign_pass(&secret(), "drop", "ann", 42, 5_000));
    }

    #[test]
    fn a_receipt_gives_its_place_to_its_owner_only() {
        let r = sign_receipt(&secret(), "drop", "ann", 7, 5_000);
        assert_eq!(verify_receipt(&secret(), &r, "drop", "ann", 0), Some(7));
        assert_eq!(verify_receipt(&secret(), &r, "drop", "bob", 0), None);
        assert_eq!(verify_receipt(&secret(), &r, "other", "ann", 0), None);
        assert_eq!(verify_receipt(&secret(), &r, "drop", "ann", 5_000), None);
        // A user id with the separator in it cannot borrow another's place.
        let odd = sign_receipt(&secret(), "drop", "ann|7", 1, 5_000);
        assert_eq!(verify_receipt(&secret(), &odd, "drop", "ann", 0), None);
        assert_eq!(verify_receipt(&secret(), &odd, "drop", "ann|7", 0), Some(1));
        let pass = sign_pass(&secret(), "drop", "ann", 7, 5_000);
        assert_eq!(verify_receipt(&secret(), &pass, "drop", "ann", 0), None);
    }

    #[test]
    fn the_wait_follows_the_rate() {
        assert_eq!(eta_ms(200, 200), 1_000);
        assert_eq!(eta_ms(1, 200), 5);
        assert_eq!(eta_ms(10, 0), 10_000);
    }
}
