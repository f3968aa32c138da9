//! The node secret the test nodes share, and the keys derived from it: the shop's, which
//! signs shoppers' tokens, and the nodes' own (tickets, download links …).

use std::path::Path;

use seckill_core::auth::Secret;
use seckill_core::node_keys::{self, NodeKeys};

pub const SECRET: &str = "test secret, long enough for HMAC";

/// `dir/secret`, readable by its owner only, as a node wants it.
pub fn write_secret(dir: &Path) {
    seckill_core::secrets::create_private(&dir.join("secret"), SECRET.as_bytes())
        .expect("write secret");
}

/// The shop's key of the nodes' secret, to sign shoppers' tokens as a shop would.
pub fn secret() -> Secret {
    node_keys::shop_signer(SECRET.as_bytes())
}

/// The test nodes' own keys (no demo issuer's among the shoppers' keys).
pub fn node_keys() -> NodeKeys {
    NodeKeys::derive(&[SECRET.as_bytes().to_vec()], false)
}
