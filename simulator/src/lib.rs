//! seckill's simulator: testers rehearse a sale against a real data plane.
//!
//! - [`scenario`]: what to run, from TOML with flag overrides;
//! - [`plan`]: the arrival plan, fixed before the run (open model);
//! - [`engine`]: thread-per-core load with keep-alive pools per source address, latency
//!   from the planned instant into HdrHistogram;
//! - [`earn`]: the tickets accounts earn before the opening;
//! - [`http`]: the lean HTTP/1.1 client the engine sends with;
//! - [`run`]: sets up the sale, runs, checks the ledger and thresholds;
//! - [`report`]: what a run found, who won, its summary and the metrics of `--fail-on`;
//! - [`plot`]: the run over time as an SVG;
//! - [`chisq`]: the chi-square test of equal shares;
//! - [`verdict`]: thresholds as conditions on the report (`--fail-on`);
//! - [`burst`]: a simple closed-loop burst (the demo's);
//! - [`flood`]: malformed and slow-loris connections, to run beside a surge.

pub mod burst;
pub mod chisq;
pub mod earn;
pub mod engine;
pub mod flood;
pub mod http;
pub mod plan;
pub mod plot;
pub mod report;
pub mod run;
pub mod scenario;
pub mod verdict;
