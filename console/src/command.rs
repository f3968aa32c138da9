//! The changes to the control plane a key asks for ([`Command`]), and carrying them out
//! with the same library calls as the `seckill-dataplane` CLI.

use anyhow::Context;
use seckill_core::connection::Connection;
use std::path::{Path, PathBuf};

use seckill_core::blacklist;
use seckill_core::campaign::{Action, CampaignSpec};
use seckill_core::control;
use seckill_orders::reconcile;

/// A change to the control plane, asked for by a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Create { file: PathBuf },
    Arm { id: String },
    Act { id: String, action: Action },
    SetLimits(Vec<(String, String)>),
    ResetLimits,
    Block { entry: String, ttl_s: u64 },
    Unblock { entry: String },
    Reconcile { id: String },
    SetAdmitRate { id: String, rate: u32 },
}

/// What a command came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Done {
    Message(String),
    Report { title: String, text: String },
}

/// Where `Reconcile` finds the order stores.
#[derive(Debug, Clone, Default)]
pub struct Stores(pub Vec<PathBuf>);

impl Stores {
    /// The stores given, or every `*.sqlite` in `data/orders/`.
    fn resolve(&self) -> Vec<PathBuf> {
        if !self.0.is_empty() {
            return self.0.clone();
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir("data/orders")
            .map(|dir| {
                dir.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "sqlite"))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    }
}

pub fn execute(con: &mut Connection, command: &Command, stores: &Stores) -> anyhow::Result<Done> {
    let done = |m: String| Ok(Done::Message(m));
    match command {
        Command::Create { file } => {
            let spec = read_spec(file)?;
            let c = control::create(con, spec)?;
            done(format!(
                "created {} ({} units in {} partitions): arm it with a",
                c.spec.id, c.spec.total, c.spec.partitions
            ))
        }
        Command::Arm { id } => {
            let c = control::arm(con, id)?;
            done(format!(
                "armed {id}: {} units in {} partitions",
                c.spec.total, c.spec.partitions
            ))
        }
        Command::Act { id, action } => {
            let c = control::act(con, id, *action)?;
            done(format!("{id} is {}", c.state))
        }
        Command::SetLimits(pairs) => {
            control::set_limits(con, pairs)?;
            let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            done(format!("limits on every node: {}", text.join(" ")))
        }
        Command::ResetLimits => {
            control::reset_limits(con)?;
            done("limits back to each node's configuration".into())
        }
        Command::Block { entry, ttl_s } => {
            blacklist::add(con, entry, *ttl_s)?;
            done(format!("blocked {entry} for {ttl_s} s on every node"))
        }
        Command::Unblock { entry } => {
            if blacklist::remove(con, entry)? {
                done(format!("unblocked {entry}"))
            } else {
                anyhow::bail!("{entry} was not blocked")
            }
        }
        Command::SetAdmitRate { id, rate } => {
            control::set_admit_rate(con, id, *rate)?;
            done(format!(
                "{id} lets {rate} shoppers through per second from its next round"
            ))
        }
        Command::Reconcile { id } => {
            let stores = stores.resolve();
            if stores.is_empty() {
                anyhow::bail!("no order store: start the console with --db FILE");
            }
            let report = reconcile::reconcile(con, id, &stores)?;
            reconcile::record(con, &report)?;
            Ok(Done::Report {
                title: format!(
                    "reconciliation of {id}: {}",
                    if report.holds() {
                        "the ledger holds"
                    } else {
                        "VIOLATIONS"
                    }
                ),
                text: report.to_string(),
            })
        }
    }
}

fn read_spec(file: &Path) -> anyhow::Result<CampaignSpec> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    CampaignSpec::from_toml(&text).with_context(|| format!("in {}", file.display()))
}
