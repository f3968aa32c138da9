//! `keys`: the keys a node derives from its secret that others hold. Today, the shop's
//! token key: the one key a shop signs shoppers' tokens with, which opens nothing else.

use anyhow::Context;
use clap::Subcommand;
use seckill_core::node_keys::{self, Purpose};
use seckill_core::secrets;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum KeysCommand {
    /// Write the shop's token key (derived from the node secret) to a new file of mode
    /// 0600, for the shop's backend to sign shoppers' tokens with.
    ShopToken {
        /// The node secret the key derives from: the nodes' `secret_file`.
        #[arg(long, env = "SECKILL_SECRET_FILE", default_value = "data/secret")]
        secret_file: PathBuf,
        /// The file to write; it must not exist yet.
        #[arg(long)]
        out: PathBuf,
    },
}

pub(super) fn run(command: KeysCommand) -> anyhow::Result<ExitCode> {
    match command {
        KeysCommand::ShopToken { secret_file, out } => {
            let secret = secrets::read_secret(&secret_file)
                .map_err(|e| anyhow::anyhow!("--secret-file: {e}"))?;
            let key = node_keys::derive(&secret, Purpose::ShopTokens);
            secrets::create_private(&out, format!("{key}\n").as_bytes())
                .with_context(|| format!("--out: cannot create {}", out.display()))?;
            eprintln!(
                "wrote the shop's token key to {} (mode 0600): the shop signs shoppers' tokens with it",
                out.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
