//! The `seckill-dataplane` command line: `serve`, and the campaign commands operators
//! and scripts use on the control plane.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use seckill_core::connection::Connection;
use std::path::PathBuf;
use std::process::ExitCode;

use seckill_core::campaign::{format_instant_ms, valid_admit_rate, Action, Campaign, CampaignSpec};
use seckill_core::{control, ledger, secrets};
use seckill_dataplane::config::Config;
use seckill_dataplane::server;
use seckill_orders as orders;

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
    Serve(ServeArgs),
    /// Print the completion script for a shell: bash, zsh, fish, elvish or powershell.
    Completions { shell: seckill_core::shell::Shell },
    /// Print the manual pages (roff): `seckill-dataplane man > seckill-dataplane.1`.
    Man,
    /// Run an order worker on its own: event streams to its SQLite file, and delivery.
    Worker(WorkerArgs),
    /// Show or change the rate limits of every node, live.
    Limits {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: LimitsCommand,
    },
    /// Block users or client IPs for a while, on every node.
    Blacklist {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: BlacklistCommand,
    },
    /// Check a campaign's ledger across Redis, the order streams and the order stores.
    Reconcile {
        id: String,
        #[command(flatten)]
        control: ControlPlane,
        /// Order stores (repeat for every worker's file); default: data/orders/*.sqlite.
        #[arg(long = "db")]
        dbs: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
        /// Replay orders missing from the stores into the first one and release overdue
        /// holds. Never creates or removes a sale.
        #[arg(long)]
        repair: bool,
    },
    /// Create, arm, start, pause, resume, stop and inspect campaigns.
    Campaign {
        #[command(flatten)]
        control: ControlPlane,
        #[command(subcommand)]
        command: CampaignCommand,
    },
}

/// Where the control plane is: campaigns, limits, the blacklist.
#[derive(clap::Args)]
struct ControlPlane {
    /// Redis holding the control plane: redis://[user@]host:port (the operators' user).
    #[arg(
        long,
        env = "SECKILL_REDIS",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6390",
        global = true
    )]
    redis: String,
    /// File holding the Redis user's password (mode 0600).
    #[arg(long, env = "SECKILL_REDIS_PASSWORD_FILE", global = true)]
    redis_password_file: Option<PathBuf>,
}

impl ControlPlane {
    /// The URL to connect with, the password in it.
    fn url(&self) -> anyhow::Result<String> {
        secrets::redis_url(&self.redis, self.redis_password_file.as_deref())
            .map_err(|e| anyhow::anyhow!("--redis-password-file: {e}"))
    }
}

/// Connects to the control plane; an error names the URL without its password.
fn connect(url: &str) -> anyhow::Result<Connection> {
    control::connect(url).with_context(|| format!("connecting to {}", secrets::redact(url)))
}

#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (every shard binds it with SO_REUSEPORT).
    #[arg(long, env = "SECKILL_LISTEN")]
    listen: Option<String>,
    /// Number of shards (default: one per core).
    #[arg(long, env = "SECKILL_SHARDS")]
    shards: Option<usize>,
    /// Let the kernel place the shards instead of pinning each to a core.
    #[arg(long, env = "SECKILL_NO_PIN")]
    no_pin: bool,
    /// Serve POST /api/session, which signs a token for any user id: demos and tests
    /// only, and only on a loopback listener. `--demo-issuer=false` turns it off.
    #[arg(
        long,
        env = "SECKILL_DEMO_ISSUER",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    demo_issuer: Option<bool>,
    /// Do not run the order worker in this process (run `worker` processes instead).
    #[arg(long, env = "SECKILL_NO_WORKER")]
    no_worker: bool,
    /// Address of the admin listener (/metrics, /healthz, /readyz); "" turns it off.
    #[arg(long, env = "SECKILL_ADMIN_LISTEN")]
    admin_listen: Option<String>,
    /// Bearer token every admin request must carry.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
}

#[derive(clap::Args)]
struct WorkerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Consumer name; stable across restarts, distinct per worker.
    #[arg(long, env = "SECKILL_WORKER_NAME")]
    name: Option<String>,
    /// The worker's SQLite file.
    #[arg(long, env = "SECKILL_WORKER_DB")]
    db: Option<PathBuf>,
}

/// Options `serve` and `worker` share.
#[derive(clap::Args)]
struct CommonArgs {
    /// TOML configuration; a missing default file means built-in defaults.
    #[arg(long, env = "SECKILL_CONFIG")]
    config: Option<PathBuf>,
    /// Redis URL: redis://[user@]host:port, e.g. redis://seckill-node@127.0.0.1:6390.
    #[arg(long, env = "SECKILL_REDIS", hide_env_values = true)]
    redis: Option<String>,
    /// File holding the Redis user's password (mode 0600).
    #[arg(long, env = "SECKILL_REDIS_PASSWORD_FILE")]
    redis_password_file: Option<PathBuf>,
    /// File holding the shared HMAC secret.
    #[arg(long, env = "SECKILL_SECRET_FILE")]
    secret_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum LimitsCommand {
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

#[derive(Subcommand)]
enum BlacklistCommand {
    /// Block user:<id> or ip:<address>.
    Add {
        entry: String,
        /// For how long.
        #[arg(long, default_value_t = 3600)]
        ttl_s: u64,
    },
    /// Unblock an entry.
    Remove { entry: String },
    /// Entries in force, with their expiry.
    List,
}

#[derive(Subcommand)]
enum CampaignCommand {
    /// Create a campaign (state draft) from a TOML file.
    Create {
        #[arg(long)]
        file: PathBuf,
        /// Use this id instead of the file's (the file as a template).
        #[arg(long)]
        id: Option<String>,
    },
    /// List campaigns.
    List,
    /// Show a campaign, its partitions and its ledger.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Load the stock into the partitions (once; re-arming is refused).
    Arm { id: String },
    /// Open the sale (armed → live).
    Start { id: String },
    /// Pause the sale (live → paused).
    Pause { id: String },
    /// Resume the sale (paused → live).
    Resume { id: String },
    /// End the sale for good.
    Stop { id: String },
    /// Show a campaign's waiting room, or change how many shoppers it lets through.
    Queue {
        id: String,
        #[arg(long)]
        json: bool,
        /// Let N shoppers through per second from the admission's next round (1-100000).
        #[arg(long, value_name = "N")]
        admit_per_s: Option<u32>,
    },
    /// Check a waiting room's draw: every pre-queue joiner's place recomputed from the
    /// seed shown at the opening; non-zero exit if any differs.
    AuditDraw { id: String },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Serve(a) => serve(a),
        Command::Completions { shell } => {
            seckill_core::shell::completions(<Args as clap::CommandFactory>::command(), shell);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            seckill_core::shell::man(<Args as clap::CommandFactory>::command())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(a) => worker(a),
        Command::Limits { control, command } => limits(&control.url()?, command),
        Command::Blacklist { control, command } => blacklist(&control.url()?, command),
        Command::Reconcile {
            id,
            control,
            dbs,
            json,
            repair,
        } => reconcile(&control.url()?, &id, dbs, json, repair),
        Command::Campaign { control, command } => campaign(&control.url()?, command),
    }
}

impl CommonArgs {
    fn load(self) -> anyhow::Result<Config> {
        let explicit = self.config.is_some();
        let path = self
            .config
            .unwrap_or_else(|| "config/dataplane.toml".into());
        let mut config = Config::load(&path, explicit)?;
        if let Some(v) = self.redis {
            config.redis = v;
        }
        if let Some(v) = self.redis_password_file {
            config.redis_password_file = Some(v);
        }
        if let Some(v) = self.secret_file {
            config.secret_file = v;
        }
        Ok(config)
    }
}

fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.common.load()?;
    if let Some(v) = a.listen {
        config.listen = v;
    }
    if let Some(v) = a.shards {
        config.shards = Some(v);
    }
    if a.no_pin {
        config.pin_shards = false;
    }
    if let Some(v) = a.demo_issuer {
        config.demo_issuer = v;
    }
    if a.no_worker {
        config.worker.enabled = false;
    }
    if let Some(v) = a.admin_listen {
        config.admin.listen = v;
    }
    if let Some(v) = a.admin_token {
        config.admin.token = Some(v);
    }
    let settings = config.validate()?;
    let stop = server::stop_on_signals()?;
    let metrics = std::sync::Arc::new(seckill_dataplane::metrics::Metrics::new(
        &settings.node,
        settings.started_ms,
        settings.shards,
        settings.worker.enabled,
    ));
    let worker = settings.worker.enabled.then(|| {
        let (mut opts, stop) = (settings.worker_options(), stop.clone());
        let nice = settings.worker.nice;
        opts.metrics = metrics.worker.clone();
        std::thread::Builder::new()
            .name("seckill-worker".into())
            .spawn(move || {
                lower_priority(nice);
                orders::worker::run(opts, &stop)
            })
    });
    let served = server::run_until(settings, stop.clone(), metrics);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(w) = worker {
        let _ = w?.join();
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Sets the calling thread's nice value (on Linux a thread's own, not its process's).
fn lower_priority(nice: u8) {
    if let Err(e) = rustix::process::setpriority_process(None, i32::from(nice)) {
        tracing::warn!(nice, error = %e, "cannot lower the order worker's priority; it shares the shards' cores as their equal");
    }
}

fn worker(a: WorkerArgs) -> anyhow::Result<ExitCode> {
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

fn reconcile(
    redis: &str,
    id: &str,
    mut dbs: Vec<PathBuf>,
    json: bool,
    repair: bool,
) -> anyhow::Result<ExitCode> {
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

fn limits(redis: &str, command: LimitsCommand) -> anyhow::Result<ExitCode> {
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

fn blacklist(redis: &str, command: BlacklistCommand) -> anyhow::Result<ExitCode> {
    use seckill_dataplane::guard::blacklist;
    let mut con = connect(redis)?;
    match command {
        BlacklistCommand::Add { entry, ttl_s } => {
            let entry = blacklist::parse_entry(&entry).map_err(anyhow::Error::msg)?;
            let until = blacklist::add(&mut con, &entry, ttl_s)?;
            println!("blocked {entry} until {}", format_instant_ms(until));
        }
        BlacklistCommand::Remove { entry } => {
            let entry = blacklist::parse_entry(&entry).map_err(anyhow::Error::msg)?;
            if blacklist::remove(&mut con, &entry)? {
                println!("unblocked {entry}");
            } else {
                bail!("{entry} was not blocked");
            }
        }
        BlacklistCommand::List => {
            let entries = blacklist::list(&mut con)?;
            if entries.is_empty() {
                println!("the blacklist is empty");
            }
            for (entry, until) in entries {
                println!("{entry:<48} until {}", format_instant_ms(until));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn campaign(redis: &str, command: CampaignCommand) -> anyhow::Result<ExitCode> {
    let mut con = connect(redis)?;
    let con = &mut con;
    match command {
        CampaignCommand::Create { file, id } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let mut spec =
                CampaignSpec::from_toml(&text).with_context(|| format!("in {}", file.display()))?;
            if let Some(id) = id {
                spec.id = id;
            }
            let c = control::create(con, spec)?;
            println!(
                "created campaign {} ({}), state {}",
                c.spec.id, c.spec.name, c.state
            );
        }
        CampaignCommand::List => {
            let all = control::list(con)?;
            if all.is_empty() {
                println!("no campaigns");
            }
            println!(
                "{:<16} {:<8} {:>10} {:>10} {:>5} {:<25} name",
                "id", "state", "total", "remaining", "parts", "starts"
            );
            for c in &all {
                let remaining: i64 = control::partitions(con, c)?
                    .iter()
                    .map(|p| p.stock + p.transit)
                    .sum();
                println!(
                    "{:<16} {:<8} {:>10} {:>10} {:>5} {:<25} {}",
                    c.spec.id,
                    c.state,
                    c.spec.total,
                    remaining,
                    c.spec.partitions,
                    c.starts_at_ms
                        .map(format_instant_ms)
                        .unwrap_or_else(|| "-".into()),
                    c.spec.name
                );
            }
        }
        CampaignCommand::Show { id, json } => return show(con, &id, json),
        CampaignCommand::Arm { id } => {
            let c = control::arm(con, &id)?;
            println!(
                "armed {}: {} units in {} partitions",
                id, c.spec.total, c.spec.partitions
            );
        }
        CampaignCommand::Start { id } => act(con, &id, Action::Start)?,
        CampaignCommand::Pause { id } => act(con, &id, Action::Pause)?,
        CampaignCommand::Resume { id } => act(con, &id, Action::Resume)?,
        CampaignCommand::Stop { id } => act(con, &id, Action::Stop)?,
        CampaignCommand::Queue {
            id,
            json,
            admit_per_s,
        } => return queue(con, &id, json, admit_per_s),
        CampaignCommand::AuditDraw { id } => return audit_draw(con, &id),
    }
    Ok(ExitCode::SUCCESS)
}

fn act(con: &mut Connection, id: &str, action: Action) -> anyhow::Result<()> {
    let c = control::act(con, id, action)?;
    println!("{id} is {}", c.state);
    Ok(())
}

fn show(con: &mut Connection, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let c: Campaign = control::get(con, id)?;
    let parts = control::partitions(con, &c)?;
    let l = ledger::check(con, &c)?;
    if json {
        let v = serde_json::json!({
            "campaign": {
                "spec": c.spec,
                "state": c.state,
                "starts_at_ms": c.starts_at_ms,
                "ends_at_ms": c.ends_at_ms,
            },
            "partitions": parts,
            "ledger": l,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let s = &c.spec;
        println!("{} — {}", s.id, s.name);
        println!("  state        {}", c.state);
        println!(
            "  total        {} units, {} partitions, at most {} per buyer",
            s.total, s.partitions, s.per_user_limit
        );
        println!(
            "  price        {}.{:02}",
            s.price_cents / 100,
            s.price_cents % 100
        );
        println!("  hold         {} s to pay", s.hold_ttl_s);
        println!(
            "  starts       {}",
            c.starts_at_ms
                .map(format_instant_ms)
                .unwrap_or_else(|| "when started".into())
        );
        println!(
            "  ends         {}",
            c.ends_at_ms
                .map(format_instant_ms)
                .unwrap_or_else(|| "when stopped".into())
        );
        println!("  partition   initial    stock     held     sold  transit");
        for p in &parts {
            println!(
                "  {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
                p.partition, p.initial, p.stock, p.held, p.sold, p.transit
            );
        }
        println!("  ledger       {l}");
    }
    if !l.holds() {
        eprintln!("the ledger of {id} does not hold");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A campaign's waiting room, after changing its admission rate when asked to.
fn queue(
    con: &mut Connection,
    id: &str,
    json: bool,
    admit_per_s: Option<u32>,
) -> anyhow::Result<ExitCode> {
    let c = control::get(con, id)?;
    let Some(spec) = c.spec.queue else {
        return Err(control::ControlError::NoQueue(id.to_string()).into());
    };
    if let Some(rate) = admit_per_s {
        valid_admit_rate(rate)
            .map_err(|e| anyhow::anyhow!("--admit-per-s {rate}: {}", e.problem))?;
        control::set_admit_rate(con, id, rate)?;
        if !json {
            println!(
                "{id} lets {rate} shoppers through per second from the admission's next round"
            );
        }
    }
    let mut q = control::queue_progress(con, id)?;
    // Redis holds the room's rules from the arming on; until then they are the file's.
    if q.admit_per_s == 0 {
        q.admit_per_s = spec.admit_per_s;
    }
    if q.pass_ttl_ms == 0 {
        q.pass_ttl_ms = spec.pass_ttl_s as i64 * 1000;
    }
    if json {
        let mut v = serde_json::to_value(&q)?;
        v["campaign"] = id.into();
        v["waiting"] = q.waiting().into();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{id} — waiting room");
    match q.drawn_ms {
        Some(_) => println!(
            "  waiting      {} (a line of {}: {} drawn from the pre-queue, {} joined since)",
            q.waiting(),
            q.line,
            q.pre,
            q.line.saturating_sub(q.pre)
        ),
        None => println!("  waiting      {} in the pre-queue", q.waiting()),
    }
    println!("  admitted     {}", q.admitted);
    println!(
        "  rate         {} shoppers/s, each pass good for {} s",
        q.admit_per_s,
        q.pass_ttl_ms / 1000
    );
    println!(
        "  passes       {} outstanding, {} used, {} expired",
        q.outstanding, q.used, q.expired
    );
    println!("  sold out     {}", if q.sold_out { "yes" } else { "no" });
    match &q.leader {
        Some(who) => println!("  admission    run by {who}"),
        None => println!("  admission    no node holds its lease"),
    }
    match (&q.seed, q.drawn_ms) {
        (Some(seed), Some(at)) => {
            println!("  draw         {}, seed {seed}", format_instant_ms(at))
        }
        _ => println!(
            "  draw         at the opening; the seed is shown then{}",
            q.seed_sha1
                .as_deref()
                .map(|f| format!(" (its SHA-1: {f})"))
                .unwrap_or_default()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// Mismatched shoppers listed by name; the rest are counted.
const MISMATCHES_LISTED: usize = 20;

fn audit_draw(con: &mut Connection, id: &str) -> anyhow::Result<ExitCode> {
    let a = control::audit_draw(con, id)?;
    let list = |users: &[String]| {
        for user in users.iter().take(MISMATCHES_LISTED) {
            println!("    {user}");
        }
        if users.len() > MISMATCHES_LISTED {
            println!("    … and {} more", users.len() - MISMATCHES_LISTED);
        }
    };
    println!("draw of {id}");
    println!("  seed         {}", a.seed);
    println!(
        "  commitment   {}",
        if a.seed_matches_commitment {
            "the seed's SHA-1 is the one shown before the opening"
        } else {
            "MISSING OR DIFFERENT: this is not the seed shown before the opening"
        }
    );
    println!(
        "  checked      {} pre-queue joiners (the draw counted {})",
        a.checked, a.drawn
    );
    println!("  mismatches   {}", a.mismatched.len());
    list(&a.mismatched);
    println!("  out of order {}", a.out_of_order.len());
    list(&a.out_of_order);
    if !a.fair() {
        eprintln!(
            "the draw of {id} does not hold: {} of {} shoppers off the seed, {} admitted out of order, {} joiners counted at the draw{}",
            a.mismatched.len(),
            a.checked,
            a.out_of_order.len(),
            a.drawn,
            if a.seed_matches_commitment { "" } else { ", the seed not the one committed to" }
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
