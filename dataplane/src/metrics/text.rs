//! The lines of Prometheus's text format: a family's header, a histogram, a label value.

use seckill_core::histo::BUCKETS;
use std::fmt::Write as _;

/// A family's `# HELP` and `# TYPE` lines.
pub(super) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A latency histogram's lines: [`BUCKETS`], the sum counted in nanoseconds.
pub(super) fn histogram(out: &mut String, name: &str, labels: &str, counts: &[u64], sum_ns: u64) {
    histogram_of(out, name, labels, &BUCKETS, counts, sum_ns as f64 / 1e9);
}

/// A histogram's lines: buckets bounded by `bounds` (then `+Inf`) and the sum in seconds.
pub(super) fn histogram_of(
    out: &mut String,
    name: &str,
    labels: &str,
    bounds: &[f64],
    counts: &[u64],
    sum_s: f64,
) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, c) in counts.iter().enumerate() {
        cumulative += c;
        let le = bounds
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let braces = |s: &str| {
        if s.is_empty() {
            String::new()
        } else {
            format!("{{{s}}}")
        }
    };
    let _ = writeln!(out, "{name}_sum{} {}", braces(labels), sum_s);
    let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
}

/// Escapes a label value.
pub(super) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
