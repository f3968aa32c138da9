//! A redis-server of the test's own, on a free port in a temp dir.

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

fn spawn(port: u16, dir: &std::path::Path) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (install it: apt-get install redis-server)")
}

impl Redis {
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = spawn(port, dir.path());
        let r = Redis {
            port,
            child,
            _dir: dir,
        };
        r.wait_up();
        r
    }

    fn wait_up(&self) {
        wait_until("redis", Duration::from_secs(10), || {
            seckill_dataplane::control::connect(&self.url()).is_ok()
        });
    }

    /// Kills the server; `start_again` brings it back on the same port with its data.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn start_again(&mut self) {
        self.child = spawn(self.port, self._dir.path());
        self.wait_up();
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn con(&self) -> seckill_dataplane::connection::Connection {
        seckill_dataplane::control::connect(&self.url()).expect("connect")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A campaign file in `dir`.
pub fn campaign_file(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{id}.toml"));
    std::fs::write(
        &path,
        format!(
            "id = \"{id}\"\nname = \"{id} edition\"\ntotal = 100\npartitions = 4\n\
             per_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 500\n"
        ),
    )
    .expect("campaign file");
    path
}
