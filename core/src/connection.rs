//! Redis off the hot path (CLI, console, order worker, simulator, reconciliation): one
//! server or a Redis Cluster behind the same URL. Whether the server at the URL runs in
//! cluster mode is asked once at connect (`CLUSTER INFO`); a cluster is then reached
//! through the `redis` crate's cluster client, which follows its slot map and its
//! `MOVED` and `ASK` redirections.
//!
//! Every key one script touches shares a hash tag (see [`crate::keys`]), so scripts run
//! unchanged on a cluster. A pipeline is the one thing that differs: on one server it is
//! one round trip (and a transaction when marked atomic); on a cluster each command goes
//! to its own slot's master, and an atomic pipeline across slots is not atomic.

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Cmd, ConnectionLike, FromRedisValue, Pipeline, RedisResult, Value};
use std::time::Duration;

/// A connection to one Redis server or to a Redis Cluster.
pub enum Connection {
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

impl Connection {
    /// Connects to `url`; several seed nodes of one cluster may be given separated by
    /// commas. Connecting gives up after `timeout`; every later read and write after
    /// `io_timeout`, when given.
    pub fn open(url: &str, timeout: Duration, io_timeout: Option<Duration>) -> RedisResult<Self> {
        let seeds: Vec<&str> = url.split(',').map(str::trim).collect();
        let client = redis::Client::open(seeds[0])?;
        let mut con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(io_timeout.or(Some(timeout)))?;
        // `CLUSTER INFO` rather than `INFO`, which Redis files under its dangerous
        // commands and the operators' ACL user does not have.
        let cluster = match redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut con) {
            Ok(_) => true,
            Err(e) if e.to_string().contains("cluster support disabled") => false,
            Err(e) => return Err(e),
        };
        if !cluster {
            con.set_read_timeout(io_timeout)?;
            con.set_write_timeout(io_timeout)?;
            return Ok(Connection::Single(con));
        }
        let cluster = ClusterClient::builder(seeds)
            .connection_timeout(timeout)
            .build()?
            .get_connection()?;
        cluster.set_read_timeout(io_timeout)?;
        cluster.set_write_timeout(io_timeout)?;
        Ok(Connection::Cluster(Box::new(cluster)))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    /// `WAIT` on the master that serves `key`, over the link this connection's commands
    /// on that key took: until `replicas` replicas have every write this client made there
    /// (an `XREADGROUP` is one: it moves the group, after every entry it read), `timeout`
    /// at most. Returns how many replicas confirmed.
    pub fn wait_for_replicas(
        &mut self,
        key: &str,
        replicas: u32,
        timeout: Duration,
    ) -> RedisResult<i64> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
        let wait = redis::cmd("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis() as u64)
            .clone();
        match self {
            Connection::Single(con) => wait.query(con),
            Connection::Cluster(con) => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let v = con.route_command(
                    &wait,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )?;
                i64::from_redis_value(v).map_err(Into::into)
            }
        }
    }

    /// Runs a pipeline: one round trip on one server; on a cluster, each command on its
    /// slot's master, in order, every reply kept (also those marked `ignore()`: read such
    /// pipelines as `()`).
    pub fn pipeline<T: FromRedisValue>(&mut self, pipe: &Pipeline) -> RedisResult<T> {
        match self {
            Connection::Single(con) => pipe.query(con),
            Connection::Cluster(con) => {
                let mut replies = Vec::new();
                for cmd in pipe.cmd_iter() {
                    replies.push(cmd.query::<Value>(con.as_mut())?);
                }
                T::from_redis_value(Value::Array(replies)).map_err(Into::into)
            }
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(cmd, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Connection::Single(c) => c.req_command(cmd),
            Connection::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Connection::Single(c) => c.check_connection(),
            Connection::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Connection::Single(c) => c.is_open(),
            Connection::Cluster(c) => c.is_open(),
        }
    }
}
