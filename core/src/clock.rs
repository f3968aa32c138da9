//! The sale's clock is Redis's. The purchase script decides by Redis `TIME` whether a sale
//! has opened or ended; a node keeps its own decisions (the shard's early refusals, the
//! countdown of `/api/time`, the expiries of tokens, tickets and links) on the same clock
//! by measuring how far its own is from Redis's and adding that offset. Two nodes whose
//! clocks disagree therefore still open a sale at the same instant.
//!
//! A node measures the offset with `TIME` on its shards' connections at every control
//! poll: the midpoint of the round trip against Redis's answer, kept only from round
//! trips short enough to bound the error. A node whose offset exceeds
//! `control.max_clock_skew_ms` reports itself not ready: a clock that far off points to a
//! broken time service on that machine. Other processes (the CLI, the console, the
//! simulator, a standalone worker) measure it on connecting ([`sync`]).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};
use std::time::Duration;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static MEASURED: AtomicBool = AtomicBool::new(false);

/// A round trip longer than this says too little about when Redis read its clock.
pub const MAX_SAMPLE_RTT: Duration = Duration::from_millis(40);

/// Milliseconds since the Unix epoch, by this machine's clock.
pub fn local_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Milliseconds since the Unix epoch on the sale's clock: this machine's, corrected by
/// the last offset measured against Redis (none yet: uncorrected).
pub fn now_ms() -> i64 {
    local_ms() + OFFSET_MS.load(Relaxed)
}

/// Redis's clock minus this machine's, once measured.
pub fn offset_ms() -> Option<i64> {
    MEASURED.load(Relaxed).then(|| OFFSET_MS.load(Relaxed))
}

/// The offset one `TIME` round trip shows: this machine's clock just before sending
/// (`sent_ms`) and just after the answer (`redis_ms`) came back (`received_ms`), `rtt`
/// apart. None when the round trip was too slow to say.
pub fn sample(sent_ms: i64, redis_ms: i64, received_ms: i64, rtt: Duration) -> Option<i64> {
    (rtt <= MAX_SAMPLE_RTT && received_ms >= sent_ms)
        .then(|| redis_ms - (sent_ms + received_ms) / 2)
}

/// Keeps the offset of one round trip (see [`sample`]); returns whether it was kept.
pub fn observe(sent_ms: i64, redis_ms: i64, received_ms: i64, rtt: Duration) -> bool {
    let offset = sample(sent_ms, redis_ms, received_ms, rtt);
    offset.inspect(|o| keep(*o)).is_some()
}

fn keep(offset: i64) {
    OFFSET_MS.store(offset, Relaxed);
    MEASURED.store(true, Relaxed);
}

/// Measures this process's clock against Redis's with a few `TIME` round trips and keeps
/// the offset of the quickest: what the CLI, the console, the simulator and a standalone
/// worker do on connecting, so every process reads expiries and deadlines on the clock
/// the nodes and the scripts use. A failure leaves the clock as it was.
pub fn sync(con: &mut impl redis::ConnectionLike) {
    let mut best: Option<(Duration, i64)> = None;
    for _ in 0..3 {
        let (sent, sent_ms) = (std::time::Instant::now(), local_ms());
        let Some(redis_ms) = crate::protocol::time()
            .query::<redis::Value>(con)
            .ok()
            .and_then(|v| crate::protocol::read_time(&v))
        else {
            return;
        };
        let (rtt, received_ms) = (sent.elapsed(), local_ms());
        if let Some(o) = sample(sent_ms, redis_ms, received_ms, rtt) {
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, o));
            }
        }
    }
    if let Some((_, offset)) = best {
        keep(offset);
    }
}

/// The readiness verdict on the clock: an error names the offset and the bound.
pub fn check(max_skew_ms: u64) -> Result<(), String> {
    judge(offset_ms(), max_skew_ms)
}

fn judge(offset: Option<i64>, max_skew_ms: u64) -> Result<(), String> {
    match offset {
        Some(o) if o.unsigned_abs() > max_skew_ms => Err(format!(
            "clock: {o} ms off Redis's clock (control.max_clock_skew_ms = {max_skew_ms})"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_precise_round_trip_gives_the_offset_and_a_slow_one_nothing() {
        let fast = Duration::from_millis(4);
        assert_eq!(sample(1_000, 2_502, 1_004, fast), Some(1_500));
        assert_eq!(sample(1_000, 200, 1_004, fast), Some(-802));
        assert_eq!(
            sample(1_000, 9_000, 1_300, Duration::from_millis(300)),
            None
        );
        assert_eq!(
            sample(1_000, 9_000, 990, fast),
            None,
            "the clock stepped back"
        );
    }

    #[test]
    fn a_node_too_far_off_is_not_ready() {
        assert!(judge(None, 1000).is_ok(), "not measured yet");
        assert!(judge(Some(-1000), 1000).is_ok());
        let e = judge(Some(1500), 1000).expect_err("beyond the bound");
        assert!(
            e.contains("1500 ms") && e.contains("max_clock_skew_ms"),
            "{e}"
        );
        assert!(judge(Some(-1001), 1000).is_err());
    }
}
