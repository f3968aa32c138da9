mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Args::parse();
    seckill_dataplane::logs::init(matches!(args.log_format, cli::LogFormat::Json));
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            // Could not check or do what was asked: 2; a check that failed is 1.
            std::process::ExitCode::from(2)
        }
    }
}
