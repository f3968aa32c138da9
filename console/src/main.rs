//! `seckill-console`: the operators' terminal console.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

use seckill_console::command::Stores;
use seckill_console::run::{run, Options};
use seckill_core::cli_args::RedisArgs;

#[derive(Parser)]
#[command(
    name = "seckill-console",
    version,
    about = "seckill ops console: campaigns, live stock, QPS and the ledger in the terminal"
)]
struct Args {
    #[command(flatten)]
    redis: RedisArgs,
    /// Open on this campaign's detail view (as soon as it exists).
    #[arg(long, env = "SECKILL_CAMPAIGN")]
    campaign: Option<String>,
    /// How often to read the control plane, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    refresh_ms: u64,
    /// An order store for reconciliation (repeat for several; default: data/orders/*.sqlite).
    #[arg(
        long = "db",
        value_name = "FILE",
        env = "SECKILL_DB",
        value_delimiter = ','
    )]
    dbs: Vec<PathBuf>,
    #[command(subcommand)]
    command: Option<Extra>,
}

/// What the console does besides opening.
#[derive(clap::Subcommand)]
enum Extra {
    /// Print the completion script for a shell: bash, zsh, fish, elvish or powershell.
    Completions { shell: seckill_core::shell::Shell },
    /// Print the manual page (roff): `seckill-console man > seckill-console.1`.
    Man,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match console(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn console(args: Args) -> anyhow::Result<()> {
    use clap::CommandFactory;
    match args.command {
        Some(Extra::Completions { shell }) => {
            seckill_core::shell::completions(Args::command(), shell);
            return Ok(());
        }
        Some(Extra::Man) => return Ok(seckill_core::shell::man(Args::command())?),
        None => {}
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!("seckill-console needs a terminal; `seckill-dataplane campaign list` reads the same control plane");
    }
    let redis = args.redis.url_with_password()?;
    redis::Client::open(redis.as_str()).map_err(|e| anyhow::anyhow!("--redis: {e}"))?;
    run(Options {
        redis,
        campaign: args.campaign,
        refresh: Duration::from_millis(args.refresh_ms),
        stores: Stores(args.dbs),
    })
}
