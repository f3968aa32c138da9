//! A stack of its own for each test: a redis-server with the managed users on a free
//! port in a temporary directory, and data plane nodes with their order workers; and a
//! headless browser, for the pages the simulator writes.

#![allow(dead_code)]

pub mod webdriver;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../../dataplane/tests/common/ports.rs"]
mod ports;
pub use ports::free_port;

pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The data plane binary next to this test's own: `cargo test --workspace` builds it
/// for the data plane's own tests.
pub fn dataplane_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("seckill-dataplane");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p seckill-dataplane` first (just test does)",
        bin.display()
    );
    bin
}

/// Whether `url` answers a GET below 400 (no proxy from the environment).
pub fn answers(url: &str) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    agent
        .get(url)
        .call()
        .is_ok_and(|r| r.status().as_u16() < 400)
}

pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Redis and the nodes, stopped when dropped: the nodes first, then Redis, then the
/// directory goes (fields drop in order).
pub struct Stack {
    nodes: Vec<Killed>,
    _redis: Killed,
    pub dir: tempfile::TempDir,
    /// The operators' URL (its password in `users/ops.password`).
    pub redis: String,
    /// The nodes' URLs, separated by commas.
    pub target: String,
}

impl Stack {
    /// Redis and one node per name, each with 2 shards, its order worker and store
    /// (`orders-{name}.sqlite`), per-IP limits of 50/s (burst 100) and the data plane
    /// secret in `secret`.
    pub fn start(names: &[&str]) -> Stack {
        let dir = tempfile::tempdir().expect("tempdir");
        let rport = free_port();
        let users = dir.path().join("users");
        let made = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/redis-users.sh"
        ))
        .arg(&users)
        .status()
        .expect("scripts/redis-users.sh runs");
        assert!(made.success());
        let redis_server = Killed(
            Command::new("redis-server")
                .args([
                    "--port",
                    &rport.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--aclfile")
                .arg(users.join("users.acl"))
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server"),
        );
        // The simulator talks to the control plane as the operators' user, the nodes as
        // theirs; each password stays in its file.
        let redis = format!("redis://seckill-ops@127.0.0.1:{rport}");
        let ops_password = users.join("ops.password");
        wait_for("redis", || {
            seckill_core::secrets::redis_url(&redis, Some(&ops_password))
                .is_ok_and(|url| seckill_core::control::connect(&url).is_ok())
        });
        seckill_core::secrets::create_private(
            &dir.path().join("secret"),
            b"simulator test secret, long enough",
        )
        .expect("secret");
        // Each source address talks to one node.
        let d = dir.path().display();
        std::fs::create_dir_all(dir.path().join("content")).expect("content dir");
        std::fs::write(dir.path().join("content/album.zip"), vec![7u8; 10_000]).expect("content");
        let mut nodes = Vec::new();
        let mut targets = Vec::new();
        for name in names {
            let port = free_port();
            let config = dir.path().join(format!("dp-{name}.toml"));
            std::fs::write(
                &config,
                format!(
                    "listen = \"127.0.0.1:{port}\"\nredis = \"redis://seckill-node@127.0.0.1:{rport}\"\n\
                     redis_password_file = \"{d}/users/node.password\"\nshards = 2\nsecret_file = \"{d}/secret\"\n\
                     content_dir = \"{d}/content\"\n\
                     [worker]\nname = \"{name}\"\ndb = \"{d}/orders-{name}.sqlite\"\n[limits]\nip_rate = 50\nip_burst = 100\n\
                     [tickets]\ndifficulty = 8\n[admin]\nlisten = \"\"\n"
                ),
            )
            .expect("config");
            nodes.push(Killed(
                Command::new(dataplane_bin())
                    .args(["serve", "--config"])
                    .arg(&config)
                    .env("RUST_LOG", "warn")
                    .spawn()
                    .expect("data plane"),
            ));
            let target = format!("http://127.0.0.1:{port}");
            wait_for("the data plane", || answers(&format!("{target}/api/time")));
            targets.push(target);
        }
        Stack {
            nodes,
            _redis: redis_server,
            dir,
            redis,
            target: targets.join(","),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
