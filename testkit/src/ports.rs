//! Free ports for the servers the tests start.

use std::net::TcpListener;
use std::time::Instant;

/// A port free now and not handed out before in this test process: the kernel may give
/// the same free port to two binds in a row, and a node's listener and admin listener
/// (or two nodes) would then be given one port.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// The first of `n` free ports in a row, each with its cluster bus port (+10000) free
/// too, and no port of a run handed out before in this test process. The run is drawn
/// from 20000 to 22700, so that the bus ports (30000 to 32705) stay below the kernel's
/// ephemeral ports (32768 up), which any connection's own end may take at any moment.
pub fn free_run(n: u16) -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let base = (0..400)
        .map(|_| 20_000 + random_offset() % 2_700)
        .find(|b| {
            (0..n).all(|i| {
                !given.contains(&(b + i))
                    && TcpListener::bind(("127.0.0.1", b + i)).is_ok()
                    && TcpListener::bind(("127.0.0.1", b + i + 10_000)).is_ok()
            })
        })
        .unwrap_or_else(|| panic!("{n} free ports in a row"));
    given.extend(base..base + n);
    base
}

fn random_offset() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() % 9_000) as u16
}
