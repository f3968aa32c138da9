//! The trace of a run (`--trace`): every purchase, when its latency is measured from on
//! the monotonic clock, its latency and its outcome.

use std::time::Duration;

use crate::tally::Traced;

/// Every purchase of a run answered or failed, in the order of the instants their latencies
/// are measured from.
pub struct Trace {
    /// The run's start on the monotonic clock.
    pub(super) origin: Duration,
    pub(super) purchases: Vec<Traced>,
}

impl Trace {
    /// Writes it as CSV: the instant measured from (monotonic clock, s), latency (ms), outcome.
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(w, "monotonic_s,latency_ms,outcome")?;
        for p in &self.purchases {
            let at = self.origin + p.planned;
            writeln!(
                w,
                "{}.{:06},{:.3},{}",
                at.as_secs(),
                at.subsec_micros(),
                p.took_us as f64 / 1000.0,
                p.outcome
            )?;
        }
        w.flush()
    }
}

/// Now on the monotonic clock, which `Instant` reads too.
pub(super) fn monotonic_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
