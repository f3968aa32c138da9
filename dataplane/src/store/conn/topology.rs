//! Where a command goes: one server, or the master of its key's slot on a Redis
//! Cluster. The slot map is learnt from `CLUSTER SLOTS` and kept fresh; `MOVED`, `ASK`
//! and `TRYAGAIN` are read from the replies.

use futures::future::{select, Either};
use futures::io::AsyncWriteExt;
use glommio::timer::Timer;
use redis::{Cmd, Value};
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio_util::compat::FuturesAsyncReadCompatExt;

use crate::config::{RedisClientConfig, RedisTarget};
use seckill_core::backoff::Backoff;

use super::link::{connect, Node};
use super::{Inner, Reply, StoreError, SLOTS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Topology {
    /// No node has answered yet.
    Unknown,
    /// One server: every command goes to the first node.
    Single,
    /// A cluster: every command goes to its slot's master.
    Cluster,
}

/// What a redirection error asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Redirect {
    /// The slot lives elsewhere now: `MOVED <slot> <host:port>`.
    Moved { slot: usize, addr: String },
    /// The slot is being migrated and this key has gone: `ASK <slot> <host:port>`.
    Ask { addr: String },
    /// A slot half-migrated holds some of the keys: `TRYAGAIN`.
    TryAgain,
}

impl Redirect {
    pub(super) fn parse(error: &str) -> Option<Redirect> {
        let mut words = error.split_ascii_whitespace();
        match words.next()? {
            "MOVED" => {
                let slot = words.next()?.parse().ok().filter(|s| *s < SLOTS)?;
                let addr = words.next()?.to_string();
                Some(Redirect::Moved { slot, addr })
            }
            "ASK" => Some(Redirect::Ask {
                addr: words.nth(1)?.to_string(),
            }),
            "TRYAGAIN" => Some(Redirect::TryAgain),
            _ => None,
        }
    }
}

/// The slot of a key: CRC16 (XMODEM) of the key or of its `{hash tag}`, mod 16384.
pub fn slot_of(key: &[u8]) -> usize {
    let tag = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|b| *b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|t| !t.is_empty())
        .unwrap_or(key);
    usize::from(crc16::State::<crc16::XMODEM>::calculate(tag)) % SLOTS
}

/// The key a command is routed by: the first key of a script, else the first argument;
/// none for the commands that name no key.
fn routing_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(b) => b,
        _ => &[],
    });
    let name = args.next()?;
    if name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL") {
        let numkeys = std::str::from_utf8(args.nth(1)?)
            .ok()?
            .parse::<usize>()
            .ok()?;
        return if numkeys > 0 { args.next() } else { None };
    }
    const KEYLESS: [&[u8]; 7] = [
        b"SCRIPT", b"TIME", b"PUBLISH", b"PING", b"INFO", b"CLIENT", b"CLUSTER",
    ];
    if KEYLESS.iter().any(|k| name.eq_ignore_ascii_case(k)) {
        return None;
    }
    args.next()
}

impl Inner {
    /// The node a command goes to first.
    pub(super) fn node_for(&self, cmd: &Cmd) -> Option<Rc<Node>> {
        self.node_for_key(routing_key(cmd))
    }

    /// The node that serves `key`; any master for none.
    pub(super) fn node_for_key(&self, key: Option<&[u8]>) -> Option<Rc<Node>> {
        let nodes = self.nodes.borrow();
        match self.topology.get() {
            Topology::Unknown => None,
            Topology::Single => nodes.first().cloned(),
            Topology::Cluster => {
                // A command without a key goes to the master of slot 0: a master that
                // serves now, whichever node that is after a failover.
                let slot = key.map_or(0, slot_of);
                let i = self.slots.borrow()[slot];
                nodes.get(usize::from(i)).cloned()
            }
        }
    }

    /// The node at `host:port`, started when it is new.
    pub(super) fn node_at(&self, addr: &str) -> Rc<Node> {
        let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "6379"));
        let port = port.parse().unwrap_or(6379);
        let host = if host.is_empty() {
            self.seeds[0].host.as_str()
        } else {
            host
        };
        if let Some(n) = self
            .nodes
            .borrow()
            .iter()
            .find(|n| n.target.host == host && n.target.port == port)
        {
            return n.clone();
        }
        let target = RedisTarget {
            host: host.to_string(),
            port,
            ..self.seeds[0].clone()
        };
        let node = Node::start(target, self);
        self.nodes.borrow_mut().push(node.clone());
        node
    }

    /// Sends `slot` to `node` from now on.
    pub(super) fn route(&self, slot: usize, node: &Rc<Node>) {
        if let Some(i) = self.nodes.borrow().iter().position(|n| Rc::ptr_eq(n, node)) {
            if let Some(s) = self.slots.borrow_mut().get_mut(slot) {
                *s = i as u16;
            }
        }
    }

    /// Asks the seeds, then every known node, until one answers `CLUSTER SLOTS`, and
    /// takes what it says: one server, or the cluster's slot map.
    pub(super) async fn discover(&self) -> bool {
        let mut candidates = self.seeds.clone();
        candidates.extend(self.nodes.borrow().iter().map(|n| n.target.clone()));
        for t in candidates {
            let reply = match one_off(&t, &self.cfg, redis::cmd("CLUSTER").arg("SLOTS")).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!(host = %t.host, port = t.port, error = %e, "redis node did not answer");
                    continue;
                }
            };
            match reply {
                Value::ServerError(_) => {
                    // Cluster support disabled: one server.
                    if self.nodes.borrow().is_empty() {
                        let node = Node::start(t, self);
                        self.nodes.borrow_mut().push(node);
                    }
                    self.topology.set(Topology::Single);
                    return true;
                }
                Value::Array(ranges) => {
                    let mut slots = vec![0u16; SLOTS];
                    let mut covered = 0;
                    for range in &ranges {
                        let Some((from, to, addr)) = slot_range(range) else {
                            continue;
                        };
                        let node = self.node_at(&addr);
                        let i = self
                            .nodes
                            .borrow()
                            .iter()
                            .position(|n| Rc::ptr_eq(n, &node))
                            .unwrap_or(0) as u16;
                        for s in slots.iter_mut().take(to + 1).skip(from) {
                            *s = i;
                            covered += 1;
                        }
                    }
                    if covered == 0 {
                        continue;
                    }
                    *self.slots.borrow_mut() = slots;
                    if self.topology.get() != Topology::Cluster {
                        tracing::info!(nodes = self.nodes.borrow().len(), "redis is a cluster");
                    }
                    self.topology.set(Topology::Cluster);
                    return true;
                }
                _ => continue,
            }
        }
        false
    }
}

/// `[from, to, [host, port, ...], replicas...]` of a `CLUSTER SLOTS` reply.
pub(super) fn slot_range(v: &Value) -> Option<(usize, usize, String)> {
    let Value::Array(parts) = v else { return None };
    let int = |v: &Value| match v {
        Value::Int(i) => usize::try_from(*i).ok(),
        _ => None,
    };
    let (from, to) = (int(parts.first()?)?, int(parts.get(1)?)?);
    let Value::Array(master) = parts.get(2)? else {
        return None;
    };
    let host = match master.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let port = int(master.get(1)?)?;
    (from <= to && to < SLOTS).then(|| (from, to, format!("{host}:{port}")))
}

/// Learns the topology, then keeps a cluster's slot map fresh: every second, and at
/// once when a redirection or a failed node says it moved.
pub(super) async fn follow_topology(inner: Rc<Inner>) {
    let mut backoff = Backoff::new(
        Duration::from_millis(10),
        Duration::from_millis(inner.cfg.max_backoff_ms),
    );
    let mut last_read = Instant::now();
    while !inner.closed.get() {
        match inner.topology.get() {
            Topology::Unknown => {
                if !inner.discover().await {
                    Timer::new(backoff.wait()).await;
                }
            }
            Topology::Single => return,
            Topology::Cluster => {
                Timer::new(Duration::from_millis(50)).await;
                let due = last_read.elapsed() >= Duration::from_secs(1);
                if inner.stale.get() && last_read.elapsed() >= Duration::from_millis(100) || due {
                    inner.stale.set(false);
                    last_read = Instant::now();
                    inner.discover().await;
                }
            }
        }
    }
}

/// One command on a connection of its own, for the topology (so it never waits behind
/// traffic).
pub(super) async fn one_off(t: &RedisTarget, cfg: &RedisClientConfig, cmd: &Cmd) -> Reply {
    let (mut stream, mut decoder) = connect(t, cfg, &[]).await?;
    let io = async {
        stream.write_all(&cmd.get_packed_command()).await?;
        let mut reader = (&mut stream).compat();
        redis::parse_redis_value_async(&mut decoder, &mut reader)
            .await
            .map_err(std::io::Error::other)
    };
    let timeout = Duration::from_millis(cfg.command_timeout_ms.max(cfg.connect_timeout_ms));
    let reply = match select(pin!(io), pin!(Timer::new(timeout))).await {
        Either::Left((Ok(v), _)) => Ok(v),
        Either::Left((Err(e), _)) => Err(StoreError::Server(e.to_string())),
        Either::Right(_) => Err(StoreError::Timeout),
    };
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag_as_redis_computes_them() {
        // Figures from `CLUSTER KEYSLOT` on a real Redis.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"sk:{spring.3}:part"), 1486);
        assert_eq!(slot_of(b"spring.3"), 1486);
        assert_eq!(slot_of(b"a{}b"), 13694, "an empty tag hashes the whole key");
        assert_eq!(slot_of(b"{}"), 15257);
    }

    #[test]
    fn commands_are_routed_by_their_first_key() {
        let keys = seckill_core::keys::PartitionKeys::new("spring", 3);
        let script =
            seckill_core::scripts::call(&seckill_core::scripts::PURCHASE, &[&keys.part()], &["u"]);
        assert_eq!(routing_key(&script), Some(keys.part().as_bytes()));
        let keyless = seckill_core::scripts::call(&seckill_core::scripts::PURCHASE, &[], &["u"]);
        assert_eq!(routing_key(&keyless), None);
        assert_eq!(
            routing_key(redis::cmd("HGETALL").arg("sk:campaign:x")),
            Some(&b"sk:campaign:x"[..])
        );
        assert_eq!(routing_key(&redis::cmd("TIME")), None);
        assert_eq!(
            routing_key(redis::cmd("SCRIPT").arg("LOAD").arg("return 1")),
            None
        );
    }

    #[test]
    fn redirections_are_read_from_the_error() {
        assert_eq!(
            Redirect::parse("MOVED 1486 127.0.0.1:7002"),
            Some(Redirect::Moved {
                slot: 1486,
                addr: "127.0.0.1:7002".into()
            })
        );
        assert_eq!(
            Redirect::parse("ASK 1486 10.0.0.2:6379"),
            Some(Redirect::Ask {
                addr: "10.0.0.2:6379".into()
            })
        );
        assert_eq!(
            Redirect::parse("TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(Redirect::parse("MOVED 99999 a:1"), None);
        assert_eq!(Redirect::parse("ERR wrong number of arguments"), None);
    }
}
