//! The connection's waker, which holds back the one wake hyper's body channel sends for
//! nothing.
//!
//! hyper's HTTP/1 connection reads a request's body into a channel; as the channel's
//! sending side, the connection registers its task's waker to hear when there is room.
//! Taking an item out wakes that waker, even when the item was the body's last and the
//! sending side has let go of the channel: the task is polled once more for nothing, a
//! second poll for every request with a body. A connection is therefore polled through a
//! [`Gated`] waker, and a body is read inside [`held_back`], which holds back the wakes
//! it causes and hands them to the reader: the reader passes them on unless the body is
//! complete, so no wake that matters is lost.

use futures::future::{select, Either};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use std::cell::RefCell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

thread_local! {
    /// Inside [`held_back`]: the task whose wake is held back, if one is.
    static HOLDING: RefCell<Option<Option<Waker>>> = const { RefCell::new(None) };
}

/// A task's waker, whose wakes [`held_back`] can hold back.
struct Gate(Waker);

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // One task's wake is held; another's (none comes today) goes through at once.
        let held = HOLDING.with_borrow_mut(|holding| match holding {
            Some(slot @ None) => {
                *slot = Some(self.0.clone());
                true
            }
            Some(Some(task)) => task.will_wake(&self.0),
            None => false,
        });
        if !held {
            self.0.wake_by_ref();
        }
    }
}

/// Runs `f`, holding back the wakes of [`Gated`] wakers it causes. Returns what `f` gave
/// and the task a wake was held back for, which the caller wakes unless it knows the
/// wake was for nothing.
pub fn held_back<T>(f: impl FnOnce() -> T) -> (T, Option<Waker>) {
    /// Ends the holding when dropped, on a panic too, and passes on a wake still held.
    struct Restore(Option<Option<Waker>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(Some(task)) = HOLDING.replace(self.0.take()) {
                task.wake();
            }
        }
    }
    let restore = Restore(HOLDING.replace(Some(None)));
    let out = f();
    let held = HOLDING.with_borrow_mut(|holding| holding.as_mut().and_then(Option::take));
    drop(restore);
    (out, held)
}

/// A future polled with a [`Gate`] around its task's waker.
pub struct Gated<F> {
    inner: F,
    /// The task's waker and the gate around it.
    waker: Option<(Waker, Waker)>,
}

impl<F> Gated<F> {
    pub fn new(inner: F) -> Self {
        Gated { inner, waker: None }
    }

    pub fn get_mut(&mut self) -> &mut F {
        &mut self.inner
    }
}

impl<F: Future + Unpin> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let gate = match &this.waker {
            Some((task, gate)) if task.will_wake(cx.waker()) => gate,
            _ => {
                let task = cx.waker().clone();
                let gate = Waker::from(Arc::new(Gate(task.clone())));
                &this.waker.insert((task, gate)).1
            }
        };
        Pin::new(&mut this.inner).poll(&mut Context::from_waker(gate))
    }
}

/// Drives a connection until the client leaves or `shutdown` resolves; then the request
/// in flight finishes and the connection closes.
pub(super) async fn until_shutdown<I, S, B>(
    conn: http1::Connection<I, S>,
    shutdown: impl Future<Output = ()>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = pin!(conn);
    let mut conn = Gated::new(conn);
    let result = match select(&mut conn, pin!(shutdown)).await {
        Either::Left((r, _)) => r,
        Either::Right(((), _)) => {
            conn.get_mut().as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    /// Registers the waker it is polled with, then is ready.
    struct Register(Option<Waker>);

    impl Future for Register {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0 = Some(cx.waker().clone());
            Poll::Ready(())
        }
    }

    /// A task's waker that counts its wakes, and the waker a future polled through
    /// [`Gated`] on that task registers.
    fn gated_task() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let mut gated = Gated::new(Register(None));
        let _ = Pin::new(&mut gated).poll(&mut Context::from_waker(&task));
        let registered = gated.get_mut().0.take().expect("registered");
        (count, registered)
    }

    #[test]
    fn a_gated_waker_wakes_the_task_except_inside_held_back() {
        let (count, registered) = gated_task();

        registered.wake_by_ref();
        assert_eq!(count.0.load(Relaxed), 1, "an ordinary wake goes through");

        let ((), held) = held_back(|| {
            registered.wake_by_ref();
            registered.wake_by_ref();
        });
        assert_eq!(count.0.load(Relaxed), 1, "held back");
        held.expect("the task's wake, handed over").wake();
        assert_eq!(count.0.load(Relaxed), 2, "once, by whoever holds it");

        let ((), held) = held_back(|| ());
        assert!(held.is_none(), "nothing to hold back");
        registered.wake();
        assert_eq!(count.0.load(Relaxed), 3, "and through again after");
    }

    #[test]
    fn an_ordinary_waker_is_never_held_back() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let ((), held) = held_back(|| task.wake_by_ref());
        assert!(held.is_none());
        assert_eq!(count.0.load(Relaxed), 1);
    }

    #[test]
    fn a_wake_held_when_the_read_panics_is_passed_on() {
        let (count, registered) = gated_task();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            held_back(|| {
                registered.wake_by_ref();
                panic!("a read that fails");
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(count.0.load(Relaxed), 1, "the held wake went through");
        registered.wake_by_ref();
        assert_eq!(count.0.load(Relaxed), 2, "and holding ended");
    }
}
