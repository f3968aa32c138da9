//! Delivery: a licence key bound to each unit of a paid order (from the campaign's pool,
//! or derived), the order marked delivered, and the orders held back counted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Worker, WorkerError};
use crate::event::Event;
use seckill_core::auth::derive_license;
use seckill_core::keys::{CodeKeys, OrderId, PartitionKeys};
use seckill_core::reply::{int, text};
use seckill_core::scripts;

/// The derived licence keys of an order's units, a line each: the first is the order's
/// own (as an order of one always had), the others the order's with the unit's number.
fn derived_keys(secret: &seckill_core::auth::Secret, order_id: &str, units: i64) -> String {
    (0..units.max(1))
        .map(|i| match i {
            0 => derive_license(secret, order_id),
            i => derive_license(secret, &format!("{order_id}/{i}")),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Worker {
    /// Binds a licence key to each unit of each paid order and marks it delivered, once:
    /// a replayed `paid` event finds the same codes bound and the order already delivered. Each step
    /// is one pipelined round trip for the whole batch. Returns the orders it could not
    /// deliver: their events must stay pending, to be tried again.
    pub(super) fn deliver<'e>(
        &mut self,
        paid: &[&'e Event],
    ) -> Result<HashSet<&'e str>, WorkerError> {
        let mut undelivered = HashSet::new();
        if paid.is_empty() {
            return Ok(undelivered);
        }
        let mut binds = redis::pipe();
        let pooled: Vec<&&Event> = paid
            .iter()
            .filter(|e| self.pooled.contains(&e.campaign))
            .collect();
        for e in &pooled {
            let k = CodeKeys::new(&e.campaign);
            binds
                .cmd("EVALSHA")
                .arg(scripts::BIND_CODE.get_hash())
                .arg(2)
                .arg(k.pool())
                .arg(k.bound())
                .arg(&e.order_id)
                .arg(e.quantity.max(1));
        }
        let codes: Vec<Option<String>> = if pooled.is_empty() {
            Vec::new()
        } else {
            self.con.pipeline(&binds)?
        };
        let codes: HashMap<&str, Option<String>> = pooled
            .iter()
            .map(|e| e.order_id.as_str())
            .zip(codes)
            .collect();
        let mut delivers = redis::pipe();
        let mut sent = Vec::new();
        for e in paid {
            let license = match codes.get(e.order_id.as_str()) {
                Some(Some(code)) => code.clone(),
                Some(None) => {
                    // Logged once per order: its retries show in the undelivered gauge.
                    if !self.held_back.contains_key(&e.order_id) {
                        tracing::error!(campaign = %e.campaign, order = %e.order_id, units = e.quantity, "code pool short of the order's units; order left pending until codes are added");
                    }
                    undelivered.insert(e.order_id.as_str());
                    continue;
                }
                None => derived_keys(&self.opts.licences, &e.order_id, e.quantity),
            };
            let Some(oid) = OrderId::parse(&e.order_id) else {
                continue;
            };
            let k = PartitionKeys::new(oid.campaign, oid.partition);
            delivers
                .cmd("EVALSHA")
                .arg(scripts::DELIVER.get_hash())
                .arg(2)
                .arg(k.order(&e.order_id))
                .arg(k.events())
                .arg(&e.order_id)
                .arg(&license);
            sent.push(e.order_id.as_str());
        }
        if sent.is_empty() {
            return Ok(undelivered);
        }
        let replies: Vec<Vec<redis::Value>> = self.con.pipeline(&delivers)?;
        for (order, v) in sent.into_iter().zip(replies) {
            if text(v.first()).as_deref() != Some("delivered") {
                // Not expected after a `paid` event (a paid order only moves on to
                // delivered); kept pending so that it shows and is tried again.
                if !self.held_back.contains_key(order) {
                    tracing::error!(order, reply = ?v, "paid event for an order that is not paid");
                }
                undelivered.insert(order);
                continue;
            }
            let (paid_ms, delivered_ms, first) = (
                int(v.get(2)).unwrap_or(0),
                int(v.get(3)).unwrap_or(0),
                int(v.get(4)).unwrap_or(0),
            );
            if first == 1 {
                self.stats.delivered += 1;
                let took = (delivered_ms - paid_ms).max(1) as u64;
                let _ = self.stats.pay_to_delivered_ms.record(took);
                let _ = self.stats.recent_pay_to_delivered_ms.record(took);
                if let Some(m) = &self.opts.metrics {
                    m.delivered_after(Duration::from_millis(took));
                }
            }
        }
        Ok(undelivered)
    }

    /// Counts a pass's failed deliveries and updates the orders held back. One not tried
    /// again for two claim periods was claimed by another worker, and is its to report.
    pub(super) fn note_undelivered(&mut self, paid: &[&Event], undelivered: &HashSet<&str>) {
        let now = Instant::now();
        for e in paid {
            if undelivered.contains(e.order_id.as_str()) {
                self.held_back.insert(e.order_id.clone(), now);
            } else {
                self.held_back.remove(&e.order_id);
            }
        }
        let forgotten = self.opts.claim_idle * 2 + Duration::from_secs(2);
        self.held_back
            .retain(|_, tried| tried.elapsed() < forgotten);
        self.stats.delivery_failures += undelivered.len() as u64;
        if let Some(m) = &self.opts.metrics {
            m.delivery_failures
                .fetch_add(undelivered.len() as u64, Ordering::Relaxed);
            m.undelivered
                .store(self.held_back.len() as u64, Ordering::Relaxed);
        }
    }
}
