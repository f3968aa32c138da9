//! `GET /api/time`: the server's clock, so clients can count down to a sale.

use crate::http::reply::ApiError;
use crate::http::reply::{ok, Reply};
use seckill_core::api;

pub fn get() -> Result<Reply, ApiError> {
    Ok(ok(&api::Time {
        now_ms: seckill_core::now_ms(),
    }))
}
