//! Stock and orders in Redis, as the shards use them: one script call per purchase on
//! the user's partition, and the crash-safe transfers that move stock between partitions.

mod conn;
mod lease;
mod orders;
mod purchase;
mod queue;
mod tickets;
mod transfer;

pub(crate) use conn::connect;
pub use conn::{slot_of, RedisConn, Reply, StoreError};
pub use lease::Lease;
pub use orders::{PaymentEvent, PaymentRecord, PaymentTerms, Taken};
pub use purchase::{Purchase, PurchaseRequest};
pub use queue::{Look, Round, Standing};
pub use seckill_core::reply::{int, text};
pub use tickets::{Challenge, Issue, NewTicket};
pub use transfer::{rebalance, PartitionProbe};

use redis::{Cmd, Script, Value};

use seckill_core::scripts;

/// The shard's Redis: one pipelined connection, the scripts it runs, and the lanes in
/// which each partition's purchases wait for their call.
#[derive(Clone)]
pub struct Store {
    pub conn: RedisConn,
    lanes: purchase::Lanes,
}

impl Store {
    pub fn new(conn: RedisConn) -> Self {
        Store {
            conn,
            lanes: purchase::Lanes::default(),
        }
    }

    /// Runs a script by hash; when Redis has forgotten it (`NOSCRIPT`, after a restart,
    /// a failover or `SCRIPT FLUSH`) it is sent whole, which also loads it, on the node
    /// that serves its keys.
    pub async fn eval(&self, script: &Script, keys: &[&str], args: &[&str]) -> Reply {
        self.run_script(&scripts::call(script, keys, args)).await
    }

    /// Sends an `EVALSHA` built by [`scripts::call`], as `EVAL` with the source on `NOSCRIPT`.
    async fn run_script(&self, cmd: &Cmd) -> Reply {
        match self.conn.query(cmd).await {
            Err(StoreError::Server(e)) if e.starts_with("NOSCRIPT") => {
                let mut args = cmd.args_iter().map(|a| match a {
                    redis::Arg::Simple(b) => b,
                    _ => &[],
                });
                let src = args
                    .nth(1)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(scripts::source_of);
                let Some(src) = src else {
                    return Err(StoreError::Server(e));
                };
                let mut eval = redis::cmd("EVAL");
                eval.arg(src);
                for a in args {
                    eval.arg(a);
                }
                self.conn.query(&eval).await
            }
            other => other,
        }
    }
}

/// Reads a reply the scripts build as an array of strings and integers.
pub fn items(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(StoreError::Protocol(format!(
            "expected an array, got {other:?}"
        ))),
    }
}
