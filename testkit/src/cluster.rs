//! A Redis Cluster of the test's own, started by `scripts/cluster.sh`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::ports::free_run;
use crate::users::{script, url_as, RedisUrl};
use crate::wait::wait_until;

/// A Redis Cluster of the test's own: 3 masters and 3 replicas started by
/// `scripts/cluster.sh` on free ports in a temp dir, each node with its append-only file
/// fsynced on every write.
pub struct Cluster {
    pub base: u16,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Cluster {
        // Ports free when drawn may be taken before the nodes bind them (by another
        // test's server): a start that fails is stopped and tried on other ports.
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let base = free_run(6);
            let status = Command::new(script("cluster.sh"))
                .arg("start")
                .arg(base.to_string())
                .arg(dir.path())
                .stdout(Stdio::null())
                .status()
                .expect("scripts/cluster.sh runs");
            let cluster = Cluster { base, dir };
            if status.success() {
                return cluster;
            }
            eprintln!(
                "the cluster on {base}-{} did not start; trying other ports",
                base + 5
            );
        }
        panic!("the cluster did not start in 3 tries");
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
        let status = Command::new(script("cluster.sh"))
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
        let _ = Command::new(script("cluster.sh"))
            .arg("stop")
            .arg(self.base.to_string())
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .status();
    }
}
