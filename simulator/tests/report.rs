//! The HTML report in a real browser. One run against a node and a redis-server started
//! here writes both `--report` and `--json`; headless Chromium opens the page from its
//! file, with nothing to fetch, and the test reads the page through WebDriver: its charts
//! drawn and laid out, and every figure it shows equal to the JSON report's.

mod common;

use clap::{CommandFactory, FromArgMatches, Parser};
use common::Stack;
use seckill_simulator::run::{run, RunArgs};
use seckill_simulator::verdict::{self, Op};
use seckill_testkit::webdriver::Browser;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

/// The simulator's command line, as `seckill-sim run` parses it.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// A small launch with bots, one threshold per kind, and a last one no run can meet
/// (`p999<0.001ms`), so the page shows both a met and a broken threshold and a failed run.
fn scenario(dir: &Path, target: &str, redis: &str) -> std::path::PathBuf {
    let campaign = dir.join("c.toml");
    std::fs::write(
        &campaign,
        "id = \"simr\"\nname = \"report test\"\ntotal = 200\npartitions = 4\nper_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 1\ncontent_file = \"album.zip\"\n",
    )
    .expect("campaign file");
    let path = dir.join("scenario.toml");
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
duration_s = 3
threads = 2
[campaign]
create = "{campaign}"
starts_in_s = 0.5
[arrivals]
profile = "ramp"
rate = 500
ramp_s = 1
[population]
users = 800
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
max_bot_units = 1000
fail_on = "oversell==0,violations==0,retry_mismatches==0,p999<0.001ms"
"#,
            d = dir.display(),
            campaign = campaign.display(),
        ),
    )
    .expect("scenario file");
    path
}

#[test]
fn the_html_report_draws_its_charts_and_shows_the_figures_of_the_json_report() {
    let stack = Stack::start(&["a"]);
    let dir = stack.path();
    let (page_file, json_file) = (dir.join("report.html"), dir.join("report.json"));
    let file = scenario(dir, &stack.target, &stack.redis);
    // Target and Redis as flags, too: they win over SECKILL_TARGET and SECKILL_REDIS.
    let argv = [
        "run".as_ref(),
        "--scenario".as_ref(),
        file.as_os_str(),
        "--target".as_ref(),
        stack.target.as_ref(),
        "--redis".as_ref(),
        stack.redis.as_ref(),
        "--report".as_ref(),
        page_file.as_os_str(),
        "--json".as_ref(),
        json_file.as_os_str(),
        "--seed".as_ref(),
        "5".as_ref(),
    ];
    let matches = Cli::command().get_matches_from(argv);
    let args = Cli::from_arg_matches(&matches).expect("arguments").run;
    let code = run(&args).expect("the run");
    assert_eq!(code, ExitCode::FAILURE, "p999<0.001ms cannot be met");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).expect("--json wrote"))
            .expect("the JSON report");
    let page = std::fs::read_to_string(&page_file).expect("--report wrote");
    fetches_nothing(&page);
    keep(&[&page_file, &json_file]);

    let b = Browser::start(1000, 1000);
    b.open(&format!("file://{}", page_file.display()));
    let seen = b.js(READ_PAGE);
    drop(b);

    assert_eq!(
        seen["title"].as_str(),
        Some(
            format!(
                "seckill run: {}",
                json["campaign"].as_str().expect("campaign")
            )
            .as_str()
        )
    );
    assert_eq!(seen["fetched"], Value::Array(vec![]), "resources fetched");
    assert_eq!(
        seen["fetchers"],
        Value::Array(vec![]),
        "elements that fetch"
    );
    figures_match(&seen, &json);
    verdicts_match(&seen, &json);
    thresholds_match(&seen, &json);
    charts_match(&seen["charts"], &json);
    // The scenario as the page prints it is the scenario the JSON holds.
    let shown: toml::Value = toml::from_str(seen["scenario"].as_str().expect("scenario text"))
        .expect("the page's scenario is TOML");
    assert_eq!(
        serde_json::to_value(shown).expect("as JSON"),
        without_nulls(&json["scenario"])
    );
}

/// Copies the run's files under the target's temp dir, to look at after the test.
fn keep(files: &[&Path]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).expect("a dir for the report");
    for f in files {
        let to = dir.join(f.file_name().expect("a file name"));
        std::fs::copy(f, &to).expect("a copy of the report");
        eprintln!("kept: {}", to.display());
    }
}

/// Reads the page: every figure with its JSON pointer, the verdicts, the thresholds, what
/// each chart drew and how big it was laid out, and anything that fetched or would fetch.
const READ_PAGE: &str = r#"
const text = e => e.textContent.trim();
const figures = [];
for (const e of document.querySelectorAll('[data-json]')) {
  if (e.tagName === 'TR') {
    const head = e.closest('table').rows[0].cells;
    [...e.cells].forEach((c, i) => {
      if (head[i].dataset.key) figures.push([e.dataset.json + '/' + head[i].dataset.key, text(c)]);
    });
  } else {
    figures.push([e.dataset.json, text(e)]);
  }
}
for (const e of document.querySelectorAll('[data-json-numbers]')) {
  const at = e.dataset.jsonNumbers.split(' ');
  const numbers = text(e).match(/-?[0-9]+(\.[0-9]+)?/g) || [];
  if (numbers.length !== at.length) figures.push([e.dataset.jsonNumbers, text(e)]);
  else at.forEach((p, i) => figures.push([p, numbers[i]]));
}
const verdicts = [...document.querySelectorAll('[data-verdict]')].map(e => {
  const said = e.querySelector('.pass, .fail');
  return [e.dataset.verdict, said ? text(said) : '', said ? said.className : ''];
});
const thresholds = [...document.querySelectorAll('td[data-metric]')].map(td => {
  const row = td.parentElement.cells;
  return [td.dataset.metric, text(row[0]), text(td), text(row[2])];
});
const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
const bbox = e => { const b = e.getBBox(); return [b.x, b.y, b.width, b.height]; };
const charts = {};
for (const id of ['answers', 'percentiles', 'distribution']) {
  const figure = document.getElementById('chart-' + id);
  const svgs = figure ? [...figure.querySelectorAll('svg')] : [];
  if (svgs.length !== 1) { charts[id] = { svgs: svgs.length }; continue; }
  const svg = svgs[0];
  charts[id] = {
    svgs: 1,
    size: box(svg),
    texts: [...svg.querySelectorAll('text')].map(t => ({ text: text(t), box: bbox(t) })),
    rects: [...svg.querySelectorAll('rect')].map(r => ({
      fill: (r.getAttribute('fill') || '').toLowerCase(), box: bbox(r) })),
    lines: [...svg.querySelectorAll('polyline')].map(p => ({
      stroke: (p.getAttribute('stroke') || '').toLowerCase(),
      points: [...p.points].map(q => [q.x, q.y]) })),
  };
}
const fetchers = [...document.querySelectorAll('script, link, img, iframe, object, embed, [src], [href]')]
  .map(e => e.outerHTML.slice(0, 100));
return {
  title: document.title, figures, verdicts, thresholds, charts, fetchers,
  fetched: performance.getEntriesByType('resource').map(e => e.name),
  scenario: text(document.getElementById('scenario')),
};
"#;

/// The page's source names nothing to fetch: no scripts, styles, images or frames from
/// anywhere, no address in an attribute (but the SVG namespace, which is a name).
fn fetches_nothing(page: &str) {
    for tag in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", " src=", " href=",
    ] {
        assert!(!page.contains(tag), "{tag} in the page");
    }
    let page = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for attribute in ["=\"http", "='http", "=http"] {
        assert!(!page.contains(attribute), "{attribute} in the page");
    }
}

/// The JSON pointer of a field, as the page writes it.
fn pointer(path: &[&str]) -> String {
    path.iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Whether a figure as shown is the JSON's value: a string as it is, a list by its
/// length, an integer exactly, a fraction to the digits shown.
fn agrees(shown: &str, value: &Value) -> bool {
    match value {
        Value::String(s) => shown == s,
        Value::Array(a) => shown == a.len().to_string(),
        Value::Number(n) if n.is_f64() => {
            let digits = shown.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
            shown.parse::<f64>().is_ok_and(|v| {
                (v - n.as_f64().unwrap_or(f64::NAN)).abs() <= 0.5 * 10f64.powi(-digits) + 1e-9
            })
        }
        Value::Number(n) => shown == n.to_string(),
        _ => false,
    }
}

/// Every figure on the page is the JSON's, and the page shows every figure it should.
fn figures_match(seen: &Value, json: &Value) {
    let figures = seen["figures"].as_array().expect("figures");
    let mut shown = BTreeSet::new();
    for f in figures {
        let (at, text) = (
            f[0].as_str().expect("pointer"),
            f[1].as_str().expect("text"),
        );
        let value = json
            .pointer(at)
            .unwrap_or_else(|| panic!("{at} is not in the JSON report"));
        assert!(
            agrees(text, value),
            "{at}: the page shows {text}, the JSON has {value}"
        );
        shown.insert(at.to_string());
    }
    let mut expected: Vec<String> = [
        "campaign",
        "sale_opens",
        "planned",
        "offered_per_s",
        "achieved_per_s",
        "requests",
        "unanswered",
        "unsent",
        "units_to_people",
        "units_to_bots",
        "paid",
        "delivered",
        "downloaded",
    ]
    .iter()
    .map(|f| pointer(&[f]))
    .collect();
    expected.push(pointer(&["scenario", "duration_s"]));
    expected.push(pointer(&["purchase_latency", "p99_ms"]));
    let keys = |at: &str| -> Vec<String> {
        json[at]
            .as_object()
            .unwrap_or_else(|| panic!("{at} in the JSON"))
            .keys()
            .cloned()
            .collect()
    };
    for persona in keys("outcomes") {
        for outcome in json["outcomes"][&persona]
            .as_object()
            .expect("outcomes")
            .keys()
        {
            expected.push(pointer(&["outcomes", &persona, outcome]));
        }
    }
    for route in keys("route_latency") {
        for field in ["count", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
            expected.push(pointer(&["route_latency", &route, field]));
        }
    }
    for persona in keys("units_won") {
        expected.push(pointer(&["units_won", &persona]));
    }
    for field in [
        "remaining",
        "in_transit",
        "held",
        "sold",
        "total",
        "buyers",
        "orders",
    ] {
        expected.push(pointer(&["ledger", field]));
    }
    for field in ["missing", "undelivered", "delivered_twice", "codes_reused"] {
        expected.push(pointer(&["reconciliation", field]));
    }
    for field in [
        "provider",
        "sent",
        "resent",
        "unanswered",
        "late_not_sent",
        "refunds_due",
        "mismatches",
        "refunds_listed",
        "unpaid_orders",
        "keys_short",
    ] {
        expected.push(pointer(&["payments", field]));
    }
    for field in [
        "payments",
        "paid_cents",
        "refunds_due",
        "refunds_due_cents",
        "refunded",
        "refunded_cents",
        "mismatches",
    ] {
        expected.push(pointer(&["payments", "recorded", field]));
    }
    for list in ["outcomes", "orders_seen", "resent_after"] {
        let counts = json["payments"][list]
            .as_object()
            .expect("payments' counts");
        for key in counts.keys() {
            expected.push(pointer(&["payments", list, key]));
        }
    }
    for field in ["pending", "lag"] {
        expected.push(pointer(&["reconciliation", "streams", field]));
    }
    let failures = json["failures"].as_array().expect("failures").len();
    assert!(failures > 0, "the run broke p999<0.001ms");
    for i in 0..failures {
        expected.push(pointer(&["failures", &i.to_string()]));
    }
    let missing: Vec<&String> = expected.iter().filter(|p| !shown.contains(*p)).collect();
    assert!(missing.is_empty(), "not on the page: {missing:?}");
    assert!(keys("outcomes").len() > 3 && keys("units_won").len() > 1);
}

/// Each verdict says PASS when the list it names in the JSON is empty, FAIL otherwise.
fn verdicts_match(seen: &Value, json: &Value) {
    let mut named = BTreeSet::new();
    for v in seen["verdicts"].as_array().expect("verdicts") {
        let (at, text, class) = (
            v[0].as_str().expect("pointer"),
            v[1].as_str().expect("text"),
            v[2].as_str().expect("class"),
        );
        let list = json
            .pointer(at)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{at}: no list in the JSON report"));
        let want = if list.is_empty() { "PASS" } else { "FAIL" };
        assert_eq!((text, class), (want, want.to_lowercase().as_str()), "{at}");
        named.insert(at);
    }
    assert_eq!(
        named,
        BTreeSet::from([
            "/failures",
            "/ledger/violations",
            "/reconciliation/violations"
        ])
    );
}

/// The metric a threshold names, from the JSON report alone.
fn metric(json: &Value, name: &str) -> f64 {
    let n = |at: &str| json.pointer(at).and_then(Value::as_f64).expect(at);
    let len = |at: &str| json.pointer(at).and_then(Value::as_array).expect(at).len() as f64;
    match name {
        "p99" => n("/purchase_latency/p99_ms"),
        "p999" => n("/purchase_latency/p999_ms"),
        "bot_wins" => n("/units_to_bots"),
        "oversell" => (n("/ledger/held") + n("/ledger/sold") - n("/ledger/total")).max(0.0),
        "violations" => len("/reconciliation/violations"),
        "retry_mismatches" => n("/retry_mismatches"),
        _ => panic!("no reading of {name} here"),
    }
}

/// A threshold's row as it should read: its metric, its text, the comparison and its
/// bound.
type Threshold = (String, String, fn(f64, f64) -> bool, f64);

/// The thresholds the JSON's scenario sets, in order, each with its value in the JSON and
/// met or broken as that value says.
fn thresholds_match(seen: &Value, json: &Value) {
    let t = &json["scenario"]["thresholds"];
    let p99 = t["p99_ms"].as_f64().expect("p99_ms");
    let bots = t["max_bot_units"].as_f64().expect("max_bot_units");
    let at_most: fn(f64, f64) -> bool = |v, max| v <= max;
    let mut want: Vec<Threshold> = vec![
        ("p99".into(), format!("p99 ≤ {p99} ms"), at_most, p99),
        (
            "bot_wins".into(),
            format!("bot units ≤ {bots}"),
            at_most,
            bots,
        ),
    ];
    let conditions = verdict::parse(t["fail_on"].as_str().expect("fail_on")).expect("fail_on");
    for c in conditions {
        let holds: fn(f64, f64) -> bool = match c.op {
            Op::Lt => |v, b| v < b,
            Op::Le => |v, b| v <= b,
            Op::Eq => |v, b| v == b,
            Op::Ge => |v, b| v >= b,
            Op::Gt => |v, b| v > b,
        };
        want.push((c.metric, c.text, holds, c.bound));
    }
    let rows = seen["thresholds"].as_array().expect("thresholds");
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    let mut broken = 0;
    for (row, (name, text, holds, bound)) in rows.iter().zip(want) {
        let value = metric(json, &name);
        let cell = |i: usize| row[i].as_str().expect("a cell");
        assert_eq!((cell(0), cell(1)), (name.as_str(), text.as_str()));
        assert!(
            agrees(cell(2), &serde_json::json!(value)),
            "{text}: the page shows {}, the JSON says {value}",
            cell(2)
        );
        let met = if holds(value, bound) { "met" } else { "broken" };
        assert_eq!(cell(3), met, "{text} at {value}");
        broken += usize::from(met == "broken");
    }
    assert!(broken >= 1, "p999<0.001ms is broken");
}

/// Each chart laid out with a size and drawn from the JSON's series: a bar for every
/// second and outcome, a line per percentile over the seconds that had answers, a bar per
/// latency bucket between its bounds, each as tall as its count says; and no legend
/// drawn over the bars or lines.
fn charts_match(charts: &Value, json: &Value) {
    let over_time = json["over_time"].as_array().expect("over_time");
    let seconds = over_time.len();
    assert!(seconds >= 3, "{seconds} seconds");
    for id in ["answers", "percentiles", "distribution"] {
        let c = &charts[id];
        assert_eq!(c["svgs"], 1, "{id}: one SVG");
        let (w, h) = (c["size"][0].as_f64(), c["size"][1].as_f64());
        assert!(
            w > Some(100.0) && h > Some(100.0),
            "{id} laid out at {w:?} x {h:?}"
        );
        assert!(!texts(c).is_empty(), "{id}: no text");
    }

    // Answers: one colour per outcome, a bar of it every second and its legend swatch;
    // the outcomes' names right of every bar.
    let answers = &charts["answers"];
    let outcomes: BTreeSet<&str> = over_time
        .iter()
        .flat_map(|s| s["outcomes"].as_object().expect("outcomes").keys())
        .map(String::as_str)
        .collect();
    let rects = answers["rects"].as_array().expect("rects");
    let mut by_fill = std::collections::BTreeMap::<&str, usize>::new();
    for r in rects {
        *by_fill.entry(r["fill"].as_str().unwrap_or("")).or_default() += 1;
    }
    let layers = by_fill.values().filter(|n| **n == seconds + 1).count();
    assert_eq!(layers, outcomes.len(), "bars by colour: {by_fill:?}");
    let bars: Vec<[f64; 4]> = rects
        .iter()
        .filter(|r| !["#ffffff", "none"].contains(&r["fill"].as_str().unwrap_or("")))
        .map(|r| bbox(&r["box"]))
        .filter(|[_, _, w, h]| *w > 20.0 && *h > 0.0)
        .collect();
    assert!(bars.len() > outcomes.len(), "{} bars drawn", bars.len());
    let right = bars.iter().map(|[x, _, w, _]| x + w).fold(0.0, f64::max);
    // (A tick of the y axis may read as an outcome, "200", but on the left.)
    let names = texts(answers);
    for o in &outcomes {
        assert!(
            names.iter().any(|(t, [x, ..])| t == o && *x > right),
            "the legend's {o} is not right of the bars: {names:?}"
        );
    }

    // Percentiles: p50, p90 and p99, each over the seconds that had answers, the slower
    // percentile never drawn below the faster; their names right of every point.
    let p = &charts["percentiles"];
    let names = texts(p);
    let answered: Vec<&Value> = over_time.iter().filter(|s| s["answered"] != 0).collect();
    let mut ys = Vec::new();
    let mut right: f64 = 0.0;
    for (field, colour) in [
        ("p50_ms", "#1f77b4"),
        ("p90_ms", "#ff7f0e"),
        ("p99_ms", "#d62728"),
    ] {
        let line = p["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .find(|l| {
                l["stroke"] == colour
                    && l["points"].as_array().map(Vec::len) == Some(answered.len())
            })
            .unwrap_or_else(|| {
                panic!(
                    "no {field} line of {} points: {}",
                    answered.len(),
                    p["lines"]
                )
            });
        for (point, second) in line["points"]
            .as_array()
            .expect("points")
            .iter()
            .zip(&answered)
        {
            let (x, y) = (point[0].as_f64().expect("x"), point[1].as_f64().expect("y"));
            ys.push((second[field].as_f64().expect(field), y));
            right = right.max(x);
        }
    }
    higher_is_taller(&ys, "percentile lines");
    for name in ["p50", "p90", "p99"] {
        assert!(
            names.iter().any(|(t, [x, ..])| *t == name && *x > right),
            "the legend's {name} is not right of the lines: {names:?}"
        );
    }

    // The distribution: a bar per bucket, the fuller bucket never the shorter bar, each
    // bar between the labels of its bounds.
    let d = &charts["distribution"];
    let buckets = json["purchase_latency_distribution"]
        .as_array()
        .expect("buckets");
    let mut bars: Vec<[f64; 4]> = d["rects"]
        .as_array()
        .expect("rects")
        .iter()
        .filter(|r| r["fill"] == "#1f77b4")
        .map(|r| bbox(&r["box"]))
        .collect();
    bars.sort_by(|a, b| a[0].total_cmp(&b[0]));
    assert_eq!(bars.len(), buckets.len(), "a bar per bucket");
    let heights: Vec<(f64, f64)> = buckets
        .iter()
        .zip(&bars)
        // Taller bars reach higher: their top's y is smaller.
        .map(|(b, [_, _, _, h])| (b["count"].as_f64().expect("count"), -h))
        .collect();
    higher_is_taller(&heights, "distribution bars");
    assert!(heights.iter().any(|(_, h)| *h < -10.0), "{heights:?}");
    // The x axis's labels: below the bars.
    let bottom = bars.iter().map(|[_, y, _, h]| y + h).fold(0.0, f64::max);
    let labels: Vec<(&str, [f64; 4])> = texts(d)
        .into_iter()
        .filter(|(_, [_, y, ..])| *y >= bottom)
        .collect();
    let centre = |[x, _, w, _]: [f64; 4]| x + w / 2.0;
    let label = |bound: &str| {
        labels
            .iter()
            .find(|(t, _)| *t == bound)
            .map(|(_, b)| centre(*b))
            .unwrap_or_else(|| panic!("no label {bound} under the bars: {labels:?}"))
    };
    assert!(
        label("0") < centre(bars[0]),
        "0 right of the first bar's middle"
    );
    for (i, (bucket, bar)) in buckets.iter().zip(&bars).enumerate() {
        let bound = trim(bucket["up_to_ms"].as_f64().expect("up_to_ms"));
        let next = bars.get(i + 1).map_or(f64::INFINITY, |b| centre(*b));
        let at = label(&bound);
        assert!(
            centre(*bar) < at && at < next,
            "bucket {i}: its bound {bound} is labelled at x {at}, not at its bar's right edge ({bar:?})"
        );
    }
}

/// A chart's texts, each with the box it was drawn in.
fn texts(chart: &Value) -> Vec<(&str, [f64; 4])> {
    chart["texts"]
        .as_array()
        .expect("texts")
        .iter()
        .map(|t| (t["text"].as_str().expect("text"), bbox(&t["box"])))
        .collect()
}

/// An element's box in its SVG: x, y, width, height.
fn bbox(v: &Value) -> [f64; 4] {
    std::array::from_fn(|i| v[i].as_f64().expect("a box"))
}

/// A bucket's bound as the chart writes it: 0.25, 1, 16.
fn trim(ms: f64) -> String {
    let s = format!("{ms:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Points (value, y on the page): a larger value never sits lower on the page (a larger
/// y), give or take a pixel of rounding.
fn higher_is_taller(points: &[(f64, f64)], what: &str) {
    for (v, y) in points {
        for (w, z) in points {
            assert!(
                !(v > w && y > &(z + 1.0)),
                "{what}: {v} drawn below {w} ({y} > {z})"
            );
        }
    }
}

/// The JSON without its null fields: TOML has no null, the page's scenario leaves them
/// out.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        v => v.clone(),
    }
}
