//! `seckill-sim`: traffic against a seckill data plane — surges, bots, and a verdict.

use clap::{Parser, Subcommand};
use seckill_simulator::{burst, flood, run};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "seckill-sim",
    version,
    about = "seckill simulator: surge and bot traffic against a data plane"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario: open-model surge with bots, then latency, outcomes, winners, ledger.
    Run(Box<run::RunArgs>),
    /// A closed-loop burst of real purchases from many users, then the outcome and the ledger.
    Burst(burst::BurstArgs),
    /// Malformed requests and slow-loris connections against a node, to run beside a surge.
    Flood(flood::FloodArgs),
    /// Print the completion script for a shell: bash, zsh, fish, elvish or powershell.
    Completions { shell: seckill_core::shell::Shell },
    /// Print the manual pages (roff): `seckill-sim man > seckill-sim.1`.
    Man,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Command::Run(a) => run::run(&a),
        Command::Burst(a) => burst::run(&a),
        Command::Flood(a) => flood::run(&a),
        Command::Completions { shell } => {
            seckill_core::shell::completions(<Args as clap::CommandFactory>::command(), shell);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => seckill_core::shell::man(<Args as clap::CommandFactory>::command())
            .map(|()| ExitCode::SUCCESS)
            .map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            // Could not check or do what was asked: 2; a check that failed is 1.
            ExitCode::from(2)
        }
    }
}
