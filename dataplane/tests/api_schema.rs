//! The API against its own description, checked by Schemathesis (from PyPI): it reads
//! `/api/openapi.json` from a live node on a real Redis, generates requests for every
//! route from the schemas (valid ones, and bad input made from them), and checks every
//! answer: no 5xx but the documented 503s, every status, header, content type and body
//! as described, bad input refused, valid input accepted, auth not ignored.

mod common;

use common::{arm, get_text, open_sale, queued, spec, Node, Redis};
use std::path::Path;
use std::process::Command;

const ADMIN_TOKEN: &str = "schema-admin-token";

/// Runs `schemathesis run` with `config` and `args`; panics with its report unless every
/// check passed.
fn schemathesis(dir: &Path, what: &str, config: &str, args: &[&str]) {
    let file = dir.join(format!("{what}.toml"));
    std::fs::write(&file, config).expect("write schemathesis.toml");
    let out = Command::new("schemathesis")
        .arg("--config-file")
        .arg(&file)
        .arg("run")
        .args(args)
        .env("NO_COLOR", "1")
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("schemathesis: {e} (just setup installs it: pip install schemathesis)")
        });
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    assert!(
        out.status.success(),
        "Schemathesis found answers outside the description ({what}):\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_route_answers_as_its_description_says() {
    let redis = Redis::start();
    let node = Node::start_with(&redis, 2, &format!("[admin]\ntoken = \"{ADMIN_TOKEN}\"\n"));
    // A live sale with stock, a waiting room not yet open, and one not started.
    open_sale(&redis, &node, spec("live", 1000, 4, 1000));
    arm(&redis, &node, queued("room", 100, 10, 60));
    let mut later = spec("later", 10, 2, 1);
    later.starts_at = Some(seckill_core::campaign::format_instant_ms(
        seckill_core::now_ms() + 3_600_000,
    ));
    arm(&redis, &node, later);
    let c = node.client();
    let token = c.token("schema-shopper");
    let (code, held) = c.purchase("live", &token, None);
    assert_eq!(code, 200, "{held}");
    let order = held["order_id"].as_str().expect("order id");

    let dir = tempfile::tempdir().expect("tempdir");
    let description = node.url("/api/openapi.json");
    let base = node.url("");
    // A valid request may still be refused by the campaign's state or the shopper's
    // standing (sold out, over the limit, not open yet, ended): those statuses count as
    // accepting the data. Bad data sent to a campaign that refuses every purchase hears
    // the campaign's refusal (not started, ended), which does not depend on the body: those
    // statuses count as rejecting it. The stateful phase has no links to follow here.
    let common = "[generation]\nmax-examples = 25\n\n\
        [phases.stateful]\nenabled = false\n\n\
        [[operations]]\ninclude-path-regex = \"/events$\"\nrequest-timeout = 1.0\n\
        generation.max-examples = 3\n\n\
        [checks.positive_data_acceptance]\n\
        expected-statuses = [\"2xx\", \"401\", \"403\", \"404\", \"409\", \"410\", \"425\", \"429\", \"503\"]\n\n\
        [checks.negative_data_rejection]\n\
        expected-statuses = [\"400\", \"401\", \"403\", \"404\", \"405\", \"406\", \"409\", \"410\", \"415\", \"422\", \"425\", \"428\", \"429\", \"5xx\"]\n";
    // Every shopper route with generated path parameters (mostly unknown ids), then with
    // the ids of the campaigns and the order above, so the checks reach past the 404s.
    schemathesis(
        dir.path(),
        "generated",
        &format!("headers = {{ Authorization = \"Bearer {token}\" }}\n{common}"),
        &[
            &description,
            "--url",
            &base,
            "--checks",
            "all",
            "--exclude-path-regex",
            "^/(healthz|readyz|metrics)$",
        ],
    );
    for campaign in ["live", "room", "later"] {
        schemathesis(
            dir.path(),
            campaign,
            &format!(
                "headers = {{ Authorization = \"Bearer {token}\" }}\n{common}\n\
                 [[operations]]\ninclude-path-regex = \"^/api/campaigns/\\\\{{id\\\\}}\"\n\
                 parameters = {{ id = \"{campaign}\" }}\n\n\
                 [[operations]]\ninclude-path-regex = \"^/api/orders/\"\n\
                 parameters = {{ id = \"{order}\" }}\n"
            ),
            &[
                &description,
                "--url",
                &base,
                "--checks",
                "all",
                "--include-path-regex",
                "^/api/(campaigns/|orders/)",
            ],
        );
    }
    // The admin listener, behind its token.
    schemathesis(
        dir.path(),
        "admin",
        &format!("headers = {{ Authorization = \"Bearer {ADMIN_TOKEN}\" }}\n{common}"),
        &[
            &description,
            "--url",
            &format!("http://127.0.0.1:{}", node.admin_port),
            "--checks",
            "all",
            "--include-path-regex",
            "^/(healthz|readyz|metrics)$",
        ],
    );
    // The runs reached past the 404s: the node counted answers of every kind of route
    // with real ids.
    let metrics = get_text(
        &format!("http://127.0.0.1:{}/metrics", node.admin_port),
        Some(ADMIN_TOKEN),
    );
    let answered = |route: &str, outcome: &str| -> f64 {
        let series =
            format!("seckill_http_requests_total{{route=\"{route}\",outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .map_or(0.0, |n| n.parse().expect("a count"))
    };
    for (route, outcome) in [
        ("purchase", "ok"),
        ("purchase", "not_started"),
        ("purchase", "limit_reached"),
        ("purchase", "bad_request"),
        ("campaign", "ok"),
        ("events", "ok"),
        ("queue", "ok"),
        ("order", "ok"),
        ("pay", "ok"),
    ] {
        assert!(
            answered(route, outcome) > 0.0,
            "no {route} answered {outcome}:\n{metrics}"
        );
    }
    common::ledger_holds(&redis, "live");
}
