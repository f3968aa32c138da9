//! A worker's life on its thread: opened, stepped until told to stop, opened again after
//! a failure; its telemetry for the console each second and its counts in the log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Worker, WorkerError, WorkerOptions};
use seckill_core::backoff::Backoff;

/// What the last telemetry record counted from.
struct Reported {
    at: Instant,
    events: u64,
    delivered: u64,
}

/// Runs a worker until `stop` is set, reconnecting after failures; and, for a shop that
/// hears of every order, its webhooks' sender on a thread beside it.
pub fn run(opts: WorkerOptions, stop: &AtomicBool) {
    std::thread::scope(|s| {
        if let Some(shop) = opts.shop.clone() {
            let (url, name) = (opts.redis_url.clone(), opts.name.clone());
            let metrics = opts.metrics.as_ref().map(|m| m.shop.clone());
            std::thread::Builder::new()
                .name("seckill-shop-webhooks".into())
                .spawn_scoped(s, move || {
                    crate::shop::run_sender(shop, &url, &name, stop, metrics)
                })
                .map_err(|e| tracing::error!(error = %e, "cannot start the shop's webhook sender"))
                .ok();
        }
        run_worker(opts, stop);
    });
}

fn run_worker(opts: WorkerOptions, stop: &AtomicBool) {
    let mut worker: Option<Worker> = None;
    let mut last_report = Instant::now();
    let started_ms = seckill_core::now_ms();
    let mut reported = Reported {
        at: Instant::now(),
        events: 0,
        delivered: 0,
    };
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    while !stop.load(Ordering::Relaxed) {
        let w = match worker.as_mut() {
            Some(w) => w,
            None => match Worker::open(opts.clone()) {
                Ok(w) => {
                    tracing::info!(name = %opts.name, db = %opts.db.display(), "order worker started");
                    // A new worker counts from zero.
                    (reported.events, reported.delivered) = (0, 0);
                    backoff.reset();
                    worker.insert(w)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "order worker cannot start; retrying");
                    std::thread::sleep(backoff.wait());
                    continue;
                }
            },
        };
        match w.step() {
            Ok(0) => std::thread::sleep(Duration::from_millis(5)),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "order worker step failed; reconnecting");
                worker = None;
                std::thread::sleep(backoff.wait());
                continue;
            }
        }
        if reported.at.elapsed() >= Duration::from_secs(1) {
            if let Some(w) = worker.as_mut() {
                if let Err(e) = w.write_telemetry(started_ms, &mut reported) {
                    tracing::debug!(error = %e, "cannot write the worker's telemetry");
                }
            }
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            if let Some(w) = &worker {
                w.report("order worker");
            }
            last_report = Instant::now();
        }
    }
    if let Some(w) = &worker {
        w.report("order worker stopped");
    }
}

impl Worker {
    /// Writes this second's record for the console: backlog, rates, delivery latency.
    fn write_telemetry(&mut self, started_ms: i64, last: &mut Reported) -> Result<(), WorkerError> {
        let (mut pending, mut lag) = (0, 0);
        for s in &self.streams {
            let (p, l) = crate::reconcile::backlog(&mut self.con, &s.key)?;
            pending += p;
            lag += l;
        }
        if let Some(m) = &self.opts.metrics {
            m.lag.store(lag, Ordering::Relaxed);
            m.pending.store(pending, Ordering::Relaxed);
            m.refunds_due
                .store(self.db.refunds_due()?, Ordering::Relaxed);
        }
        let secs = last.at.elapsed().as_secs_f64().max(0.001);
        // `last` counts from zero with each new worker: these counters only grow past it.
        assert!(
            self.stats.events >= last.events && self.stats.delivered >= last.delivered,
            "a worker's counters went back"
        );
        let recent = &mut self.stats.recent_pay_to_delivered_ms;
        let record = seckill_core::telemetry::WorkerRecord {
            name: self.opts.name.clone(),
            started_ms,
            at_ms: seckill_core::now_ms(),
            lag,
            pending,
            events_per_s: (self.stats.events - last.events) as f64 / secs,
            delivered_per_s: (self.stats.delivered - last.delivered) as f64 / secs,
            delivered: self.stats.delivered,
            pay_to_delivered_p99_ms: recent.value_at_quantile(0.99) as f64,
            undelivered: self.held_back.len() as u64,
        };
        recent.reset();
        *last = Reported {
            at: Instant::now(),
            events: self.stats.events,
            delivered: self.stats.delivered,
        };
        seckill_core::telemetry::write_worker(&mut self.con, &record)?;
        Ok(())
    }

    fn report(&self, what: &str) {
        let h = &self.stats.pay_to_delivered_ms;
        tracing::info!(
            events = self.stats.events,
            delivered = self.stats.delivered,
            pay_to_delivered_p50_ms = h.value_at_quantile(0.5),
            pay_to_delivered_p99_ms = h.value_at_quantile(0.99),
            pay_to_delivered_max_ms = h.max(),
            "{what}"
        );
    }
}
