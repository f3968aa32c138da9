//! One module per route, each the same shape: parse, check, apply, respond.

pub mod campaigns;
pub mod orders;
pub mod purchase;
pub mod session;
pub mod time;
