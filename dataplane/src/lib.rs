//! seckill's data plane: a flash-sale purchase path, thread-per-core.
//!
//! A purchase passes through these modules in order:
//! - [`server`]: one pinned glommio executor per core (shard), each with its own
//!   `SO_REUSEPORT` listener, and the orderly stop;
//! - `http`: hyper on glommio sockets, the routes, and every refusal mapped to a status;
//! - [`auth`]: the shopper's HMAC-signed token;
//! - [`shard`]: the shard's copy of the campaigns (kept fresh from the control plane),
//!   where most refusals are decided without leaving the core;
//! - [`store`]: the shard's pipelined Redis connection, the one-script purchase on the
//!   user's partition, and the crash-safe transfers between partitions;
//! - [`keys`] and [`scripts`]: the Redis key schema, partition routing and the Lua.
//!
//! After the hold: [`orders`] (the order events, the worker that stores them in SQLite
//! and delivers paid orders) and [`reconcile`] (the ledger across Redis, the streams and
//! every order store).
//!
//! Beside the hot path: [`campaign`] (the model), [`clock`] (the sale's clock, Redis's), [`control`] (the control plane, for the
//! CLI and console), [`ledger`] (the Redis side of the invariants), [`telemetry`] (each
//! node's and worker's record of the last second, for the console), [`backoff`] (the
//! jittered waits between reconnection attempts), [`secrets`] (secret files and Redis
//! credentials) and [`config`].

pub mod auth;
pub mod backoff;
pub mod campaign;
pub mod clock;
pub mod config;
pub mod connection;
pub mod control;
pub mod guard;
mod http;
pub use http::{request, ApiError};
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod orders;
pub mod reconcile;
pub mod scripts;
pub mod secrets;
pub mod server;
pub mod shard;
pub mod store;
pub mod telemetry;

/// Milliseconds since the Unix epoch on the sale's clock (see [`clock`]).
pub fn now_ms() -> i64 {
    clock::now_ms()
}
