//! Drawing: one function per view, each reading the [`App`] and nothing else. Works
//! at 80×24 and spreads out on larger terminals.

mod campaigns;
mod detail;
mod fleet;
mod room;

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::app::{App, Link, Popup, View};

pub fn draw(app: &App, f: &mut Frame) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(f.area());
    header(app, f, head);
    match app.view {
        View::Campaigns => campaigns::draw(app, f, body),
        View::Detail => detail::draw(app, f, body),
        View::Fleet => fleet::draw(app, f, body),
    }
    footer(app, f, foot);
    match &app.popup {
        None => {}
        Some(Popup::Help) => help(app, f),
        Some(Popup::Confirm { question, .. }) => confirm(f, question),
        Some(Popup::Input { prompt, text }) => input(app, f, &prompt.title(), text),
        Some(Popup::Report {
            title,
            lines,
            scroll,
        }) => report(f, title, lines, *scroll),
    }
}

/// `HH:MM:SS` (UTC) of an instant in ms since the epoch.
pub fn clock(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A duration in ms as `3h05m`, `4m10s` or `12s`.
pub fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A rate with thousands separated: `12,345`.
pub fn count(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn header(app: &App, f: &mut Frame, area: Rect) {
    let view = match app.view {
        View::Campaigns => "campaigns",
        View::Detail => "campaign",
        View::Fleet => "fleet",
    };
    let mut spans = vec![
        Span::styled(" seckill ", Style::new().bold().reversed()),
        Span::raw(format!(" {view} · {} ", app.redis_url)),
    ];
    spans.push(match &app.link {
        Link::Up => Span::styled("● connected", Style::new().fg(Color::Green)),
        Link::Connecting => Span::styled("… connecting", Style::new().fg(Color::Yellow)),
        Link::Lost { since_ms, .. } => Span::styled(
            format!("✗ no Redis since {}, retrying", clock(*since_ms)),
            Style::new().fg(Color::White).bg(Color::Red).bold(),
        ),
    });
    if app.snapshot.at_ms > 0 {
        spans.push(Span::raw(format!("  {}", clock(app.snapshot.at_ms))));
    }
    f.render_widget(Line::from(spans), area);
}

fn footer(app: &App, f: &mut Frame, area: Rect) {
    let line = match &app.status {
        Some((m, true)) => Line::from(Span::styled(
            format!(" {m}"),
            Style::new().fg(Color::White).bg(Color::Red),
        )),
        Some((m, false)) => {
            Line::from(Span::styled(format!(" {m}"), Style::new().fg(Color::Green)))
        }
        None if matches!(app.link, Link::Lost { .. }) => {
            let error = match &app.link {
                Link::Lost { error, .. } => error.as_str(),
                _ => "",
            };
            Line::from(Span::styled(
                format!(
                    " {error}; the screen shows the last read, of {}",
                    clock(app.snapshot.at_ms)
                ),
                Style::new().fg(Color::Red),
            ))
        }
        None => {
            let mut spans = vec![];
            // The way out and the way to the rest first: the line is cut at the edge.
            let mut keys = app.keys();
            keys.sort_by_key(|(k, _)| !matches!(*k, "?" | "q"));
            for (key, what) in keys {
                spans.push(Span::styled(format!(" {key}"), Style::new().bold()));
                spans.push(Span::raw(format!(" {what} ")));
            }
            Line::from(spans)
        }
    };
    f.render_widget(line, area);
}

/// A centred box of at most `w`×`h` inside the screen.
fn centred(f: &Frame, w: u16, h: u16) -> Rect {
    let area = f.area();
    let [r] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(r);
    r
}

fn boxed(title: &str) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), Style::new().bold()))
}

fn help(app: &App, f: &mut Frame) {
    let mut shown = App::new(&app.redis_url);
    shown.view = app.view;
    let keys = shown.keys();
    let area = centred(f, 44, keys.len() as u16 + 2);
    let rows = keys
        .into_iter()
        .map(|(k, what)| Row::new(vec![k.to_string(), what.to_string()]));
    let table = Table::new(rows, [Constraint::Length(10), Constraint::Min(10)])
        .block(boxed("keys here (any key closes)"));
    f.render_widget(Clear, area);
    f.render_widget(table, area);
}

fn confirm(f: &mut Frame, question: &str) {
    let area = centred(f, 60, 6);
    let text = vec![
        Line::from(question.to_string()),
        Line::from(""),
        Line::from(vec![
            Span::styled(" y ", Style::new().bold().reversed()),
            Span::raw(" yes    "),
            Span::styled(" n ", Style::new().bold().reversed()),
            Span::raw(" no"),
        ]),
    ];
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: true })
            .block(boxed("confirm").border_style(Style::new().fg(Color::Yellow))),
        area,
    );
}

fn input(app: &App, f: &mut Frame, title: &str, text: &str) {
    let area = centred(f, 64, 5);
    let mut lines = vec![Line::from(vec![
        Span::raw(format!("> {text}")),
        Span::styled(" ", Style::new().add_modifier(Modifier::REVERSED)),
    ])];
    if let Some((e, true)) = &app.status {
        lines.push(Line::from(Span::styled(
            e.clone(),
            Style::new().fg(Color::Red),
        )));
    }
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(boxed(title)),
        area,
    );
}

fn report(f: &mut Frame, title: &str, lines: &[String], scroll: u16) {
    let area = f.area();
    let area = Rect {
        x: area.x + 1,
        y: area.y + 1,
        width: area.width.saturating_sub(2),
        height: area.height.saturating_sub(2),
    };
    let text: Vec<Line> = lines.iter().map(|l| Line::from(l.clone())).collect();
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(text)
            .scroll((scroll, 0))
            .block(boxed(title).title_bottom(" ↑↓ scroll · Esc close ")),
        area,
    );
}
