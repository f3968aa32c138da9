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

/// Whether the server answering on `port` within 10 s is `child`, not another process
/// that holds the port.
fn serves(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = format!("redis://127.0.0.1:{port}");
    let ours = format!("process_id:{}\r", child.id());
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let info = seckill_dataplane::control::connect(&url)
            .and_then(|mut con| Ok(redis::cmd("INFO").arg("server").query::<String>(&mut con)?));
        if let Ok(info) = info {
            return info.contains(&ours);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Redis {
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().expect("tempdir");
        // A free port can be taken again before redis-server binds it: then ours exits,
        // and another try gets another port.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let mut child = spawn(port, dir.path());
            if serves(port, &mut child) {
                return Redis {
                    port,
                    child,
                    _dir: dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start on a free port in 5 tries");
    }

    fn wait_up(&mut self) {
        assert!(
            serves(self.port, &mut self.child),
            "redis-server did not come back on port {}",
            self.port
        );
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
