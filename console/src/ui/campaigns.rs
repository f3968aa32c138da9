//! The campaigns table: state, stock, sell-through and timing of every campaign, and a
//! line on the fleet under it.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table, TableState};
use ratatui::Frame;

use super::{boxed, count, span};
use crate::app::App;
use crate::data::CampaignRow;

pub fn draw(app: &App, f: &mut Frame, area: Rect) {
    let [table_area, fleet_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(area);
    let header = Row::new([
        "Campaign", "State", "Sold", "Held", "Left", "Total", "Units/s", "When",
    ])
    .style(Style::new().bold());
    let rows = app.snapshot.campaigns.iter().map(|c| row(app, c));
    let widths = [
        Constraint::Min(14),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(13),
    ];
    let title = format!("campaigns ({})", app.snapshot.campaigns.len());
    let table = Table::new(rows, widths)
        .header(header)
        .block(boxed(&title))
        .row_highlight_style(Style::new().reversed())
        .highlight_symbol("▶ ");
    let mut state = TableState::default()
        .with_selected((!app.snapshot.campaigns.is_empty()).then_some(app.selected));
    f.render_stateful_widget(table, table_area, &mut state);
    f.render_widget(
        ratatui::widgets::Paragraph::new(fleet_line(app)).block(boxed("fleet")),
        fleet_area,
    );
}

pub fn state_style(state: &str) -> Style {
    match state {
        "live" => Style::new().fg(Color::Green).bold(),
        "sold_out" => Style::new().fg(Color::Magenta).bold(),
        "paused" => Style::new().fg(Color::Yellow),
        "armed" => Style::new().fg(Color::Cyan),
        "ended" => Style::new().fg(Color::DarkGray),
        _ => Style::new(),
    }
}

/// Time to start or to end, as the campaign's state makes relevant.
pub fn when(c: &CampaignRow, now_ms: i64) -> String {
    use seckill_core::campaign::State;
    let camp = &c.campaign;
    match camp.state {
        State::Draft | State::Arming => "arm first".into(),
        State::Armed => match camp.starts_at_ms {
            Some(t) if t > now_ms => format!("starts in {}", span(t - now_ms)),
            Some(_) => "start due".into(),
            None => "on start".into(),
        },
        State::Live | State::Paused => match (camp.starts_at_ms, camp.ends_at_ms) {
            (Some(t), _) if t > now_ms => format!("opens in {}", span(t - now_ms)),
            (_, Some(t)) if t > now_ms => format!("ends in {}", span(t - now_ms)),
            (_, Some(_)) => "end passed".into(),
            _ => "until stopped".into(),
        },
        State::Ended => "ended".into(),
    }
}

fn row<'a>(app: &App, c: &'a CampaignRow) -> Row<'a> {
    let state = c.shown_state();
    let rate = app
        .sell_through(c.id())
        .map_or_else(|| "–".to_string(), |r| format!("{r:.0}"));
    let n = |v: i64| count(v as f64);
    Row::new(vec![
        Cell::from(c.id().to_string()),
        Cell::from(Span::styled(state, state_style(state))),
        Cell::from(n(c.sold())),
        Cell::from(n(c.held())),
        Cell::from(n(c.remaining() + c.in_transit())),
        Cell::from(n(c.total())),
        Cell::from(rate),
        Cell::from(when(c, app.snapshot.at_ms)),
    ])
}

/// Nodes, shards, answers per second by outcome and the workers' backlog.
pub fn fleet_line(app: &App) -> Line<'static> {
    let fleet = &app.snapshot.fleet;
    if fleet.nodes.is_empty() && fleet.workers.is_empty() {
        return Line::from(Span::styled(
            "no node has reported in the last 5 s",
            Style::new().fg(Color::Yellow),
        ));
    }
    let shards: usize = fleet.nodes.iter().map(|n| n.shards).sum();
    let outcomes = fleet.outcomes_per_s();
    let total: f64 = outcomes.values().sum();
    let mut by: Vec<(&String, &f64)> = outcomes.iter().filter(|(_, v)| **v >= 0.5).collect();
    by.sort_by(|a, b| b.1.total_cmp(a.1));
    let parts: Vec<String> = by
        .iter()
        .take(3)
        .map(|(o, v)| format!("{o} {}", count(**v)))
        .collect();
    let lag: u64 = fleet.workers.iter().map(|w| w.lag + w.pending).sum();
    Line::from(vec![
        Span::raw(format!(
            "{} node{} · {shards} shards · ",
            fleet.nodes.len(),
            if fleet.nodes.len() == 1 { "" } else { "s" }
        )),
        Span::styled(format!("{} req/s", count(total)), Style::new().bold()),
        Span::raw(if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(" · "))
        }),
        Span::raw(format!(
            " · {} worker{}, backlog {lag}",
            fleet.workers.len(),
            if fleet.workers.len() == 1 { "" } else { "s" }
        )),
    ])
}
