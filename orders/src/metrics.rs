//! The order worker's counters, for the node that runs it in-process to export.

use seckill_core::histo::Histo;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The in-process order worker's counters.
#[derive(Debug, Default)]
pub struct WorkerMetrics {
    pub events: AtomicU64,
    pub delivered: AtomicU64,
    pub lag: AtomicU64,
    pub pending: AtomicU64,
    /// Paid orders held back undelivered, as of the worker's last pass.
    pub undelivered: AtomicU64,
    pub delivery_failures: AtomicU64,
    pub pay_to_delivered: Histo,
    /// Payments owed back, as this worker's store knows them.
    pub refunds_due: AtomicU64,
    /// The shop's webhooks: sent, failed tries, waiting, refused for good.
    pub shop: std::sync::Arc<crate::shop::ShopMetrics>,
}

impl WorkerMetrics {
    pub fn delivered_after(&self, took: Duration) {
        self.delivered.fetch_add(1, Relaxed);
        self.pay_to_delivered.observe(took);
    }
}
