//! The alert rules and the Grafana dashboard shipped in `config/` parse, and every metric
//! they name is one the data plane exposes.

use std::collections::BTreeSet;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

use seckill_dataplane::metrics::{self, CampaignGauges, Metrics};

fn config(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .join(file);
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

/// The `seckill_…` names in a PromQL expression.
fn named(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("seckill_") {
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
        if let Yaml::String(d) = &r["for"] {
            assert!(d.ends_with('s') || d.ends_with('m'), "{name}: for {d}");
        }
        let used = named(expr);
        assert!(!used.is_empty(), "{name} names no seckill metric");
        for m in used {
            assert!(exposed.contains(&m), "{name}: {m} is not exposed");
        }
        alerts.insert(name.to_string());
    }
    for needed in [
        "SeckillHighErrorRate",
        "SeckillBreakerOpen",
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
            for m in named(expr) {
                assert!(exposed.contains(&m), "{title}: {m} is not exposed");
            }
        }
    }
}
