//! A campaign's waiting room, under its partitions: who waits and who was let through,
//! the passes and what became of them, the admission's rate and the node that runs it,
//! and the draw's seed once the pre-queue is drawn (so anyone can check the order), its
//! fingerprint before.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use seckill_core::campaign::State;
use seckill_core::control::QueueProgress;

use super::{boxed, clock, count};
use crate::data::CampaignRow;

/// Rows the room's box takes, borders included.
pub fn height(q: &QueueProgress) -> u16 {
    // Three pairs of counters, the admission's runner, and the draw (its seed, or
    // before the opening the seed's fingerprint, on a line of its own).
    let draw = if q.seed.is_some() || q.seed_sha1.is_some() {
        2
    } else {
        1
    };
    2 + 3 + 1 + draw
}

pub fn draw(c: &CampaignRow, q: &QueueProgress, f: &mut Frame, area: Rect) {
    let mut block = boxed("waiting room");
    if q.sold_out {
        block = block.title(
            Line::from(Span::styled(
                " sold out ",
                Style::new().fg(Color::Magenta).bold(),
            ))
            .right_aligned(),
        );
    }
    let inner = block.inner(area);
    f.render_widget(block, area);
    let width = inner.width as usize;
    let n = |v: u64| count(v as f64);
    let rate = format!("{}/s", n(c.admit_per_s().unwrap_or(q.admit_per_s).into()));
    let mut lines = vec![
        pair(
            width,
            ("waiting", n(q.waiting())),
            ("admitted", n(q.admitted)),
        ),
        pair(width, ("passes out", n(q.outstanding)), ("rate", rate)),
        pair(width, ("used", n(q.used)), ("expired", n(q.expired))),
        match &q.leader {
            Some(who) => Line::from(format!("run by {who}")),
            None if c.campaign.state == State::Live => Line::from(Span::styled(
                "no node runs the admission",
                Style::new().fg(Color::Yellow),
            )),
            None => Line::from("no node runs the admission"),
        },
    ];
    match (&q.seed, q.drawn_ms) {
        (Some(seed), drawn) => {
            let at = drawn.map_or_else(String::new, |t| format!(" {}", clock(t)));
            lines.push(Line::from(format!("drawn{at}, seed:")));
            lines.push(Line::from(cut(seed, width)));
        }
        (None, _) => {
            lines.push(Line::from("seed: drawn at the opening"));
            if let Some(f) = &q.seed_sha1 {
                lines.push(Line::from(cut(&format!("its SHA-1 {f}"), width)));
            }
        }
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Two counters side by side, each a label and a number set right in half the width.
fn pair(width: usize, left: (&str, String), right: (&str, String)) -> Line<'static> {
    let half = (width / 2).max(12);
    let cell = |(label, value): (&str, String)| {
        let room = (half - 1).saturating_sub(label.len());
        format!("{label}{value:>room$} ")
    };
    Line::from(format!("{}{}", cell(left), cell(right)))
}

/// `text` cut to `width` characters, the cut shown with `…`.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}
