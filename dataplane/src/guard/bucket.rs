//! Token buckets, and a bounded map of them keyed by client IP or user.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A bucket of `burst` tokens refilled at `rate` per second; each request takes one.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn full(burst: f64, now: Instant) -> Self {
        Bucket {
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant, rate: f64, burst: f64) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.last = now;
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant, rate: f64, burst: f64) -> Result<(), Duration> {
        self.refill(now, rate, burst);
        // A bucket is never overdrawn: a token is taken only when one is there, and the
        // refill adds none at a rate of zero or less.
        debug_assert!(self.tokens >= 0.0, "a bucket overdrawn: {}", self.tokens);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else if rate <= 0.0 {
            Err(Duration::from_secs(3600))
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        }
    }

    /// Whether the bucket would be full by `now`: then it is the same as no bucket.
    fn is_full(&self, now: Instant, rate: f64, burst: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens + elapsed * rate >= burst
    }
}

/// Buckets per key, at most `capacity` of them. Full buckets are dropped (a key without a
/// bucket has a full one), so the map holds only keys that spent tokens recently; when it
/// is full of those, a new key goes unlimited rather than evicting a spender.
#[derive(Debug)]
pub struct BucketMap<K> {
    buckets: HashMap<K, Bucket>,
    capacity: usize,
    last_sweep: Option<Instant>,
}

impl<K: Hash + Eq + Clone> BucketMap<K> {
    pub fn new(capacity: usize) -> Self {
        BucketMap {
            buckets: HashMap::new(),
            capacity,
            last_sweep: None,
        }
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Takes a token for `key`. A `rate` of 0 or less means no limit.
    /// The key is borrowed (a `&str` for `String` keys) and copied only for a new bucket.
    pub fn take<Q>(&mut self, key: &Q, now: Instant, rate: f64, burst: f64) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if rate <= 0.0 {
            return Ok(());
        }
        if let Some(b) = self.buckets.get_mut(key) {
            return b.take(now, rate, burst);
        }
        if self.buckets.len() >= self.capacity {
            self.sweep(now, rate, burst);
            if self.buckets.len() >= self.capacity {
                return Ok(());
            }
        }
        let mut b = Bucket::full(burst, now);
        let r = b.take(now, rate, burst);
        self.buckets.insert(key.to_owned(), b);
        r
    }

    /// Drops the buckets that have refilled; at most once per 100 ms, so a flood of new
    /// keys does not turn every request into a full scan.
    fn sweep(&mut self, now: Instant, rate: f64, burst: f64) {
        if self
            .last_sweep
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last_sweep = Some(now);
        self.buckets.retain(|_, b| !b.is_full(now, rate, burst));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::full(3.0, t0);
        for _ in 0..3 {
            assert!(b.take(t0, 2.0, 3.0).is_ok());
        }
        let wait = b.take(t0, 2.0, 3.0).expect_err("empty");
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        assert!(b.take(t0 + Duration::from_millis(499), 2.0, 3.0).is_err());
        assert!(b.take(t0 + Duration::from_millis(1000), 2.0, 3.0).is_ok());
        // Refill never exceeds the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(b.take(later, 2.0, 3.0).is_ok());
        }
        assert!(b.take(later, 2.0, 3.0).is_err());
    }

    #[test]
    fn the_map_stays_bounded_under_a_flood_of_keys() {
        let t0 = Instant::now();
        let mut m: BucketMap<u32> = BucketMap::new(1000);
        for k in 0..1_000_000u32 {
            let now = t0 + Duration::from_micros(u64::from(k));
            let _ = m.take(&k, now, 1.0, 1.0);
            assert!(m.len() <= 1000);
        }
    }

    #[test]
    fn keys_are_limited_separately_and_refilled_keys_are_forgotten() {
        let t0 = Instant::now();
        let mut m: BucketMap<&str> = BucketMap::new(2);
        assert!(m.take(&"a", t0, 1.0, 1.0).is_ok());
        assert!(m.take(&"a", t0, 1.0, 1.0).is_err());
        assert!(m.take(&"b", t0, 1.0, 1.0).is_ok());
        // Full of spenders: a new key is let through, not tracked.
        assert!(m.take(&"c", t0, 1.0, 1.0).is_ok());
        assert_eq!(m.len(), 2);
        // Once a and b have refilled, they are swept to make room.
        let later = t0 + Duration::from_secs(2);
        assert!(m.take(&"c", later, 1.0, 1.0).is_ok());
        assert!(m.take(&"c", later, 1.0, 1.0).is_err());
        assert_eq!(m.len(), 1);
        assert!(m.take(&"x", t0, 0.0, 0.0).is_ok(), "rate 0 means no limit");
    }
}
