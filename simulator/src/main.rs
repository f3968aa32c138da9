//! `seckill-sim`: traffic against a seckill data plane.

mod burst;

use clap::{Parser, Subcommand};
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
    /// A burst of real purchases from many users, then the outcome and the ledger.
    Burst(burst::BurstArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Command::Burst(a) => burst::run(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
