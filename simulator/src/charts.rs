//! The HTML report's charts, drawn with plotters into SVG strings: answers per second
//! stacked by outcome, latency percentiles over time, and the latency distribution.
//! The SVG backend writes text as `<text>` elements, so no font files are needed.

use plotters::prelude::*;
use std::collections::BTreeSet;

use crate::report::Report;

const SIZE: (u32, u32) = (760, 300);
const FONT: &str = "sans-serif";
/// The legend's strip on the right of a chart: plotters draws its own legend inside the
/// plot, over the bars and lines, so the legend gets room of its own.
const LEGEND_WIDTH: u32 = 180;

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

type Drawn = Result<(), Box<dyn std::error::Error>>;

/// A line of the percentile chart: its name, its value in a second, its colour.
type Percentile = (&'static str, fn(&crate::report::Second) -> f64, RGBColor);

/// Draws into a fresh SVG string; a chart that cannot be drawn says so instead.
fn svg(draw: impl FnOnce(Area) -> Drawn) -> String {
    let mut out = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(root)
    };
    match drawn {
        Ok(()) => out,
        Err(e) => format!(
            "<p>chart not drawn: {}</p>",
            crate::markup::escape(&e.to_string())
        ),
    }
}

/// A white chart with its legend strip: the plot's area, and the legend's.
fn with_legend(root: Area) -> Result<(Area, Area), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    Ok(root.split_horizontally(SIZE.0 - LEGEND_WIDTH))
}

/// The legend in its strip: a swatch (a bar's, or a line's) and a name per series.
fn legend(area: &Area, entries: &[(&str, RGBColor)], line: bool) -> Drawn {
    for (i, (name, c)) in entries.iter().enumerate() {
        let y = 45 + 20 * i as i32;
        if line {
            area.draw(&PathElement::new([(5, y), (20, y)], c.stroke_width(2)))?;
        } else {
            area.draw(&Rectangle::new([(8, y - 5), (18, y + 5)], c.filled()))?;
        }
        area.draw(&Text::new(name.to_string(), (26, y - 7), (FONT, 14)))?;
    }
    Ok(())
}

/// A colour per outcome: green for held orders, the palette for the rest.
fn colour(outcome: &str, i: usize) -> RGBColor {
    if outcome.starts_with("200") {
        RGBColor(44, 160, 44)
    } else {
        let c = Palette99::pick(i + 1).to_rgba();
        RGBColor(c.0, c.1, c.2)
    }
}

/// Purchases answered per second, a stacked bar per second, one layer per outcome.
pub fn answers(r: &Report) -> String {
    let outcomes: BTreeSet<&str> = r
        .over_time
        .iter()
        .flat_map(|s| s.outcomes.keys().map(String::as_str))
        .collect();
    let seconds = r.over_time.len().max(1) as f64;
    let top = r
        .over_time
        .iter()
        .map(|s| s.answered)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    svg(|root| {
        let (plot, side) = with_legend(root)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption("purchases answered per second, by outcome", (FONT, 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..seconds, 0.0..top * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("seconds into the run (planned send time)")
            .y_desc("answers/s")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style((FONT, 14))
            .draw()?;
        let mut entries = Vec::new();
        for (i, outcome) in outcomes.iter().enumerate() {
            let c = colour(outcome, i);
            let bars = r.over_time.iter().map(|s| {
                let below: u64 = s
                    .outcomes
                    .iter()
                    .filter(|(o, _)| o.as_str() < *outcome)
                    .map(|(_, n)| n)
                    .sum();
                let mine = s.outcomes.get(*outcome).copied().unwrap_or(0);
                let x = s.second as f64;
                Rectangle::new(
                    [(x + 0.05, below as f64), (x + 0.95, (below + mine) as f64)],
                    c.filled(),
                )
            });
            chart.draw_series(bars)?;
            entries.push((*outcome, c));
        }
        legend(&side, &entries, false)?;
        plot.present()?;
        Ok(())
    })
}

/// p50, p90 and p99 of purchase latency, second by second.
pub fn percentiles(r: &Report) -> String {
    let seconds = r.over_time.len().max(1) as f64;
    let top = r.over_time.iter().map(|s| s.p99_ms).fold(1.0, f64::max);
    svg(|root| {
        let (plot, side) = with_legend(root)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption("purchase latency from the planned send, ms", (FONT, 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..seconds, 0.0..top * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("seconds into the run (planned send time)")
            .y_desc("ms")
            .label_style((FONT, 14))
            .draw()?;
        let lines: [Percentile; 3] = [
            ("p50", |s| s.p50_ms, RGBColor(31, 119, 180)),
            ("p90", |s| s.p90_ms, RGBColor(255, 127, 14)),
            ("p99", |s| s.p99_ms, RGBColor(214, 39, 40)),
        ];
        for (_, value, c) in lines {
            let points = r
                .over_time
                .iter()
                .filter(|s| s.answered > 0)
                .map(|s| (s.second as f64 + 0.5, value(s)));
            chart.draw_series(LineSeries::new(points, c.stroke_width(2)))?;
        }
        let entries = lines.map(|(name, _, c)| (name, c));
        legend(&side, &entries, true)?;
        plot.present()?;
        Ok(())
    })
}

/// How many purchases were answered within each doubling latency bucket: bar `i` stands
/// between the bounds under its edges, `i` (the bucket before's, 0 for the first) and
/// `i + 1` (its own).
pub fn distribution(r: &Report) -> String {
    let buckets = &r.purchase_latency_distribution;
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64;
    let edges: Vec<String> = std::iter::once("0".to_string())
        .chain(buckets.iter().map(|b| trim(b.up_to_ms)))
        .collect();
    let edge = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 {
            edges.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("purchase latency distribution", (FONT, 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..buckets.len().max(1) as f64, 0.0..top * 1.05)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(buckets.len().max(1) + 1)
            .x_label_formatter(&edge)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_desc("answered within, ms (bucket bounds)")
            .y_desc("purchases")
            .label_style((FONT, 13))
            .draw()?;
        chart.draw_series(buckets.iter().enumerate().map(|(i, b)| {
            Rectangle::new(
                [(i as f64 + 0.1, 0.0), (i as f64 + 0.9, b.count as f64)],
                RGBColor(31, 119, 180).filled(),
            )
        }))?;
        root.present()?;
        Ok(())
    })
}

/// A bucket bound without trailing zeros: 0.25, 1, 16.
fn trim(ms: f64) -> String {
    let s = format!("{ms:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
