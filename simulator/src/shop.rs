//! Shoppers' tokens signed here as the shop's identity provider signs them: JWTs of the
//! shop's private key (a file `seckill-dataplane keys new` writes, its name the key's id),
//! which the nodes verify with the public key in their JWKS.

use std::path::{Path, PathBuf};

use seckill_core::identity::Signer;

/// The shop's key, and the issuer and audience its tokens carry.
pub struct ShopSigner {
    signer: Signer,
    issuer: String,
    audience: String,
}

impl ShopSigner {
    /// From the key file `key` with `issuer` (required) and `audience` (default
    /// `seckill`); errors name the setting, `name("key")` (a flag or a scenario field).
    pub fn new(
        key: &Path,
        issuer: Option<&str>,
        audience: Option<&str>,
        name: impl Fn(&str) -> String,
    ) -> anyhow::Result<ShopSigner> {
        let signer = Signer::read(key).map_err(|e| anyhow::anyhow!("{}: {e}", name("key")))?;
        let issuer = issuer
            .filter(|i| !i.is_empty())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: the shop's issuer is required with {} (the nodes' identity.issuer)",
                    name("issuer"),
                    name("key")
                )
            })?
            .to_string();
        Ok(ShopSigner {
            signer,
            issuer,
            audience: audience.unwrap_or("seckill").to_string(),
        })
    }

    /// `user`'s token, until `expires_ms`.
    pub fn token(&self, user: &str, expires_ms: i64) -> String {
        self.signer
            .shopper_token(user, &self.issuer, &self.audience, expires_ms)
    }
}

/// The shop's key on the command line (`run` and `flood`): each flag overrides the
/// scenario's field of the same name (`token_key`, `token_issuer`, `token_audience`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ShopArgs {
    /// The shop's private key (seckill-dataplane keys new; the file's name is its kid),
    /// which signs the shoppers' tokens; without it, the demo issuer's tokens.
    #[arg(long, env = "SECKILL_TOKEN_KEY")]
    pub token_key: Option<PathBuf>,
    /// The `iss` of the tokens it signs: the nodes' identity.issuer.
    #[arg(long, env = "SECKILL_TOKEN_ISSUER")]
    pub token_issuer: Option<String>,
    /// The `aud` of the tokens it signs (default seckill).
    #[arg(long, env = "SECKILL_TOKEN_AUDIENCE")]
    pub token_audience: Option<String>,
}

impl ShopArgs {
    /// The signer of `--token-key`, if given.
    pub fn signer(&self) -> anyhow::Result<Option<ShopSigner>> {
        self.token_key
            .as_deref()
            .map(|key| {
                ShopSigner::new(
                    key,
                    self.token_issuer.as_deref(),
                    self.token_audience.as_deref(),
                    |f| format!("--token-{f}"),
                )
            })
            .transpose()
    }
}
