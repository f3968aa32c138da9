//! `seckill-console`: the operators' terminal console.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "seckill-console",
    version,
    about = "seckill ops console: campaigns, live stock, QPS and the ledger in the terminal",
    long_about = "seckill ops console. The interactive console is not built yet; meanwhile \
                  `seckill-dataplane campaign list|show` reads the same control plane."
)]
struct Args {
    /// Redis holding the control plane.
    #[arg(long, env = "SECKILL_REDIS", default_value = "redis://127.0.0.1:6390")]
    redis: String,
}

fn main() {
    let args = Args::parse();
    eprintln!(
        "the interactive console is not built yet; try: seckill-dataplane campaign --redis {} list",
        args.redis
    );
    std::process::exit(2);
}
