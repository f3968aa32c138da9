//! The dashboard and the alert rules against a real Prometheus: two nodes (each with its
//! in-process order worker, whose figures its node's `/metrics` carries; a standalone
//! `seckill-dataplane worker` serves none) scraped every second on their admin listeners
//! with the admin token, `config/alerts.yml` loaded and evaluated every second. After a
//! surge, Prometheus itself answers every query of every panel of
//! `config/grafana/seckill-dashboard.json` and every alert expression, and the answers are
//! checked against the ledger; then a node is killed and SeckillNodeDown goes pending.

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const ADMIN_TOKEN: &str = "prometheus-reads-this";
const CAMPAIGN: &str = "scraped";
const UNITS: u64 = 200;
const SHOPPERS: usize = 300;
/// What Grafana puts for `$__rate_interval` with the data source's default scrape
/// interval (15 s): four of them. The whole test fits in it.
const RATE_INTERVAL: &str = "1m";

fn repo(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file)
}

/// A `prometheus` server of the test's own, in a temp dir, on a free port; killed on drop.
struct Prometheus {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    agent: ureq::Agent,
}

/// An alert Prometheus holds as pending or firing.
#[derive(Debug, Clone)]
struct Alert {
    name: String,
    state: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// One series of an instant vector: its labels and its value.
#[derive(Debug, Clone)]
struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
}

impl Prometheus {
    /// Scrapes the admin listeners on `admin_ports` every second as job `seckill`, with
    /// the admin token from a file as `config/prometheus.yml` says, and evaluates
    /// `config/alerts.yml` every second.
    fn start(admin_ports: &[u16]) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("admin.token");
        std::fs::write(&token, ADMIN_TOKEN).expect("token file");
        let targets: Vec<String> = admin_ports
            .iter()
            .map(|p| format!("'127.0.0.1:{p}'"))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: seckill\n    metrics_path: /metrics\n\
             \x20   authorization:\n      type: Bearer\n      credentials_file: '{}'\n\
             \x20   static_configs:\n      - targets: [{}]\n",
            repo("config/alerts.yml").display(),
            token.display(),
            targets.join(", ")
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("write config");
        let mut p = Prometheus {
            port: 0,
            dir,
            child: None,
            agent: common::agent_with(|c| c.timeout_global(Some(Duration::from_secs(10)))),
        };
        // A free port can be taken again before Prometheus binds it: then it exits, and
        // another try gets another port.
        for _ in 0..5 {
            p.port = free_port();
            if p.launch() {
                return p;
            }
            p.kill();
        }
        panic!("prometheus did not start in 5 tries:\n{}", p.log());
    }

    fn launch(&mut self) -> bool {
        let d = self.dir.path();
        let log = std::fs::File::create(d.join("prometheus.log")).expect("log file");
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                d.join("prometheus.yml").display()
            ))
            .arg(format!("--storage.tsdb.path={}", d.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus is installed (apt-get install prometheus)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut() {
                if c.try_wait().ok().flatten().is_some() {
                    return false;
                }
            }
            if common::answers(&self.url("/-/ready")) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The `data` of a successful API answer; anything else fails the test with the
    /// error Prometheus gave.
    fn api(&self, path: &str, params: &[(&str, &str)]) -> serde_json::Value {
        let mut req = self.agent.get(&self.url(path));
        for (k, v) in params {
            req = req.query(k, v);
        }
        let body: serde_json::Value = match req.call() {
            Ok(mut r) if r.status().as_u16() < 400 => r.body_mut().read_json().expect("JSON"),
            Ok(r) => {
                let code = r.status().as_u16();
                let body = common::body_text(r);
                panic!("{path} {params:?}: Prometheus answered {code}: {body}")
            }
            Err(e) => panic!("{path}: {e}"),
        };
        assert_eq!(body["status"], "success", "{path} {params:?}: {body}");
        body["data"].clone()
    }

    /// An instant query at the present moment, as an alert rule or a stat panel asks it.
    fn query(&self, expr: &str) -> Vec<Sample> {
        let data = self.api("/api/v1/query", &[("query", expr)]);
        assert_eq!(data["resultType"], "vector", "{expr}: {data}");
        data["result"]
            .as_array()
            .expect("result")
            .iter()
            .map(|s| Sample {
                labels: serde_json::from_value(s["metric"].clone()).expect("labels"),
                value: s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .expect("value"),
            })
            .collect()
    }

    /// The alerts pending or firing.
    fn alerts(&self) -> Vec<Alert> {
        let data = self.api("/api/v1/alerts", &[]);
        data["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .map(|a| {
                let map = |k: &str| -> BTreeMap<String, String> {
                    serde_json::from_value(a[k].clone()).expect("a map of strings")
                };
                let labels = map("labels");
                Alert {
                    name: labels.get("alertname").cloned().unwrap_or_default(),
                    state: a["state"].as_str().unwrap_or("").to_string(),
                    labels,
                    annotations: map("annotations"),
                }
            })
            .collect()
    }

    /// The loaded rules: name → (health, last error, state, last evaluation).
    fn rules(&self) -> BTreeMap<String, (String, String, String, String)> {
        let data = self.api("/api/v1/rules", &[]);
        let mut out = BTreeMap::new();
        for g in data["groups"].as_array().expect("groups") {
            for r in g["rules"].as_array().expect("rules") {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                out.insert(
                    s("name"),
                    (s("health"), s("lastError"), s("state"), s("lastEvaluation")),
                );
            }
        }
        out
    }

    /// Waits until every target was scraped after `after` (seconds since the epoch),
    /// then until every rule was evaluated on what that scrape brought.
    fn wait_for_scrape_and_rules(&self, after: f64, targets: usize) {
        wait_until(
            "a scrape of every node after the surge",
            Duration::from_secs(15),
            || {
                let up = self.query("timestamp(up{job=\"seckill\"} == 1)");
                up.len() == targets && up.iter().all(|s| s.value > after)
            },
        );
        // Evaluation runs every second: the second change of a rule's last evaluation
        // starts after the scrape above.
        let first = self.rules();
        let mut changes = 0;
        let mut last = first;
        wait_until(
            "two rule evaluations after that scrape",
            Duration::from_secs(10),
            || {
                let now = self.rules();
                if now.values().map(|r| &r.3).ne(last.values().map(|r| &r.3)) {
                    changes += 1;
                    last = now;
                }
                changes >= 2
            },
        );
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.kill();
    }
}

fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// The labels' values of `label` over a result.
fn values_of(result: &[Sample], label: &str) -> BTreeSet<String> {
    result
        .iter()
        .filter_map(|s| s.labels.get(label).cloned())
        .collect()
}

/// The value of a result that must hold exactly one series: a campaign's figure read once,
/// not once per node.
fn one(result: &[Sample], what: &str) -> f64 {
    assert_eq!(
        result.len(),
        1,
        "{what}: expected one series, got {} (one per node would mean the nodes' copies \
         are not folded into one): {result:?}",
        result.len()
    );
    result[0].value
}

/// A campaign's figure on a panel: read once, and the ledger's.
fn figure(result: &[Sample], what: &str, want: i64, ledger: &seckill_core::ledger::Ledger) {
    let got = one(result, what);
    let twice = if want != 0 && got == 2.0 * want as f64 {
        " (twice the ledger: summed over the two nodes)"
    } else {
        ""
    };
    assert!(
        got == want as f64,
        "{what} shows {got}, the ledger {want}{twice}: {ledger}"
    );
}

/// By `label`: the value of each series.
fn by(result: &[Sample], label: &str) -> BTreeMap<String, f64> {
    result
        .iter()
        .map(|s| (s.labels.get(label).cloned().unwrap_or_default(), s.value))
        .collect()
}

/// The PromQL of a dashboard query with its template variables set as Grafana sets them
/// for `campaign` selected (a regex: `.*` is the selector's "All").
fn substitute(expr: &str, campaign: &str) -> String {
    let e = expr
        .replace("${campaign}", campaign)
        .replace("$campaign", campaign)
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("$__interval", "15s")
        .replace("$__range", "15m");
    assert!(!e.contains('$'), "a template variable left unset: {e}");
    e
}

/// Every query of every panel (rows' panels too): (panel title, refId, expr).
fn dashboard_queries() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(repo("config/grafana/seckill-dashboard.json"))
        .expect("the dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    fn walk(panels: &serde_json::Value, out: &mut Vec<(String, String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().expect("every target has an expr");
                let id = t["refId"].as_str().unwrap_or("").to_string();
                out.push((title.clone(), id, expr.to_string()));
            }
            walk(&p["panels"], out);
        }
    }
    walk(&d["panels"], &mut out);
    assert!(!out.is_empty(), "the dashboard has no queries");
    out
}

/// Every alert of `config/alerts.yml`: (name, expr).
fn alert_rules() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo("config/alerts.yml")).expect("the alert rules");
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).expect("alerts YAML");
    let mut out = Vec::new();
    for g in docs[0]["groups"].as_vec().expect("groups") {
        for r in g["rules"].as_vec().expect("rules") {
            let name = r["alert"].as_str().expect("an alert").to_string();
            out.push((name, r["expr"].as_str().expect("an expr").to_string()));
        }
    }
    out
}

/// An alert's expression without its thresholds (`> 0.05`, `== 1` …, outside label
/// matchers): what the alert looks at, present whether or not it would fire.
fn without_thresholds(expr: &str) -> String {
    let b = expr.as_bytes();
    let (mut out, mut i, mut braces, mut quoted) = (String::new(), 0, 0, false);
    while i < b.len() {
        let c = b[i] as char;
        match c {
            '"' => quoted = !quoted,
            '{' if !quoted => braces += 1,
            '}' if !quoted => braces -= 1,
            '=' | '!' | '<' | '>' if !quoted && braces == 0 => {
                let len = if b.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                let op = &expr[i..i + len];
                let rest = expr[i + len..].trim_start();
                let number: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
                    .collect();
                if op != "=" && op != "!" && !number.is_empty() {
                    out.truncate(out.trim_end().len());
                    i = expr.len() - rest.len() + number.len();
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A small surge: `SHOPPERS` shoppers for `UNITS` units, alternately on each node, in
/// four waves a scrape apart (a counter's first scrape is its baseline: a surge inside
/// one scrape interval shows no rate), then half the winners pay. Returns how many were
/// answered 200 and how many paid.
fn surge(nodes: [&Node; 2]) -> (usize, usize) {
    let tokens: Vec<String> = {
        let c = nodes[0].client();
        (0..SHOPPERS).map(|u| c.token(&format!("s{u}"))).collect()
    };
    let mut won: Vec<(usize, String)> = Vec::new();
    for (w, chunk) in tokens.chunks(SHOPPERS / 4).enumerate() {
        let results: Vec<(usize, u16, serde_json::Value)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    s.spawn(move || {
                        let clients = [nodes[0].client(), nodes[1].client()];
                        let mut out = Vec::new();
                        for (i, token) in chunk.iter().enumerate().skip(t).step_by(4) {
                            let user = w * (SHOPPERS / 4) + i;
                            let (code, body) = clients[user % 2].purchase(CAMPAIGN, token, None);
                            out.push((user, code, body));
                        }
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a shopper thread"))
                .collect()
        });
        for (user, code, body) in results {
            match code {
                200 => won.push((user, body["order_id"].as_str().expect("id").to_string())),
                409 => assert_eq!(body["error"], "sold_out", "{body}"),
                _ => panic!("purchase: {code} {body}"),
            }
        }
        std::thread::sleep(Duration::from_millis(1100));
    }
    let clients = [nodes[0].client(), nodes[1].client()];
    let mut paid = 0;
    for (user, order) in won.iter().step_by(2) {
        let (code, body) = clients[user % 2].pay(order, &tokens[*user]);
        assert_eq!(code, 200, "pay: {body}");
        paid += 1;
    }
    (won.len(), paid)
}

#[test]
fn the_dashboard_and_alerts_read_true_on_a_real_prometheus() {
    let started = Instant::now();
    let redis = Redis::start();
    let extra = |name: &str| format!("node = \"{name}\"\n[admin]\ntoken = \"{ADMIN_TOKEN}\"\n");
    let n1 = Node::start_with(&redis, 2, &extra("edge-1"));
    let mut n2 = Node::start_with(&redis, 2, &extra("edge-2"));
    let instances: BTreeSet<String> = [n1.admin_port, n2.admin_port]
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let prom = Prometheus::start(&[n1.admin_port, n2.admin_port]);
    // Prometheus runs before a sale opens; its first scrapes wait for target discovery.
    wait_until(
        "a first scrape of both nodes",
        Duration::from_secs(15),
        || prom.query("up{job=\"seckill\"} == 1").len() == 2,
    );

    open_sale(&redis, &n1, spec(CAMPAIGN, UNITS, 4, 1));
    wait_state(&n2, CAMPAIGN, "live");
    let (won, paid) = surge([&n1, &n2]);
    assert_eq!(won as u64, UNITS, "every unit found a buyer");

    // The workers drain the order streams; a reconciliation is recorded, as the CLI does.
    let report = reconciled(&redis, CAMPAIGN, &[n1.db(), n2.db()]);
    assert!(report.holds() && report.drained(), "{report:?}");
    seckill_orders::reconcile::record(&mut redis.con(), &report).expect("record");
    let ledger = ledger_holds(&redis, CAMPAIGN);
    assert_eq!(ledger.sold as usize, paid, "{ledger}");
    // Deliveries trail the payments by the worker's poll; wait for every one, and for the
    // workers to read the `delivered` events they wrote (their backlog is sampled each
    // second).
    wait_until(
        "every paid order delivered",
        Duration::from_secs(10),
        || {
            prom.query("sum(seckill_worker_delivered_total)")
                .first()
                .is_some_and(|s| s.value as usize == paid)
        },
    );
    wait_until(
        "the workers to have read and acknowledged every event",
        Duration::from_secs(10),
        || {
            prom.query("max(seckill_worker_lag_entries) + max(seckill_worker_pending_entries)")
                .first()
                .is_some_and(|s| s.value == 0.0)
        },
    );
    let settled = epoch_s();
    prom.wait_for_scrape_and_rules(settled, 2);

    // The campaign selector lists the campaign.
    let listed = prom.api(
        "/api/v1/label/campaign/values",
        &[("match[]", "seckill_campaign_total_units")],
    );
    assert_eq!(
        listed,
        serde_json::json!([CAMPAIGN]),
        "the campaign selector"
    );

    check_panels(&prom, &ledger, &instances);
    check_alerts_quiet(&prom, &instances);

    // A campaign down to its last unit, and a node gone: exactly those two alerts go
    // pending (their `for` is not waited out), nothing else.
    open_sale(&redis, &n1, spec("last-units", 20, 2, 1));
    let c = n1.client();
    for u in 0..19 {
        let (code, body) = c.purchase("last-units", &c.token(&format!("l{u}")), None);
        assert_eq!(code, 200, "{body}");
    }
    let down = format!("127.0.0.1:{}", n2.admin_port);
    n2.kill();
    let mut alerts = Vec::new();
    wait_until(
        "SeckillNodeDown and SeckillLowStock to go pending",
        Duration::from_secs(15),
        || {
            alerts = prom.alerts();
            let has = |name: &str, label: &str, value: &str| {
                alerts.iter().any(|a| {
                    a.name == name && a.labels.get(label).map(String::as_str) == Some(value)
                })
            };
            has("SeckillNodeDown", "instance", &down)
                && has("SeckillLowStock", "campaign", "last-units")
        },
    );
    let mut active: Vec<String> = alerts
        .iter()
        .map(|a| {
            let about = a.labels.get("instance").or(a.labels.get("campaign"));
            format!("{} {}", a.name, about.cloned().unwrap_or_default())
        })
        .collect();
    active.sort();
    assert_eq!(
        active,
        [
            "SeckillLowStock last-units".to_string(),
            format!("SeckillNodeDown {down}")
        ],
        "only the dead node and the campaign at 5% of its stock should alert: {alerts:?}"
    );
    for a in &alerts {
        // Their `for` (a minute) has not passed: pending, and pages nobody yet.
        assert_eq!(a.state, "pending", "{a:?}");
        let about = a.labels.get("instance").or(a.labels.get("campaign"));
        let summary = a.annotations.get("summary").cloned().unwrap_or_default();
        assert!(
            about.is_some_and(|x| summary.starts_with(x.as_str())),
            "{}: the summary names what it is about: {summary:?}",
            a.name
        );
        for (k, v) in &a.annotations {
            assert!(
                !v.is_empty() && !v.contains("error expanding template"),
                "{}: annotation {k}: {v:?}",
                a.name
            );
        }
        let runbook = a
            .annotations
            .get("runbook_url")
            .cloned()
            .unwrap_or_default();
        assert!(runbook.starts_with("docs/operators.md#runbook-"), "{a:?}");
    }
    let node_down = prom.query("up{job=\"seckill\"} == 0");
    assert_eq!(
        values_of(&node_down, "instance"),
        BTreeSet::from([down.clone()]),
        "SeckillNodeDown's expression names the dead node only"
    );
    // With one node left and "All" campaigns selected, the stock panels show each
    // campaign once and true, read from the survivor.
    let ledgers = [
        ledger_holds(&redis, CAMPAIGN),
        ledger_holds(&redis, "last-units"),
    ];
    for (title, id, expr) in dashboard_queries() {
        let pick: fn(&seckill_core::ledger::Ledger) -> i64 = match title.as_str() {
            "Remaining" => |l| l.remaining + l.in_transit,
            "Held" => |l| l.held,
            "Sold" => |l| l.sold,
            _ => continue,
        };
        let q = substitute(&expr, ".*");
        let want: BTreeMap<String, f64> = ledgers
            .iter()
            .map(|l| (l.campaign.clone(), pick(l) as f64))
            .collect();
        let got = prom.query(&q);
        assert_eq!(got.len(), want.len(), "{title} {id} ({q}): {got:?}");
        assert_eq!(
            by(&got, "campaign"),
            want,
            "{title} {id} ({q}) with a node down"
        );
    }

    let took = started.elapsed();
    assert!(took < Duration::from_secs(60), "the test took {took:?}");
}

/// Every panel's every query, evaluated by Prometheus after the surge, against what the
/// ledger and the surge say it must show.
fn check_panels(
    prom: &Prometheus,
    ledger: &seckill_core::ledger::Ledger,
    instances: &BTreeSet<String>,
) {
    let mut checked = 0;
    for (title, id, expr) in dashboard_queries() {
        let q = substitute(&expr, CAMPAIGN);
        let r = prom.query(&q);
        let what = format!("panel {title:?} query {id} ({q})");
        let finite_positive = |v: f64| v.is_finite() && v > 0.0;
        match (title.as_str(), id.as_str()) {
            ("Remaining", "A") => figure(&r, &what, ledger.remaining + ledger.in_transit, ledger),
            ("Held", "A") | ("Stock", "B") => figure(&r, &what, ledger.held, ledger),
            ("Sold", "A") | ("Stock", "C") => figure(&r, &what, ledger.sold, ledger),
            ("Stock", "A") => figure(&r, &what, ledger.remaining, ledger),
            ("Ledger mismatch (units)", "A") => {
                assert_eq!(one(&r, &what), 0.0, "{what}: the ledger holds: {ledger}")
            }
            ("Reconciliation violations", "A") => assert_eq!(
                one(&r, &what),
                0.0,
                "{what}: the recorded reconciliation found none"
            ),
            ("Answers per second by outcome", "A") => {
                let rates = by(&r, "outcome");
                assert!(
                    rates.get("ok").is_some_and(|v| *v > 0.0),
                    "{what}: no rate of units held during the surge: {rates:?}"
                );
                assert!(
                    rates.get("sold_out").is_some_and(|v| *v > 0.0),
                    "{what}: no rate of sold-out answers after the last unit: {rates:?}"
                );
                assert_eq!(
                    rates.keys().map(String::as_str).collect::<Vec<_>>(),
                    ["ok", "sold_out"],
                    "{what}: every purchase was held or sold out"
                );
            }
            ("Refusals by reason", "A") => {
                let rates = by(&r, "outcome");
                assert!(
                    rates.get("sold_out").is_some_and(|v| *v > 0.0),
                    "{what}: {rates:?}"
                );
                assert!(
                    !rates.contains_key("ok"),
                    "{what}: ok is no refusal: {rates:?}"
                );
            }
            ("Refusals by reason", "B") | ("Refusals by reason", "C") => assert_eq!(
                one(&r, &what),
                0.0,
                "{what}: the nodes have no rate limits and no blacklist entries"
            ),
            ("Purchase latency", "A") | ("Purchase latency", "B") | ("Purchase latency", "C") => {
                let v = one(&r, &what);
                assert!(finite_positive(v) && v < 5.0, "{what}: {v} s");
            }
            ("Order worker", "A") | ("Order worker", "B") => assert_eq!(
                one(&r, &what),
                0.0,
                "{what}: the workers have read and acknowledged every event"
            ),
            ("Order worker", "C") => {
                let v = one(&r, &what);
                assert!(finite_positive(v), "{what}: deliveries per second {v}");
            }
            ("Payment to delivery", "A") | ("Payment to delivery", "B") => {
                let v = one(&r, &what);
                assert!(
                    finite_positive(v) && v < 5.0,
                    "{what}: {v} s, buyers must get their content within seconds"
                );
            }
            ("Redis and breaker", "A") | ("Redis and breaker", "B") => {
                let want = if id == "A" { 1.0 } else { 0.0 };
                assert_eq!(
                    values_of(&r, "instance"),
                    *instances,
                    "{what}: one per node"
                );
                assert!(r.iter().all(|s| s.value == want), "{what}: {r:?}");
            }
            _ => panic!("{what}: no check for this query here; say what it must show"),
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} dashboard queries checked");
    // The latencies' quantiles in order.
    let q = |p: &str| {
        let e = format!(
            "histogram_quantile({p}, sum by (le) (rate(seckill_http_request_duration_seconds_bucket{{route=\"purchase\"}}[{RATE_INTERVAL}])))"
        );
        one(&prom.query(&e), &e)
    };
    assert!(q("0.5") <= q("0.99"), "p50 above p99");
}

/// With everything healthy every rule is loaded and evaluates without error, no alert is
/// pending or firing, each expression is false, and what each looks at is there: an
/// expression that matches no series would never fire either.
fn check_alerts_quiet(prom: &Prometheus, instances: &BTreeSet<String>) {
    let rules = prom.rules();
    let alerts = alert_rules();
    assert_eq!(
        rules.keys().cloned().collect::<BTreeSet<_>>(),
        alerts
            .iter()
            .map(|(n, _)| n.clone())
            .collect::<BTreeSet<_>>(),
        "Prometheus loaded every rule of config/alerts.yml"
    );
    for (name, (health, error, state, _)) in &rules {
        assert_eq!(health, "ok", "{name}: {error}");
        assert_eq!(state, "inactive", "{name} is {state} while all is healthy");
    }
    let active = prom.alerts();
    assert!(active.is_empty(), "alerts while all is healthy: {active:?}");

    for (name, expr) in &alerts {
        let fires = prom.query(expr);
        assert!(
            fires.is_empty(),
            "{name} holds while all is healthy: {expr} gives {fires:?}"
        );
        let seen = without_thresholds(expr);
        let r = prom.query(&seen);
        match name.as_str() {
            "SeckillNodeDown" => {
                assert_eq!(values_of(&r, "instance"), *instances, "{name}: {seen}");
                assert!(r.iter().all(|s| s.value == 1.0), "{name}: {r:?}");
            }
            // No node has answered a failure, so the ratio's numerator has no series:
            // the ratio is empty, the denominator (answers per node) is not.
            "SeckillHighErrorRate" => {
                assert!(r.is_empty(), "{name}: {seen} gives {r:?}");
                let failures = prom
                    .query("seckill_http_requests_total{outcome=~\"unavailable|timeout|other\"}");
                assert!(
                    failures.is_empty(),
                    "{name}: failures answered: {failures:?}"
                );
                let answers =
                    prom.query("sum by (instance) (rate(seckill_http_requests_total[1m])) > 0");
                assert_eq!(values_of(&answers, "instance"), *instances, "{name}");
            }
            "SeckillBreakerOpen"
            | "SeckillRedisDown"
            | "SeckillClockOffset"
            | "SeckillWorkerLag"
            | "SeckillSlowDelivery"
            | "SeckillUndeliveredOrders" => {
                assert_eq!(
                    values_of(&r, "instance"),
                    *instances,
                    "{name} looks at every node: {seen} gives {r:?}"
                );
            }
            "SeckillLowStock" | "SeckillLedgerMismatch" | "SeckillReconciliationViolations" => {
                assert_eq!(
                    values_of(&r, "campaign"),
                    BTreeSet::from([CAMPAIGN.to_string()]),
                    "{name} looks at the campaign, once: {seen} gives {r:?}"
                );
                assert_eq!(r.len(), 1, "{name}: {r:?}");
            }
            // Fleet-wide: money owed back summed over the workers' stores, and the shop's
            // outbox (one for all) seen by any of them; none of it yet.
            "SeckillRefundsDue"
            | "SeckillShopWebhooksBacklog"
            | "SeckillShopWebhooksDeadLetters" => {
                assert_eq!(
                    r.len(),
                    1,
                    "{name} is one series for the fleet: {seen} gives {r:?}"
                );
                assert_eq!(r[0].value, 0.0, "{name}: {r:?}");
            }
            _ => panic!("{name}: no check for this alert here; say what it looks at"),
        }
    }
}

#[test]
fn thresholds_come_off_outside_label_matchers_only() {
    assert_eq!(
        without_thresholds("max by (instance) (x{a!=\"1\"}) > 0.5"),
        "max by (instance) (x{a!=\"1\"})"
    );
    assert_eq!(
        without_thresholds("a / b < 0.1\n  and on (c) max(s{state=\"live\"}) == 1"),
        "a / b\n  and on (c) max(s{state=\"live\"})"
    );
}
