//! Buyers pay as the shop's payment provider does: `payment.succeeded` webhooks signed with
//! its secret and sent to a real node, some after their hold's deadline, some twice, some
//! of the wrong amount. The report's payments agree with the webhooks' answers, with the
//! orders the buyers looked at after paying, and with what the node recorded; the run
//! passes. A burst pays the same way on a node without the demo provider.

mod common;

use clap::{CommandFactory, FromArgMatches, Parser};
use common::Stack;
use seckill_simulator::burst::BurstArgs;
use seckill_simulator::run::{execute, summary, RunArgs};
use seckill_simulator::scenario::Scenario;
use seckill_testkit::tokens::WEBHOOK_SECRET;
use seckill_testkit::{ledger_holds, open_sale, spec, Node, Redis};
use std::process::ExitCode;

/// The simulator's command line, as `seckill-sim run` parses it.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// `seckill-sim burst`'s command line.
#[derive(Parser)]
struct BurstCli {
    #[command(flatten)]
    burst: BurstArgs,
}

/// A small sale of 30 units at 12.50 EUR held for a second each, to a crowd of shoppers
/// who all pay: a quarter late, a quarter twice, a quarter one cent too much.
fn scenario_file(dir: &std::path::Path, target: &str, redis: &str) -> std::path::PathBuf {
    scenario_file_for(dir, target, redis, "simpay")
}

/// The same sale as [`scenario_file`], as campaign `id`.
fn scenario_file_for(
    dir: &std::path::Path,
    target: &str,
    redis: &str,
    id: &str,
) -> std::path::PathBuf {
    let campaign = dir.join(format!("{id}.toml"));
    std::fs::write(
        &campaign,
        format!("id = \"{id}\"\nname = \"payments test\"\ntotal = 30\npartitions = 2\nper_user_limit = 1\nhold_ttl_s = 1\nprice_cents = 1250\ncurrency = \"EUR\"\ncontent_file = \"album.zip\"\n"),
    )
    .expect("campaign file");
    let path = dir.join(format!("{id}-payments.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
target = "{target}"
redis = "{redis}"
redis_password_file = "{d}/users/ops.password"
token_key = "{d}/test-shop.pem"
token_issuer = "https://shop.test"
stores = ["{d}/orders-a.sqlite"]
duration_s = 1.5
threads = 1
[campaign]
create = "{campaign}"
starts_in_s = 0.2
[arrivals]
profile = "constant"
rate = 60
[population]
users = 200
pay_fraction = 1.0
pay_late_fraction = 0.25
pay_twice_fraction = 0.25
pay_wrong_amount_fraction = 0.25
[personas]
shopper = 1.0
[thresholds]
fail_on = "oversell==0,violations==0,unpaid_units==0"
"#,
            d = dir.display(),
            campaign = campaign.display(),
        ),
    )
    .expect("scenario file");
    path
}

#[test]
fn buyers_pay_by_signed_webhooks_late_twice_or_wrong_and_the_books_agree() {
    let stack = Stack::start(&["a"]);
    let dir = stack.path();
    let file = scenario_file(dir, &stack.target, &stack.redis);
    // The provider's secret as the flag gives it: the scenario file does not name it.
    let secret = stack.webhook_secret();
    let argv = [
        "run".as_ref(),
        "--scenario".as_ref(),
        file.as_os_str(),
        "--payment-webhook-secret-file".as_ref(),
        secret.as_os_str(),
    ];
    let matches = Cli::command().get_matches_from(argv);
    let args = Cli::from_arg_matches(&matches).expect("arguments").run;
    let mut s = Scenario::load(&args.scenario).expect("scenario");
    s.apply(&args.overrides);
    s.validate().expect("valid");
    assert_eq!(s.webhook_secret_file.as_deref(), Some(secret.as_path()));

    let r = execute(&s, 3).expect("run");
    let text = summary(&r);
    eprintln!("{text}");
    let p = &r.payments;
    assert_eq!(p.provider, "webhook");

    // Every payment was answered, and each paid, was owed back or did not match.
    assert_eq!((p.unanswered, p.late_not_sent), (0, 0), "{p:?}");
    assert_eq!(p.resent, p.resent_after.values().sum::<u64>());
    let answered: u64 = p.outcomes.values().sum();
    assert_eq!(answered, p.sent, "{:?}", p.outcomes);
    assert_eq!(r.paid, p.outcomes.get("paid").copied().unwrap_or(0));
    assert_eq!(
        p.sent,
        r.paid + p.refunds_due + p.mismatches,
        "{:?}",
        p.outcomes
    );
    assert!(
        r.paid > 0 && p.refunds_due > 0 && p.mismatches > 0,
        "{:?}",
        p.outcomes
    );

    // The orders after paying: the paid ones delivered, each with its licence key; the
    // late ones owed back; the wrong amounts never paid. Each payment owed back is listed
    // by its order.
    assert_eq!(r.delivered, r.paid);
    assert_eq!(r.downloaded, r.delivered);
    assert_eq!(p.orders_seen.get("delivered").copied(), Some(r.paid));
    let late = p.orders_seen.get("refund_due").copied().unwrap_or(0);
    assert!(late > 0, "{:?}", p.orders_seen);
    let unpaid: u64 = ["held", "expired"]
        .iter()
        .filter_map(|s| p.orders_seen.get(*s))
        .sum();
    assert_eq!(unpaid, p.mismatches, "{:?}", p.orders_seen);
    assert_eq!(p.refunds_listed, p.refunds_due, "{:?}", p.orders_seen);
    assert_eq!(p.keys_short, 0);

    // The node recorded the same: every paid payment to the cent, the refunds due and
    // the mismatches.
    let m = &p.recorded;
    assert_eq!(m.currency, "EUR");
    assert_eq!(
        (m.payments, m.refunds_due, m.mismatches),
        (r.paid, p.refunds_due, p.mismatches)
    );
    assert_eq!(m.paid_cents, r.paid * 1250);
    assert_eq!(m.refunds_due_cents, p.refunds_due * 1250);

    // Every unit sold was paid for, and the books hold.
    assert!(p.unpaid_orders.is_empty(), "{:?}", p.unpaid_orders);
    assert_eq!(r.ledger.sold as u64, r.paid);
    let rec = r.reconciliation.as_ref().expect("stores given");
    assert!(rec.holds(), "{:?}", rec.violations);
    assert!(r.passed(), "{:?}", r.failures);
    assert!(text.contains("payments (webhook): "), "{text}");
    assert!(text.contains("0 units sold without a payment"), "{text}");
    assert!(text.contains("verdict: PASS"));
}

#[test]
fn a_storm_of_copies_of_each_webhook_pays_each_payment_once() {
    let stack = Stack::start(&["a"]);
    let dir = stack.path();
    let secret = stack.webhook_secret();
    // The same sale twice: each webhook sent once, then with 5 copies of it at once.
    let mut runs = Vec::new();
    for (id, copies) in [("calm", "0"), ("storm", "5")] {
        let file = scenario_file_for(dir, &stack.target, &stack.redis, id);
        let argv = [
            "run".as_ref(),
            "--scenario".as_ref(),
            file.as_os_str(),
            "--payment-webhook-secret-file".as_ref(),
            secret.as_os_str(),
            "--webhook-copies".as_ref(),
            copies.as_ref(),
        ];
        let matches = Cli::command().get_matches_from(argv);
        let args = Cli::from_arg_matches(&matches).expect("arguments").run;
        let mut s = Scenario::load(&args.scenario).expect("scenario");
        s.apply(&args.overrides);
        s.validate().expect("valid");
        let r = execute(&s, 3).expect("run");
        eprintln!("{id}: {}", summary(&r));
        runs.push(r);
    }
    for r in &runs {
        // Each payment counted once, by its own answer: the copies' count none.
        let p = &r.payments;
        assert_eq!((p.unanswered, p.late_not_sent), (0, 0), "{p:?}");
        assert_eq!(p.outcomes.values().sum::<u64>(), p.sent, "{:?}", p.outcomes);
        assert_eq!(p.sent, r.paid + p.refunds_due + p.mismatches, "{p:?}");
        assert!(r.paid > 0 && p.refunds_due > 0 && p.mismatches > 0, "{p:?}");
        // The node took each payment once: recorded to the cent, a unit sold for each.
        let m = &p.recorded;
        assert_eq!(
            (m.payments, m.refunds_due, m.mismatches),
            (r.paid, p.refunds_due, p.mismatches),
            "{p:?}"
        );
        assert_eq!(m.paid_cents, r.paid * 1250);
        assert_eq!(m.refunds_due_cents, p.refunds_due * 1250);
        assert_eq!(r.ledger.sold as u64, r.paid);
        assert!(p.unpaid_orders.is_empty(), "{:?}", p.unpaid_orders);
        let rec = r.reconciliation.as_ref().expect("stores given");
        assert!(rec.holds(), "{:?}", rec.violations);
        assert!(r.passed(), "{:?}", r.failures);
    }
    let (calm, storm) = (&runs[0].payments, &runs[1].payments);
    assert_eq!((calm.copies, calm.copy_answers.len()), (0, 0));
    assert_eq!(storm.copies, 5 * storm.sent, "{storm:?}");
    // A copy is answered as its webhook was, or busy (429, 503) while another copy of it
    // is being taken: never more `paid` than 5 a payment.
    let paid_copies = storm.copy_answers.get("paid").copied().unwrap_or(0);
    assert!(
        paid_copies > 0 && paid_copies <= 5 * runs[1].paid,
        "{storm:?}"
    );
    for answer in storm.copy_answers.keys() {
        assert!(
            storm.outcomes.contains_key(answer)
                || answer.starts_with("429 ")
                || answer.starts_with("503 "),
            "{answer}: {storm:?}"
        );
    }
    // The same sale, the same books: the storm changed no payment, refund or verdict.
    assert_eq!(
        (calm.sent, runs[0].paid, calm.refunds_due, calm.mismatches),
        (
            storm.sent,
            runs[1].paid,
            storm.refunds_due,
            storm.mismatches
        )
    );
    assert_eq!(runs[0].passed(), runs[1].passed());
}

#[test]
fn late_double_and_wrong_payments_need_the_providers_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = scenario_file(dir.path(), "http://127.0.0.1:1", "redis://127.0.0.1:1");
    let s = Scenario::load(&file).expect("scenario");
    let err = s
        .validate()
        .expect_err("no webhook_secret_file")
        .to_string();
    assert!(
        err.starts_with("population.pay_late_fraction: needs webhook_secret_file"),
        "{err}"
    );
    let mut s = s;
    s.webhook_secret_file = Some(dir.path().join("webhook.secret"));
    s.population.pay_twice_fraction = 0.6;
    let err = s.validate().expect_err("shares above 1").to_string();
    assert!(err.contains("add up to more than 1"), "{err}");
    // Copies of the webhooks: the provider's too, and a storm of 100 at most.
    s.population.pay_twice_fraction = 0.25;
    s.webhook_copies = 101;
    let err = s.validate().expect_err("101 copies").to_string();
    assert!(err.starts_with("webhook_copies: at most 100"), "{err}");
    s.webhook_copies = 5;
    s.validate().expect("5 copies");
    s.webhook_secret_file = None;
    s.population.pay_late_fraction = 0.0;
    s.population.pay_twice_fraction = 0.0;
    s.population.pay_wrong_amount_fraction = 0.0;
    let err = s
        .validate()
        .expect_err("copies without the secret")
        .to_string();
    assert!(
        err.starts_with("webhook_copies: needs webhook_secret_file"),
        "{err}"
    );
}

#[test]
fn a_burst_pays_by_signed_webhooks_where_the_provider_alone_takes_payments() {
    let redis = Redis::start_in_memory();
    let keys = tempfile::tempdir().expect("tempdir");
    let secret = keys.path().join("webhook.secret");
    seckill_core::secrets::create_private(&secret, WEBHOOK_SECRET.as_bytes()).expect("secret");
    // No demo provider: the provider's webhooks are the only way to pay.
    let node = Node::start_with(
        &redis,
        2,
        &format!(
            "[payments]\nprovider = \"webhook\"\nwebhook_secret_files = [\"{}\"]\n",
            secret.display()
        ),
    );
    open_sale(&redis, &node, spec("burstpay", 20, 2, 1));
    let (target, url) = (node.url(""), redis.url());
    let argv = [
        "burst".as_ref(),
        "--target".as_ref(),
        target.as_ref(),
        "--campaign".as_ref(),
        "burstpay".as_ref(),
        "--users".as_ref(),
        "30".as_ref(),
        "--requests".as_ref(),
        "30".as_ref(),
        "--concurrency".as_ref(),
        "4".as_ref(),
        "--pay".as_ref(),
        "1".as_ref(),
        "--payment-webhook-secret-file".as_ref(),
        secret.as_os_str(),
        "--redis".as_ref(),
        url.as_ref(),
    ];
    let matches = BurstCli::command().get_matches_from(argv);
    let args = BurstCli::from_arg_matches(&matches)
        .expect("arguments")
        .burst;
    let code = seckill_simulator::burst::run(&args).expect("the burst");
    assert_eq!(code, ExitCode::SUCCESS);
    // Every unit held was paid for, each at its price.
    let l = ledger_holds(&redis, "burstpay");
    assert_eq!((l.sold, l.held), (20, 0), "{l}");
}
