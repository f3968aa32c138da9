//! What the black-box tests share: a real `redis-server` started in a temp dir on a free
//! port, a real `seckill-dataplane serve` process, and a small HTTP client.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seckill_core::campaign::{Action, CampaignSpec};
use seckill_core::control;

mod ports;
pub use ports::free_port;

/// The tests' HTTP agent: every answer comes back as a response whatever its status (the
/// tests read the JSON of a 4xx), and no proxy is taken from the environment.
pub fn agent() -> ureq::Agent {
    agent_with(|c| c)
}

/// [`agent`] with more settings (timeouts, idle connections).
pub fn agent_with(
    f: impl FnOnce(
        ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
    ) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::Agent {
    f(ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None))
    .build()
    .into()
}

/// The text of a GET that must answer 200 (metrics, with the admin token when given).
pub fn get_text(url: &str, token: Option<&str>) -> String {
    let mut req = agent().get(url);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let r = req.call().expect(url);
    assert_eq!(r.status(), 200, "{url}");
    body_text(r)
}

/// Whether `url` answers a GET below 400.
pub fn answers(url: &str) -> bool {
    agent()
        .get(url)
        .call()
        .is_ok_and(|r| r.status().as_u16() < 400)
}

/// The status of an answer, its body read to the end first: then the connection goes back
/// to the agent for its next request (an answer dropped unread closes it).
pub fn status_of(mut r: ureq::http::Response<ureq::Body>) -> u16 {
    let _ = std::io::copy(&mut r.body_mut().as_reader(), &mut std::io::sink());
    r.status().as_u16()
}

/// A body as text, empty when it cannot be read.
pub fn body_text(mut r: ureq::http::Response<ureq::Body>) -> String {
    r.body_mut().read_to_string().unwrap_or_default()
}

/// A body as JSON, `Null` when it is none.
pub fn body_json(mut r: ureq::http::Response<ureq::Body>) -> serde_json::Value {
    r.body_mut().read_json().unwrap_or_default()
}

/// A header of an answer, as text.
pub fn header<'a>(r: &'a ureq::http::Response<ureq::Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
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

/// Units on a campaign's shelves, from its counters alone (one transaction): what a test
/// can wait on while scripts still move units, where the whole ledger, read a command at a
/// time, could catch a release half-read.
pub fn remaining(redis: &impl RedisUrl, id: &str) -> i64 {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    control::partitions(&mut con, &c)
        .expect("counters")
        .iter()
        .map(|p| p.stock)
        .sum()
}

/// Sets limits in the control plane (`name`, value), as `seckill-dataplane limits set` does;
/// nodes read them within a second.
pub fn limits(redis: &impl RedisUrl, pairs: &[(&str, &str)]) {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    control::set_limits(&mut redis.con(), &pairs).expect("set limits");
}

/// Checks a campaign's ledger, failing the test when it does not hold.
pub fn ledger_holds(redis: &impl RedisUrl, id: &str) -> seckill_core::ledger::Ledger {
    let mut con = redis.con();
    let c = control::get(&mut con, id).expect("campaign");
    let l = seckill_core::ledger::check(&mut con, &c).expect("ledger");
    assert!(l.holds(), "{l}");
    l
}

/// Creates the managed Redis's ACL users in `dir` as `just redis` does
/// (`scripts/redis-users.sh`): passwords in files of mode 0600, and `users.acl`.
pub fn make_users(dir: &Path) {
    let status = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/redis-users.sh"
    ))
    .arg(dir)
    .status()
    .expect("scripts/redis-users.sh runs");
    assert!(status.success(), "the Redis users were made");
}

/// `redis://USER:PASSWORD@127.0.0.1:PORT`, the password read from `users`.
pub fn url_as(users: &Path, user: &str, port: u16) -> String {
    let who = user.trim_start_matches("seckill-");
    let pw = seckill_core::secrets::read_password(&users.join(format!("{who}.password")))
        .expect("password file");
    seckill_core::secrets::with_password(&format!("redis://{user}@127.0.0.1:{port}"), &pw)
}

/// A `redis-server` of the test's own, with its append-only file fsynced on every write,
/// so a SIGKILL loses nothing that was acknowledged, and the ACL users of the managed
/// Redis: nodes log in as `seckill-node`, the tests' own control-plane calls as
/// `seckill-ops`, what only maintenance may do (`DEBUG`, `SCRIPT FLUSH`) as
/// `seckill-admin`; the default user is off.
pub struct Redis {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Redis {
    pub fn start() -> Redis {
        let mut r = Redis {
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            child: None,
        };
        make_users(&r.dir.path().join("users"));
        // A free port can be taken again before redis-server binds it: then ours exits,
        // and another try gets another port.
        for _ in 0..5 {
            if r.launch() {
                return r;
            }
            r.kill();
            r.port = free_port();
        }
        panic!("redis-server did not start on a free port in 5 tries");
    }

    pub fn url(&self) -> String {
        url_as(&self.users(), "seckill-ops", self.port)
    }

    pub fn users(&self) -> PathBuf {
        self.dir.path().join("users")
    }

    /// Starts the server again on its port, with its data.
    pub fn restart(&mut self) {
        assert!(
            self.launch(),
            "redis-server did not come back on port {}",
            self.port
        );
    }

    /// Whether the server that answers on the port within 10 s is the one started here,
    /// not another process that holds the port.
    fn launch(&mut self) -> bool {
        let mut child = Command::new("redis-server")
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
            .arg("--aclfile")
            .arg(self.users().join("users.acl"))
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (just setup)");
        let url = url_as(&self.users(), "seckill-admin", self.port);
        let ours = format!("process_id:{}\r", child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut served = false;
        while Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            let info = redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("INFO").arg("server").query::<String>(&mut c));
            if let Ok(info) = info {
                served = info.contains(&ours);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
        served
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn con(&self) -> seckill_core::connection::Connection {
        control::connect(&self.url()).expect("connect to the test redis")
    }

    /// The maintenance user's URL, for what no program may do (`DEBUG`, `SCRIPT FLUSH`).
    pub fn admin_url(&self) -> String {
        url_as(&self.users(), "seckill-admin", self.port)
    }

    pub fn admin(&self) -> seckill_core::connection::Connection {
        control::connect(&self.admin_url()).expect("admin")
    }
}

/// What the helpers need of a Redis: where it is and its users. One server or a cluster.
pub trait RedisUrl {
    /// The operators' URL, password in it: what the tests' own control-plane calls use.
    fn url(&self) -> String;
    /// Where the users' password files are.
    fn users(&self) -> PathBuf;
    /// The port of the first seed.
    fn seed_port(&self) -> u16;
    fn con(&self) -> seckill_core::connection::Connection {
        control::connect(&self.url()).expect("connect to the test redis")
    }
    /// A node's or worker's configuration lines: the nodes' user in the URL, its
    /// password in its file, as a deployment would have them.
    fn node_config(&self) -> String {
        format!(
            "redis = \"redis://seckill-node@127.0.0.1:{}\"\nredis_password_file = \"{}\"\n",
            self.seed_port(),
            self.users().join("node.password").display()
        )
    }
}

impl RedisUrl for Redis {
    fn url(&self) -> String {
        Redis::url(self)
    }
    fn users(&self) -> PathBuf {
        Redis::users(self)
    }
    fn seed_port(&self) -> u16 {
        self.port
    }
}

/// A Redis Cluster of the test's own: 3 masters and 3 replicas started by
/// `scripts/cluster.sh` on free ports in a temp dir, each node with its append-only file
/// fsynced on every write.
pub struct Cluster {
    pub base: u16,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        // Six ports in a row, and each one's cluster bus port (+10000), all free.
        let base = (0..200)
            .map(|_| 20_000 + rand_port_offset())
            .find(|b| {
                (0..6).all(|i| {
                    TcpListener::bind(("127.0.0.1", b + i)).is_ok()
                        && TcpListener::bind(("127.0.0.1", b + i + 10_000)).is_ok()
                })
            })
            .expect("six free ports in a row");
        let status = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/cluster.sh"
        ))
        .arg("start")
        .arg(base.to_string())
        .arg(dir.path())
        .stdout(Stdio::null())
        .status()
        .expect("scripts/cluster.sh runs");
        assert!(status.success(), "the cluster started");
        Cluster { base, dir }
    }

    /// The ports of the masters serving slots now, from `CLUSTER SLOTS`.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = self.slots().into_iter().map(|(_, _, port)| port).collect();
        masters.sort_unstable();
        masters.dedup();
        masters
    }

    /// (first slot, last slot, master port) of every slot range.
    pub fn slots(&self) -> Vec<(u16, u16, u16)> {
        let ports: Vec<u16> = (self.base..self.base + 6).collect();
        for p in ports {
            let Ok(mut con) =
                redis::Client::open(url_as(&RedisUrl::users(self), "seckill-admin", p))
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            else {
                continue;
            };
            let Ok(ranges) = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Vec<Vec<redis::Value>>>(&mut con)
            else {
                continue;
            };
            let int = |v: &redis::Value| match v {
                redis::Value::Int(i) => *i as u16,
                _ => 0,
            };
            return ranges
                .iter()
                .map(|r| {
                    let port = match &r[2] {
                        redis::Value::Array(m) => int(&m[1]),
                        _ => 0,
                    };
                    (int(&r[0]), int(&r[1]), port)
                })
                .collect();
        }
        panic!("no cluster node answers");
    }

    /// SIGKILL of one node: nothing it has not written to its append-only file survives.
    pub fn kill(&self, port: u16) {
        let pid = std::fs::read_to_string(self.dir.path().join(format!("{port}/redis.pid")))
            .expect("pid file");
        let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        wait_until("the node to die", Duration::from_secs(5), || {
            TcpListener::bind(("127.0.0.1", port)).is_ok()
        });
    }

    /// Starts a killed node again from its files; it rejoins the cluster.
    pub fn restart(&self, port: u16) {
        let status = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/cluster.sh"
        ))
        .arg("node")
        .arg(port.to_string())
        .arg(self.dir.path())
        .stdout(Stdio::null())
        .status()
        .expect("scripts/cluster.sh runs");
        assert!(status.success(), "node {port} restarted");
    }

    /// Moves `slots` slots from the master on `from` to the master on `to` with
    /// `redis-cli --cluster reshard`, key by key, while the cluster serves.
    pub fn reshard(&self, from: u16, to: u16, slots: u32) {
        let id = |port: u16| -> String {
            let mut con = self.admin_on(port);
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query(&mut con)
                .expect("node id")
        };
        let admin = std::fs::read_to_string(RedisUrl::users(self).join("admin.password"))
            .expect("admin password");
        let out = Command::new("redis-cli")
            .env("REDISCLI_AUTH", admin.trim())
            .args(["--user", "seckill-admin"])
            .args(["--cluster", "reshard", &format!("127.0.0.1:{}", self.base)])
            .args(["--cluster-from", &id(from), "--cluster-to", &id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "reshard: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The port of the master serving `key`.
    pub fn master_of(&self, key: &str) -> u16 {
        let mut con = redis::Client::open(RedisUrl::url(self))
            .and_then(|c| c.get_connection())
            .expect("a node");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .expect("keyslot");
        self.slots()
            .into_iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .map(|(_, _, p)| p)
            .expect("slot served")
    }
}

fn rand_port_offset() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() % 9_000) as u16
}

impl RedisUrl for Cluster {
    fn url(&self) -> String {
        url_as(&self.users(), "seckill-ops", self.base)
    }
    fn users(&self) -> PathBuf {
        self.dir.path().join("users")
    }
    fn seed_port(&self) -> u16 {
        self.base
    }
}

impl Cluster {
    /// A connection to one node as the maintenance user.
    pub fn admin_on(&self, port: u16) -> redis::Connection {
        redis::Client::open(url_as(&RedisUrl::users(self), "seckill-admin", port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .expect("admin connection")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/cluster.sh"
        ))
        .arg("stop")
        .arg(self.base.to_string())
        .arg(self.dir.path())
        .stdout(Stdio::null())
        .status();
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

/// `dir/secret`, readable by its owner only, as a node wants it.
pub fn write_secret(dir: &Path) {
    seckill_core::secrets::create_private(&dir.join("secret"), SECRET.as_bytes())
        .expect("write secret");
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

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
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
        let config = format!(
            "listen = \"127.0.0.1:{port}\"\n{}shards = {shards}\ndemo_issuer = true\n\
             secret_file = \"{d}/secret\"\ncontent_dir = \"{d}/content\"\n{extra}\n\
             [worker]\nenabled = {worker}\nname = \"w{port}\"\ndb = \"{d}/orders.sqlite\"\nclaim_idle_ms = 1000\n\
             [limits]\nip_rate = 0\nuser_rate = 0\nauto_block_refusals = 0\n",
            redis.node_config(),
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
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the node again, with its configuration and store, on its ports; returns
    /// as soon as the process runs, without waiting for it to answer.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the node still runs");
        let child = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
            .arg("serve")
            .arg("--config")
            .arg(self.dir.path().join("dataplane.toml"))
            .arg("--admin-listen")
            .arg(format!("127.0.0.1:{}", self.admin_port))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start seckill-dataplane");
        self.child = Some(child);
    }

    /// Sends SIGTERM: a graceful stop begins.
    pub fn sigterm(&self) {
        let child = self.child.as_ref().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.sigterm();
        self.child.take().expect("running").wait().expect("wait")
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
        Client {
            base: self.url(""),
            agent: agent_with(|c| {
                c.timeout_global(Some(Duration::from_secs(10)))
                    .max_idle_connections_per_host(1)
            }),
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
        let child = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
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
    redis: &impl RedisUrl,
    campaign: &str,
    stores: &[PathBuf],
) -> seckill_orders::reconcile::Report {
    let mut con = redis.con();
    let start = Instant::now();
    loop {
        let r =
            seckill_orders::reconcile::reconcile(&mut con, campaign, stores).expect("reconcile");
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

fn answer(res: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    match res {
        Ok(r) => (r.status().as_u16(), body_json(r)),
        Err(e) => panic!("transport error: {e}"),
    }
}

impl Client {
    /// The node's URL, for requests the helpers here do not make.
    pub fn base(&self) -> String {
        self.base.clone()
    }

    pub fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut req = self.agent.get(&format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        answer(req.call())
    }

    pub fn post(&self, path: &str, token: Option<&str>, body: &str) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Content-Type", "application/json");
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        answer(req.send(body))
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
            .header("Authorization", &format!("Bearer {token}"));
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        answer(req.send("{\"quantity\": 1}"))
    }
}

/// Asks for a challenge, solves it, and trades it for a ticket; from the start again, as
/// a client told to retry would, while the node answers 503 `unavailable` (its Redis did
/// not answer in time: with `appendfsync always` on a busy disk, an fsync can hold it
/// past the node's command timeout).
pub fn earn_ticket(c: &Client, campaign: &str, token: &str) -> (u16, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = earn_ticket_once(c, campaign, token);
        if code != 503 || body["error"] != "unavailable" || Instant::now() > deadline {
            return (code, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn earn_ticket_once(c: &Client, campaign: &str, token: &str) -> (u16, serde_json::Value) {
    let (code, ch) = c.post(
        &format!("/api/campaigns/{campaign}/challenge"),
        Some(token),
        "",
    );
    if code == 503 {
        return (code, ch);
    }
    assert_eq!(code, 200, "{ch}");
    let nonce = seckill_dataplane::guard::pow::solve(
        ch["prefix"].as_str().expect("prefix"),
        ch["difficulty"].as_u64().expect("difficulty") as u32,
    );
    let body = serde_json::json!({ "challenge_id": ch["challenge_id"], "nonce": nonce });
    c.post(
        &format!("/api/campaigns/{campaign}/ticket"),
        Some(token),
        &body.to_string(),
    )
}

/// A purchase of one unit with `ticket`.
pub fn buy_with(
    c: &Client,
    campaign: &str,
    token: &str,
    ticket: Option<&str>,
) -> (u16, serde_json::Value) {
    let body = serde_json::json!({ "quantity": 1, "ticket": ticket });
    c.post(
        &format!("/api/campaigns/{campaign}/purchase"),
        Some(token),
        &body.to_string(),
    )
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
        queue: None,
    }
}

/// A campaign of one unit per shopper with a waiting room.
pub fn queued(id: &str, total: u64, admit_per_s: u32, pass_ttl_s: u64) -> CampaignSpec {
    CampaignSpec {
        queue: Some(seckill_core::campaign::QueueSpec {
            admit_per_s,
            pass_ttl_s,
        }),
        ..spec(id, total, 4, 1)
    }
}

/// Creates and arms a campaign (a waiting room opens), and waits until the node shows it.
pub fn arm(redis: &impl RedisUrl, node: &Node, spec: CampaignSpec) {
    let mut con = redis.con();
    let id = spec.id.clone();
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, &id).expect("arm");
    wait_state(node, &id, "armed");
}

/// Creates, arms and starts a campaign, and waits until the node sells it.
pub fn open_sale(redis: &impl RedisUrl, node: &Node, spec: CampaignSpec) {
    let mut con = redis.con();
    let id = spec.id.clone();
    control::create(&mut con, spec).expect("create");
    control::arm(&mut con, &id).expect("arm");
    control::act(&mut con, &id, Action::Start).expect("start");
    wait_state(node, &id, "live");
}

/// Waits until every shard of `node` shows campaign `id` in `state`. Each shard learns
/// of a change on its own, at the latest by its next control-plane poll (`control.poll_ms`,
/// 250 ms); fresh connections land on any shard. Once 16 fresh connections agree, one
/// more poll interval covers a shard none of them reached.
pub fn wait_state(node: &Node, id: &str, state: &str) {
    wait_until(
        &format!("every shard to see {id} {state}"),
        Duration::from_secs(5),
        || {
            (0..16).all(|_| {
                node.client().get(&format!("/api/campaigns/{id}"), None).1["state"] == state
            })
        },
    );
    std::thread::sleep(Duration::from_millis(300));
}
