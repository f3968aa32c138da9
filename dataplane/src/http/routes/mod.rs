//! One module per route, each the same shape: parse, check, apply, respond.

pub mod campaigns;
pub mod challenge;
pub mod download;
pub mod events;
pub mod orders;
pub mod page;
pub mod pay;
pub mod payments;
pub mod purchase;
pub mod queue;
pub mod session;
pub mod time;
