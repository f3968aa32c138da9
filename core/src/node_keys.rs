//! The node's own keys, one a purpose, derived with HKDF-SHA256 (RFC 5869) from the node
//! secret (`secret_file`), so that a key that leaks from one purpose opens no other.
//!
//! - the **shop's token key** signs shoppers' tokens: the one key a shop holds
//!   (`seckill-dataplane keys shop-token` writes it), and all it can sign;
//! - the **demo issuer's key** signs the tokens of `POST /api/session`;
//! - the **ticket key** signs proof-of-work tickets and waiting-room passes;
//! - the **receipt key** signs a shopper's place in a waiting room's line;
//! - the **download key** signs download links;
//! - the **licence key** derives the licence keys of campaigns without a code pool.
//!
//! Nodes and order workers hold the secret and derive the rest. Rotation is the secret's:
//! each key is derived from every secret the node holds (`verify_secret_files`), the
//! first of which signs.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::auth::Secret;

/// What a key is for: each is derived under a label of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    ShopTokens,
    DemoTokens,
    Tickets,
    Receipts,
    Downloads,
    Licences,
}

impl Purpose {
    pub const ALL: [Purpose; 6] = [
        Purpose::ShopTokens,
        Purpose::DemoTokens,
        Purpose::Tickets,
        Purpose::Receipts,
        Purpose::Downloads,
        Purpose::Licences,
    ];

    /// HKDF's `info`: the purpose, and the version of the derivation.
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::ShopTokens => b"seckill v1: shop tokens",
            Purpose::DemoTokens => b"seckill v1: demo issuer tokens",
            Purpose::Tickets => b"seckill v1: tickets and passes",
            Purpose::Receipts => b"seckill v1: waiting room receipts",
            Purpose::Downloads => b"seckill v1: download links",
            Purpose::Licences => b"seckill v1: licence keys",
        }
    }
}

/// HKDF's salt: public and fixed; the secret is the input keying material.
const SALT: &[u8] = b"seckill node keys";

/// The key of `purpose` under the node secret `secret`: 32 bytes, as the base64url text a
/// key file holds and HMAC takes as its key.
pub fn derive(secret: &[u8], purpose: Purpose) -> String {
    let mut okm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(SALT), secret)
        .expand(purpose.label(), &mut okm)
        // 32 bytes is within HKDF-SHA256's 8,160: the error case cannot happen.
        .unwrap_or_else(|_| unreachable!());
    B64.encode(okm)
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
    shoppers: Secret,
    demo: Secret,
    tickets: Secret,
    receipts: Secret,
    downloads: Secret,
    licences: Secret,
}

impl NodeKeys {
    /// The keys of `secrets` (the signing secret first, then the older ones that still
    /// verify; none empty). Shoppers' tokens are the shop's, and with `demo_issuer` the
    /// demo issuer's too.
    pub fn derive(secrets: &[Vec<u8>], demo_issuer: bool) -> NodeKeys {
        assert!(
            !secrets.is_empty(),
            "a node derives its keys from one secret or more"
        );
        let key = |p| keyed(secrets, p);
        let demo = key(Purpose::DemoTokens);
        let shop = key(Purpose::ShopTokens);
        NodeKeys {
            shoppers: if demo_issuer {
                shop.also_verifying(demo.clone())
            } else {
                shop
            },
            demo,
            tickets: key(Purpose::Tickets),
            receipts: key(Purpose::Receipts),
            downloads: key(Purpose::Downloads),
            licences: key(Purpose::Licences),
        }
    }

    /// Verifies shoppers' tokens: the shop's key, and the demo issuer's when it is on.
    pub fn shoppers(&self) -> &Secret {
        &self.shoppers
    }

    /// Signs the demo issuer's tokens.
    pub fn demo_issuer(&self) -> &Secret {
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

/// The shop's token key under the node secret `secret`, as a shop signs with it: what
/// the simulator and the tests, standing in for a shop, sign shoppers' tokens with.
pub fn shop_signer(secret: &[u8]) -> Secret {
    key_of(secret, Purpose::ShopTokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{issue_token, sign_download, verify_download, verify_token};
    use crate::pow::{sign_ticket, verify_ticket, Ticket};
    use crate::queue::{sign_pass, sign_receipt, verify_receipt};

    const SECRET: &[u8] = b"a node secret of thirty-two bytes or more";
    const DAY: i64 = 86_400_000;

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
        assert_eq!(derive(SECRET, Purpose::Tickets), keys[2]);
        assert_ne!(
            derive(
                b"another node secret, just as long as that",
                Purpose::Tickets
            ),
            keys[2]
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
    fn the_shops_key_signs_tokens_and_opens_nothing_else() {
        let node = NodeKeys::derive(&[SECRET.to_vec()], false);
        let shop = shop_signer(SECRET);
        let token = issue_token(&shop, "alice", 2_000);
        assert_eq!(
            verify_token(node.shoppers(), &token, 0, DAY).as_deref(),
            Ok("alice")
        );
        // What a leaked shop key would sign, each refused by its purpose's key.
        let pass = sign_pass(&shop, "spring", "alice", 1, 2_000);
        assert!(verify_ticket(node.tickets(), &pass, 0).is_err());
        let ticket = Ticket {
            campaign: "spring".into(),
            user: "alice".into(),
            id: "x".into(),
        };
        assert!(verify_ticket(node.tickets(), &sign_ticket(&shop, &ticket, 2_000), 0).is_err());
        let receipt = sign_receipt(&shop, "spring", "alice", 1, 2_000);
        assert_eq!(
            verify_receipt(node.receipts(), &receipt, "spring", "alice", 0),
            None
        );
        let link = sign_download(&shop, "spring.1.1", 2_000);
        assert!(verify_download(node.downloads(), &link, 0).is_err());
        // And what the old single secret signed is refused too.
        let old = crate::auth::Secret::new(SECRET.to_vec()).expect("long");
        assert!(verify_token(node.shoppers(), &issue_token(&old, "alice", 2_000), 0, DAY).is_err());
        assert!(verify_ticket(
            node.tickets(),
            &sign_pass(&old, "spring", "alice", 1, 2_000),
            0
        )
        .is_err());
        assert!(verify_download(
            node.downloads(),
            &sign_download(&old, "spring.1.1", 2_000),
            0
        )
        .is_err());
    }

    #[test]
    fn each_key_verifies_only_its_own_purpose() {
        let node = NodeKeys::derive(&[SECRET.to_vec()], true);
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
            ("shoppers", node.shoppers()),
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
        // A demo token verifies as a shopper's only while the demo issuer is on.
        let demo = issue_token(node.demo_issuer(), "bob", 2_000);
        assert!(verify_token(node.shoppers(), &demo, 0, DAY).is_ok());
        let off = NodeKeys::derive(&[SECRET.to_vec()], false);
        assert!(verify_token(off.shoppers(), &demo, 0, DAY).is_err());
    }

    #[test]
    fn a_rotated_secret_still_verifies_what_its_keys_signed() {
        let new = b"the next node secret, thirty-two bytes or more".to_vec();
        let before = NodeKeys::derive(&[SECRET.to_vec()], false);
        let during = NodeKeys::derive(&[new.clone(), SECRET.to_vec()], false);
        let link = sign_download(before.downloads(), "spring.1.1", 2_000);
        assert!(verify_download(during.downloads(), &link, 0).is_ok());
        let token = issue_token(&shop_signer(SECRET), "alice", 2_000);
        assert!(verify_token(during.shoppers(), &token, 0, DAY).is_ok());
        // The new secret's keys sign: a node that has not rotated yet refuses them.
        let link = sign_download(during.downloads(), "spring.1.1", 2_000);
        assert!(verify_download(before.downloads(), &link, 0).is_err());
    }
}
