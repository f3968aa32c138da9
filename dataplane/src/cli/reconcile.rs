//! `reconcile`: a campaign's ledger checked across Redis, the order streams and the
//! order stores, and repaired when asked.

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{connect, ControlPlane};

#[derive(clap::Args)]
pub(super) struct ReconcileArgs {
    id: String,
    #[command(flatten)]
    pub(super) control: ControlPlane,
    /// Order stores (repeat for every worker's file); default: data/orders/*.sqlite.
    #[arg(long = "db")]
    dbs: Vec<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Replay orders missing from the stores into the first one and release overdue
    /// holds. Never creates or removes a sale.
    #[arg(long)]
    repair: bool,
}

pub(super) fn run(redis: &str, a: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let ReconcileArgs {
        id,
        mut dbs,
        json,
        repair,
        ..
    } = a;
    let id = id.as_str();
    if dbs.is_empty() {
        if let Ok(dir) = std::fs::read_dir("data/orders") {
            dbs = dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "sqlite"))
                .collect();
            dbs.sort();
        }
    }
    if dbs.is_empty() {
        bail!("--db: no order store given and none found in data/orders/");
    }
    let mut con = connect(redis)?;
    let repaired = if repair {
        Some(seckill_orders::reconcile::repair(&mut con, id, &dbs)?)
    } else {
        None
    };
    let report = seckill_orders::reconcile::reconcile(&mut con, id, &dbs)?;
    seckill_orders::reconcile::record(&mut con, &report)?;
    if json {
        let v = serde_json::json!({ "report": report, "repaired": repaired });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(r) = &repaired {
            println!(
                "repaired: {} orders replayed into {}, {} holds released, {} index entries removed",
                r.orders_replayed,
                dbs[0].display(),
                r.holds_released,
                r.index_entries_removed
            );
            if !r.holds_waiting.is_empty() {
                let parts: Vec<String> = r.holds_waiting.iter().map(u32::to_string).collect();
                println!(
                    "overdue holds of partition(s) {} still wait for a shard's lease to end: run the repair again",
                    parts.join(", ")
                );
            }
        }
        println!("{report}");
    }
    Ok(if report.holds() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
