//! After a hold: the order events, the worker that stores them in SQLite and delivers
//! paid orders, and the order store itself.

pub mod db;
pub mod event;
pub mod worker;

pub use db::OrderDb;
pub use event::{Event, Kind};
pub use worker::{Worker, WorkerOptions};
