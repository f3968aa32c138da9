//! seckill's simulator: testers rehearse a sale against a real data plane.
//!
//! - [`scenario`]: what to run, from TOML with flag overrides;
//! - [`plan`]: the arrival plan, fixed before the run (open model);
//! - [`engine`]: thread-per-core load with keep-alive pools per source address, latency
//!   from the planned instant into HdrHistogram;
//! - [`context`]: what every load thread shares, and the live progress counters;
//! - [`tally`]: what the load saw, counted per thread and merged;
//! - [`pace`]: the wait for each planned instant, to within tens of microseconds;
//! - [`session`]: a shopper's purchase, then for a buyer [`pay`]: its payments (signed as
//!   the [`provider`] signs them, or through the demo provider), delivery and download;
//! - [`earn`]: the tickets accounts earn before the opening;
//! - [`room`]: a session through a waiting room: join, look, buy with the pass;
//! - [`http`]: the lean HTTP/1.1 client the engine sends with;
//! - [`run`]: sets up the sale, runs, checks the ledger and thresholds;
//! - [`report`]: what a run found, who won, its summary and the metrics of `--fail-on`;
//! - [`plot`]: the run over time as an SVG;
//! - [`html`]: the report as one self-contained HTML page, its charts from [`charts`],
//!   both written with [`markup`];
//! - [`fairness`]: the waiting room's fairness table, tested with [`chisq`];
//! - [`verdict`]: thresholds as conditions on the report (`--fail-on`);
//! - [`burst`]: a simple closed-loop burst (the demo's);
//! - [`flood`]: malformed and slow-loris connections, to run beside a surge.

pub mod burst;
pub mod charts;
pub mod chisq;
pub mod context;
pub mod earn;
pub mod engine;
pub mod fairness;
pub mod flood;
pub mod html;
pub mod http;
pub mod markup;
pub mod pace;
pub mod pay;
pub mod plan;
pub mod plot;
pub mod provider;
pub mod report;
pub mod room;
pub mod run;
pub mod scenario;
pub mod session;
pub mod shop;
pub mod tally;
pub mod verdict;

/// A current-thread runtime, for the tests that drive sockets and timers.
#[cfg(test)]
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}
