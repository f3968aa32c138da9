//! The sale's clock is Redis's. The purchase script decides by Redis `TIME` whether a sale
//! has opened or ended; a node keeps its own decisions (the shard's early refusals, the
//! countdown of `/api/time`, the expiries of tokens, tickets and links) on the same clock
//! by measuring how far its own is from Redis's and adding that offset. Two nodes whose
//! clocks disagree therefore still open a sale at the same instant.
//!
//! A node measures the offset with `TIME` on its shards' connections at every control
//! poll: the midpoint of the round trip against Redis's answer, kept only from round
//! trips short enough to bound the error. Every shard samples, so the process keeps the
//! most precise recent sample (the shortest round trip of the last [`FRESH`]), not the
//! last one, and the sale's clock never steps back: [`now_ms`] is the highest value it
//! has given, so a smaller offset slows it down until real time catches up.
//!
//! A node reports itself not ready while its offset exceeds `control.max_clock_skew_ms`
//! (a clock that far off points to a broken time service on that machine), and while it
//! has no sample of the last [`STALE`] (every round trip too slow to say where Redis's
//! clock is). Other processes (the CLI, the console, the simulator, a standalone worker)
//! measure it on connecting ([`sync`]).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static MEASURED: AtomicBool = AtomicBool::new(false);
/// The highest value [`now_ms`] has given.
static HIGHEST_MS: AtomicI64 = AtomicI64::new(0);
/// The sample the offset comes from: its round trip, and when it was taken.
static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

#[derive(Debug, Clone, Copy)]
struct Kept {
    rtt: Duration,
    at: Instant,
}

/// A round trip longer than this says too little about when Redis read its clock.
pub const MAX_SAMPLE_RTT: Duration = Duration::from_millis(40);
/// A kept sample gives way to a less precise one after this long, so that the offset
/// follows a drifting clock.
pub const FRESH: Duration = Duration::from_secs(2);
/// With no sample for this long, the offset is no longer known.
pub const STALE: Duration = Duration::from_secs(10);

/// Milliseconds since the Unix epoch, by this machine's clock.
pub fn local_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Milliseconds since the Unix epoch on the sale's clock: this machine's, corrected by
/// the offset measured against Redis (none yet: uncorrected), and never less than it
/// gave before in this process.
pub fn now_ms() -> i64 {
    on_the_sales_clock(local_ms())
}

/// [`now_ms`] off the kernel's coarse clock, which moves once a tick and so trails the
/// precise one by a few milliseconds (a tick and the milliseconds' truncation), for a
/// fraction of the cost: for the checks made on every request (a token's expiry, the
/// shard's early verdict on a sale), whose margins are tens of milliseconds. It never
/// gives less than [`now_ms`] has given.
pub fn coarse_now_ms() -> i64 {
    on_the_sales_clock(coarse_local_ms())
}

/// [`local_ms`] off the kernel's coarse clock. Read through the C library, as the precise
/// clock is: whatever stands in for the clock there (libfaketime, in the clock-skew
/// drill) moves both readings alike.
#[cfg(target_os = "linux")]
fn coarse_local_ms() -> i64 {
    use nix::time::{clock_gettime, ClockId};
    match clock_gettime(ClockId::CLOCK_REALTIME_COARSE) {
        Ok(t) => t.tv_sec() * 1000 + t.tv_nsec() / 1_000_000,
        Err(_) => local_ms(),
    }
}

#[cfg(not(target_os = "linux"))]
fn coarse_local_ms() -> i64 {
    local_ms()
}

/// This machine's milliseconds `local` on the sale's clock: corrected by the offset, and
/// never less than the sale's clock gave before.
fn on_the_sales_clock(local: i64) -> i64 {
    let now = local + OFFSET_MS.load(Relaxed);
    // Read before written: the highest value moves once a millisecond, and a write on
    // every call would pull its cache line from shard to shard on each request.
    let seen = HIGHEST_MS.load(Relaxed);
    if now <= seen {
        return seen;
    }
    now.max(HIGHEST_MS.fetch_max(now, Relaxed))
}

/// Redis's clock minus this machine's, once measured.
pub fn offset_ms() -> Option<i64> {
    MEASURED.load(Relaxed).then(|| OFFSET_MS.load(Relaxed))
}

/// How long ago the kept sample was taken, if there is one.
pub fn sample_age() -> Option<Duration> {
    let kept = *KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.map(|k| k.at.elapsed())
}

/// The offset one `TIME` round trip shows: this machine's clock just before sending
/// (`sent_ms`) and just after the answer (`redis_ms`) came back (`received_ms`), `rtt`
/// apart. None when the round trip was too slow to say.
pub fn sample(sent_ms: i64, redis_ms: i64, received_ms: i64, rtt: Duration) -> Option<i64> {
    (rtt <= MAX_SAMPLE_RTT && received_ms >= sent_ms)
        .then(|| redis_ms - (sent_ms + received_ms) / 2)
}

/// Keeps the offset of one round trip (see [`sample`]) unless a more precise sample of
/// the last [`FRESH`] is kept; returns whether it was kept.
pub fn observe(sent_ms: i64, redis_ms: i64, received_ms: i64, rtt: Duration) -> bool {
    let Some(offset) = sample(sent_ms, redis_ms, received_ms, rtt) else {
        return false;
    };
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if !replaces(*kept, rtt, Instant::now()) {
        return false;
    }
    *kept = Some(Kept {
        rtt,
        at: Instant::now(),
    });
    keep(offset);
    true
}

/// Whether a sample of round trip `rtt` taken at `now` replaces the kept one.
fn replaces(kept: Option<Kept>, rtt: Duration, now: Instant) -> bool {
    kept.is_none_or(|k| rtt <= k.rtt || now.duration_since(k.at) >= FRESH)
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
    if let Some((rtt, offset)) = best {
        *KEPT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Kept {
            rtt,
            at: Instant::now(),
        });
        keep(offset);
    }
}

/// The readiness verdict on the clock: an error names the offset and the bound, or says
/// that the offset is not known.
pub fn check(max_skew_ms: u64) -> Result<(), String> {
    judge(offset_ms(), sample_age(), max_skew_ms)
}

fn judge(offset: Option<i64>, age: Option<Duration>, max_skew_ms: u64) -> Result<(), String> {
    let slow = MAX_SAMPLE_RTT.as_millis();
    match (offset, age) {
        (Some(o), _) if o.unsigned_abs() > max_skew_ms => Err(format!(
            "clock: {o} ms off Redis's clock (control.max_clock_skew_ms = {max_skew_ms})"
        )),
        (Some(_), Some(age)) if age < STALE => Ok(()),
        (Some(_), _) => Err(format!(
            "clock: no TIME round trip to Redis under {slow} ms for {} s; the offset is no longer known",
            STALE.as_secs()
        )),
        (None, _) => Err(format!(
            "clock: not measured yet (no TIME round trip to Redis under {slow} ms)"
        )),
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
    fn a_node_too_far_off_or_unable_to_measure_is_not_ready() {
        let recent = Some(Duration::from_secs(1));
        assert!(judge(Some(-1000), recent, 1000).is_ok());
        let e = judge(Some(1500), recent, 1000).expect_err("beyond the bound");
        assert!(
            e.contains("1500 ms") && e.contains("max_clock_skew_ms"),
            "{e}"
        );
        assert!(judge(Some(-1001), recent, 1000).is_err());
        let e = judge(None, None, 1000).expect_err("never measured");
        assert!(e.contains("not measured"), "{e}");
        let e = judge(Some(3), Some(STALE), 1000).expect_err("no sample for too long");
        assert!(e.contains("no longer known"), "{e}");
    }

    #[test]
    fn a_precise_sample_is_kept_over_a_rougher_one_until_it_ages() {
        let t0 = Instant::now();
        let kept = Some(Kept {
            rtt: Duration::from_millis(2),
            at: t0,
        });
        assert!(replaces(None, Duration::from_millis(30), t0));
        assert!(replaces(kept, Duration::from_millis(1), t0));
        assert!(!replaces(kept, Duration::from_millis(30), t0 + FRESH / 2));
        assert!(replaces(kept, Duration::from_millis(30), t0 + FRESH));
    }

    #[test]
    fn the_sale_clock_never_steps_back() {
        let _ = observe(1_000, 1_000, 1_002, Duration::from_millis(2));
        let before = now_ms();
        // A later, as precise sample says Redis's clock is 50 ms further behind.
        std::thread::sleep(FRESH / 20);
        keep(OFFSET_MS.load(Relaxed) - 50);
        let mut last = before;
        for _ in 0..1000 {
            let now = now_ms();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
        assert!(last >= before);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_coarse_reading_trails_by_a_tick_and_never_steps_back() {
        let tick = nix::time::clock_getres(nix::time::ClockId::CLOCK_REALTIME_COARSE)
            .expect("the coarse clock's resolution");
        let tick_ms = tick.tv_sec() * 1000 + tick.tv_nsec() / 1_000_000 + 1;
        let mut last = now_ms();
        for _ in 0..1000 {
            let coarse = coarse_now_ms();
            let precise = now_ms();
            assert!(
                coarse >= last && precise >= coarse,
                "{last}, {coarse}, {precise}"
            );
            // The other tests here move the offset by up to 50 ms meanwhile.
            assert!(
                precise - coarse <= tick_ms + 100,
                "{coarse} trails {precise}"
            );
            last = precise;
        }
    }
}
