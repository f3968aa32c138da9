//! `worker`: an order worker on its own, from the node's configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use seckill_dataplane::server;
use seckill_orders as orders;

use super::CommonArgs;

#[derive(clap::Args)]
pub(super) struct WorkerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Consumer name; stable across restarts, distinct per worker.
    #[arg(long, env = "SECKILL_WORKER_NAME")]
    name: Option<String>,
    /// The worker's SQLite file.
    #[arg(long, env = "SECKILL_WORKER_DB")]
    db: Option<PathBuf>,
}

pub(super) fn run(a: WorkerArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.common.load()?;
    if let Some(v) = a.name {
        config.worker.name = v;
    }
    if let Some(v) = a.db {
        config.worker.db = v;
    }
    let settings = config.validate()?;
    let stop = server::stop_on_signals()?;
    orders::worker::run(settings.worker_options(), &stop);
    Ok(ExitCode::SUCCESS)
}
