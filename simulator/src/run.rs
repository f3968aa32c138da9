//! `seckill-sim run`: set up the sale, run the plan, report, check the ledger and the
//! thresholds.

use anyhow::Context as _;
use clap::Args;
use seckill_core::connection::Connection;
use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_core::campaign::Campaign;
use seckill_core::{control, ledger, payments};
use seckill_orders::reconcile;

use crate::context::{Context, Progress};
use crate::engine;
use crate::plan;
use crate::provider::Provider;
pub use crate::report::{summary, Report};
use crate::report::{DrawCheck, PaymentEvidence, QueueReport, Settled};
use crate::scenario::{Overrides, Queue, Scenario};
use crate::tally::Tally;

mod setup;
mod trace;

use setup::{account_tokens, earn_tickets, open_later, set_up_sale, wait_until_shown, Clock, Sale};
pub use trace::Trace;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The scenario file.
    #[arg(long, default_value = "config/scenarios/launch.toml")]
    pub scenario: PathBuf,
    #[command(flatten)]
    pub overrides: Overrides,
    /// Write the report as JSON to this file ("-": to standard output, instead of the
    /// summary).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG plot of throughput and latency over time to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the report as one self-contained HTML page (charts, winners, payments,
    /// ledger, thresholds, fairness, scenario) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Write every purchase answered or failed (not those never sent or still unanswered
    /// at the end) to this file as CSV: the instant its latency is measured from (when it
    /// was planned; through a waiting room, when it was sent), in seconds on the machine's
    /// monotonic clock (CLOCK_MONOTONIC: `perf record -k CLOCK_MONOTONIC` and ftrace's
    /// `trace_clock=mono` read it), its latency in ms, and its outcome; to line the slow
    /// ones up with what the machine did at the time. Written after the report.
    #[arg(long, value_name = "FILE.csv")]
    pub trace: Option<PathBuf>,
    /// Seed of the arrival plan (the same seed, the same plan).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let mut s = Scenario::load(&a.scenario)?;
    s.apply(&a.overrides);
    s.validate()?;
    let (report, trace) = execute_traced(&s, a.seed, a.trace.is_some())?;
    if let Some(p) = &a.plot {
        std::fs::write(p, crate::plot::svg(&report))
            .with_context(|| format!("--plot: writing {}", p.display()))?;
    }
    if let Some(p) = &a.report {
        write_report(p, &report)?;
    }
    let json = serde_json::to_string_pretty(&report)?;
    match &a.json {
        Some(p) if p.as_os_str() == "-" => println!("{json}"),
        Some(p) => {
            std::fs::write(p, &json).with_context(|| format!("--json: writing {}", p.display()))?;
            print!("{}", summary(&report));
        }
        None => print!("{}", summary(&report)),
    }
    if let (Some(p), Some(t)) = (&a.trace, trace) {
        t.write(p)
            .with_context(|| format!("--trace: writing {}", p.display()))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Resolves `http://host:port` to a socket address.
fn resolve(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("http://")
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("target: cannot resolve {url}"))
}

/// Writes the report as the HTML page of `--report`.
pub fn write_report(path: &std::path::Path, report: &Report) -> anyhow::Result<()> {
    std::fs::write(path, crate::html::page(report))
        .with_context(|| format!("--report: writing {}", path.display()))
}

/// Runs a validated scenario and builds its report.
pub fn execute(s: &Scenario, seed: u64) -> anyhow::Result<Report> {
    execute_traced(s, seed, false).map(|(report, _)| report)
}

/// Runs a validated scenario and builds its report, and with `trace`, the run's trace.
pub fn execute_traced(
    s: &Scenario,
    seed: u64,
    trace: bool,
) -> anyhow::Result<(Report, Option<Trace>)> {
    let urls = s.targets();
    let targets = urls
        .iter()
        .map(|u| resolve(u))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let threads = s
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // The provider's secret is read before anything is set up: a wrong one stops the run.
    let signer = s
        .webhook_secret_file
        .as_deref()
        .map(|p| crate::provider::read_secret(p, "webhook_secret_file"))
        .transpose()?;
    let tokens = account_tokens(s, urls[0])?;
    let sale = set_up_sale(s)?;
    let price = wait_until_shown(&urls, &sale.campaign)?;
    let provider = signer.map(|signer| {
        Provider::new(signer, price, seckill_core::now_ms()).with_copies(s.webhook_copies)
    });
    let (tickets, before) = if sale.require_ticket {
        earn_tickets(s, &sale.campaign, &tokens, &targets, threads)
    } else {
        (vec![None; tokens.len()], Tally::new())
    };
    let clock = Clock::of(s, sale.scheduled)?;
    let opener = sale
        .opens
        .then(|| open_later(s, &sale.campaign, clock.opens_in));
    let plan = match &sale.room {
        Some(q) => plan::build_queued(s, q, seed),
        None => plan::build(s, seed),
    };
    let planned = plan.len() as u64;
    let ctx = Arc::new(Context {
        progress: Progress::default(),
        targets,
        campaign: sale.campaign.clone(),
        connections: s.connections,
        tokens,
        tickets,
        start: clock.start,
        opening: Duration::from_secs_f64(s.campaign.starts_in_s),
        opens_ms: (sale.opens || sale.scheduled.is_some()).then_some(clock.opens_ms),
        deadline: clock.start + Duration::from_secs_f64(s.duration_s) + engine::GRACE,
        resend_for: Duration::from_secs_f64(s.population.resend_for_s),
        trace,
        provider,
    });
    let mut tally = load(plan, threads, ctx, s.duration_s);
    let trace = trace.then(|| {
        let mut purchases = std::mem::take(&mut tally.trace);
        purchases.sort_by_key(|p| p.planned);
        Trace {
            origin: clock.origin,
            purchases,
        }
    });
    let elapsed = tally.last_answer.as_secs_f64().max(s.duration_s);
    if let Some(o) = opener {
        o.join()
            .map_err(|_| anyhow::anyhow!("the opener panicked"))??;
    }
    let report = settled_report(s, sale, (clock.opens_ms, planned, elapsed), (tally, before))?;
    Ok((report, trace))
}

/// Runs the plan, with the live progress line on a terminal.
fn load(plan: Vec<plan::Arrival>, threads: usize, ctx: Arc<Context>, duration: f64) -> Tally {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let (ctx, done) = (ctx.clone(), done.clone());
        std::thread::spawn(move || show_progress(&ctx, &done, duration))
    });
    let tally = engine::run(plan, threads, ctx);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    tally
}

/// The report, once the shards' pipelines have settled: the ledger, the waiting room's
/// and the reconciliation's beside what the load saw.
fn settled_report(
    s: &Scenario,
    sale: Sale,
    (opens_ms, planned, elapsed): (i64, u64, f64),
    (tally, before): (Tally, Tally),
) -> anyhow::Result<Report> {
    // Let the shards' pipelines settle before reading the ledger.
    std::thread::sleep(Duration::from_millis(300));
    let campaign = sale.campaign;
    let mut con = s.connect()?;
    let c = control::get(&mut con, &campaign)?;
    let ledger = ledger::check(&mut con, &c)?;
    let queue = match &sale.room {
        Some(q) => Some(queue_report(s, q, &mut con, &campaign, &tally)?),
        None => None,
    };
    let reconciliation = if s.stores.is_empty() {
        None
    } else {
        Some(reconcile_settled(&mut con, &campaign, &s.stores)?)
    };
    let payments = payment_evidence(&mut con, &c, sale.created, &tally)?;
    let settled = Settled {
        ledger,
        reconciliation,
        queue,
        payments,
    };
    Ok(crate::report::build(
        s,
        campaign,
        (opens_ms, planned, elapsed),
        (tally, before),
        settled,
    ))
}

/// Redis's side of the payments: the run's orders sold (every order of a campaign it
/// created; of another, the orders it held), and the campaign's payments as the nodes
/// recorded them.
fn payment_evidence(
    con: &mut Connection,
    c: &Campaign,
    created: bool,
    t: &Tally,
) -> anyhow::Result<PaymentEvidence> {
    let held: HashSet<&str> = t.held.iter().map(|(_, _, o)| o.as_str()).collect();
    let sold = reconcile::redis_orders(con, c)
        .with_context(|| format!("reading the orders of {}", c.spec.id))?
        .into_iter()
        .filter(|o| matches!(o.status.as_str(), "paid" | "delivered"))
        .filter(|o| created || held.contains(o.order_id.as_str()))
        .map(|o| o.order_id)
        .collect();
    let records = payments::of_campaign(con, &c.spec.id, c.spec.partitions)
        .with_context(|| format!("reading the payments of {}", c.spec.id))?;
    Ok(PaymentEvidence {
        sold,
        recorded: payments::Money::of(&c.spec.currency, &records),
    })
}

/// The room as Redis has it, its draw checked against the seed, and the fairness table
/// from the accounts that held a unit.
fn queue_report(
    s: &Scenario,
    q: &Queue,
    con: &mut Connection,
    campaign: &str,
    t: &Tally,
) -> anyhow::Result<QueueReport> {
    let room = control::queue_progress(con, campaign)?;
    let draw = match room.drawn_ms {
        Some(_) => Some(DrawCheck::of(&control::audit_draw(con, campaign)?)),
        None => None,
    };
    let winners = t.held.iter().map(|(p, user, _)| (*p, *user)).collect();
    let fairness = crate::fairness::table_of(
        &t.joined,
        &winners,
        Duration::from_secs_f64(s.campaign.starts_in_s),
        Duration::from_secs_f64(q.window(s)),
        &q.poll_ms,
    );
    Ok(QueueReport {
        room,
        draw,
        fairness,
    })
}

/// Reconciles once the workers have caught up (every event read, acknowledged and
/// delivered), or as things stand after 15 s.
fn reconcile_settled(
    con: &mut Connection,
    campaign: &str,
    stores: &[PathBuf],
) -> anyhow::Result<reconcile::Report> {
    let since = Instant::now();
    loop {
        let r = reconcile::reconcile(con, campaign, stores)
            .with_context(|| format!("reconciling {campaign}"))?;
        let settled = r.drained() && r.missing.is_empty() && r.undelivered.is_empty();
        if settled || since.elapsed() > Duration::from_secs(15) {
            reconcile::record(con, &r).context("recording the reconciliation")?;
            return Ok(r);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// One line on the terminal, rewritten each second: how far, how fast, what came back,
/// and the p99 of the purchases answered in that second.
fn show_progress(ctx: &Context, done: &std::sync::atomic::AtomicBool, duration: f64) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut last = 0;
    while !done.load(Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        let p = &ctx.progress;
        let answered = p.answered.load(Relaxed);
        let p99 = p.window.lock().map_or(0.0, |mut w| {
            let v = w.value_at_quantile(0.99) as f64 / 1000.0;
            w.reset();
            v
        });
        let t = ctx.start.elapsed().as_secs_f64();
        eprint!(
            "\r{t:5.1}/{duration:.0} s  {:>7}/s  p99 {p99:>8.2} ms  held {:>6}  refused {:>8}  errors {:>6}   ",
            answered - last,
            p.held.load(Relaxed),
            p.refused.load(Relaxed),
            p.errors.load(Relaxed)
        );
        last = answered;
    }
    eprintln!();
}
