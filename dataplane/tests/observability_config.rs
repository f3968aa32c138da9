//! The alert rules and the Grafana dashboard shipped in `config/` parse, every metric
//! they name is one the data plane exposes, every alert points to a runbook section that
//! exists, and campaign-wide gauges are never summed over nodes.

use std::collections::BTreeSet;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

use seckill_dataplane::metrics::{self, CampaignGauges, Metrics};

fn config(file: &str) -> String {
    repo(&format!("config/{file}"))
}

fn repo(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every series name `/metrics` can carry (histograms with their `_bucket`, `_sum` and
/// `_count`).
fn exposed() -> BTreeSet<String> {
    let m = Metrics::new("n", 0, 1, true);
    let c = CampaignGauges {
        id: "c".into(),
        state: "live",
        reconciled: Some((0, 0)),
        ..CampaignGauges::default()
    };
    let mut names = BTreeSet::new();
    for line in metrics::render(&m, &[c]).lines() {
        let mut parts = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    names
}

/// The anchors GitHub makes of a Markdown file's headings.
fn anchors(md: &str) -> BTreeSet<String> {
    md.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| {
            h.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

/// Campaign gauges come from Redis, the same on every node: summing them over the
/// nodes multiplies the stock.
fn sums_a_campaign_gauge(expr: &str) -> bool {
    let mut rest = expr;
    while let Some(i) = rest.find("sum") {
        let tail = &rest[i..];
        let inner = tail.split(')').nth(1).unwrap_or("");
        if inner.contains("seckill_campaign_") || tail.starts_with("sum(seckill_campaign_") {
            return true;
        }
        rest = &tail[3..];
    }
    false
}

/// The `seckill_…` and `process_…` names in a PromQL expression.
fn named(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = [rest.find("seckill_"), rest.find("process_")]
        .into_iter()
        .flatten()
        .min()
    {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn alert_rules_parse_and_name_real_metrics() {
    let docs = YamlLoader::load_from_str(&config("alerts.yml")).expect("valid YAML");
    let rules = docs[0]["groups"][0]["rules"]
        .as_vec()
        .expect("groups[0].rules is a list");
    let exposed = exposed();
    let runbooks = anchors(&repo("docs/operators.md"));
    let mut alerts = BTreeSet::new();
    for r in rules {
        let name = r["alert"].as_str().expect("every rule is an alert");
        let expr = r["expr"].as_str().expect("an expr");
        let severity = r["labels"]["severity"].as_str().unwrap_or("");
        assert!(
            ["page", "warn", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        assert!(r["annotations"]["summary"].as_str().is_some(), "{name}");
        let Yaml::String(d) = &r["for"] else {
            panic!("{name}: no for");
        };
        assert!(d.ends_with('s') || d.ends_with('m'), "{name}: for {d}");
        let runbook = r["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no runbook_url"));
        let anchor = runbook
            .strip_prefix("docs/operators.md#")
            .unwrap_or_else(|| panic!("{name}: {runbook} is not docs/operators.md#…"));
        assert!(runbooks.contains(anchor), "{name}: no section #{anchor}");
        assert!(!sums_a_campaign_gauge(expr), "{name} sums a campaign gauge");
        let used = named(expr);
        // Only the node-down alert rests on Prometheus's own `up` of the scrape job.
        if expr.contains("up{job=\"seckill\"}") {
            assert_eq!(name, "SeckillNodeDown");
            alerts.insert(name.to_string());
            continue;
        }
        assert!(!used.is_empty(), "{name} names no seckill metric");
        for m in used {
            assert!(exposed.contains(&m), "{name}: {m} is not exposed");
        }
        alerts.insert(name.to_string());
    }
    for needed in [
        "SeckillNodeDown",
        "SeckillHighErrorRate",
        "SeckillBreakerOpen",
        "SeckillRedisDown",
        "SeckillClockOffset",
        "SeckillWorkerLag",
        "SeckillUndeliveredOrders",
        "SeckillLowStock",
        "SeckillLedgerMismatch",
        "SeckillReconciliationViolations",
    ] {
        assert!(alerts.contains(needed), "{needed} is missing");
    }
}

#[test]
fn the_dashboard_parses_and_names_real_metrics() {
    let d: serde_json::Value =
        serde_json::from_str(&config("grafana/seckill-dashboard.json")).expect("valid JSON");
    let exposed = exposed();
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8);
    for p in panels {
        let title = p["title"].as_str().expect("a title");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            let expr = t["expr"].as_str().expect("an expr");
            assert!(
                !sums_a_campaign_gauge(expr),
                "{title} sums a campaign gauge: {expr}"
            );
            for m in named(expr) {
                assert!(exposed.contains(&m), "{title}: {m} is not exposed");
            }
        }
    }
}

#[test]
fn campaign_state_has_its_own_series_not_a_label_on_the_stock() {
    let m = Metrics::new("n", 0, 1, false);
    let c = CampaignGauges {
        id: "c".into(),
        state: "paused",
        total: 5,
        ..CampaignGauges::default()
    };
    let text = metrics::render(&m, &[c]);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(lines.contains(&"seckill_campaign_total_units{campaign=\"c\"} 5"));
    assert!(lines.contains(&"seckill_campaign_state{campaign=\"c\",state=\"paused\"} 1"));
    assert!(lines.contains(&"seckill_campaign_state{campaign=\"c\",state=\"live\"} 0"));
    for l in &lines {
        if l.starts_with("seckill_campaign_") && !l.starts_with("seckill_campaign_state") {
            assert!(!l.contains("state="), "{l}");
        }
    }
    let names = exposed();
    for name in [
        "seckill_build_info",
        "seckill_campaign_state",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(names.contains(name), "{name} is not exposed");
    }
}

#[test]
fn the_checks_catch_a_summed_campaign_gauge() {
    assert!(sums_a_campaign_gauge(
        "sum by (campaign) (seckill_campaign_held_units{campaign=~\"$c\"})"
    ));
    assert!(sums_a_campaign_gauge("sum(seckill_campaign_sold_units)"));
    assert!(!sums_a_campaign_gauge(
        "max by (campaign) (seckill_campaign_sold_units)"
    ));
    assert!(!sums_a_campaign_gauge(
        "sum by (outcome) (rate(seckill_http_requests_total[1m]))"
    ));
}
