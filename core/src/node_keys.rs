//! The node's own keys, one a purpose, derived with HKDF-SHA256 (RFC 5869) from the node
//! secret (`secret_file`), so that a key that leaks from one purpose opens no other.
//! Nodes and order workers hold the secret; nobody else needs it (a shop's tokens are
//! checked with the shop's public keys, see [`crate::identity`]).
//!
//! - the **demo issuer's key** (Ed25519) signs the tokens of `POST /api/session`;
//! - the **ticket key** signs proof-of-work tickets and waiting-room passes;
//! - the **receipt key** signs a shopper's place in a waiting room's line;
//! - the **download key** signs download links;
//! - the **licence key** derives the licence keys of campaigns without a code pool.
//!
//! Rotation is the secret's: each key is derived from every secret the node holds
//! (`verify_secret_files`), the first of which signs.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::auth::Secret;
use crate::identity::Signer;

/// What a key is for: each is derived under a label of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    DemoTokens,
    Tickets,
    Receipts,
    Downloads,
    Licences,
    DemoPayments,
}

impl Purpose {
    pub const ALL: [Purpose; 6] = [
        Purpose::DemoTokens,
        Purpose::Tickets,
        Purpose::Receipts,
        Purpose::Downloads,
        Purpose::Licences,
        Purpose::DemoPayments,
    ];

    /// HKDF's `info`: the purpose, and the version of the derivation.
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::DemoTokens => b"seckill v1: demo issuer tokens",
            Purpose::Tickets => b"seckill v1: tickets and passes",
            Purpose::Receipts => b"seckill v1: waiting room receipts",
            Purpose::Downloads => b"seckill v1: download links",
            Purpose::Licences => b"seckill v1: licence keys",
            Purpose::DemoPayments => b"seckill v1: demo payment provider webhooks",
        }
    }
}

/// HKDF's salt: public and fixed; the secret is the input keying material.
const SALT: &[u8] = b"seckill node keys";

/// The demo issuer's key id, in its tokens' headers.
pub const DEMO_KID: &str = "seckill-demo";

/// The 32 bytes of `purpose` under the node secret `secret`.
fn okm(secret: &[u8], purpose: Purpose) -> [u8; 32] {
    let mut okm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(SALT), secret)
        .expand(purpose.label(), &mut okm)
        // 32 bytes is within HKDF-SHA256's 8,160: the error case cannot happen.
        .unwrap_or_else(|_| unreachable!());
    okm
}

/// The demo payment provider's webhook secret under the node secret `secret` (it signs
/// webhooks to its own node, which verifies them only while the demo provider is on).
pub fn demo_payments(secret: &[u8]) -> crate::webhooks::Signer {
    crate::webhooks::Signer::new(&crate::webhooks::WebhookKey::Hmac(
        okm(secret, Purpose::DemoPayments).to_vec(),
    ))
    .unwrap_or_else(|| unreachable!("a symmetric key signs"))
}

/// The key of `purpose` under the node secret `secret`: 32 bytes, as the base64url text
/// HMAC takes as its key.
pub fn derive(secret: &[u8], purpose: Purpose) -> String {
    B64.encode(okm(secret, purpose))
}

/// The key of `purpose` under one node secret, ready to sign and verify.
fn key_of(secret: &[u8], purpose: Purpose) -> Secret {
    Secret::new(derive(secret, purpose).into_bytes())
        .unwrap_or_else(|| unreachable!("32 bytes make a key"))
}

/// The key of `purpose` under each node secret, the first signing.
fn keyed(secrets: &[Vec<u8>], purpose: Purpose) -> Secret {
    let mut each = secrets.iter().map(|s| key_of(s, purpose));
    let first = each
        .next()
        .unwrap_or_else(|| unreachable!("a node derives its keys from one secret or more"));
    each.fold(first, Secret::also_verifying)
}

/// Every key a node or an order worker uses, derived from its secrets.
#[derive(Clone, Debug)]
pub struct NodeKeys {
    demo: Arc<Signer>,
    tickets: Secret,
    receipts: Secret,
    downloads: Secret,
    licences: Secret,
}

impl NodeKeys {
    /// The keys of `secrets` (the signing secret first, then the older ones that still
    /// verify; none empty).
    pub fn derive(secrets: &[Vec<u8>]) -> NodeKeys {
        assert!(
            !secrets.is_empty(),
            "a node derives its keys from one secret or more"
        );
        let key = |p| keyed(secrets, p);
        NodeKeys {
            demo: Arc::new(Signer::ed25519(
                &okm(&secrets[0], Purpose::DemoTokens),
                DEMO_KID,
            )),
            tickets: key(Purpose::Tickets),
            receipts: key(Purpose::Receipts),
            downloads: key(Purpose::Downloads),
            licences: key(Purpose::Licences),
        }
    }

    /// Signs the demo issuer's tokens (Ed25519, `kid` [`DEMO_KID`]); its public key is
    /// among the shoppers' keys while the demo issuer is on.
    pub fn demo_issuer(&self) -> &Signer {
        &self.demo
    }

    /// Signs and verifies proof-of-work tickets and waiting-room passes.
    pub fn tickets(&self) -> &Secret {
        &self.tickets
    }

    /// Signs and verifies waiting-room receipts.
    pub fn receipts(&self) -> &Secret {
        &self.receipts
    }

    /// Signs and verifies download links.
    pub fn downloads(&self) -> &Secret {
        &self.downloads
    }

    /// Derives licence keys.
    pub fn licences(&self) -> &Secret {
        &self.licences
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{sign_download, verify_download};
    use crate::pow::{sign_ticket, verify_ticket, Ticket};
    use crate::queue::{sign_pass, sign_receipt, verify_receipt};

    const SECRET: &[u8] = b"a node secret of thirty-two bytes or more";

    #[test]
    fn each_purpose_has_a_key_of_its_own_and_none_is_the_secret() {
        let keys: Vec<String> = Purpose::ALL.iter().map(|&p| derive(SECRET, p)).collect();
        for (i, a) in keys.iter().enumerate() {
            assert_eq!(a.len(), 43, "32 bytes, base64url");
            assert_ne!(a.as_bytes(), SECRET);
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The same secret derives the same keys on every node; another, others.
        assert_eq!(derive(SECRET, Purpose::Tickets), keys[1]);
        assert_ne!(
            derive(
                b"another node secret, just as long as that",
                Purpose::Tickets
            ),
            keys[1]
        );
    }

    #[test]
    fn hkdf_sha256_as_rfc_5869_gives_it() {
        // RFC 5869, A.1: the crate's HKDF-SHA256 on the RFC's first test vector.
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0u8; 42];
        Hkdf::<Sha256>::new(Some(&salt), &ikm)
            .expand(&info, &mut okm)
            .expect("42 bytes");
        let hex: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        );
    }

    #[test]
    fn every_key_is_the_one_pythons_cryptography_derives() {
        // An independent HKDF, Python's cryptography (`just setup` installs it), agrees.
        let script = "import base64, sys\n\
            from cryptography.hazmat.primitives import hashes\n\
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF\n\
            for label in sys.argv[3:]:\n\
            \x20   k = HKDF(algorithm=hashes.SHA256(), length=32, salt=sys.argv[2].encode(),\n\
            \x20            info=label.encode()).derive(sys.argv[1].encode())\n\
            \x20   print(base64.urlsafe_b64encode(k).rstrip(b'=').decode())\n";
        let secret = std::str::from_utf8(SECRET).expect("text");
        let salt = std::str::from_utf8(SALT).expect("text");
        let labels: Vec<&str> = Purpose::ALL
            .iter()
            .map(|p| std::str::from_utf8(p.label()).expect("text"))
            .collect();
        let out = std::process::Command::new("python3")
            .args(["-c", script, secret, salt])
            .args(&labels)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{} (just setup installs cryptography)",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        let ours: Vec<String> = Purpose::ALL.iter().map(|&p| derive(SECRET, p)).collect();
        assert_eq!(theirs, ours);
    }

    #[test]
    fn what_the_old_single_secret_signed_opens_nothing() {
        let node = NodeKeys::derive(&[SECRET.to_vec()]);
        let old = crate::auth::Secret::new(SECRET.to_vec()).expect("long");
        let pass = sign_pass(&old, "spring", "alice", 1, 2_000);
        assert!(verify_ticket(node.tickets(), &pass, 0).is_err());
        let ticket = Ticket {
            campaign: "spring".into(),
            user: "alice".into(),
            id: "x".into(),
        };
        assert!(verify_ticket(node.tickets(), &sign_ticket(&old, &ticket, 2_000), 0).is_err());
        let receipt = sign_receipt(&old, "spring", "alice", 1, 2_000);
        assert_eq!(
            verify_receipt(node.receipts(), &receipt, "spring", "alice", 0),
            None
        );
        let link = sign_download(&old, "spring.1.1", 2_000);
        assert!(verify_download(node.downloads(), &link, 0).is_err());
    }

    #[test]
    fn each_key_verifies_only_its_own_purpose() {
        let node = NodeKeys::derive(&[SECRET.to_vec()]);
        let pass = sign_pass(node.tickets(), "spring", "alice", 1, 2_000);
        assert!(verify_ticket(node.tickets(), &pass, 0).is_ok());
        let receipt = sign_receipt(node.receipts(), "spring", "alice", 1, 2_000);
        assert_eq!(
            verify_receipt(node.receipts(), &receipt, "spring", "alice", 0),
            Some(1)
        );
        let link = sign_download(node.downloads(), "spring.1.1", 2_000);
        assert!(verify_download(node.downloads(), &link, 0).is_ok());
        for (name, key) in [
            ("receipts", node.receipts()),
            ("downloads", node.downloads()),
        ] {
            assert!(
                verify_ticket(key, &pass, 0).is_err(),
                "{name} verified a pass"
            );
        }
        assert_eq!(
            verify_receipt(node.tickets(), &receipt, "spring", "alice", 0),
            None
        );
        assert!(verify_download(node.tickets(), &link, 0).is_err());
        // The demo issuer's key is Ed25519, of its own: the same on every node of the
        // secret, another under another secret.
        let again = NodeKeys::derive(&[SECRET.to_vec()]);
        assert_eq!(node.demo_issuer().jwk(), again.demo_issuer().jwk());
        let other = NodeKeys::derive(&[b"another node secret, just as long as that".to_vec()]);
        assert_ne!(node.demo_issuer().jwk(), other.demo_issuer().jwk());
    }

    #[test]
    fn a_rotated_secret_still_verifies_what_its_keys_signed() {
        let new = b"the next node secret, thirty-two bytes or more".to_vec();
        let before = NodeKeys::derive(&[SECRET.to_vec()]);
        let during = NodeKeys::derive(&[new.clone(), SECRET.to_vec()]);
        let link = sign_download(before.downloads(), "spring.1.1", 2_000);
        assert!(verify_download(during.downloads(), &link, 0).is_ok());
        // The new secret's keys sign: a node that has not rotated yet refuses them.
        let link = sign_download(during.downloads(), "spring.1.1", 2_000);
        assert!(verify_download(before.downloads(), &link, 0).is_err());
    }
}
