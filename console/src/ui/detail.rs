//! One campaign: the live ledger line, a gauge per partition (and its waiting room under
//! them, if it has one), and the fleet's answers, latency, refusals and worker backlog
//! beside them.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph};
use ratatui::Frame;
use std::collections::BTreeMap;

use super::campaigns::{state_style, when};
use super::{boxed, count, room};
use crate::app::App;
use crate::data::CampaignRow;

pub fn draw(app: &App, f: &mut Frame, area: Rect) {
    let Some(c) = app.current() else {
        f.render_widget(
            Paragraph::new("no campaign yet: press n to create one from a file")
                .block(boxed("campaign")),
            area,
        );
        return;
    };
    let [top, rest] = Layout::vertical([Constraint::Length(4), Constraint::Min(0)]).areas(area);
    let s = &c.campaign.spec;
    let state = c.shown_state();
    let rate = app
        .sell_through(c.id())
        .map_or_else(|| "–".into(), |r| format!("{r:.0}"));
    let summary = vec![
        Line::from(vec![
            Span::styled(state.to_string(), state_style(state)),
            Span::raw(format!(
                " · {} partitions · ≤{} per buyer · {} units/s · {}",
                s.partitions,
                s.per_user_limit,
                rate,
                when(c, app.snapshot.at_ms)
            )),
        ]),
        ledger_line(c),
    ];
    f.render_widget(
        Paragraph::new(summary).block(boxed(&format!("{} — {}", c.id(), s.name))),
        top,
    );
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(rest);
    match &c.queue {
        Some(q) => {
            let [parts, queue] =
                Layout::vertical([Constraint::Min(3), Constraint::Length(room::height(q))])
                    .areas(left);
            partitions(c, f, parts);
            room::draw(c, q, f, queue);
        }
        None => partitions(c, f, left),
    }
    traffic(app, f, right);
}

/// remaining + in transit + held + sold = total, and sold ≤ total: green when it holds,
/// red with the numbers when it does not.
pub fn ledger_line(c: &CampaignRow) -> Line<'static> {
    if !c.armed() {
        return Line::from("ledger: not armed yet");
    }
    let sum = c.remaining() + c.in_transit() + c.held() + c.sold();
    let text = format!(
        "{} left + {} moving + {} held + {} sold = {sum}",
        c.remaining(),
        c.in_transit(),
        c.held(),
        c.sold(),
    );
    match c.ledger_problem() {
        None => Line::from(Span::styled(
            format!(" ledger ✓ {text} total, sold ≤ total "),
            Style::new().fg(Color::Black).bg(Color::Green),
        )),
        Some(p) => Line::from(Span::styled(
            format!(" ledger ✗ {text}: {p} "),
            Style::new().fg(Color::White).bg(Color::Red).bold(),
        )),
    }
}

fn partitions(c: &CampaignRow, f: &mut Frame, area: Rect) {
    let block = boxed("partitions: left of initial");
    let inner = block.inner(area);
    f.render_widget(block, area);
    let rows = inner.height as usize;
    let shown = if c.partitions.len() > rows {
        rows.saturating_sub(1)
    } else {
        c.partitions.len()
    };
    for (i, p) in c.partitions.iter().take(shown).enumerate() {
        let ratio = if p.initial > 0 {
            (p.stock.max(0) as f64 / p.initial as f64).min(1.0)
        } else {
            0.0
        };
        let label = format!("p{:<3}{:>6}/{:<6}", p.partition, p.stock, p.initial);
        let width = (inner.width as usize).saturating_sub(label.len() + 1);
        let filled = (ratio * width as f64).round() as usize;
        let bar = Line::from(vec![
            Span::raw(label),
            Span::raw(" "),
            Span::styled(
                "█".repeat(filled),
                Style::new().fg(if p.stock > 0 {
                    Color::Green
                } else {
                    Color::DarkGray
                }),
            ),
            Span::styled("░".repeat(width - filled), Style::new().fg(Color::DarkGray)),
        ]);
        let row = Rect {
            y: inner.y + i as u16,
            height: 1,
            ..inner
        };
        f.render_widget(bar, row);
    }
    if shown < c.partitions.len() {
        let rest = &c.partitions[shown..];
        let left: i64 = rest.iter().map(|p| p.stock).sum();
        let row = Rect {
            y: inner.y + shown as u16,
            height: 1,
            ..inner
        };
        f.render_widget(
            Line::from(format!("… {} more, {left} left in them", rest.len())),
            row,
        );
    }
}

/// Requests per second over the last minutes, by kind of answer: every answer, the
/// successes, sold out, and every other refusal; x is seconds before now.
struct Series {
    seconds: usize,
    lines: [(&'static str, Color, Points); 4],
}

/// (seconds before now, requests per second).
type Points = Vec<(f64, f64)>;

impl Series {
    fn of(app: &App, width: usize) -> Series {
        // Braille draws two points per column.
        let n = app.history.len().min(width.saturating_sub(8).max(10) * 2);
        let recent: Vec<_> = app.history.iter().skip(app.history.len() - n).collect();
        let series = |pick: &dyn Fn(&BTreeMap<String, f64>) -> f64| {
            recent
                .iter()
                .enumerate()
                .map(|(i, s)| (i as f64 - (n as f64 - 1.0), pick(&s.outcomes)))
                .collect::<Points>()
        };
        let get = |o: &BTreeMap<String, f64>, k: &str| o.get(k).copied().unwrap_or(0.0);
        Series {
            seconds: n,
            lines: [
                ("all", Color::Cyan, series(&|o| o.values().sum())),
                ("ok", Color::Green, series(&|o| get(o, "ok"))),
                ("sold out", Color::Magenta, series(&|o| get(o, "sold_out"))),
                (
                    "refused",
                    Color::Red,
                    series(&|o| o.values().sum::<f64>() - get(o, "ok") - get(o, "sold_out")),
                ),
            ],
        }
    }

    fn chart(&self) -> Chart<'_> {
        let top = self.lines[0].2.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
        let datasets = self
            .lines
            .iter()
            .map(|(name, color, data)| {
                Dataset::default()
                    .name(*name)
                    .marker(symbols::Marker::Braille)
                    .graph_type(GraphType::Line)
                    .style(Style::new().fg(*color))
                    .data(data)
            })
            .collect();
        let span = self.seconds.max(2) as f64 - 1.0;
        Chart::new(datasets)
            .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
            .x_axis(
                Axis::default()
                    .bounds([-span, 0.0])
                    .labels([format!("-{span}s"), "now".to_string()]),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, top])
                    .labels(["0".to_string(), count(top)]),
            )
    }
}

fn traffic(app: &App, f: &mut Frame, area: Rect) {
    let fleet = &app.snapshot.fleet;
    let block = boxed("fleet: requests/s");
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [spark, lines] = Layout::vertical([Constraint::Min(2), Constraint::Length(9)]).areas(inner);
    let series = Series::of(app, spark.width as usize);
    f.render_widget(series.chart(), spark);
    let outcomes = fleet.outcomes_per_s();
    let total: f64 = outcomes.values().sum();
    let ok = outcomes.get("ok").copied().unwrap_or(0.0);
    let mut legend: Vec<Span> = Vec::new();
    for (name, color, _) in &series.lines {
        legend.push(Span::styled(format!("━ {name}  "), Style::new().fg(*color)));
    }
    let mut text = vec![
        Line::from(legend),
        Line::from(vec![
            Span::styled(format!("{} req/s", count(total)), Style::new().bold()),
            Span::raw(format!(" · ok {}", count(ok))),
        ]),
    ];
    let mut refused: Vec<(&String, &f64)> = outcomes
        .iter()
        .filter(|(o, v)| *o != "ok" && **v >= 0.5)
        .collect();
    refused.sort_by(|a, b| b.1.total_cmp(a.1));
    if !refused.is_empty() {
        let parts: Vec<String> = refused
            .iter()
            .take(4)
            .map(|(o, v)| format!("{o} {}", count(**v)))
            .collect();
        text.push(Line::from(format!("refused: {}", parts.join(" · "))));
    }
    for route in ["purchase", "pay"] {
        let worst = fleet
            .nodes
            .iter()
            .filter_map(|n| n.routes.get(route))
            .fold((0.0f64, 0.0f64), |acc, r| {
                (acc.0.max(r.p50_ms), acc.1.max(r.p99_ms))
            });
        text.push(Line::from(format!(
            "{route:<8} p50 {:>6.2} ms  p99 {:>6.2} ms",
            worst.0, worst.1
        )));
    }
    let redis = fleet
        .nodes
        .iter()
        .map(|n| n.redis_p99_ms)
        .fold(0.0, f64::max);
    text.push(Line::from(format!("redis    p99 {redis:>6.2} ms")));
    let (lag, pending, p99, delivering) =
        fleet.workers.iter().fold((0, 0, 0.0f64, false), |a, w| {
            (
                a.0 + w.lag,
                a.1 + w.pending,
                a.2.max(w.pay_to_delivered_p99_ms),
                a.3 || w.delivered_per_s > 0.0,
            )
        });
    if fleet.workers.is_empty() {
        text.push(Line::from(Span::styled(
            "no order worker reporting",
            Style::new().fg(Color::Yellow),
        )));
    } else {
        text.push(Line::from(format!(
            "workers: lag {lag} · pending {pending}"
        )));
        text.push(Line::from(if delivering {
            format!("paid → delivered p99 {p99:.0} ms")
        } else {
            "paid → delivered: none this second".into()
        }));
    }
    f.render_widget(Paragraph::new(text), lines);
}
