//! seckill's ops console: the sale, live, in a terminal. It reads and writes only the
//! control plane in Redis, so it sees the whole fleet, not one node.
//!
//! - [`data`]: one read of the control plane (campaigns and their partitions, the
//!   fleet's telemetry, limits, blacklist) and the live ledger line;
//! - [`app`]: the state, and what each key does to it (commands for the control plane);
//! - [`prompt`]: what each prompt asks, and what was typed read into a command;
//! - [`command`]: the commands a key asks for, and carrying them out;
//! - [`ui`]: draws the state, one view per file;
//! - [`run`]: the terminal, the event loop and the data thread.

pub mod app;
pub mod command;
pub mod data;
pub mod prompt;
pub mod run;
pub mod ui;
