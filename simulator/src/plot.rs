//! The run over time as an SVG: purchases answered per second, and their p50 and p99.

use crate::report::Report;

const W: f64 = 720.0;
const H: f64 = 220.0;
const PAD: f64 = 50.0;

/// A polyline through `points` (x in seconds, y in the panel's unit) scaled into a panel.
fn line(points: &[(f64, f64)], x_max: f64, y_max: f64, top: f64, colour: &str) -> String {
    let coords: Vec<String> = points
        .iter()
        .map(|(x, y)| {
            let px = PAD + x / x_max.max(1.0) * (W - 2.0 * PAD);
            let py = top + H - y / y_max.max(f64::MIN_POSITIVE) * H;
            format!("{px:.1},{py:.1}")
        })
        .collect();
    format!(
        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
        coords.join(" ")
    )
}

fn panel(title: &str, top: f64, y_max: f64, unit: &str) -> String {
    format!(
        r##"<text x="{PAD}" y="{t}" font-size="14">{title}</text>
<line x1="{PAD}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/>
<line x1="{PAD}" y1="{top}" x2="{PAD}" y2="{b}" stroke="#888"/>
<text x="5" y="{ty}" font-size="11">{y_max:.1} {unit}</text>
<text x="5" y="{b}" font-size="11">0</text>"##,
        t = top - 8.0,
        b = top + H,
        r = W - PAD,
        ty = top + 10.0,
    )
}

pub fn svg(r: &Report) -> String {
    let pts = |f: fn(&crate::report::Second) -> f64| -> Vec<(f64, f64)> {
        r.over_time
            .iter()
            .map(|s| (s.second as f64 + 0.5, f(s)))
            .collect()
    };
    let x_max = r.over_time.len() as f64;
    let rate = pts(|s| s.answered as f64);
    let p50 = pts(|s| s.p50_ms);
    let p99 = pts(|s| s.p99_ms);
    let rate_max = rate.iter().map(|p| p.1).fold(1.0, f64::max);
    let lat_max = p99.iter().map(|p| p.1).fold(1.0, f64::max);
    let top2 = H + 2.0 * PAD;
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{PAD}" y="20" font-size="16">{c}: {planned} purchases planned over {d:.0} s</text>
{p1}
{l1}
{p2}
{l2}
{l3}
<text x="{lx}" y="{ly}" font-size="12" fill="#1f77b4">p50</text>
<text x="{lx}" y="{ly2}" font-size="12" fill="#d62728">p99</text>
<text x="{xl}" y="{xb}" font-size="12">seconds into the run (by planned send time)</text>
</svg>
"##,
        h = 2.0 * H + 3.0 * PAD + 20.0,
        c = r.campaign,
        planned = r.planned,
        d = r.scenario.duration_s,
        p1 = panel("purchases answered per second", PAD, rate_max, "/s"),
        l1 = line(&rate, x_max, rate_max, PAD, "#2ca02c"),
        p2 = panel(
            "purchase latency from the planned send",
            top2,
            lat_max,
            "ms"
        ),
        l2 = line(&p50, x_max, lat_max, top2, "#1f77b4"),
        l3 = line(&p99, x_max, lat_max, top2, "#d62728"),
        lx = W - PAD - 30.0,
        ly = top2 + 14.0,
        ly2 = top2 + 28.0,
        xl = W / 2.0 - 120.0,
        xb = 2.0 * H + 3.0 * PAD + 10.0,
    )
}
