//! The node: one pinned glommio executor per core, each with its own `SO_REUSEPORT`
//! listener, and an orderly stop — on SIGINT or SIGTERM the node reports itself not
//! ready and keeps serving for `http.drain_ms` (a load balancer takes it out), then
//! every shard stops accepting, lets in-flight requests finish (up to a grace period),
//! and the process exits 0.

use futures::channel::oneshot;
use futures::future::{select, Either, FutureExt};
use glommio::net::TcpListener;
use glommio::sync::Semaphore;
use glommio::timer::Timer;
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::http;
use crate::metrics::Metrics;
use crate::shard::Shard;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot start the shards: {0}")]
    Executors(String),
    #[error("shard {shard}: cannot listen on {addr}: {reason}")]
    Bind {
        shard: usize,
        addr: std::net::SocketAddr,
        reason: String,
    },
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
}

/// A flag that SIGINT or SIGTERM sets.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, ServerError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(ServerError::Signals)?;
    }
    Ok(stop)
}

/// The depth of each shard's io_uring rings. Every connection waiting for its next
/// request holds a poll in the kernel, and every cancellation (glommio cancels a timeout
/// each time the shard goes to sleep) looks through one bucket of the ring's table of
/// them: the kernel gives a ring a bucket for every 32 completion entries, at most 256.
/// At glommio's default (128, so 8 buckets) a shard holding thousands of connections
/// spent most of its time walking those buckets; 4096 gives the 256.
pub const RING_DEPTH: usize = 4096;

/// The kernel's cap on a listener's accept queue, `net.core.somaxconn`, where it can be read.
fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Warns when the kernel caps the accept queue below `http.listen_backlog`.
fn check_backlog(backlog: u32) {
    if let Some(cap) = somaxconn().filter(|cap| *cap < backlog) {
        tracing::warn!(
            somaxconn = cap,
            listen_backlog = backlog,
            "the kernel caps each shard's accept queue at net.core.somaxconn, below http.listen_backlog; raise it with sysctl"
        );
    }
}

/// A shard's listener: `SO_REUSEPORT` (each shard has its own on the same address) and
/// an accept queue `backlog` deep. glommio's own `TcpListener::bind` makes its queue 1024
/// deep; while a shard is busy with one turn through its requests at a sale's opening, a
/// crowd fills that, and the kernel drops every further connection attempt, which the
/// client sends again only a second later: a launch's tail of a second. A connection
/// comes to the shard once it speaks, or after about a second ([`defer_accept`]).
fn listen(addr: std::net::SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
    let family = if addr.is_ipv6() {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseport(&socket, true)?;
    if let Err(e) = defer_accept(&socket) {
        tracing::warn!(error = %e, "cannot defer accepting connections until they speak");
    }
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(adopt(socket))
}

/// Leaves a connection to the kernel until its first bytes come (`TCP_DEFER_ACCEPT`, for
/// a second). A crowd's shopper connects and sends at once: the shard then accepts the
/// connection and reads its request in one wake-up, not two (one for the accept, another
/// for the bytes). A connection that stays silent costs the shard nothing for about a
/// second (no descriptor, no connection slot, no poll armed); then the kernel sends its
/// part of the handshake again, and once the client answers, hands the connection to the
/// shard all the same, where the idle timeout runs.
#[allow(unsafe_code)]
fn defer_accept(socket: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let seconds: libc::c_int = 1;
    // SAFETY: a valid socket descriptor, and an option value that is an int, with its size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            std::ptr::from_ref(&seconds).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A listening socket, handed to glommio, which takes it only as a raw descriptor.
#[allow(unsafe_code)]
fn adopt(socket: std::os::fd::OwnedFd) -> TcpListener {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: the descriptor is a bound, listening TCP socket that `listen` just made;
    // `into_raw_fd` gives up its only owner, so the listener is the one that closes it.
    unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) }
}

/// Sizes the descriptor table for every connection the shards may hold, so that it never
/// grows (and stalls a shard for an RCU grace period, see [`seckill_core::fds`]) while
/// a crowd is being accepted.
fn reserve_descriptors(settings: &Settings) {
    let wanted = (settings.shards * settings.http.max_connections_per_shard) as u64
        + seckill_core::fds::SPARE;
    match seckill_core::fds::reserve(wanted) {
        Ok(r) if r.limit < wanted => tracing::warn!(
            limit = r.limit,
            wanted,
            "the limit on open files (RLIMIT_NOFILE) is below the connections the shards may hold; past it, connections wait in the backlog"
        ),
        Ok(r) => tracing::debug!(descriptors = r.table, "descriptor table sized"),
        Err(e) => tracing::warn!(error = %e, "cannot size the descriptor table; it will grow under load"),
    }
}

/// The online CPUs this process may run on, where shards are pinned: a node started
/// under `taskset`, systemd's `CPUAffinity=` or a container's cpuset keeps to the CPUs
/// it was given (it counts one shard per core of them, too). Left alone, glommio would
/// place shards over every online CPU, onto cores given to other work, or, where a
/// cpuset forbids them, fail to start. `None` (every online CPU) where either cannot be
/// read or they have no CPU in common.
pub fn allowed_cpus() -> Option<glommio::CpuSet> {
    let allowed = rustix::thread::sched_getaffinity(None).ok()?;
    let cpus = glommio::CpuSet::online()
        .ok()?
        .filter(|cpu| allowed.is_set(cpu.cpu));
    (!cpus.is_empty()).then_some(cpus)
}

/// Runs the node until `stop` is set; its shards count into `metrics`.
pub fn run_until(
    settings: Settings,
    stop: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) -> Result<(), ServerError> {
    let shards = settings.shards;
    tracing::info!(
        listen = %settings.listen,
        shards,
        redis = %seckill_core::secrets::redact(&settings.redis_url),
        "starting"
    );
    reserve_descriptors(&settings);
    check_backlog(settings.http.listen_backlog);
    let next_index = Arc::new(AtomicUsize::new(0));
    let placement = if settings.pin_shards {
        PoolPlacement::MaxSpread(shards, allowed_cpus())
    } else {
        PoolPlacement::Unbound(shards)
    };
    let handles = LocalExecutorPoolBuilder::new(placement)
        .name("seckill-shard")
        .ring_depth(RING_DEPTH)
        .on_all_shards(move || {
            let index = next_index.fetch_add(1, Ordering::SeqCst);
            run_shard(index, settings, stop, metrics)
        })
        .map_err(|e| ServerError::Executors(e.to_string()))?;
    let mut first_error = None;
    for r in handles.join_all() {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(ServerError::Executors(e.to_string()));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

async fn run_shard(
    index: usize,
    settings: Settings,
    stop: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) -> Result<(), ServerError> {
    let addr = settings.listen;
    let grace = Duration::from_millis(settings.http.shutdown_grace_ms);
    let drain = Duration::from_millis(settings.http.drain_ms);
    let max_conns = settings.http.max_connections_per_shard as u64;
    let listener = listen(addr, settings.http.listen_backlog).map_err(|e| ServerError::Bind {
        shard: index,
        addr,
        reason: e.to_string(),
    })?;
    let admin = match settings.admin_listen.filter(|_| index == 0) {
        Some(addr) => Some(TcpListener::bind(addr).map_err(|e| ServerError::Bind {
            shard: index,
            addr,
            reason: e.to_string(),
        })?),
        None => None,
    };
    let shard_metrics = metrics.shards.get(index).cloned().unwrap_or_default();
    let shard = Shard::start(index, Rc::new(settings), shard_metrics);
    tracing::debug!(shard = index, "listening");

    let slots = Rc::new(Semaphore::new(max_conns));
    let (closing, closed) = oneshot::channel::<()>();
    let closed = closed.map(|_| ()).shared();
    if let Some(admin) = admin {
        let (shard, closed, metrics) = (shard.clone(), closed.clone(), metrics.clone());
        glommio::spawn_local(async move {
            loop {
                let accept = pin!(admin.accept());
                let stream = match select(accept, closed.clone()).await {
                    Either::Left((Ok(s), _)) => s,
                    Either::Left((Err(e), _)) => {
                        tracing::warn!(error = %e, "admin accept failed");
                        Timer::new(Duration::from_millis(10)).await;
                        continue;
                    }
                    Either::Right(_) => return,
                };
                let (shard, metrics, closed) = (shard.clone(), metrics.clone(), closed.clone());
                glommio::spawn_local(http::admin::serve_connection(
                    shard, metrics, stream, closed,
                ))
                .detach();
            }
        })
        .detach();
    }
    let accept = async {
        loop {
            let Ok(slot) = slots.acquire_static_permit(1).await else {
                return;
            };
            // Each connection holds one slot, given back when it ends: never more out
            // than the cap.
            debug_assert!(slots.available() < max_conns);
            let stream = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(shard = index, error = %e, "accept failed");
                    Timer::new(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let (shard, closed) = (shard.clone(), closed.clone());
            glommio::spawn_local(async move {
                http::serve_connection(shard, stream, closed).await;
                drop(slot);
            })
            .detach();
        }
    };
    let stopping = async {
        while !stop.load(Ordering::Relaxed) {
            Timer::new(Duration::from_millis(50)).await;
        }
        if index == 0 {
            tracing::info!(
                drain_ms = drain.as_millis() as u64,
                "stopping: not ready, draining"
            );
        }
        metrics.stopping.store(true, Ordering::Relaxed);
        Timer::new(drain).await;
    };
    select(pin!(accept), pin!(stopping)).await;
    drop(listener);
    shard.stop();
    let _ = closing.send(());
    let deadline = Instant::now() + grace;
    while slots.available() < max_conns && Instant::now() < deadline {
        Timer::new(Duration::from_millis(10)).await;
    }
    let open = max_conns - slots.available();
    if open > 0 {
        tracing::warn!(
            shard = index,
            open,
            "grace period over; closing connections"
        );
    }
    shard.close();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crowd larger than glommio's own accept queue (1024) connects at once to a shard
    /// that accepts none of them yet: every handshake completes in the kernel, and none
    /// waits a second for its SYN to be sent again.
    #[test]
    fn a_crowd_deeper_than_glommios_queue_waits_in_the_backlog() {
        let crowd = 1500;
        let cap = somaxconn().unwrap_or(0);
        if (cap as usize) < crowd {
            eprintln!("net.core.somaxconn is {cap}: the kernel caps the queue below the crowd");
            return;
        }
        let wanted = crowd as u64 + seckill_core::fds::SPARE;
        let reserved = seckill_core::fds::reserve(wanted).expect("descriptors");
        if reserved.limit < wanted {
            eprintln!(
                "the hard limit on open files is {}: too low for the crowd",
                reserved.limit
            );
            return;
        }
        let ex = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let listener =
                    listen("127.0.0.1:0".parse().expect("an address"), 4096).expect("a listener");
                let addr = listener.local_addr().expect("its address");
                // A dropped attempt is sent again after a second: each must be through
                // before that. Each sends its first bytes, as a shopper does, so the kernel
                // queues it for the shard at once.
                let clients: Vec<_> = (0..crowd)
                    .map(|_| {
                        let mut c =
                            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(900))
                                .expect("a handshake the kernel completes at once");
                        std::io::Write::write_all(&mut c, b"G").expect("a first byte");
                        c
                    })
                    .collect();
                assert_eq!(clients.len(), crowd);
                // They are all there to accept, in order.
                for _ in 0..crowd {
                    listener.accept().await.expect("a waiting connection");
                }
            })
            .expect("an executor");
        ex.join().expect("the test's executor");
    }
}
