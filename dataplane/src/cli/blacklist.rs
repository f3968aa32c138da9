//! `blacklist`: users and client addresses blocked for a while, on every node.

use anyhow::bail;
use clap::Subcommand;
use seckill_core::campaign::format_instant_ms;
use std::process::ExitCode;

use super::connect;

#[derive(Subcommand)]
pub(super) enum BlacklistCommand {
    /// Block user:<id> or ip:<address>.
    Add {
        entry: String,
        /// For how long.
        #[arg(long, default_value_t = 3600)]
        ttl_s: u64,
    },
    /// Unblock an entry.
    Remove { entry: String },
    /// Entries in force, with their expiry.
    List,
}

pub(super) fn run(redis: &str, command: BlacklistCommand) -> anyhow::Result<ExitCode> {
    use seckill_dataplane::guard::blacklist;
    let mut con = connect(redis)?;
    match command {
        BlacklistCommand::Add { entry, ttl_s } => {
            let entry = blacklist::parse_entry(&entry).map_err(anyhow::Error::msg)?;
            let until = blacklist::add(&mut con, &entry, ttl_s)?;
            println!("blocked {entry} until {}", format_instant_ms(until));
        }
        BlacklistCommand::Remove { entry } => {
            let entry = blacklist::parse_entry(&entry).map_err(anyhow::Error::msg)?;
            if blacklist::remove(&mut con, &entry)? {
                println!("unblocked {entry}");
            } else {
                bail!("{entry} was not blocked");
            }
        }
        BlacklistCommand::List => {
            let entries = blacklist::list(&mut con)?;
            if entries.is_empty() {
                println!("the blacklist is empty");
            }
            for (entry, until) in entries {
                println!("{entry:<48} until {}", format_instant_ms(until));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
