//! The connection's waker, which holds back the one wake hyper's body channel sends for
//! nothing.
//!
//! hyper's HTTP/1 connection reads a request's body into a channel, and its reading side
//! registers the connection task's waker to hear when the channel has room. Taking an
//! item out of the channel wakes that waker, even when the item was the body's last and
//! the reading side has let go of the channel: the task is polled once more for nothing,
//! two polls a request with a body against one without, and a poll costs about half a
//! microsecond of a shard's time, a twentieth of a refused purchase's. A connection
//! is therefore polled through a [`Gated`] waker, and a body read inside [`held_back`]
//! holds back the wakes it causes; the reader wakes the task itself when the body is not
//! complete, so no wake that matters is lost.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

thread_local! {
    /// Inside [`held_back`]: whether a wake was held back.
    static HOLDING: Cell<Option<bool>> = const { Cell::new(None) };
}

/// A task's waker, whose wakes [`held_back`] can hold back.
struct Gate(Waker);

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let held = HOLDING.with(|h| match h.get() {
            Some(_) => {
                h.set(Some(true));
                true
            }
            None => false,
        });
        if !held {
            self.0.wake_by_ref();
        }
    }
}

/// Runs `f`, holding back the wakes of [`Gated`] wakers it causes; says whether it did.
pub fn held_back<T>(f: impl FnOnce() -> T) -> (T, bool) {
    let outer = HOLDING.replace(Some(false));
    let out = f();
    let held = HOLDING.replace(outer) == Some(true);
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

    #[test]
    fn a_gated_waker_wakes_the_task_except_inside_held_back() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let mut gated = Gated::new(Register(None));
        let _ = Pin::new(&mut gated).poll(&mut Context::from_waker(&task));
        let registered = gated.get_mut().0.take().expect("registered");

        registered.wake_by_ref();
        assert_eq!(count.0.load(Relaxed), 1, "an ordinary wake goes through");

        let ((), held) = held_back(|| registered.wake_by_ref());
        assert!(held);
        assert_eq!(count.0.load(Relaxed), 1, "held back");

        let ((), held) = held_back(|| ());
        assert!(!held, "nothing to hold back");
        registered.wake();
        assert_eq!(count.0.load(Relaxed), 2, "and through again after");
    }

    #[test]
    fn an_ordinary_waker_is_never_held_back() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let ((), held) = held_back(|| task.wake_by_ref());
        assert!(!held);
        assert_eq!(count.0.load(Relaxed), 1);
    }
}
