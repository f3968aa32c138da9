//! `limits`: the rate limits every node applies, overridden live on the control plane.

use anyhow::Context;
use clap::Subcommand;
use seckill_core::control;
use std::process::ExitCode;

use super::connect;

#[derive(Subcommand)]
pub(super) enum LimitsCommand {
    /// The overrides in force (fields not shown come from each node's configuration).
    Show,
    /// Override limits: FIELD=VALUE ... (ip_rate, ip_burst, user_rate, user_burst,
    /// admission_rate, admission_burst, auto_block_refusals, auto_block_window_s,
    /// auto_block_ttl_s).
    Set {
        #[arg(required = true)]
        pairs: Vec<String>,
    },
    /// Drop every override.
    Reset,
}

pub(super) fn run(redis: &str, command: LimitsCommand) -> anyhow::Result<ExitCode> {
    let mut con = connect(redis)?;
    match command {
        LimitsCommand::Show => {}
        LimitsCommand::Set { pairs } => {
            let pairs = pairs
                .iter()
                .map(|p| {
                    p.split_once('=')
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .with_context(|| format!("'{p}': expected FIELD=VALUE"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            control::set_limits(&mut con, &pairs)?;
        }
        LimitsCommand::Reset => control::reset_limits(&mut con)?,
    }
    let mut overrides: Vec<(String, String)> =
        control::limit_overrides(&mut con)?.into_iter().collect();
    overrides.sort();
    if overrides.is_empty() {
        println!("no overrides: every node applies its configured [limits]");
    }
    for (k, v) in overrides {
        println!("{k} = {v}");
    }
    Ok(ExitCode::SUCCESS)
}
