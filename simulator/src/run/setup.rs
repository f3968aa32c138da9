//! Before the load: every account's token, the sale's campaign created or found and
//! shown by every target, the tickets earned, and the run's clock.

use anyhow::{bail, Context as _};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::trace::monotonic_now;
use crate::plan;
use crate::provider::Price;
use crate::scenario::{Queue, Scenario};
use crate::shop::ShopSigner;
use crate::tally::Tally;
use seckill_core::api;
use seckill_core::campaign::{format_instant_ms, Action, CampaignSpec, QueueSpec};
use seckill_core::control;

/// Each name's token from the demo issuer at `target`, asked by `threads` threads.
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

/// Every account's bearer token: signed here as the shop signs them, with the scenario's
/// shop key, or asked of the first target's demo issuer.
pub(super) fn account_tokens(s: &Scenario, first: &str) -> anyhow::Result<Vec<String>> {
    let names = plan::account_names(s.population.users);
    Ok(match &s.token_key {
        Some(path) => {
            let shop = ShopSigner::new(
                path,
                s.token_issuer.as_deref(),
                s.token_audience.as_deref(),
                |f| format!("token_{f}"),
            )?;
            let expires = seckill_core::now_ms() + 3_600_000;
            names.iter().map(|n| shop.token(n, expires)).collect()
        }
        None => tokens(first, &names, 8)?,
    })
}

/// The sale a run sells: its campaign, when and whether the run opens it, its waiting
/// room.
pub(super) struct Sale {
    pub(super) campaign: String,
    /// Whether the run created it (then every order in it is the run's).
    pub(super) created: bool,
    /// When a scheduled sale opens, ms since the epoch.
    pub(super) scheduled: Option<i64>,
    /// Whether the run opens the sale on time itself.
    pub(super) opens: bool,
    pub(super) room: Option<Queue>,
    pub(super) require_ticket: bool,
}

/// The scenario's campaign: a fresh copy created here, or an existing one, with the
/// waiting room it is sold through.
pub(super) fn set_up_sale(s: &Scenario) -> anyhow::Result<Sale> {
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
    Ok(Sale {
        campaign,
        created,
        scheduled,
        opens,
        room,
        require_ticket: spec.require_ticket,
    })
}

/// Waits until every target shows the campaign, for at most 5 s; the price of its units,
/// as the first target shows it to buyers.
pub(super) fn wait_until_shown(urls: &[&str], campaign: &str) -> anyhow::Result<Price> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .proxy(None)
        .build()
        .into();
    let seen = Instant::now();
    let mut price = None;
    for url in urls {
        let answer = loop {
            match agent.get(&format!("{url}/api/campaigns/{campaign}")).call() {
                Ok(r) => break r,
                Err(_) if seen.elapsed() > Duration::from_secs(5) => {
                    bail!("target: {url} does not show campaign {campaign}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        if price.is_none() {
            let text = answer.into_body().read_to_string()?;
            price = Some(Price::of_answer(&text).with_context(|| {
                format!("target: {url} answered campaign {campaign} with {text}")
            })?);
        }
    }
    price.with_context(|| format!("target: no node shows campaign {campaign}"))
}

/// Every account but the skipper's proves its work before the sale: the tickets by
/// account, and what earning them saw.
pub(super) fn earn_tickets(
    s: &Scenario,
    campaign: &str,
    tokens: &[String],
    targets: &[SocketAddr],
    threads: usize,
) -> (Vec<Option<String>>, Tally) {
    let accounts = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), plan::account_ip(s, i)))
        .collect();
    let (mut t, seen) = crate::earn::earn_tickets(targets, campaign, accounts, threads);
    t[plan::skipper_user(s.population.users)] = None;
    (t, seen)
}

/// When the plan starts (on `Instant` and on the monotonic clock), and when the sale
/// opens: from the start, and in ms since the epoch.
pub(super) struct Clock {
    pub(super) start: Instant,
    pub(super) origin: Duration,
    pub(super) opens_in: Duration,
    pub(super) opens_ms: i64,
}

impl Clock {
    /// The plan starts half a second from now, or for a scheduled sale, `starts_in_s`
    /// before it opens.
    pub(super) fn of(s: &Scenario, scheduled: Option<i64>) -> anyhow::Result<Clock> {
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
        Ok(Clock {
            start,
            origin,
            opens_in,
            opens_ms,
        })
    }
}

/// Starts the sale `opens_in` from now, on a thread of its own.
pub(super) fn open_later(
    s: &Scenario,
    campaign: &str,
    opens_in: Duration,
) -> std::thread::JoinHandle<anyhow::Result<()>> {
    let (redis, id) = (s.redis_url(), campaign.to_string());
    std::thread::spawn(move || -> anyhow::Result<()> {
        std::thread::sleep(opens_in);
        let mut con = control::connect(&redis?)?;
        control::act(&mut con, &id, Action::Start)?;
        Ok(())
    })
}
