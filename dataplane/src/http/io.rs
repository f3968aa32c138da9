//! The bridge from glommio's socket to hyper, written once: glommio's `TcpStream` speaks
//! `futures::io`, `tokio_util::compat` turns it into `tokio::io`, and hyper-util's
//! `TokioIo` into hyper's traits, all without `unsafe`. On the way it enforces the
//! connection's clocks: an idle keep-alive connection is closed after the idle timeout,
//! and a request head must arrive within the header timeout of its first byte, so a
//! client that trickles bytes (slow loris) holds its connection no longer than that.

use glommio::net::TcpStream;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

pub struct TimedStream {
    inner: Compat<TcpStream>,
    header_timeout: Duration,
    idle_timeout: Duration,
    /// When the first byte of the request being read arrived; cleared by the response.
    request_started: Option<Instant>,
}

impl TimedStream {
    pub fn new(stream: TcpStream, header_timeout: Duration, idle_timeout: Duration) -> Self {
        // Errors here only mean "no timeout": glommio refuses a zero duration, which
        // configuration validation already excludes.
        let _ = stream.set_read_timeout(Some(idle_timeout));
        let _ = stream.set_write_timeout(Some(idle_timeout));
        TimedStream {
            inner: stream.compat(),
            header_timeout,
            idle_timeout,
            request_started: None,
        }
    }

    fn set_read_timeout(&self, d: Duration) {
        let _ = self.inner.get_ref().set_read_timeout(Some(d));
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(started) = self.request_started {
            if started.elapsed() > self.header_timeout {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request head not received in time",
                )));
            }
        }
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            if buf.filled().len() > before && self.request_started.is_none() {
                self.request_started = Some(Instant::now());
                let t = self.header_timeout;
                self.set_read_timeout(t);
            }
        }
        res
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.request_started.take().is_some() {
            let t = self.idle_timeout;
            self.set_read_timeout(t);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.request_started.take().is_some() {
            let t = self.idle_timeout;
            self.set_read_timeout(t);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
