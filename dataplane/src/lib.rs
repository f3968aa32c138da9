//! seckill's data plane: a flash-sale purchase path, thread-per-core.
//!
//! A purchase passes through these modules in order:
//! - [`server`]: one pinned glommio executor per core (shard), each with its own
//!   `SO_REUSEPORT` listener, and the orderly stop;
//! - `http`: hyper on glommio sockets, the routes, and every refusal mapped to a status;
//! - [`guard`]: the shard's defences before Redis: buckets, the blacklist's copy, the
//!   circuit breaker;
//! - [`shard`]: the shard's copy of the campaigns (kept fresh from the control plane),
//!   where most refusals are decided without leaving the core;
//! - [`store`]: the shard's pipelined Redis connection, the one-script purchase on the
//!   user's partition, and the crash-safe transfers between partitions.
//!
//! Beside the hot path: [`answer`] (the endpoints and outcomes answers are counted by),
//! [`metrics`] (what the admin listener exports), [`telemetry`]
//! (the shard's record of its last second), [`logs`] (log lines that name their request)
//! and [`config`].
//!
//! What every program shares (campaigns, keys and scripts, the control plane, the
//! sale's clock, signatures) is in `seckill-core`; the order worker and reconciliation
//! are in `seckill-orders`. Callers name them there.

pub mod answer;
pub mod config;
pub mod guard;
mod http;
pub mod identity;
pub use http::{request, ApiError};
pub mod logs;
pub mod metrics;
pub mod payments;
pub mod server;
pub mod shard;
pub mod store;
pub mod telemetry;
