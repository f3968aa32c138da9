//! The report as one self-contained HTML page (`--report`): inline CSS and inline SVG
//! charts, nothing fetched when it is opened. Every figure comes from [`Report`], the
//! structure `--json` writes, so the page and the JSON agree.

use std::fmt::Write;

use crate::report::Report;
use crate::verdict;

const STYLE: &str = "body{font-family:sans-serif;max-width:800px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px}\
td.n{text-align:right}.pass{color:#1a7f1a}.fail{color:#b00}pre{background:#f4f4f4;padding:8px;overflow:auto}";

/// `&`, `<`, `>` and `"` as entities: names and outcomes come from the run.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        r#"<span class="pass">PASS</span>"#
    } else {
        r#"<span class="fail">FAIL</span>"#
    }
}

/// A table: a header row, then rows of cells; cells that parse as numbers align right.
fn table(head: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut out = String::from("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out += "</tr>";
    for row in rows {
        out += "<tr>";
        for cell in row {
            let class = if cell.trim_end_matches('%').parse::<f64>().is_ok() {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(&cell));
        }
        out += "</tr>";
    }
    out + "</table>\n"
}

/// Each threshold of the scenario with its value in this run, met or broken.
fn thresholds(r: &Report) -> String {
    let t = &r.scenario.thresholds;
    let mut rows = Vec::new();
    if let Some(max) = t.p99_ms {
        let v = r.purchase_latency.p99_ms;
        rows.push(vec![
            format!("p99 ≤ {max} ms"),
            format!("{v:.2}"),
            met(v <= max),
        ]);
    }
    if let Some(max) = t.max_bot_units {
        let v = r.units_to_bots;
        rows.push(vec![
            format!("bot units ≤ {max}"),
            v.to_string(),
            met(v <= max),
        ]);
    }
    let conditions = t
        .fail_on
        .as_deref()
        .and_then(|f| verdict::parse(f).ok())
        .unwrap_or_default();
    for c in conditions {
        let ok = verdict::broken(std::slice::from_ref(&c), |m| r.metric(m)).is_empty();
        rows.push(vec![
            c.text.clone(),
            format!("{}", r.metric(&c.metric)),
            met(ok),
        ]);
    }
    if rows.is_empty() {
        return "<p>The scenario sets no thresholds.</p>\n".into();
    }
    table(&["threshold", "value", ""], rows)
}

fn met(ok: bool) -> String {
    if ok { "met" } else { "broken" }.into()
}

fn fairness(r: &Report) -> String {
    let Some(q) = &r.queue else {
        return String::new();
    };
    let f = &q.fairness;
    let mut out = format!(
        "<h2>Waiting room</h2>\n<pre>{}</pre>\n<p>{} accounts in the pre-queue won {} units; bots: {:.1}% of the pre-queue, {:.1}% of its units; {} shoppers joined after the opening, {} won.</p>\n",
        escape(&q.text().lines().take(2).collect::<Vec<_>>().join("\n")),
        f.pre_queue,
        f.pre_queue_won,
        f.bots_share_of_pre_queue * 100.0,
        f.bots_share_of_units * 100.0,
        f.late.joined,
        f.late.won,
    );
    for (head, t) in [
        ("shoppers, by when they joined", &f.by_join_time),
        ("shoppers, by how often they looked", &f.by_polling),
        ("the pre-queue, people and bots", &f.bots),
    ] {
        let _ = writeln!(out, "<h3>{}</h3>", escape(head));
        out += &table(
            &["class", "joined", "won", "share", "looks/s", "refused"],
            t.rows.iter().map(|row| {
                vec![
                    row.class.clone(),
                    row.joined.to_string(),
                    row.won.to_string(),
                    format!("{:.1}%", row.share * 100.0),
                    format!("{:.2}", row.looks_per_s),
                    format!("{:.1}%", row.looks_refused * 100.0),
                ]
            }),
        );
        let _ = writeln!(out, "<p>{}</p>", escape(&t.test.line()));
    }
    out
}

fn scenario(r: &Report) -> String {
    let text = toml::to_string_pretty(&r.scenario)
        .or_else(|_| serde_json::to_string_pretty(&r.scenario))
        .unwrap_or_default();
    format!("<h2>Scenario</h2>\n<pre>{}</pre>\n", escape(&text))
}

/// The whole page.
pub fn page(r: &Report) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>seckill run: {c}</title><style>{STYLE}</style></head><body>\n\
<h1>Campaign {c}</h1>\n<p>Sale opened {o}; {d:.0} s; {p} planned; offered {off:.0}/s, answered {ans:.0}/s; {req} requests ({un} unanswered, {us} never sent).</p>\n",
        c = escape(&r.campaign),
        o = escape(&r.sale_opens),
        d = r.scenario.duration_s,
        p = r.planned,
        off = r.offered_per_s,
        ans = r.achieved_per_s,
        req = r.requests,
        un = r.unanswered,
        us = r.unsent,
    );
    let _ = writeln!(out, "<h2>Verdict: {}</h2>", verdict(r.passed()));
    if !r.passed() {
        out += "<ul>";
        for f in &r.failures {
            let _ = write!(out, "<li>{}</li>", escape(f));
        }
        out += "</ul>\n";
    }
    out += "<h2>Thresholds</h2>\n";
    out += &thresholds(r);

    out += "<h2>Answers over the run</h2>\n";
    out += &crate::charts::answers(r);
    out += "<h2>Latency</h2>\n";
    out += &crate::charts::percentiles(r);
    out += &crate::charts::distribution(r);
    out += &table(
        &["route", "requests", "p50", "p90", "p99", "p99.9", "max"],
        r.route_latency.iter().map(|(route, l)| {
            vec![
                route.clone(),
                l.count.to_string(),
                format!("{:.2}", l.p50_ms),
                format!("{:.2}", l.p90_ms),
                format!("{:.2}", l.p99_ms),
                format!("{:.2}", l.p999_ms),
                format!("{:.2}", l.max_ms),
            ]
        }),
    );
    out += "<p>Milliseconds; purchases from the planned send, delivered from the payment's answer.</p>\n";

    out += "<h2>Who won the units</h2>\n";
    out += &table(
        &["persona", "units"],
        r.units_won
            .iter()
            .map(|(p, n)| vec![p.clone(), n.to_string()]),
    );
    let _ = writeln!(
        out,
        "<p>{} units to people, {} to bots; {} paid, {} saw their order delivered, {} downloaded it.</p>",
        r.units_to_people, r.units_to_bots, r.paid, r.delivered, r.downloaded
    );
    out += &table(
        &["persona", "outcome", "answers"],
        r.outcomes.iter().flat_map(|(p, o)| {
            o.iter()
                .map(move |(o, n)| vec![p.clone(), o.clone(), n.to_string()])
        }),
    );

    out += "<h2>Ledger</h2>\n";
    let l = &r.ledger;
    out += &table(
        &[
            "remaining",
            "in transit",
            "held",
            "sold",
            "total",
            "buyers",
            "orders",
        ],
        [vec![
            l.remaining.to_string(),
            l.in_transit.to_string(),
            l.held.to_string(),
            l.sold.to_string(),
            l.total.to_string(),
            l.buyers.to_string(),
            l.orders.to_string(),
        ]],
    );
    let _ = writeln!(
        out,
        "<p>Ledger: {} {}</p>",
        verdict(l.holds()),
        escape(&l.violations.join("; "))
    );
    if let Some(rec) = &r.reconciliation {
        let _ = writeln!(
            out,
            "<p>Reconciliation with {}: {} missing {}, undelivered {}, delivered twice {}, codes reused {}; streams: {} pending, {} unread. {}</p>",
            escape(&rec.stores.join(", ")),
            verdict(rec.holds()),
            rec.missing.len(),
            rec.undelivered.len(),
            rec.delivered_twice.len(),
            rec.codes_reused.len(),
            rec.streams.pending,
            rec.streams.lag,
            escape(&rec.violations.join("; ")),
        );
    }
    out += &fairness(r);
    out += &scenario(r);
    out += "</body></html>\n";
    out
}
