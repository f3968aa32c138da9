//! The signing secret the test nodes share: what signs shoppers' tokens and download links.

use std::path::Path;

use seckill_core::auth::Secret;

pub const SECRET: &str = "test secret, long enough for HMAC";

/// `dir/secret`, readable by its owner only, as a node wants it.
pub fn write_secret(dir: &Path) {
    seckill_core::secrets::create_private(&dir.join("secret"), SECRET.as_bytes())
        .expect("write secret");
}

/// The nodes' secret, to sign what a shop would sign.
pub fn secret() -> Secret {
    Secret::new(SECRET.as_bytes().to_vec()).expect("secret")
}
