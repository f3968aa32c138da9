//! The sale's clock as a node keeps it: a node whose every round trip to Redis is too
//! slow to measure its offset does not claim to be ready, and becomes ready once it can.

mod common;

use common::{wait_until, Node, Redis, RedisUrl};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A TCP relay in front of a Redis that holds every reply for `delay_ms` before passing
/// it on: the network between a node and Redis made slow, the processes untouched.
struct SlowLink<'a> {
    redis: &'a Redis,
    port: u16,
    delay_ms: Arc<AtomicU64>,
}

impl<'a> SlowLink<'a> {
    fn start(redis: &'a Redis, delay_ms: u64) -> SlowLink<'a> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        let delay = Arc::new(AtomicU64::new(delay_ms));
        let (to, d) = (redis.port, delay.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                std::thread::spawn(move || pass(client, server, None));
                let d = d.clone();
                std::thread::spawn(move || pass(s2, c2, Some(d)));
            }
        });
        SlowLink {
            redis,
            port,
            delay_ms: delay,
        }
    }
}

/// Copies `from` to `to`, each chunk held for the current delay first.
fn pass(mut from: TcpStream, mut to: TcpStream, delay_ms: Option<Arc<AtomicU64>>) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        if let Some(d) = &delay_ms {
            std::thread::sleep(Duration::from_millis(d.load(Relaxed)));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

impl RedisUrl for SlowLink<'_> {
    fn url(&self) -> String {
        self.redis.url()
    }
    fn users(&self) -> PathBuf {
        self.redis.users()
    }
    fn seed_port(&self) -> u16 {
        self.port
    }
}

#[test]
fn a_node_that_cannot_measure_its_clock_is_not_ready_until_it_can() {
    let redis = Redis::start();
    // Every reply 60 ms late: no TIME round trip under the 40 ms a sample needs.
    let link = SlowLink::start(&redis, 60);
    let node = Node::start(&link, 1);
    std::thread::sleep(Duration::from_secs(1));
    let (code, body) = node.readyz();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.to_string().contains("clock: not measured"),
        "the reason names the clock: {body}"
    );
    // The node serves all the same (its decisions on its own clock, uncorrected).
    assert_eq!(node.client().get("/api/time", None).0, 200);
    // The link recovers: the next sample corrects the clock and the node is ready.
    link.delay_ms.store(0, Relaxed);
    wait_until("the node to be ready", Duration::from_secs(5), || {
        node.readyz().0 == 200
    });
}
