//! `keys`: the shop's signing keys, for a shop without an identity provider of its own
//! (and for tests and demos): `keys new` makes a private key and publishes its public key
//! in the JWKS the nodes read (`identity.jwks_file`).

use anyhow::Context;
use clap::Subcommand;
use seckill_core::identity::{Alg, Signer};
use seckill_core::secrets;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum KeysCommand {
    /// Make a signing key: write DIR/KID.pem (the private key, PKCS #8, mode 0600) and add
    /// its public key to DIR/jwks.json (made if absent), which the nodes read.
    New {
        /// EdDSA (Ed25519) or ES256 (P-256).
        #[arg(long, default_value = "EdDSA")]
        alg: Alg,
        /// The key's id, in the JWKS and in the header of each token it signs: 1-64 of
        /// letters, digits and . _ -
        #[arg(long)]
        kid: String,
        /// Where the key file and the JWKS are.
        #[arg(long)]
        dir: PathBuf,
    },
}

pub(super) fn run(command: KeysCommand) -> anyhow::Result<ExitCode> {
    match command {
        KeysCommand::New { alg, kid, dir } => new_key(alg, &kid, &dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn valid_kid(kid: &str) -> bool {
    (1..=64).contains(&kid.len())
        && !kid.starts_with('.')
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn new_key(alg: Alg, kid: &str, dir: &Path) -> anyhow::Result<()> {
    if !valid_kid(kid) {
        anyhow::bail!("--kid: 1-64 of letters, digits and . _ - (not starting with .)");
    }
    if !dir.is_dir() {
        anyhow::bail!("--dir: {} is not a directory", dir.display());
    }
    let jwks_path = dir.join("jwks.json");
    let mut jwks: Value = match std::fs::read_to_string(&jwks_path) {
        Ok(text) => serde_json::from_str(&text)
            .ok()
            .filter(|v: &Value| v.get("keys").is_some_and(Value::is_array))
            .with_context(|| format!("{}: not a JWKS", jwks_path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({"keys": []}),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", jwks_path.display())),
    };
    let keys = jwks["keys"]
        .as_array_mut()
        .unwrap_or_else(|| unreachable!("checked above"));
    if keys
        .iter()
        .any(|k| k.get("kid").and_then(Value::as_str) == Some(kid))
    {
        anyhow::bail!("--kid: {kid} is in {} already", jwks_path.display());
    }
    let (signer, pem) = Signer::generate(alg, kid).map_err(|e| anyhow::anyhow!("--alg: {e}"))?;
    let key_path = dir.join(format!("{kid}.pem"));
    secrets::create_private(&key_path, pem.as_bytes())
        .with_context(|| format!("cannot create {}", key_path.display()))?;
    keys.push(signer.jwk().clone());
    // Written beside and renamed over: a node watching the file reads the old or the
    // new, never half of one.
    let tmp = dir.join(".jwks.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&jwks)? + "\n")
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &jwks_path)
        .with_context(|| format!("cannot write {}", jwks_path.display()))?;
    eprintln!(
        "wrote the {} private key {} (mode 0600; the shop signs with it) and its public key to {} (the nodes' identity.jwks_file)",
        alg.name(),
        key_path.display(),
        jwks_path.display()
    );
    Ok(())
}
