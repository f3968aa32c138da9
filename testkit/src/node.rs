//! Data plane processes: a node (`seckill-dataplane serve`) and an order worker
//! (`seckill-dataplane worker`), each with its configuration in a temp dir of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::http::{agent, agent_with, answer, answers, Answer, Client};
use crate::ports::free_port;
use crate::process::{dataplane_bin, Process};
use crate::tokens::{write_jwks, write_secret};
use crate::users::RedisUrl;
use crate::wait::wait_until;

/// A `seckill-dataplane serve` process.
pub struct Node {
    // First, so that it goes before its directory does (fields drop in order).
    process: Process,
    pub port: u16,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin_port: u16,
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn start(redis: &impl RedisUrl, shards: usize) -> Node {
        Self::start_with(redis, shards, "")
    }

    /// Starts a node whose config file ends with `extra` TOML.
    pub fn start_with(redis: &impl RedisUrl, shards: usize, extra: &str) -> Node {
        Self::launch(redis, shards, extra, true, None)
    }

    /// Starts a node that leaves the order streams to separate workers.
    pub fn start_without_worker(redis: &impl RedisUrl, shards: usize) -> Node {
        Self::launch(redis, shards, "", false, None)
    }

    /// Starts a node whose logs (`--log-format FORMAT`, `RUST_LOG=FILTER`) go to a file
    /// that `log()` reads.
    pub fn start_logging(redis: &impl RedisUrl, shards: usize, format: &str, filter: &str) -> Node {
        Self::launch(redis, shards, "", true, Some((format, filter)))
    }

    /// [`Node::start_logging`], with `extra` TOML at the end of its config file.
    pub fn start_logging_with(
        redis: &impl RedisUrl,
        shards: usize,
        extra: &str,
        format: &str,
        filter: &str,
    ) -> Node {
        Self::launch(redis, shards, extra, true, Some((format, filter)))
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// What the node has logged so far (nodes started with `start_logging`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dataplane.log")).unwrap_or_default()
    }

    fn launch(
        redis: &impl RedisUrl,
        shards: usize,
        extra: &str,
        worker: bool,
        logs: Option<(&str, &str)>,
    ) -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let admin_port = free_port();
        write_secret(dir.path());
        let d = dir.path().display();
        // The nodes take the test shop's tokens (`shopper_token`), and the demo issuer's
        // but for a node behind a proxy, which may not run it.
        let demo_issuer = !extra.contains("trusted_proxies");
        let identity = if extra.contains("[identity]") {
            String::new()
        } else {
            write_jwks(dir.path())
        };
        // And the test provider's webhooks (`sign_webhook`), and the demo provider's
        // where the demo issuer serves.
        let payments = if extra.contains("[payments]") {
            String::new()
        } else {
            crate::tokens::write_webhook_secret(dir.path(), demo_issuer)
        };
        let config = format!(
            "listen = \"127.0.0.1:{port}\"\n{}shards = {shards}\ndemo_issuer = {demo_issuer}\n\
             secret_file = \"{d}/secret\"\ncontent_dir = \"{d}/content\"\n{extra}\n{identity}{payments}\
             [worker]\nenabled = {worker}\nname = \"w{port}\"\ndb = \"{d}/orders.sqlite\"\nclaim_idle_ms = 1000\n\
             [limits]\nip_rate = 0\nuser_rate = 0\nauto_block_refusals = 0\n",
            redis.node_config(),
        );
        std::fs::create_dir_all(dir.path().join("content")).expect("content dir");
        std::fs::write(dir.path().join("dataplane.toml"), config).expect("write config");
        let mut cmd = serve(dir.path(), admin_port);
        if let Some((format, filter)) = logs {
            let file = std::fs::File::create(dir.path().join("dataplane.log")).expect("log file");
            cmd.args(["--log-format", format])
                .env("RUST_LOG", filter)
                .stderr(file);
        }
        let node = Node {
            port,
            admin_port,
            dir,
            process: Process::new(cmd.spawn().expect("start seckill-dataplane")),
        };
        let url = node.url("/api/time");
        wait_until("the data plane", Duration::from_secs(20), || answers(&url));
        node.wait_synced();
        node
    }

    /// Waits, 3 s at most, until the shards have read the campaigns (fresh connections
    /// land on any shard; 16 in a row that no longer hear `starting` will do), as a load
    /// balancer waits for a node to be ready. A node whose Redis is down stays starting:
    /// then this returns all the same.
    pub fn wait_synced(&self) {
        let url = self.url("/api/campaigns");
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            let synced = (0..16).all(|_| agent().get(&url).call().is_ok_and(|r| r.status() != 503));
            if synced {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The node's own order store.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("orders.sqlite")
    }

    pub fn content_dir(&self) -> PathBuf {
        self.dir.path().join("content")
    }

    /// SIGKILL: nothing in flight is finished.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the node again, with its configuration and store, on its ports; returns
    /// as soon as the process runs, without waiting for it to answer.
    pub fn restart(&mut self) {
        assert!(!self.process.running(), "the node still runs");
        let child = serve(self.dir.path(), self.admin_port)
            .spawn()
            .expect("start seckill-dataplane");
        self.process = Process::new(child);
    }

    /// Sends SIGTERM: a graceful stop begins.
    pub fn sigterm(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.sigterm();
        self.process.wait()
    }

    /// `/readyz` on the admin listener: status and body; status 0 while nothing answers.
    pub fn readyz(&self) -> Answer {
        match agent()
            .get(&format!("http://127.0.0.1:{}/readyz", self.admin_port))
            .config()
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .call()
        {
            Err(_) => (0, serde_json::Value::Null),
            r => answer(r),
        }
    }

    pub fn client(&self) -> Client {
        Client::new(
            self.url(""),
            agent_with(|c| {
                c.timeout_global(Some(Duration::from_secs(10)))
                    .max_idle_connections_per_host(1)
            }),
        )
    }
}

/// `seckill-dataplane serve` with the configuration in `dir`, its admin listener on
/// `admin_port`, logging warnings.
fn serve(dir: &Path, admin_port: u16) -> Command {
    let mut cmd = Command::new(dataplane_bin());
    cmd.arg("serve")
        .arg("--config")
        .arg(dir.join("dataplane.toml"))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{admin_port}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null());
    cmd
}

/// A `seckill-dataplane worker` process with its own SQLite file.
pub struct WorkerProc {
    process: Process,
    pub db: PathBuf,
    _dir: tempfile::TempDir,
}

impl WorkerProc {
    pub fn start(redis: &impl RedisUrl, name: &str) -> WorkerProc {
        Self::start_with(redis, name, "")
    }

    /// Starts a worker whose config file ends with `extra` TOML.
    pub fn start_with(redis: &impl RedisUrl, name: &str, extra: &str) -> WorkerProc {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display();
        write_secret(dir.path());
        let config = format!(
            "{}secret_file = \"{d}/secret\"\n[worker]\nname = \"{name}\"\n\
             db = \"{d}/{name}.sqlite\"\nclaim_idle_ms = 1000\nbatch = 64\n{extra}\n",
            redis.node_config()
        );
        std::fs::write(dir.path().join("worker.toml"), config).expect("write config");
        let child = Command::new(dataplane_bin())
            .arg("worker")
            .arg("--config")
            .arg(dir.path().join("worker.toml"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start worker");
        let db = dir.path().join(format!("{name}.sqlite"));
        // Up once its store is made, which it does before it reads any event.
        wait_until("the worker's order store", Duration::from_secs(20), || {
            seckill_orders::OrderDb::open_existing(&db)
                .and_then(|s| s.is_made())
                .unwrap_or(false)
        });
        WorkerProc {
            db,
            _dir: dir,
            process: Process::new(child),
        }
    }

    /// SIGKILL: no chance to finish anything.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}
