//! Waiting for what a test started to get there.

use std::time::{Duration, Instant};

/// Polls until `ok` holds, failing after `timeout`; returns how long it took.
pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < timeout,
            "timed out waiting for {what} ({timeout:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}
