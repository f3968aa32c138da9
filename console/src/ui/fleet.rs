//! The fleet: every data plane node and order worker that reported in the last seconds.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use super::{boxed, count, span};
use crate::app::App;

pub fn draw(app: &App, f: &mut Frame, area: Rect) {
    let fleet = &app.snapshot.fleet;
    let now = app.snapshot.at_ms;
    let [nodes_area, workers_area] = Layout::vertical([
        Constraint::Min(4),
        Constraint::Length(fleet.workers.len().max(1) as u16 + 3),
    ])
    .areas(area);
    let header = Row::new([
        "Node",
        "Shards",
        "Up",
        "Req/s",
        "Buy p99",
        "Redis p99",
        "Redis",
    ])
    .style(Style::new().bold());
    let rows = fleet.nodes.iter().map(|n| {
        let health = match n.redis.as_str() {
            "up" if n.shards_reporting == n.shards => Style::new().fg(Color::Green),
            "up" => Style::new().fg(Color::Yellow),
            _ => Style::new().fg(Color::Red).bold(),
        };
        let buy = n.routes.get("purchase").map_or(0.0, |r| r.p99_ms);
        Row::new(vec![
            Cell::from(n.node.clone()),
            Cell::from(format!("{}/{}", n.shards_reporting, n.shards)),
            Cell::from(span(now - n.started_ms)),
            Cell::from(count(n.requests_per_s())),
            Cell::from(format!("{buy:.1} ms")),
            Cell::from(format!("{:.1} ms", n.redis_p99_ms)),
            Cell::from(Span::styled(n.redis.clone(), health)),
        ])
    });
    let nodes = Table::new(
        rows,
        [
            Constraint::Min(16),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(12),
        ],
    )
    .header(header)
    .block(boxed(&format!("nodes ({})", fleet.nodes.len())));
    f.render_widget(nodes, nodes_area);

    let header = Row::new([
        "Worker",
        "Up",
        "Lag",
        "Pending",
        "Events/s",
        "Deliv/s",
        "Pay→deliv p99",
    ])
    .style(Style::new().bold());
    let rows = fleet.workers.iter().map(|w| {
        let behind = if w.lag + w.pending > 1000 {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new()
        };
        Row::new(vec![
            Cell::from(w.name.clone()),
            Cell::from(span(now - w.started_ms)),
            Cell::from(Span::styled(w.lag.to_string(), behind)),
            Cell::from(Span::styled(w.pending.to_string(), behind)),
            Cell::from(count(w.events_per_s)),
            Cell::from(count(w.delivered_per_s)),
            Cell::from(if w.delivered_per_s > 0.0 {
                format!("{:.0} ms", w.pay_to_delivered_p99_ms)
            } else {
                "–".into()
            }),
        ])
    });
    let workers = Table::new(
        rows,
        [
            Constraint::Min(10),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Length(14),
        ],
    )
    .header(header)
    .block(boxed(&format!("order workers ({})", fleet.workers.len())));
    f.render_widget(workers, workers_area);
}
