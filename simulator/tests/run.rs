//! The simulator run in-process against a real data plane and redis-server started here.

mod common;

use common::Stack;
use seckill_simulator::run::{execute, execute_traced, summary};
use seckill_simulator::scenario::Scenario;

fn scenario(dir: &std::path::Path, target: &str, redis: &str) -> Scenario {
    scenario_with(dir, target, redis, "")
}

/// A small launch; `campaign_extra` adds lines to the campaign file.
fn scenario_with(
    dir: &std::path::Path,
    target: &str,
    redis: &str,
    campaign_extra: &str,
) -> Scenario {
    let campaign = dir.join("c.toml");
    std::fs::write(
        &campaign,
        format!("id = \"simt\"\nname = \"sim test\"\ntotal = 200\npartitions = 4\nper_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 1\ncontent_file = \"album.zip\"\n{campaign_extra}"),
    )
    .expect("campaign file");
    let text = format!(
        r#"
target = "{target}"
redis = "{redis}"
redis_password_file = "{d}/users/ops.password"
token_key = "{key}"
token_issuer = "https://shop.test"
stores = ["{d}/orders-a.sqlite", "{d}/orders-b.sqlite"]
duration_s = 3
threads = 2
[campaign]
create = "{campaign}"
starts_in_s = 0.5
[arrivals]
profile = "ramp"
rate = 600
ramp_s = 1
[population]
users = 1000
pay_fraction = 0.5
retry_fraction = 0.2
[personas]
shopper = 0.79
hammer = 0.03
ip_rotator = 0.03
forger = 0.03
replayer = 0.03
skipper = 0.03
sybil = 0.06
[thresholds]
p99_ms = 2000
"#,
        key = dir.join("test-shop.pem").display(),
        d = dir.display(),
        campaign = campaign.display(),
    );
    let s: Scenario = toml::from_str(&text).expect("scenario");
    s.validate().expect("valid");
    s
}

#[test]
fn a_launch_with_bots_reports_every_request_and_the_ledger_holds() {
    // Two nodes, each with its own order worker and store; each source address talks
    // to one of them.
    let stack = Stack::start(&["a", "b"]);
    let (dir, target, redis) = (stack.path(), &stack.target, &stack.redis);

    let s = scenario(dir, target, redis);
    let (r, trace) = execute_traced(&s, 7, true).expect("run");
    let text = summary(&r);
    eprintln!("{text}");

    // The trace has every purchase once, planned within the run on the monotonic clock,
    // with the outcomes the report counts.
    let csv = dir.join("trace.csv");
    trace.expect("traced").write(&csv).expect("trace written");
    let written = std::fs::read_to_string(&csv).expect("trace");
    let mut lines = written.lines();
    assert_eq!(lines.next(), Some("monotonic_s,latency_ms,outcome"));
    let rows: Vec<(f64, f64, String)> = lines
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, ',').collect();
            (
                f[0].parse().expect("at"),
                f[1].parse().expect("ms"),
                f[2].to_string(),
            )
        })
        .collect();
    assert_eq!(rows.len() as u64, r.planned);
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let mono = t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
    let ran = s.duration_s + 60.0;
    assert!(rows
        .iter()
        .all(|(at, ms, _)| *at <= mono && *at > mono - ran && *ms > 0.0));
    assert!(
        rows.windows(2).all(|w| w[0].0 <= w[1].0),
        "in planned order"
    );
    let held: u64 = r.outcomes.values().filter_map(|o| o.get("200")).sum();
    assert_eq!(
        rows.iter().filter(|(_, _, o)| o == "200").count() as u64,
        held
    );

    // Every planned purchase has exactly one outcome, and every request is counted
    // on its route.
    let answered: u64 = r.outcomes.values().flat_map(|o| o.values()).sum();
    assert_eq!(answered, r.planned);
    assert_eq!(r.requests_by_route["purchase"], r.planned);
    let sale: u64 = ["purchase", "retry", "pay", "order", "download"]
        .iter()
        .map(|k| r.requests_by_route.get(*k).copied().unwrap_or(0))
        .sum();
    assert_eq!(r.requests, sale, "{:?}", r.requests_by_route);
    assert_eq!(r.unanswered + r.unsent, 0);
    for route in ["purchase", "retry", "pay", "order", "delivered", "download"] {
        assert!(r.route_latency.contains_key(route), "{route}");
    }
    assert_eq!(r.route_latency["pay"].count, r.requests_by_route["pay"]);
    // Buyers who paid saw their order delivered and downloaded it.
    assert!(r.paid > 0);
    assert_eq!(r.delivered, r.paid);
    assert_eq!(r.downloaded, r.delivered);
    // Without the provider's secret they paid through the demo provider: once each, on
    // time, the right amount, as the node recorded it; every unit sold was paid for.
    let p = &r.payments;
    assert_eq!(p.provider, "demo");
    assert_eq!(p.outcomes.get("paid"), Some(&r.paid), "{:?}", p.outcomes);
    assert_eq!((p.refunds_due, p.mismatches, p.refunds_listed), (0, 0, 0));
    assert_eq!(p.orders_seen.get("delivered"), Some(&r.paid));
    assert_eq!(p.recorded.payments, r.paid);
    assert!(p.unpaid_orders.is_empty(), "{:?}", p.unpaid_orders);
    // The defences hold: forged tokens win nothing, each bot account at most its limit.
    assert_eq!(r.units_won.get("forger"), None);
    for one_account in ["hammer", "ip_rotator", "replayer", "skipper"] {
        assert!(
            r.units_won.get(one_account).copied().unwrap_or(0) <= 1,
            "{one_account}"
        );
        // Each of its purchases is a new request: one success at most, the rest refused.
        let held = r.outcomes.get(one_account).and_then(|o| o.get("200"));
        assert!(
            held.copied().unwrap_or(0) <= 1,
            "{one_account}: {:?}",
            r.outcomes
        );
    }
    assert!(r.outcomes["forger"]
        .keys()
        .all(|o| o.starts_with("401") || o.starts_with("429")));
    // Every unit taken is in the report, with its winner (unless an answer was lost).
    let lost = r
        .outcomes
        .values()
        .flat_map(|o| o.iter())
        .any(|(o, _)| o.starts_with("error"));
    let taken = (r.ledger.held + r.ledger.sold) as u64;
    if lost {
        assert!(r.units_to_people + r.units_to_bots <= taken);
    } else {
        assert_eq!(
            r.units_to_people + r.units_to_bots,
            taken,
            "{:?}",
            r.outcomes
        );
    }
    assert!(r.ledger.holds(), "{}", r.ledger);
    // Both stores together hold every order, each paid one delivered exactly once.
    let rec = r.reconciliation.as_ref().expect("stores given");
    assert!(rec.holds(), "{:?}", rec.violations);
    assert!(rec.drained());
    assert_eq!(
        rec.orders_in_redis.values().sum::<u64>(),
        rec.orders_in_stores.values().sum::<u64>()
    );
    assert_eq!(rec.orders_in_redis.get("delivered").copied(), Some(r.paid));
    assert!(rec.missing.is_empty() && rec.undelivered.is_empty());
    assert!(rec.delivered_twice.is_empty());
    assert!(
        taken > 150,
        "the crowd took only {taken} of 200 units: {:?}",
        r.outcomes
    );
    assert_eq!(r.retry_mismatches, 0);
    assert!(r.passed(), "{:?}", r.failures);

    // Second by second, the answers add up, and the plot draws them.
    let per_second: u64 = r.over_time.iter().map(|s| s.answered).sum();
    assert_eq!(per_second, r.planned);
    let svg = seckill_simulator::plot::svg(&r);
    assert!(svg.starts_with("<svg") && svg.matches("<polyline").count() == 3);
    for second in &r.over_time {
        assert_eq!(second.outcomes.values().sum::<u64>(), second.answered);
    }
    let buckets: u64 = r
        .purchase_latency_distribution
        .iter()
        .map(|b| b.count)
        .sum();
    assert_eq!(buckets, r.planned);

    // The JSON carries what the summary says.
    let json: serde_json::Value = serde_json::to_value(&r).expect("json");
    assert!(text.contains(&format!("{} purchases planned", json["planned"])));
    assert!(text.contains(&format!("{} by people", json["units_to_people"])));
    assert!(text.contains("verdict: PASS"));
    assert!(text.contains(&format!("{} saw their order delivered", json["delivered"])));
    assert!(text.contains(&format!(
        "  pay {:>16}",
        json["route_latency"]["pay"]["count"]
            .as_u64()
            .expect("a count")
    )));
    let page = html_report(dir, &r, "launch");
    assert!(page.contains("Verdict: <span class=\"pass\">PASS</span>"));
    assert!(page.contains(&format!(
        "{} units to people, {} to bots",
        json["units_to_people"], json["units_to_bots"]
    )));
    assert!(page.contains(&format!("<td class=\"n\">{}</td>", json["ledger"]["held"])));
    assert!(page.contains("<td>shopper</td>"));

    // A threshold that cannot be met fails the run.
    let mut strict = s.clone();
    strict.thresholds.p99_ms = Some(0.0001);
    strict.thresholds.max_bot_units = Some(0);
    strict.thresholds.fail_on = Some("p999<0.001ms,oversell==0,violations==0".into());
    let r = execute(&strict, 8).expect("run");
    assert!(!r.passed());
    assert!(
        r.failures.iter().any(|f| f.contains("p99")),
        "{:?}",
        r.failures
    );
    assert!(summary(&r).contains("verdict: FAIL"));
    let page = html_report(dir, &r, "strict");
    assert!(page.contains("Verdict: <span class=\"fail\">FAIL</span>"));
    assert!(page.contains("<td>p999&lt;0.001ms</td>"), "{page}");
    assert!(page.contains("<td>broken</td>") && page.contains("<td>met</td>"));

    // A campaign behind proof of work: skippers and forgers get nothing, a replayed
    // ticket buys once.
    let s = scenario_with(
        dir,
        target,
        redis,
        "require_ticket = true\nticket_factor = 50\n",
    );
    let r = execute(&s, 9).expect("run");
    eprintln!("{}", summary(&r));
    assert_eq!(r.units_won.get("skipper"), None);
    assert_eq!(r.units_won.get("forger"), None);
    assert!(
        r.outcomes["skipper"].contains_key("403 ticket_invalid"),
        "{:?}",
        r.outcomes["skipper"]
    );
    assert!(r.units_won.get("replayer").copied().unwrap_or(0) <= 1);
    assert!(r.route_latency.contains_key("challenge") && r.route_latency.contains_key("ticket"));
    assert!(r.ledger.holds(), "{}", r.ledger);
    assert!(r.reconciliation.as_ref().is_some_and(|rec| rec.holds()));
}

/// Writes the report as `--report` does and reads it back, checking it stands alone: one
/// HTML page with inline SVG charts and no resource fetched from anywhere.
fn html_report(dir: &std::path::Path, r: &seckill_simulator::report::Report, name: &str) -> String {
    let path = dir.join(format!("{name}.html"));
    seckill_simulator::run::write_report(&path, r).expect("--report");
    let page = std::fs::read_to_string(&path).expect("the page");
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<html").count(), 1);
    assert_eq!(page.matches("<svg").count(), 3, "three charts");
    for tag in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "href=",
    ] {
        assert!(!page.contains(tag), "{tag} in the page");
    }
    // Addresses appear only as text (the scenario's targets), never as something to
    // fetch: the one in an attribute is the SVG namespace, a name.
    for attribute in ["=\"http://", "=\"https://", "='http://", "='https://"] {
        let fetched = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!fetched.contains(attribute), "{attribute} in the page");
    }
    page
}

/// A change that makes a valid scenario invalid.
type Change = fn(&mut Scenario);

#[test]
fn invalid_scenarios_name_their_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = scenario(dir.path(), "http://127.0.0.1:1", "redis://127.0.0.1:1");
    let cases: Vec<(&str, Change)> = vec![
        ("target", |s| s.target = "ftp://x".into()),
        ("target", |s| s.target = "http://127.0.0.1:1,".into()),
        ("connections", |s| s.connections = 0),
        ("duration_s", |s| s.duration_s = 0.0),
        ("arrivals.rate", |s| s.arrivals.rate = -1.0),
        ("population.users", |s| s.population.users = 0),
        ("personas.hammer", |s| s.personas.hammer = 2.0),
        ("campaign", |s| s.campaign.id = Some("x".into())),
    ];
    for (field, change) in cases {
        let mut s = base.clone();
        change(&mut s);
        let err = s.validate().expect_err(field).to_string();
        assert!(err.starts_with(field), "{field}: {err}");
    }
}

#[test]
fn the_shipped_launch_scenario_is_valid() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/scenarios/launch.toml"
    );
    let s = Scenario::load(std::path::Path::new(path)).expect("parses");
    s.validate().expect("valid");
    assert!(s.thresholds.fail_on.is_some());
}
