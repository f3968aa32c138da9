//! `seckill-sim run`: set up the sale, run the plan, report, check the ledger and the
//! thresholds.

use anyhow::{bail, Context as _};
use clap::Args;
use seckill_core::connection::Connection;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_core::campaign::{format_instant_ms, Action, CampaignSpec, QueueSpec};
use seckill_core::{api, control, ledger};
use seckill_orders::reconcile;

use crate::engine::{self, Tally};
use crate::plan;
pub use crate::report::{summary, Report};
use crate::report::{DrawCheck, QueueReport};
use crate::scenario::{Overrides, Queue, Scenario};

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
    /// Write the report as one self-contained HTML page (charts, winners, ledger,
    /// thresholds, fairness, scenario) to this file.
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

fn tokens(target: &str, names: &[String], threads: usize) -> anyhow::Result<Vec<String>> {
    let chunk = names.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<_> = names
        .chunks(chunk)
        .map(|names| {
            let (names, target) = (names.to_vec(), target.to_string());
            std::thread::spawn(move || -> anyhow::Result<Vec<String>> {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(10)))
                    .proxy(None)
                    .build()
                    .into();
                names
                    .iter()
                    .map(|n| {
                        let answer = agent
                            .post(&format!("{target}/api/session"))
                            .send_json(api::SessionBody { user_id: n.clone() })
                            .context("getting a token (is the data plane's demo issuer on?)")?
                            .into_body()
                            .read_to_string()?;
                        Ok(serde_json::from_str::<api::Session>(&answer)
                            .context("no token in the answer")?
                            .token
                            .into_owned())
                    })
                    .collect()
            })
        })
        .collect();
    let mut out = Vec::with_capacity(names.len());
    for p in parts {
        out.extend(
            p.join()
                .map_err(|_| anyhow::anyhow!("a token thread panicked"))??,
        );
    }
    Ok(out)
}

/// Creates and arms a fresh copy of the campaign in `file` (with the scenario's waiting
/// room, if it gives one). A scheduled one gets its `starts_at` (returned) far enough
/// ahead for the run to set up, and is started at once.
fn prepare_sale(s: &Scenario, file: &std::path::Path) -> anyhow::Result<(String, Option<i64>)> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("campaign.create: reading {}", file.display()))?;
    let mut spec =
        CampaignSpec::from_toml(&text).with_context(|| format!("in {}", file.display()))?;
    let stamp = seckill_core::now_ms() % 1_000_000_000;
    spec.id = format!(
        "{}-sim{stamp}",
        spec.id.chars().take(16).collect::<String>()
    );
    // Set-up before the opening: the nodes see the campaign, shoppers earn their tickets.
    let set_up_ms = if spec.require_ticket { 20_000 } else { 2_000 };
    let starts_at = s
        .campaign
        .scheduled
        .then(|| seckill_core::now_ms() + set_up_ms + (s.campaign.starts_in_s * 1000.0) as i64);
    spec.starts_at = starts_at.map(format_instant_ms);
    spec.ends_at = None;
    if let Some(q) = &s.queue {
        let room = match (spec.queue, q.admit_per_s) {
            (Some(room), _) => Some(QueueSpec {
                admit_per_s: q.admit_per_s.unwrap_or(room.admit_per_s),
                pass_ttl_s: q.pass_ttl_s.unwrap_or(room.pass_ttl_s),
            }),
            (None, Some(admit_per_s)) => Some(QueueSpec {
                admit_per_s,
                pass_ttl_s: q.pass_ttl_s.unwrap_or(60),
            }),
            (None, None) => None,
        };
        spec.queue = room;
    }
    let mut con = s.connect()?;
    let id = spec.id.clone();
    control::create(&mut con, spec)?;
    control::arm(&mut con, &id)?;
    if starts_at.is_some() {
        control::act(&mut con, &id, Action::Start)?;
    }
    Ok((id, starts_at))
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

/// Every purchase of a run answered or failed, in the order of the instants their latencies
/// are measured from.
pub struct Trace {
    /// The run's start on the monotonic clock.
    origin: Duration,
    purchases: Vec<engine::Traced>,
}

impl Trace {
    /// Writes it as CSV: the instant measured from (monotonic clock, s), latency (ms), outcome.
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(w, "monotonic_s,latency_ms,outcome")?;
        for p in &self.purchases {
            let at = self.origin + p.planned;
            writeln!(
                w,
                "{}.{:06},{:.3},{}",
                at.as_secs(),
                at.subsec_micros(),
                p.took_us as f64 / 1000.0,
                p.outcome
            )?;
        }
        w.flush()
    }
}

/// Now on the monotonic clock, which `Instant` reads too.
fn monotonic_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
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
    let users = s.population.users;
    let names = plan::account_names(users);
    let tokens = match &s.secret_file {
        Some(path) => {
            let secret = seckill_core::secrets::read_secret(path)
                .map_err(|e| anyhow::anyhow!("secret_file: {e}"))?;
            let expires = seckill_core::now_ms() + 3_600_000;
            names
                .iter()
                .map(|n| seckill_core::auth::issue_token(&secret, n, expires))
                .collect()
        }
        None => tokens(urls[0], &names, 8)?,
    };
    let (campaign, created, scheduled) = match (&s.campaign.create, &s.campaign.id) {
        (Some(file), _) => {
            let (id, starts_at) = prepare_sale(s, file)?;
            (id, true, starts_at)
        }
        (None, Some(id)) => (id.clone(), false, None),
        (None, None) => bail!("campaign: give create or id"),
    };
    let mut con = s.connect()?;
    let existing = control::get(&mut con, &campaign)?;
    // A campaign created here, or an existing one still armed, is opened on time (a
    // scheduled one by its clock).
    let opens =
        scheduled.is_none() && (created || existing.state == seckill_core::campaign::State::Armed);
    let spec = existing.spec;
    // A campaign with a waiting room is sold through it, as the scenario's [queue] says
    // (or by its defaults).
    let room: Option<Queue> = match (&spec.queue, &s.queue) {
        (Some(_), q) => Some(q.clone().unwrap_or_default()),
        (None, Some(_)) => bail!(
            "queue: campaign {campaign} has no waiting room (give queue.admit_per_s for the created copy to have one)"
        ),
        (None, None) => None,
    };
    if let Some(q) = &room {
        q.validate(s)?;
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .proxy(None)
        .build()
        .into();
    let seen = Instant::now();
    for url in &urls {
        while agent
            .get(&format!("{url}/api/campaigns/{campaign}"))
            .call()
            .is_err()
        {
            if seen.elapsed() > Duration::from_secs(5) {
                bail!("target: {url} does not show campaign {campaign}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (tickets, before) = if spec.require_ticket {
        // Every account but the skipper's proves its work before the sale.
        let accounts = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), plan::account_ip(s, i)))
            .collect();
        let (mut t, seen) = crate::earn::earn_tickets(&targets, &campaign, accounts, threads);
        t[plan::skipper_user(users)] = None;
        (t, seen)
    } else {
        (vec![None; tokens.len()], Tally::new())
    };

    let starts_in_ms = (s.campaign.starts_in_s * 1000.0) as i64;
    let lead_ms = match scheduled {
        Some(at) => at - starts_in_ms - seckill_core::now_ms(),
        None => 500,
    };
    if lead_ms < 0 {
        bail!(
            "campaign.scheduled: the sale opened before the run could start (set-up took {} ms too long)",
            -lead_ms
        );
    }
    let lead = Duration::from_millis(lead_ms as u64);
    let (start, origin) = (Instant::now() + lead, monotonic_now() + lead);
    let opens_in = Duration::from_millis((lead_ms + starts_in_ms) as u64);
    let opens_ms =
        scheduled.unwrap_or_else(|| seckill_core::now_ms() + opens_in.as_millis() as i64);
    let opener = opens.then(|| {
        let (redis, id) = (s.redis_url(), campaign.clone());
        std::thread::spawn(move || -> anyhow::Result<()> {
            std::thread::sleep(opens_in);
            let mut con = control::connect(&redis?)?;
            control::act(&mut con, &id, Action::Start)?;
            Ok(())
        })
    });
    let plan = match &room {
        Some(q) => plan::build_queued(s, q, seed),
        None => plan::build(s, seed),
    };
    let planned = plan.len() as u64;
    let ctx = Arc::new(engine::Context {
        progress: engine::Progress::default(),
        targets,
        campaign: campaign.clone(),
        connections: s.connections,
        tokens,
        tickets,
        start,
        opening: Duration::from_secs_f64(s.campaign.starts_in_s),
        opens_ms: (opens || scheduled.is_some()).then_some(opens_ms),
        deadline: start + Duration::from_secs_f64(s.duration_s) + engine::GRACE,
        resend_for: Duration::from_secs_f64(s.population.resend_for_s),
        trace,
    });
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let (ctx, done, duration) = (ctx.clone(), done.clone(), s.duration_s);
        std::thread::spawn(move || show_progress(&ctx, &done, duration))
    });
    let mut tally = engine::run(plan, threads, ctx);
    let trace = trace.then(|| {
        let mut purchases = std::mem::take(&mut tally.trace);
        purchases.sort_by_key(|p| p.planned);
        Trace { origin, purchases }
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let elapsed = tally.last_answer.as_secs_f64().max(s.duration_s);
    if let Some(o) = opener {
        o.join()
            .map_err(|_| anyhow::anyhow!("the opener panicked"))??;
    }

    // Let the shards' pipelines settle before reading the ledger.
    std::thread::sleep(Duration::from_millis(300));
    let mut con = s.connect()?;
    let c = control::get(&mut con, &campaign)?;
    let ledger = ledger::check(&mut con, &c)?;
    let queue = match &room {
        Some(q) => Some(queue_report(s, q, &mut con, &campaign, &tally)?),
        None => None,
    };
    let reconciliation = if s.stores.is_empty() {
        None
    } else {
        Some(reconcile_settled(&mut con, &campaign, &s.stores)?)
    };
    let report = crate::report::build(
        s,
        campaign,
        opens_ms,
        planned,
        elapsed,
        (tally, before),
        ledger,
        reconciliation,
        queue,
    );
    Ok((report, trace))
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
fn show_progress(ctx: &engine::Context, done: &std::sync::atomic::AtomicBool, duration: f64) {
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
