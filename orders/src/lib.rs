//! seckill's orders after the hold: the order events ([`event`]), the worker that stores
//! them in SQLite ([`db`]) and delivers paid orders ([`worker`], counting into
//! [`metrics`]), [`shop`], which tells the shop of every order by webhook, and
//! [`reconcile`], which proves the ledger across Redis, the streams and every order store.

pub mod db;
pub mod event;
pub mod https;
pub mod metrics;
pub mod reconcile;
pub mod shop;
pub mod worker;

pub use db::OrderDb;
pub use event::{Event, Kind, Payment};
pub use worker::{Worker, WorkerOptions};
