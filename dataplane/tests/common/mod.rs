//! What the black-box tests share: a real `redis-server` started in a temp dir on a free
//! port, a real `seckill-dataplane serve` process, and a small HTTP client.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seckill_dataplane::campaign::{Action, CampaignSpec};
use seckill_dataplane::control;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Polls until `ok` holds, failing after `timeout`; returns how long it took.
pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < timeout,
            "timed out waiting for {what} ({timeout:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// Checks a campaign's ledger, failing the test when it does not hold.
pub fn ledger_holds(redis: &Redis, id: &str) -> seckill_dataplane::ledger::Ledger {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    let l = seckill_dataplane::ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
    l
}

/// A `redis-server` of the test's own, with its append-only file fsynced on every write,
/// so a SIGKILL loses nothing that was acknowledged.
pub struct Redis {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Redis {
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut r = Redis {
            port: free_port(),
            dir,
            child: None,
        };
        r.restart();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--enable-debug-command",
                "local",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (just setup)");
        self.child = Some(child);
        let url = self.url();
        wait_until("redis", Duration::from_secs(10), || {
            redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn con(&self) -> redis::Connection {
        control::connect(&self.url()).expect("connect to the test redis")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `seckill-dataplane serve` process.
pub struct Node {
    pub port: u16,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin_port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
}

pub const SECRET: &str = "test secret, long enough for HMAC";

impl Node {
    pub fn start(redis: &Redis, shards: usize) -> Node {
        Self::start_with(redis, shards, "")
    }

    /// Starts a node whose config file ends with `extra` TOML.
    pub fn start_with(redis: &Redis, shards: usize, extra: &str) -> Node {
        Self::launch(redis, shards, extra, true, None)
    }

    /// Starts a node that leaves the order streams to separate workers.
    pub fn start_without_worker(redis: &Redis, shards: usize) -> Node {
        Self::launch(redis, shards, "", false, None)
    }

    /// Starts a node whose logs (`--log-format FORMAT`, `RUST_LOG=FILTER`) go to a file
    /// that `log()` reads.
    pub fn start_logging(redis: &Redis, shards: usize, format: &str, filter: &str) -> Node {
        Self::launch(redis, shards, "", true, Some((format, filter)))
    }

    /// What the node has logged so far (nodes started with `start_logging`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dataplane.log")).unwrap_or_default()
    }

    fn launch(
        redis: &Redis,
        shards: usize,
        extra: &str,
        worker: bool,
        logs: Option<(&str, &str)>,
    ) -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let admin_port = free_port();
        std::fs::write(dir.path().join("secret"), SECRET).expect("write secret");
        let d = dir.path().display();
        let config = format!(
            "listen = \"127.0.0.1:{port}\"\nredis = \"{}\"\nshards = {shards}\ndemo_issuer = true\n\
             secret_file = \"{d}/secret\"\ncontent_dir = \"{d}/content\"\n{extra}\n\
             [worker]\nenabled = {worker}\ndb = \"{d}/orders.sqlite\"\nclaim_idle_ms = 1000\n\
             [limits]\nip_rate = 0\nuser_rate = 0\nauto_block_refusals = 0\n",
            redis.url(),
        );
        std::fs::create_dir_all(dir.path().join("content")).expect("content dir");
        std::fs::write(dir.path().join("dataplane.toml"), config).expect("write config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"));
        cmd.arg("serve")
            .arg("--config")
            .arg(dir.path().join("dataplane.toml"))
            .arg("--admin-listen")
            .arg(format!("127.0.0.1:{admin_port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        if let Some((format, filter)) = logs {
            let file = std::fs::File::create(dir.path().join("dataplane.log")).expect("log file");
            cmd.args(["--log-format", format])
                .env("RUST_LOG", filter)
                .stderr(file);
        }
        let child = cmd.spawn().expect("start seckill-dataplane");
        let node = Node {
            port,
            admin_port,
            dir,
            child: Some(child),
        };
        let url = node.url("/api/time");
        wait_until("the data plane", Duration::from_secs(20), || {
            ureq::get(&url).call().is_ok()
        });
        node
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

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        child.wait().expect("wait")
    }

    pub fn client(&self) -> Client {
        Client {
            base: self.url(""),
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(10))
                .max_idle_connections_per_host(1)
                .build(),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A `seckill-dataplane worker` process with its own SQLite file.
pub struct WorkerProc {
    pub db: PathBuf,
    _dir: tempfile::TempDir,
    child: Option<Child>,
}

impl WorkerProc {
    pub fn start(redis: &Redis, name: &str) -> WorkerProc {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display();
        std::fs::write(dir.path().join("secret"), SECRET).expect("write secret");
        let config = format!(
            "redis = \"{}\"\nsecret_file = \"{d}/secret\"\n[worker]\nname = \"{name}\"\n\
             db = \"{d}/{name}.sqlite\"\nclaim_idle_ms = 1000\nbatch = 64\n",
            redis.url()
        );
        std::fs::write(dir.path().join("worker.toml"), config).expect("write config");
        let child = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
            .arg("worker")
            .arg("--config")
            .arg(dir.path().join("worker.toml"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start worker");
        WorkerProc {
            db: dir.path().join(format!("{name}.sqlite")),
            _dir: dir,
            child: Some(child),
        }
    }

    /// SIGKILL: no chance to finish anything.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls reconciliation until the pipeline has drained and the ledger holds.
pub fn reconciled(
    redis: &Redis,
    campaign: &str,
    stores: &[PathBuf],
) -> seckill_dataplane::reconcile::Report {
    let mut con = redis.con();
    let start = Instant::now();
    loop {
        let r =
            seckill_dataplane::reconcile::reconcile(&mut con, campaign, stores).expect("reconcile");
        if (r.drained() && r.holds() && r.missing.is_empty())
            || start.elapsed() > Duration::from_secs(20)
        {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An HTTP client on one keep-alive connection.
pub struct Client {
    base: String,
    pub agent: ureq::Agent,
}

/// Status and JSON body of an answer.
pub type Answer = (u16, serde_json::Value);

fn answer(res: Result<ureq::Response, ureq::Error>) -> Answer {
    match res {
        Ok(r) => (r.status(), r.into_json().unwrap_or_default()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or_default()),
        Err(e) => panic!("transport error: {e}"),
    }
}

impl Client {
    pub fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut req = self.agent.get(&format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        answer(req.call())
    }

    pub fn post(&self, path: &str, token: Option<&str>, body: &str) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.base))
            .set("Content-Type", "application/json");
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        answer(req.send_string(body))
    }

    pub fn token(&self, user: &str) -> String {
        let (code, v) = self.post(
            "/api/session",
            None,
            &serde_json::json!({ "user_id": user }).to_string(),
        );
        assert_eq!(code, 200, "{v}");
        v["token"].as_str().expect("token").to_string()
    }

    pub fn pay(&self, order_id: &str, token: &str) -> Answer {
        self.post(&format!("/api/orders/{order_id}/pay"), Some(token), "")
    }

    pub fn purchase(&self, campaign: &str, token: &str, idem: Option<&str>) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}/api/campaigns/{campaign}/purchase", self.base))
            .set("Authorization", &format!("Bearer {token}"));
        if let Some(k) = idem {
            req = req.set("Idempotency-Key", k);
        }
        answer(req.send_string("{\"quantity\": 1}"))
    }
}

pub fn spec(id: &str, total: u64, partitions: u32, limit: u32) -> CampaignSpec {
    CampaignSpec {
        id: id.into(),
        name: format!("test campaign {id}"),
        total,
        partitions,
        per_user_limit: limit,
        hold_ttl_s: 300,
        price_cents: 500,
        starts_at: None,
        ends_at: None,
        codes_file: None,
        content_file: None,
        require_ticket: false,
        ticket_factor: 3,
    }
}

/// Creates, arms and starts a campaign, and waits until the node sells it.
pub fn open_sale(redis: &Redis, node: &Node, spec: CampaignSpec) {
    let mut con = redis.con();
    let id = spec.id.clone();
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, &id).expect("arm");
    control::act(&mut con, &id, Action::Start).expect("start");
    // Every shard learns of it on its own; fresh connections land on different shards.
    wait_until(
        "every shard to see the sale",
        Duration::from_secs(5),
        || {
            (0..8).all(|_| {
                node.client().get(&format!("/api/campaigns/{id}"), None).1["state"] == "live"
            })
        },
    );
}
