//! A closed-loop burst: `concurrency` connections, each buying for its share of `users`
//! until `requests` purchases were sent, a share of the buyers paying at once (with the
//! provider's signed webhook, or through the demo provider); then a summary and the
//! campaign's ledger.

use anyhow::{bail, Context};
use clap::Args;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::provider::{PaymentArgs, Price, Provider, WEBHOOK_PATH};
use seckill_core::cli_args::{redis_flag, RedisArgs};
use seckill_core::{api, control, ledger};

#[derive(Args, Debug, Clone)]
#[command(mut_args(redis_flag(|a| a.help("Redis of the control plane, to check the ledger afterwards"))))]
pub struct BurstArgs {
    /// Base URL of a data plane with the demo token issuer on.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    target: String,
    /// Campaign to buy from.
    #[arg(long, default_value = "demo")]
    campaign: String,
    /// Distinct shoppers.
    #[arg(long, default_value_t = 2000)]
    users: usize,
    /// Purchase requests in all.
    #[arg(long, default_value_t = 6000)]
    requests: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Fraction of buyers who pay for their hold right away (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pay: f64,
    #[command(flatten)]
    payment: PaymentArgs,
    #[command(flatten)]
    redis: RedisArgs,
}

pub fn run(a: &BurstArgs) -> anyhow::Result<ExitCode> {
    if a.users == 0 || a.concurrency == 0 {
        bail!("--users and --concurrency must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.pay) {
        bail!("--pay must be between 0 and 1");
    }
    let provider = match a.payment.signer()? {
        Some(signer) => Some(Provider::new(signer, price(a)?, seckill_core::now_ms())),
        None => None,
    };
    let sent = Arc::new(AtomicUsize::new(0));
    let outcomes: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let started = Instant::now();
    let workers: Vec<_> = (0..a.concurrency)
        .map(|_| {
            let (a, sent, outcomes) = (a.clone(), sent.clone(), outcomes.clone());
            let provider = provider.clone();
            std::thread::spawn(move || worker(&a, provider.as_ref(), &sent, &outcomes))
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
    }
    let elapsed = started.elapsed();
    let outcomes = outcomes.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let total: usize = outcomes.values().sum();
    println!(
        "{total} purchases from {} users over {} connections in {:.2} s ({:.0}/s)",
        a.users,
        a.concurrency,
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    for (outcome, n) in outcomes.iter() {
        println!("  {outcome:<20} {n:>8}");
    }
    let url = a.redis.url_with_password()?;
    let mut con = control::connect(&url).with_context(|| {
        format!(
            "connecting to {} for the ledger",
            seckill_core::secrets::redact(&url)
        )
    })?;
    let c = control::get(&mut con, &a.campaign)?;
    let l = ledger::check(&mut con, &c)?;
    println!("ledger: {l}");
    Ok(if l.holds() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The price of the campaign's units, as its answer to buyers gives it.
fn price(a: &BurstArgs) -> anyhow::Result<Price> {
    let url = format!("{}/api/campaigns/{}", a.target, a.campaign);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .proxy(None)
        .build()
        .into();
    let text = agent
        .get(&url)
        .call()
        .with_context(|| format!("reading {url} for the price"))?
        .into_body()
        .read_to_string()?;
    Price::of_answer(&text).with_context(|| format!("{url} answered {text}"))
}

/// Pays `order` as the provider does: a signed `payment.succeeded` webhook, sent again
/// with the same id after a 429, a 503 or no answer (five tries at most). Its outcome.
fn pay_by_webhook(
    agent: &ureq::Agent,
    target: &str,
    p: &Provider,
    n: usize,
    order: &str,
) -> String {
    let w = p.payment(n, 0, order, 1, false);
    let mut wait = Duration::from_millis(250);
    for _ in 0..5 {
        let mut req = agent
            .post(&format!("{target}{WEBHOOK_PATH}"))
            .header("Content-Type", "application/json");
        for (name, value) in p.headers(&w, seckill_core::now_ms() / 1000) {
            req = req.header(name, value.as_str());
        }
        match req.send(w.body.as_bytes()) {
            Ok(mut r) if r.status().as_u16() == 200 => {
                let taken = r.body_mut().read_json::<api::PaymentTaken>();
                return match taken.map(|t| t.outcome) {
                    Ok(o) if o == "paid" => "held, paid".to_string(),
                    Ok(o) => format!("held, payment {o}"),
                    Err(_) => "held, payment unreadable".to_string(),
                };
            }
            Ok(r) if matches!(r.status().as_u16(), 429 | 503) => {
                read_out(r);
            }
            Ok(r) => return format!("held, pay answered {}", read_out(r)),
            Err(_) => {}
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(2));
    }
    "held, pay unanswered".to_string()
}

/// Pays `order` through the demo provider's route: its outcome.
fn pay_on_demo(agent: &ureq::Agent, target: &str, token: &str, order: &str) -> String {
    match agent
        .post(&format!("{target}/api/orders/{order}/pay"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_empty()
    {
        Ok(r) => match read_out(r) {
            code @ 400.. => format!("held, pay answered {code}"),
            _ => "held, paid".to_string(),
        },
        Err(e) => format!("held, pay failed: {}", kind(&e)),
    }
}

/// Reads an answer to its end, so that its connection stays the worker's, and gives its
/// status.
fn read_out(mut r: ureq::http::Response<ureq::Body>) -> u16 {
    let _ = std::io::copy(&mut r.body_mut().as_reader(), &mut std::io::sink());
    r.status().as_u16()
}

/// What kind of failure kept an answer from coming back: an outcome's name, without the
/// details that would make every failure an outcome of its own.
fn kind(e: &ureq::Error) -> &'static str {
    match e {
        ureq::Error::Io(_) => "network error",
        ureq::Error::Timeout(_) => "timed out",
        ureq::Error::ConnectionFailed => "connection failed",
        ureq::Error::HostNotFound => "dns failed",
        ureq::Error::Protocol(_) => "bad answer",
        _ => "other error",
    }
}

fn worker(
    a: &BurstArgs,
    provider: Option<&Provider>,
    sent: &AtomicUsize,
    outcomes: &Mutex<BTreeMap<String, usize>>,
) -> anyhow::Result<()> {
    // Every answer comes back as a response, whatever its status: its code and error
    // are the outcome.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .max_idle_connections_per_host(1)
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut tokens: BTreeMap<usize, String> = BTreeMap::new();
    let mut local: BTreeMap<String, usize> = BTreeMap::new();
    loop {
        let n = sent.fetch_add(1, Ordering::Relaxed);
        if n >= a.requests {
            break;
        }
        // Request n is made by user n mod users: each user once before any user twice.
        let user = n % a.users;
        let token = match tokens.get(&user) {
            Some(t) => t.clone(),
            None => {
                let mut r = agent
                    .post(&format!("{}/api/session", a.target))
                    .send_json(api::SessionBody {
                        user_id: format!("shopper-{user}"),
                    })
                    .context("getting a token (is the demo issuer on?)")?;
                let answer = r.body_mut().read_to_string()?;
                if r.status().as_u16() >= 400 {
                    bail!(
                        "getting a token (is the demo issuer on?): {} {answer}",
                        r.status()
                    );
                }
                let t = serde_json::from_str::<api::Session>(&answer)
                    .context("no token in the answer")?
                    .token
                    .into_owned();
                tokens.insert(user, t.clone());
                t
            }
        };
        let res = agent
            .post(&format!(
                "{}/api/campaigns/{}/purchase",
                a.target, a.campaign
            ))
            .header("Authorization", &format!("Bearer {token}"))
            .send_json(serde_json::json!({ "quantity": 1 }));
        let outcome = match res {
            Ok(mut r) if r.status().as_u16() >= 400 => {
                let v: serde_json::Value = r.body_mut().read_json().unwrap_or_default();
                format!(
                    "{} {}",
                    r.status().as_u16(),
                    v["error"].as_str().unwrap_or("?")
                )
            }
            Ok(mut r) if (user % 1000) < (a.pay * 1000.0) as usize => {
                let v: serde_json::Value = r.body_mut().read_json()?;
                let id = v["order_id"].as_str().context("no order id")?;
                match provider {
                    Some(p) => pay_by_webhook(&agent, &a.target, p, n, id),
                    None => pay_on_demo(&agent, &a.target, &token, id),
                }
            }
            Ok(r) => {
                read_out(r);
                "held".to_string()
            }
            Err(e) => format!("transport: {}", kind(&e)),
        };
        *local.entry(outcome).or_default() += 1;
    }
    let mut all = outcomes.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    for (k, v) in local {
        *all.entry(k).or_default() += v;
    }
    Ok(())
}
