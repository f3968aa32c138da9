//! The `seckill-dataplane` command line: `serve` and `worker`, which run a node and an
//! order worker from the configuration, and the commands operators and scripts use on
//! the control plane (`campaign`, `limits`, `blacklist`, `reconcile`, `payments`,
//! `webhooks`), and `keys`, which makes a shop's signing key and the JWKS the nodes
//! read: a file each.

use anyhow::Context;
use clap::{Parser, Subcommand};
use seckill_core::cli_args::{redis_flag, RedisArgs};
use seckill_core::connection::Connection;
use seckill_core::{control, secrets};
use seckill_dataplane::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

mod blacklist;
mod campaign;
mod keys;
mod limits;
mod payments;
mod reconcile;
mod serve;
mod webhooks;
mod worker;

#[derive(Parser)]
#[command(
    name = "seckill-dataplane",
    version,
    about = "seckill data plane: flash-sale purchases, thread-per-core"
)]
pub struct Args {
    /// Log lines as text for people, or one JSON object per line for collectors.
    #[arg(
        long,
        env = "SECKILL_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the shopper API, one shard per core (and the order worker, unless --no-worker).
    Serve(serve::ServeArgs),
    /// Print the completion script for a shell: bash, zsh, fish, elvish or powershell.
    Completions { shell: seckill_core::shell::Shell },
    /// Print the manual pages (roff): `seckill-dataplane man > seckill-dataplane.1`.
    Man,
    /// Run an order worker on its own: event streams to its SQLite file, and delivery.
    Worker(worker::WorkerArgs),
    /// Show or change the rate limits of every node, live.
    Limits {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: limits::LimitsCommand,
    },
    /// Block users or client IPs for a while, on every node.
    Blacklist {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: blacklist::BlacklistCommand,
    },
    /// Check a campaign's ledger across Redis, the order streams and the order stores.
    Reconcile(reconcile::ReconcileArgs),
    /// Create, arm, start, pause, resume, stop and inspect campaigns.
    Campaign {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: campaign::CampaignCommand,
    },
    /// Payments owed back, and every payment taken.
    Payments {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: payments::PaymentsCommand,
    },
    /// The shop's webhooks it refused for good: list them, send them again.
    Webhooks {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: webhooks::WebhooksCommand,
    },
    /// The shop's signing keys and the JWKS the nodes read.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Serve(a) => serve::run(a),
        Command::Completions { shell } => {
            seckill_core::shell::completions(<Args as clap::CommandFactory>::command(), shell);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            seckill_core::shell::man(<Args as clap::CommandFactory>::command())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(a) => worker::run(a),
        Command::Limits { control, command } => limits::run(&control.url()?, command),
        Command::Blacklist { control, command } => blacklist::run(&control.url()?, command),
        Command::Reconcile(a) => reconcile::run(&a.control.url()?, a),
        Command::Campaign { control, command } => campaign::run(&control.url()?, command),
        Command::Payments { control, command } => payments::run(&control.url()?, command),
        Command::Webhooks { control, command } => webhooks::run(&control.url()?, command),
        Command::Keys { command } => keys::run(command),
    }
}

/// Where the control plane is: campaigns, limits, the blacklist. Its flags go before or
/// after the subcommand's.
#[derive(clap::Args)]
#[command(mut_args(|a| match a.get_id().as_str() {
    "redis" | "redis_password_file" => a.global(true),
    _ => a,
}))]
struct ControlPlane {
    #[command(flatten)]
    redis: RedisArgs,
}

impl ControlPlane {
    /// The URL to connect with, the password in it.
    fn url(&self) -> anyhow::Result<String> {
        Ok(self.redis.url_with_password()?)
    }
}

/// Connects to the control plane; an error names the URL without its password.
fn connect(url: &str) -> anyhow::Result<Connection> {
    control::connect(url).with_context(|| format!("connecting to {}", secrets::redact(url)))
}

/// Options `serve` and `worker` share: where the configuration is, and the flags that
/// override its Redis and its secret.
#[derive(clap::Args)]
#[command(mut_args(redis_flag(|a| a
    .default_value(None)
    .help("Redis URL: redis://[user@]host:port, e.g. redis://seckill-node@127.0.0.1:6390"))))]
struct CommonArgs {
    /// TOML configuration; a missing default file means built-in defaults.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisArgs,
    /// File holding the node secret, which the node's keys derive from.
    #[arg(long, env = "SECKILL_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// The shop's endpoint for its order webhooks ([shop_webhooks] url).
    #[arg(long, env = "SECKILL_SHOP_WEBHOOK_URL")]
    shop_webhook_url: Option<String>,
    /// A file holding the shop's webhook secret, whsec_… ([shop_webhooks] secret_file).
    #[arg(long, env = "SECKILL_SHOP_WEBHOOK_SECRET_FILE")]
    shop_webhook_secret_file: Option<PathBuf>,
}

impl CommonArgs {
    fn load(self) -> anyhow::Result<Config> {
        let explicit = self.config.is_some();
        let path = self
            .config
            .unwrap_or_else(|| "config/dataplane.toml".into());
        let mut config = Config::load(&path, explicit)?;
        if let Some(v) = self.redis.url {
            config.redis = v;
        }
        if let Some(v) = self.redis.password_file {
            config.redis_password_file = Some(v);
        }
        if let Some(v) = self.secret_file {
            config.secret_file = v;
        }
        if let Some(v) = self.shop_webhook_url {
            config.shop_webhooks.url = Some(v);
        }
        if let Some(v) = self.shop_webhook_secret_file {
            config.shop_webhooks.secret_file = Some(v);
        }
        Ok(config)
    }
}
