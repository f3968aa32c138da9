//! The wait for a planned instant. Latency is measured from the instant a request was
//! planned for, so the load thread's own lateness in sending it counts in every figure.
//! tokio's timer counts in whole milliseconds and wakes at the tick after the instant:
//! every send would be up to a millisecond late, half a millisecond on average, on a
//! system that answers in a fraction of that. A timerfd per load thread wakes within the
//! kernel's timer slack (50 µs) of the instant instead.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;

/// Waits for instants on one load thread.
pub struct Pacer {
    timer: Option<AsyncFd<OwnedFd>>,
}

impl Pacer {
    /// A pacer on a timerfd; on tokio's timer when the kernel gives none.
    pub fn new() -> Pacer {
        // `AsyncFd::new` is deprecated because an fd it does not own could be closed
        // while still registered; this one is an `OwnedFd` moved into it, closed only
        // when the `AsyncFd` drops (after it deregistered). Its replacement is `unsafe`,
        // which this crate does not use.
        #[allow(deprecated)]
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(std::io::Error::from)
        .and_then(AsyncFd::new);
        Pacer { timer: timer.ok() }
    }

    /// Returns at `at`, or at once when it has passed.
    pub async fn until(&self, at: Instant) {
        let wait = at.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return;
        }
        match &self.timer {
            Some(fd) if arm(fd.get_ref(), wait).is_ok() => expired(fd).await,
            _ => tokio::time::sleep_until(at.into()).await,
        }
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

/// Sets the timer to expire once, `wait` from now; setting it clears an expiry that
/// nobody read.
fn arm(fd: &OwnedFd, wait: Duration) -> rustix::io::Result<()> {
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        },
    };
    timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec).map(|_| ())
}

/// Waits until the armed timer has expired, and reads its count.
async fn expired(fd: &AsyncFd<OwnedFd>) {
    loop {
        let Ok(mut ready) = fd.readable().await else {
            return;
        };
        let mut count = [0u8; 8];
        match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut count)?)) {
            Ok(_) => return,
            // Not yet: readiness was stale (a wait given up before its expiry).
            Err(_not_yet) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_never_returns_before_the_instant_and_comes_back_again_and_again() {
        crate::test_runtime().block_on(async {
            let pacer = Pacer::new();
            assert!(pacer.timer.is_some(), "this kernel gives timerfds");
            for i in 0..50u64 {
                let at = Instant::now() + Duration::from_micros(200 + 37 * i);
                pacer.until(at).await;
                assert!(Instant::now() >= at);
            }
            // An instant that has passed returns at once, and the next wait still works.
            pacer.until(Instant::now() - Duration::from_millis(5)).await;
            let at = Instant::now() + Duration::from_millis(2);
            pacer.until(at).await;
            assert!(Instant::now() >= at);
        });
    }

    #[test]
    fn a_wait_given_up_halfway_leaves_the_next_one_on_time() {
        crate::test_runtime().block_on(async {
            let pacer = Pacer::new();
            let far = Instant::now() + Duration::from_secs(30);
            let given_up = tokio::time::timeout(Duration::from_millis(5), pacer.until(far)).await;
            assert!(given_up.is_err(), "30 s is not 5 ms");
            let start = Instant::now();
            let at = start + Duration::from_millis(3);
            pacer.until(at).await;
            assert!(Instant::now() >= at);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "re-armed, not left at 30 s"
            );
        });
    }
}
