//! The node secret the test nodes share, the keys derived from it, and the test shop: its
//! signing key, the JWKS the nodes read, and shoppers' tokens as a shop issues them.

use std::path::Path;

use seckill_core::identity::Signer;
use seckill_core::node_keys::NodeKeys;

pub const SECRET: &str = "test secret, long enough for HMAC";
/// The test shop's issuer (`iss`), as the test nodes require it.
pub const ISSUER: &str = "https://shop.test";
/// The nodes' audience (`aud`), the default.
pub const AUDIENCE: &str = "seckill";

/// `dir/secret`, readable by its owner only, as a node wants it.
pub fn write_secret(dir: &Path) {
    seckill_core::secrets::create_private(&dir.join("secret"), SECRET.as_bytes())
        .expect("write secret");
}

const SHOP_SEED: [u8; 32] = [0x5e; 32];

/// The test shop's signing key (Ed25519, `kid` `test-shop`).
pub fn shop() -> Signer {
    Signer::ed25519(&SHOP_SEED, "test-shop")
}

/// `dir/test-shop.pem`, the test shop's private key as `keys new` writes one (the
/// simulator's `token_key`), and its path.
pub fn write_shop_key(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("test-shop.pem");
    let (_, pem) = Signer::ed25519_with_pem(&SHOP_SEED, "test-shop");
    seckill_core::secrets::create_private(&path, pem.as_bytes()).expect("write the shop's key");
    path
}

/// A shopper's token as the test shop issues it: `user`, until `expires_ms`.
pub fn shopper_token(user: &str, expires_ms: i64) -> String {
    shop().shopper_token(user, ISSUER, AUDIENCE, expires_ms)
}

/// `dir/jwks.json`, the test shop's public key, and the `[identity]` section that has a
/// node read it.
pub fn write_jwks(dir: &Path) -> String {
    let path = dir.join("jwks.json");
    let jwks = serde_json::json!({"keys": [shop().jwk()]});
    std::fs::write(&path, jwks.to_string()).expect("write jwks");
    format!(
        "[identity]\njwks_file = \"{}\"\nissuer = \"{ISSUER}\"\n",
        path.display()
    )
}

/// The test nodes' own keys.
pub fn node_keys() -> NodeKeys {
    NodeKeys::derive(&[SECRET.as_bytes().to_vec()])
}

/// The test payment provider's webhook secret, as the Standard Webhooks spec writes one.
pub const WEBHOOK_SECRET: &str = "whsec_dGhlIHRlc3QgcHJvdmlkZXIncyB3ZWJob29rIHNlY3JldA==";

/// `dir/webhook.secret` (mode 0600) holding [`WEBHOOK_SECRET`], and the `[payments]`
/// section that verifies with it: the demo provider too, unless `demo` is false.
pub fn write_webhook_secret(dir: &Path, demo: bool) -> String {
    let path = dir.join("webhook.secret");
    seckill_core::secrets::create_private(&path, WEBHOOK_SECRET.as_bytes())
        .expect("write webhook secret");
    format!(
        "[payments]\nprovider = \"{}\"\nwebhook_secret_files = [\"{}\"]\n",
        if demo { "demo" } else { "webhook" },
        path.display()
    )
}

/// Signs a webhook of the test provider: its `webhook-id`, `webhook-timestamp` and
/// `webhook-signature` headers.
pub fn sign_webhook(id: &str, body: &str) -> [(String, String); 3] {
    let key = seckill_core::webhooks::WebhookKey::parse(WEBHOOK_SECRET).expect("secret");
    let signer = seckill_core::webhooks::Signer::new(&key).expect("symmetric");
    let ts = seckill_core::now_ms() / 1000;
    [
        ("webhook-id".into(), id.into()),
        ("webhook-timestamp".into(), ts.to_string()),
        (
            "webhook-signature".into(),
            signer.sign(id, ts, body.as_bytes()),
        ),
    ]
}
