//! `webhooks`: the shop's webhooks it refused for good (a 4xx other than 408 or 429),
//! kept as dead letters: listed, and put back in the outbox once the shop is fixed.

use anyhow::bail;
use clap::Subcommand;
use seckill_core::campaign::format_instant_ms;
use seckill_orders::shop;
use std::process::ExitCode;

use super::connect;

#[derive(Subcommand)]
pub(super) enum WebhooksCommand {
    /// The dead letters, oldest first: id, type, the shop's answer, when.
    List {
        /// A JSON list, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Sends dead letters again, under their own ids: one by id, or --all.
    Replay {
        /// The webhook's id (as `list` shows it).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        #[arg(long)]
        all: bool,
    },
}

/// Most webhooks the outbox keeps when a replay adds to it (the nodes' default).
const OUTBOX_CAP: u64 = 1_000_000;

pub(super) fn run(redis: &str, command: WebhooksCommand) -> anyhow::Result<ExitCode> {
    let mut con = connect(redis)?;
    match command {
        WebhooksCommand::List { json } => {
            let letters = shop::dead_letters(&mut con)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&letters)?);
                return Ok(ExitCode::SUCCESS);
            }
            if letters.is_empty() {
                println!("no dead letter: the shop took every webhook it was sent");
            }
            for d in letters {
                println!(
                    "{:<40} {:<16} {} {}",
                    d.id,
                    d.kind,
                    d.status,
                    format_instant_ms(d.at_ms)
                );
            }
        }
        WebhooksCommand::Replay { id, all } => {
            let n = shop::replay(&mut con, if all { None } else { id.as_deref() }, OUTBOX_CAP)?;
            if n == 0 {
                match id {
                    Some(id) if !all => bail!("no dead letter {id}"),
                    _ => println!("no dead letter to replay"),
                }
            } else {
                println!("{n} webhook(s) back in the outbox");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
