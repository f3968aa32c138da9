//! A redis-server of the test's own, on a free port in a temp dir, with the managed
//! Redis's ACL users (`scripts/redis-users.sh`).

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

/// `redis://USER:PASSWORD@127.0.0.1:PORT`, the password read from `dir/users`.
fn url_as(dir: &std::path::Path, user: &str, port: u16) -> String {
    let who = user.trim_start_matches("seckill-");
    let pw =
        seckill_core::secrets::read_password(&dir.join("users").join(format!("{who}.password")))
            .expect("password file");
    seckill_core::secrets::with_password(&format!("redis://{user}@127.0.0.1:{port}"), &pw)
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
        .arg("--aclfile")
        .arg(dir.join("users/users.acl"))
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (install it: apt-get install redis-server)")
}

/// Whether the server answering on `port` within 10 s is `child`, not another process
/// that holds the port.
fn serves(port: u16, dir: &std::path::Path, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = url_as(dir, "seckill-admin", port);
    let ours = format!("process_id:{}\r", child.id());
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let info = seckill_core::control::connect(&url)
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
        let status = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/redis-users.sh"
        ))
        .arg(dir.path().join("users"))
        .status()
        .expect("scripts/redis-users.sh runs");
        assert!(status.success(), "the Redis users were made");
        // A free port can be taken again before redis-server binds it: then ours exits,
        // and another try gets another port.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let mut child = spawn(port, dir.path());
            if serves(port, dir.path(), &mut child) {
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
            serves(self.port, self._dir.path(), &mut self.child),
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

    /// The operators' URL, password in it.
    pub fn url(&self) -> String {
        url_as(self._dir.path(), "seckill-ops", self.port)
    }

    /// The operators' password file.
    pub fn ops_password_file(&self) -> std::path::PathBuf {
        self._dir.path().join("users/ops.password")
    }

    pub fn con(&self) -> seckill_core::connection::Connection {
        seckill_core::control::connect(&self.url()).expect("connect")
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
