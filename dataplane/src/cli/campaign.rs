//! `campaign`: create, arm, start, pause, resume, stop and inspect campaigns, and their
//! waiting rooms.

use anyhow::Context;
use clap::Subcommand;
use seckill_core::campaign::{format_instant_ms, valid_admit_rate, Action, Campaign, CampaignSpec};
use seckill_core::connection::Connection;
use seckill_core::{control, ledger};
use std::path::PathBuf;
use std::process::ExitCode;

use super::connect;

#[derive(Subcommand)]
pub(super) enum CampaignCommand {
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

pub(super) fn run(redis: &str, command: CampaignCommand) -> anyhow::Result<ExitCode> {
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
