//! seckill's orders after the hold: the order events ([`event`]), the worker that stores
//! them in SQLite ([`db`]) and delivers paid orders ([`worker`], counting into
//! [`metrics`]), and [`reconcile`], which proves the ledger across Redis, the streams and
//! every order store.

pub mod db;
pub mod event;
pub mod metrics;
pub mod reconcile;
pub mod worker;

pub use db::OrderDb;
pub use event::{Event, Kind};
pub use worker::{Worker, WorkerOptions};
