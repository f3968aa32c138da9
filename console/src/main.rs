//! `seckill-console`: the operators' terminal console.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

use seckill_console::command::Stores;
use seckill_console::run::{run, Options};

#[derive(Parser)]
#[command(
    name = "seckill-console",
    version,
    about = "seckill ops console: campaigns, live stock, QPS and the ledger in the terminal"
)]
struct Args {
    /// Redis holding the control plane.
    #[arg(long, env = "SECKILL_REDIS", default_value = "redis://127.0.0.1:6390")]
    redis: String,
    /// Open on this campaign's detail view (as soon as it exists).
    #[arg(long)]
    campaign: Option<String>,
    /// How often to read the control plane, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    refresh_ms: u64,
    /// An order store for reconciliation (repeat for several; default: data/orders/*.sqlite).
    #[arg(long = "db", value_name = "FILE")]
    dbs: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!("seckill-console needs a terminal; `seckill-dataplane campaign list` reads the same control plane");
    }
    redis::Client::open(args.redis.as_str()).map_err(|e| anyhow::anyhow!("--redis: {e}"))?;
    run(Options {
        redis: args.redis,
        campaign: args.campaign,
        refresh: Duration::from_millis(args.refresh_ms),
        stores: Stores(args.dbs),
    })
}
