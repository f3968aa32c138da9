//! Thresholds as conditions on the report: `p99<50ms,bot_wins==0,oversell==0`.

use anyhow::{bail, Context};

/// One condition: a metric, a comparison and a bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub metric: String,
    pub op: Op,
    pub bound: f64,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

/// The metrics a condition may name.
pub const METRICS: &[&str] = &[
    "p50",
    "p90",
    "p99",
    "p999",
    "max",
    "bot_wins",
    "oversell",
    "violations",
    "errors",
    "unanswered",
    "missing",
    "undelivered",
    "delivered_twice",
    "retry_mismatches",
    "unpaid_units",
    "refunds_due",
    "payment_mismatches",
    "sold_before_opening",
    "achieved_ratio",
    "join_p",
    "poll_p",
    "bot_p",
];

/// Parses `metric op value[unit]` conditions separated by commas. Latencies take `ms`
/// (the default) or `s`.
pub fn parse(spec: &str) -> anyhow::Result<Vec<Condition>> {
    spec.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            let (pos, op, len) = [
                ("<=", Op::Le),
                (">=", Op::Ge),
                ("==", Op::Eq),
                ("<", Op::Lt),
                (">", Op::Gt),
            ]
            .iter()
            .find_map(|(s, op)| c.find(s).map(|p| (p, *op, s.len())))
            .with_context(|| format!("--fail-on: '{c}' has no comparison (< <= == >= >)"))?;
            let metric = c[..pos].trim().to_string();
            if !METRICS.contains(&metric.as_str()) {
                bail!(
                    "--fail-on: unknown metric '{metric}' (known: {})",
                    METRICS.join(", ")
                );
            }
            let value = c[pos + len..].trim();
            let (number, scale) = if let Some(v) = value.strip_suffix("ms") {
                (v, 1.0)
            } else if let Some(v) = value.strip_suffix('s') {
                (v, 1000.0)
            } else {
                (value, 1.0)
            };
            let bound: f64 = number
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .with_context(|| format!("--fail-on: '{value}' in '{c}' is not a number"))?;
            Ok(Condition {
                metric,
                op,
                bound: bound * scale,
                text: c.to_string(),
            })
        })
        .collect()
}

/// The conditions broken by the values `value` gives each metric, each with the value it
/// had.
pub fn broken(conditions: &[Condition], value: impl Fn(&str) -> f64) -> Vec<String> {
    conditions
        .iter()
        .filter_map(|c| {
            let v = value(&c.metric);
            let holds = match c.op {
                Op::Lt => v < c.bound,
                Op::Le => v <= c.bound,
                Op::Eq => v == c.bound,
                Op::Ge => v >= c.bound,
                Op::Gt => v > c.bound,
            };
            (!holds).then(|| format!("{} broken: {} is {v:.3}", c.text, c.metric))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_with_units() {
        let c = parse("p99<50ms, bot_wins==0,p999 <= 0.2s").expect("valid");
        assert_eq!(c.len(), 3);
        assert_eq!(
            (c[0].metric.as_str(), c[0].op, c[0].bound),
            ("p99", Op::Lt, 50.0)
        );
        assert_eq!(
            (c[1].metric.as_str(), c[1].op, c[1].bound),
            ("bot_wins", Op::Eq, 0.0)
        );
        assert_eq!((c[2].op, c[2].bound), (Op::Le, 200.0));
        for bad in ["p99", "latency<5", "p99<fast", "p99<>1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
