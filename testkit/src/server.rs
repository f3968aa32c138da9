//! One `redis-server` of the test's own, with the managed Redis's users.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seckill_core::control;

use crate::ports::free_port;
use crate::users::{make_users, url_as, RedisUrl};

/// A `redis-server` on a free port in a temp dir, with the ACL users of the managed
/// Redis: nodes log in as `seckill-node`, the tests' own control-plane calls as
/// `seckill-ops`, what only maintenance may do (`DEBUG`, `SCRIPT FLUSH`) as
/// `seckill-admin`; the default user is off.
pub struct Redis {
    pub port: u16,
    dir: tempfile::TempDir,
    durable: bool,
    child: Option<Child>,
}

impl Redis {
    /// A server with its append-only file fsynced on every write, so a SIGKILL loses
    /// nothing that was acknowledged.
    pub fn start() -> Redis {
        Self::start_with(true)
    }

    /// A server that writes nothing to disk: for load that needs no restart.
    pub fn start_in_memory() -> Redis {
        Self::start_with(false)
    }

    fn start_with(durable: bool) -> Redis {
        let mut r = Redis {
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            durable,
            child: None,
        };
        make_users(&r.users());
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

    /// The operators' URL, password in it.
    pub fn url(&self) -> String {
        url_as(&self.users(), "seckill-ops", self.port)
    }

    /// The server's directory: its data, and its users in `users/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn users(&self) -> PathBuf {
        self.dir.path().join("users")
    }

    /// The operators' password file.
    pub fn ops_password_file(&self) -> PathBuf {
        self.users().join("ops.password")
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
        let appendonly = if self.durable { "yes" } else { "no" };
        let mut child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", appendonly])
            .args(["--appendfsync", "always", "--enable-debug-command", "local"])
            .arg("--aclfile")
            .arg(self.users().join("users.acl"))
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (just setup)");
        let served = serves(&self.admin_url(), &mut child);
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

/// Whether the server answering at `url` within 10 s is `child`.
fn serves(url: &str, child: &mut Child) -> bool {
    let ours = format!("process_id:{}\r", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let info = redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .and_then(|mut c| redis::cmd("INFO").arg("server").query::<String>(&mut c));
        if let Ok(info) = info {
            return info.contains(&ours);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
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

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
