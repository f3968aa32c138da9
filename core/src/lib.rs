//! seckill's core: what every program shares, the data plane, the order worker, the
//! console and the simulator alike. No server runtime here: the console and the
//! simulator build on any platform.
//!
//! - [`api`]: the shopper API's requests and answers, and its OpenAPI description;
//! - [`campaign`]: the campaign model and its lifecycle;
//! - [`keys`] and [`scripts`]: the Redis key schema, partition routing and the Lua;
//!   [`purchase`]: the purchase script's call and the reading of its answers;
//! - [`protocol`]: the control plane's commands and the readers of their replies, which
//!   the blocking clients and the shards both send; [`reply`] reads Redis's answers;
//! - [`control`]: the control plane (campaigns, limits) over a blocking [`connection`],
//!   with [`blacklist`] and [`limits`];
//! - [`clock`]: the sale's clock, Redis's;
//! - [`ledger`]: the Redis side of the invariants;
//! - [`auth`], [`pow`] and [`secrets`]: signed tokens, tickets and links, proof of
//!   work, secret files and Redis credentials;
//! - [`telemetry`]: each node's and worker's record of the last second, and the fleet
//!   read from them; [`histo`]: latency histograms for the metrics;
//! - [`backoff`]: the jittered waits between reconnection attempts;
//! - [`fds`]: the descriptor table, sized before the load arrives.

pub mod api;
pub mod auth;
pub mod backoff;
pub mod blacklist;
pub mod campaign;
pub mod cli_args;
pub mod clock;
pub mod connection;
pub mod control;
pub mod fds;
pub mod histo;
pub mod identity;
pub mod keys;
pub mod ledger;
pub mod limits;
pub mod node_keys;
pub mod payments;
pub mod pow;
pub mod protocol;
pub mod purchase;
pub mod queue;
pub mod reply;
pub mod scripts;
pub mod secrets;
pub mod shell;
pub mod telemetry;
pub mod webhooks;

/// Milliseconds since the Unix epoch on the sale's clock (see [`clock`]).
pub fn now_ms() -> i64 {
    clock::now_ms()
}
