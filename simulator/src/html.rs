//! The report as one self-contained HTML page (`--report`): inline CSS and inline SVG
//! charts, nothing fetched when it is opened. Every figure comes from [`Report`], the
//! structure `--json` writes, so the page and the JSON agree. Each figure names its place
//! in the JSON with a JSON pointer in `data-json`, or sits in a row that stands for an
//! object (`data-json` on the row) under a header naming the field (`data-key`), or in a
//! sentence that lists the pointers of the numbers it says, in order
//! (`data-json-numbers`); the element holding a PASS or FAIL names the list that decides
//! it in `data-verdict`. A reader, or a test, can check the one against the other.

use std::fmt::Write;

use crate::markup::{decided_by, escape, figure, pointer, table, verdict, Cell};
use crate::report::Report;
use crate::verdict;
use seckill_core::ledger::Ledger;

const STYLE: &str = "body{font-family:sans-serif;max-width:800px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px}\
td.n{text-align:right}.pass{color:#1a7f1a}.fail{color:#b00}pre{background:#f4f4f4;padding:8px;overflow:auto}";

/// Each threshold of the scenario with its value in this run, met or broken; the value's
/// cell names its metric (`data-metric`, as `--fail-on` spells it).
fn thresholds(r: &Report) -> String {
    let t = &r.scenario.thresholds;
    let mut rows = Vec::new();
    if let Some(max) = t.p99_ms {
        let v = r.purchase_latency.p99_ms;
        rows.push(vec![
            format!("p99 ≤ {max} ms").into(),
            Cell::json(&["purchase_latency", "p99_ms"], format!("{v:.2}"))
                .with("data-metric", "p99"),
            met(v <= max),
        ]);
    }
    if let Some(max) = t.max_bot_units {
        let v = r.units_to_bots;
        rows.push(vec![
            format!("bot units ≤ {max}").into(),
            Cell::json(&["units_to_bots"], v).with("data-metric", "bot_wins"),
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
            c.text.clone().into(),
            Cell::from(format!("{}", r.metric(&c.metric))).with("data-metric", &c.metric),
            met(ok),
        ]);
    }
    if rows.is_empty() {
        return "<p>The scenario sets no thresholds.</p>\n".into();
    }
    table(&["threshold", "value", ""], rows)
}

fn met(ok: bool) -> Cell {
    String::from(if ok { "met" } else { "broken" }).into()
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
                [
                    row.class.clone(),
                    row.joined.to_string(),
                    row.won.to_string(),
                    format!("{:.1}%", row.share * 100.0),
                    format!("{:.2}", row.looks_per_s),
                    format!("{:.1}%", row.looks_refused * 100.0),
                ]
                .map(Cell::from)
                .into()
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
    format!(
        "<h2>Scenario</h2>\n<pre id=\"scenario\">{}</pre>\n",
        escape(&text)
    )
}

/// The ledger in one row that stands for the JSON's `ledger`, each column for the field
/// its header names in `data-key`.
fn ledger(l: &Ledger) -> String {
    let fields = [
        ("remaining", "remaining", l.remaining),
        ("in transit", "in_transit", l.in_transit),
        ("held", "held", l.held),
        ("sold", "sold", l.sold),
        ("total", "total", l.total),
        ("buyers", "buyers", l.buyers as i64),
        ("orders", "orders", l.orders as i64),
    ];
    let mut out = String::from("<table><tr>");
    for (label, key, _) in fields {
        let _ = write!(out, "<th data-key=\"{key}\">{label}</th>");
    }
    let _ = write!(out, "</tr><tr data-json=\"{}\">", pointer(&["ledger"]));
    for (_, _, value) in fields {
        let _ = write!(out, "<td class=\"n\">{value}</td>");
    }
    out + "</tr></table>\n"
}

/// A chart in a figure of its own, found by its id.
fn chart(id: &str, svg: String) -> String {
    format!("<figure id=\"chart-{id}\">{svg}</figure>\n")
}

/// The whole page.
pub fn page(r: &Report) -> String {
    let mut out = head(r);
    out += &verdict_and_thresholds(r);
    out += "<h2>Answers over the run</h2>\n";
    out += &chart("answers", crate::charts::answers(r));
    out += &latency(r);
    out += &winners(r);
    out += &payments(r);
    out += &books(r);
    out += &fairness(r);
    out += &scenario(r);
    out += "</body></html>\n";
    out
}

/// The document's head, the campaign and the run in one sentence.
fn head(r: &Report) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>seckill run: {t}</title><style>{STYLE}</style></head><body>\n\
<h1>Campaign {c}</h1>\n<p>Sale opened {o}; {d} s; {p} planned; offered {off}/s, answered {ans}/s; {req} requests ({un} unanswered, {us} never sent).</p>\n",
        t = escape(&r.campaign),
        c = figure(&["campaign"], &r.campaign),
        o = figure(&["sale_opens"], &r.sale_opens),
        d = figure(&["scenario", "duration_s"], format!("{:.0}", r.scenario.duration_s)),
        p = figure(&["planned"], r.planned),
        off = figure(&["offered_per_s"], format!("{:.0}", r.offered_per_s)),
        ans = figure(&["achieved_per_s"], format!("{:.0}", r.achieved_per_s)),
        req = figure(&["requests"], r.requests),
        un = figure(&["unanswered"], r.unanswered),
        us = figure(&["unsent"], r.unsent),
    )
}

/// The run's verdict, the failures that decided it, and the thresholds.
fn verdict_and_thresholds(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h2 {}>Verdict: {}</h2>",
        decided_by(&["failures"]),
        verdict(r.passed())
    );
    if !r.passed() {
        out += "<ul>";
        for (i, f) in r.failures.iter().enumerate() {
            let _ = write!(
                out,
                "<li data-json=\"{}\">{}</li>",
                pointer(&["failures", &i.to_string()]),
                escape(f)
            );
        }
        out += "</ul>\n";
    }
    out += "<h2>Thresholds</h2>\n";
    out + &thresholds(r)
}

/// The latency charts and the table of every route's percentiles.
fn latency(r: &Report) -> String {
    let mut out = String::from("<h2>Latency</h2>\n");
    out += &chart("percentiles", crate::charts::percentiles(r));
    out += &chart("distribution", crate::charts::distribution(r));
    out += &table(
        &["route", "requests", "p50", "p90", "p99", "p99.9", "max"],
        r.route_latency.iter().map(|(route, l)| {
            let ms =
                |field, v: f64| Cell::json(&["route_latency", route, field], format!("{v:.2}"));
            vec![
                route.clone().into(),
                Cell::json(&["route_latency", route, "count"], l.count),
                ms("p50_ms", l.p50_ms),
                ms("p90_ms", l.p90_ms),
                ms("p99_ms", l.p99_ms),
                ms("p999_ms", l.p999_ms),
                ms("max_ms", l.max_ms),
            ]
        }),
    );
    out + "<p>Milliseconds; purchases from the planned send, delivered from the payment's answer.</p>\n"
}

/// Who won the units, what the buyers did with them, and every persona's answers.
fn winners(r: &Report) -> String {
    let mut out = String::from("<h2>Who won the units</h2>\n");
    out += &table(
        &["persona", "units"],
        r.units_won
            .iter()
            .map(|(p, n)| vec![p.clone().into(), Cell::json(&["units_won", p], n)]),
    );
    let _ = writeln!(
        out,
        "<p data-json-numbers=\"{}\">{} units to people, {} to bots; {} paid, {} saw their order delivered, {} downloaded it.</p>",
        ["units_to_people", "units_to_bots", "paid", "delivered", "downloaded"]
            .map(|f| pointer(&[f]))
            .join(" "),
        r.units_to_people, r.units_to_bots, r.paid, r.delivered, r.downloaded
    );
    out + &table(
        &["persona", "outcome", "answers"],
        r.outcomes.iter().flat_map(|(p, o)| {
            o.iter().map(move |(o, n)| {
                vec![
                    p.clone().into(),
                    o.clone().into(),
                    Cell::json(&["outcomes", p, o], n),
                ]
            })
        }),
    )
}

/// The buyers' payments: what the node answered them, what their orders said after, and
/// what the nodes recorded.
fn payments(r: &Report) -> String {
    let p = &r.payments;
    let mut out = String::from("<h2>Payments</h2>\n");
    let numbers = |fields: &[&str]| {
        fields
            .iter()
            .map(|f| pointer(&["payments", f]))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        out,
        "<p>Paid through the {} provider.</p>",
        figure(&["payments", "provider"], &p.provider)
    );
    let _ = writeln!(
        out,
        "<p data-json-numbers=\"{}\">{} payments sent, {} tries sent again, {} unanswered, {} late ones never sent; {} refunds due, {} mismatches; the orders after paying listed {} refunds due; {} units sold without a payment answered paid; {} delivered orders short of a licence key.</p>",
        numbers(&[
            "sent",
            "resent",
            "unanswered",
            "late_not_sent",
            "refunds_due",
            "mismatches",
            "refunds_listed",
            "unpaid_orders",
            "keys_short",
        ]),
        p.sent,
        p.resent,
        p.unanswered,
        p.late_not_sent,
        p.refunds_due,
        p.mismatches,
        p.refunds_listed,
        p.unpaid_orders.len(),
        p.keys_short,
    );
    out += &table(
        &["answer", "payments"],
        p.outcomes.iter().map(|(o, n)| {
            vec![
                o.clone().into(),
                Cell::json(&["payments", "outcomes", o], n),
            ]
        }),
    );
    if !p.resent_after.is_empty() {
        out += &table(
            &["sent again after", "tries"],
            p.resent_after.iter().map(|(a, n)| {
                vec![
                    a.clone().into(),
                    Cell::json(&["payments", "resent_after", a], n),
                ]
            }),
        );
    }
    out += &table(
        &["order after paying", "orders"],
        p.orders_seen.iter().map(|(status, n)| {
            vec![
                status.clone().into(),
                Cell::json(&["payments", "orders_seen", status], n),
            ]
        }),
    );
    let m = &p.recorded;
    let recorded = |f: &str| pointer(&["payments", "recorded", f]);
    let _ = writeln!(
        out,
        "<p data-json-numbers=\"{}\">Recorded by the nodes: {} payments paid {} cents, {} refunds due of {} cents, {} refunded of {} cents, {} mismatches.</p>",
        [
            "payments",
            "paid_cents",
            "refunds_due",
            "refunds_due_cents",
            "refunded",
            "refunded_cents",
            "mismatches",
        ]
        .map(recorded)
        .join(" "),
        m.payments,
        m.paid_cents,
        m.refunds_due,
        m.refunds_due_cents,
        m.refunded,
        m.refunded_cents,
        m.mismatches,
    );
    out
}

/// The ledger and its verdict, and the reconciliation's when stores were given.
fn books(r: &Report) -> String {
    let mut out = String::from("<h2>Ledger</h2>\n");
    let l = &r.ledger;
    out += &ledger(l);
    let _ = writeln!(
        out,
        "<p {}>Ledger: {} {}</p>",
        decided_by(&["ledger", "violations"]),
        verdict(l.holds()),
        escape(&l.violations.join("; "))
    );
    if let Some(rec) = &r.reconciliation {
        // A list's figure is its length.
        let count = |field, list: usize| figure(&["reconciliation", field], list);
        let _ = writeln!(
            out,
            "<p {}>Reconciliation with {}: {} missing {}, undelivered {}, delivered twice {}, codes reused {}; streams: {} pending, {} unread. {}</p>",
            decided_by(&["reconciliation", "violations"]),
            escape(&rec.stores.join(", ")),
            verdict(rec.holds()),
            count("missing", rec.missing.len()),
            count("undelivered", rec.undelivered.len()),
            count("delivered_twice", rec.delivered_twice.len()),
            count("codes_reused", rec.codes_reused.len()),
            figure(&["reconciliation", "streams", "pending"], rec.streams.pending),
            figure(&["reconciliation", "streams", "lag"], rec.streams.lag),
            escape(&rec.violations.join("; ")),
        );
    }
    out
}
