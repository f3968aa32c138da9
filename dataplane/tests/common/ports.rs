//! Free ports for the servers the tests start (the simulator's tests include this file too).

use std::net::TcpListener;

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
