//! The Redis key schema and partition routing.
//!
//! Every key one purchase touches carries the partition's hash tag `{<campaign>.<p>}`,
//! so a purchase is one atomic script on one slot, on one Redis or on a Redis Cluster.

mod fields;

pub use fields::{event, meta, once, order, part, rules};

/// Prefix of every key the system owns.
pub const PREFIX: &str = "sk";
/// Set of every campaign id.
pub const CAMPAIGNS: &str = "sk:campaigns";
/// Counter bumped on every control-plane change; shards poll it.
pub const CONTROL_VERSION: &str = "sk:control:version";
/// Pub/sub channel announcing control-plane changes.
pub const CONTROL_CHANNEL: &str = "sk:control";

/// Hash of limit overrides every node applies on top of its configured limits.
pub const LIMITS: &str = "sk:limits";
/// Sorted set of blacklist entries (`user:<id>`, `ip:<address>`) by expiry (ms).
pub const BLACKLIST: &str = "sk:blacklist";
/// Counter bumped on every change of the blacklist; shards reload when it moves.
pub const BLACKLIST_VERSION: &str = "sk:blacklist:version";
/// Sorted set: a shopper's order ids, by their payment deadline (ms); the order workers
/// add each order as they store it. Its own hash tag: one key a shopper.
pub fn user_orders(user: &str) -> String {
    format!("{PREFIX}:{{u:{user}}}:orders")
}

/// Stream: the webhooks the shop is yet to take (`id`, `type`, `data`), in order.
pub const SHOP_OUTBOX: &str = "sk:shop:outbox";
/// Hash: webhook id → a webhook the shop refused for good (JSON), until replayed.
pub const SHOP_DEAD: &str = "sk:shop:dead";
/// Hash: payment id → a payment for an order nobody knows (JSON), for operators.
pub const UNMATCHED_PAYMENTS: &str = "sk:payments:unmatched";
/// Sorted set of `node:<name>` and `worker:<name>` by when they last reported (ms).
pub const FLEET: &str = "sk:fleet";

/// Hash: `shard:<i>` → that shard's record of its last second (JSON), expiring.
pub fn node(name: &str) -> String {
    format!("{PREFIX}:node:{name}")
}

/// String: an order worker's record of its last second (JSON), expiring.
pub fn worker(name: &str) -> String {
    format!("{PREFIX}:worker:{name}")
}

/// Hash: a campaign's last reconciliation, when and how many violations.
pub fn verdict(campaign: &str) -> String {
    format!("{PREFIX}:reconcile:{campaign}")
}

/// Consumer group of the order workers on every partition's event stream.
pub const WORKER_GROUP: &str = "workers";

/// Keys of a campaign's licence code pool, all in one slot of their own.
pub struct CodeKeys {
    tag: String,
}

impl CodeKeys {
    pub fn new(campaign: &str) -> Self {
        CodeKeys {
            tag: format!("{PREFIX}:{{{campaign}.codes}}"),
        }
    }
    /// List of codes not handed out yet.
    pub fn pool(&self) -> String {
        format!("{}:pool", self.tag)
    }
    /// Hash: order id → its code.
    pub fn bound(&self) -> String {
        format!("{}:bound", self.tag)
    }
    /// List one `arm` run stages its codes in before they are published, its own.
    pub fn staging(&self, run: &str) -> String {
        format!("{}:staging:{run}", self.tag)
    }
    pub fn loaded(&self) -> String {
        format!("{}:loaded", self.tag)
    }
}

/// Keys of a campaign's challenges and tickets, in one slot of their own.
pub struct TicketKeys {
    tag: String,
}

impl TicketKeys {
    pub fn new(campaign: &str) -> Self {
        TicketKeys {
            tag: format!("{PREFIX}:{{{campaign}.tickets}}"),
        }
    }
    /// An open challenge: `user:prefix:difficulty`, expiring.
    pub fn challenge(&self, id: &str) -> String {
        format!("{}:ch:{id}", self.tag)
    }
    /// Sorted set: user → when their live ticket expires (ms).
    pub fn live(&self) -> String {
        format!("{}:live", self.tag)
    }
    /// Hash: user → their live ticket, handed out again to a user who asks again.
    pub fn tickets(&self) -> String {
        format!("{}:tickets", self.tag)
    }
    /// Hash: the campaign's state, `starts_at_ms` and ticket cap, mirrored here so the
    /// issuing script checks them in the same slot. (A node may write it: Redis counts
    /// every key a script declares as written. A node holds the signing secret anyway.)
    pub fn rules(&self) -> String {
        format!("{}:rules", self.tag)
    }
}

/// Keys of a campaign's waiting room, in one slot of their own. A purchase never
/// touches them: passes are counted used from the partitions' logs (see
/// [`PartitionKeys::pass_log`]) by the admission, which alone writes here besides joins.
pub struct QueueKeys {
    tag: String,
}

impl QueueKeys {
    pub fn new(campaign: &str) -> Self {
        QueueKeys {
            tag: format!("{PREFIX}:{{{campaign}.queue}}"),
        }
    }
    /// Hash: the rules mirrored from the campaign (`state`, `starts_at_ms`, `total`,
    /// `pass_ttl_ms`, `admit_per_s`), the draw (`seed`, `drawn_ms`, `pre`), the line
    /// (`seq` of later joiners, `admitted`), the passes' fate (`used`, `expired`,
    /// `cur:<p>` read positions in the partitions' logs) and `sold_out`.
    pub fn meta(&self) -> String {
        format!("{}:meta", self.tag)
    }
    /// Sorted set: pre-queue joiner → their draw, SHA-1(seed ‖ ':' ‖ user) cut to 52 bits.
    pub fn pre(&self) -> String {
        format!("{}:pre", self.tag)
    }
    /// Sorted set: later joiner → their turn (1, 2, …), behind the whole pre-queue.
    pub fn post(&self) -> String {
        format!("{}:post", self.tag)
    }
    /// Hash: later joiner → when they joined (ms), until they are let through.
    pub fn joined(&self) -> String {
        format!("{}:joined", self.tag)
    }
    /// Hash: admitted shopper → `<place>:<pass expiry ms>`; their pass is derived from it.
    pub fn admitted(&self) -> String {
        format!("{}:admitted", self.tag)
    }
    /// Sorted set: outstanding pass (by its holder) → its expiry (ms). Each reserves a unit.
    pub fn passes(&self) -> String {
        format!("{}:passes", self.tag)
    }
    /// String: the node and shard that runs the admission, expiring unless renewed.
    pub fn lease(&self) -> String {
        format!("{}:lease", self.tag)
    }
}

/// String held while one `arm` of the campaign runs: the run's token, expiring.
pub fn arm_lock(id: &str) -> String {
    format!("{PREFIX}:arm:{id}")
}

/// Hash holding a campaign's definition and lifecycle state.
pub fn campaign(id: &str) -> String {
    format!("{PREFIX}:campaign:{id}")
}

/// The partition a user belongs to: a stable hash of the user id, modulo the partition count.
///
/// FNV-1a keeps routing identical across processes, machines and releases, which a
/// randomly keyed hasher would not.
pub fn partition_of(user: &str, partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in user.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(partitions.max(1))) as u32
}

/// The keys of one stock partition of a campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionKeys {
    tag: String,
}

impl PartitionKeys {
    /// The key layout of a partition this release reads and writes, kept in the part
    /// hash's `layout` field when the partition is armed. 2: the first answers and the
    /// tickets' use in [`Self::once`] (1: a string key with a TTL each).
    pub const LAYOUT: u32 = 2;

    pub fn new(campaign: &str, partition: u32) -> Self {
        PartitionKeys {
            tag: format!("{PREFIX}:{{{campaign}.{partition}}}"),
        }
    }

    /// The hash tag every key of the partition starts with: `sk:{<campaign>.<p>}`.
    pub fn tag(&self) -> &str {
        &self.tag
    }
    fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.tag)
    }
    /// Hash: stock, held, sold, transit, inflow, seq and the campaign's rules mirrored
    /// for the purchase script (state, window, per-user limit, hold time); its fields
    /// are [`part`]'s.
    pub fn part(&self) -> String {
        self.key(Self::PART)
    }
    /// Hash: user id → units held or bought.
    pub fn buyers(&self) -> String {
        self.key(Self::BUYERS)
    }
    /// Sorted set: order id scored by its payment deadline (ms).
    pub fn holds(&self) -> String {
        self.key(Self::HOLDS)
    }
    /// Stream of order events.
    pub fn events(&self) -> String {
        self.key(Self::EVENTS)
    }
    /// Hash: outgoing transfer id → `target:units:ms`, until the target has applied it.
    pub fn transfers_out(&self) -> String {
        self.key(Self::TRANSFERS_OUT)
    }
    /// Set: ids of incoming transfers already applied.
    pub fn transfers_in(&self) -> String {
        self.key(Self::TRANSFERS_IN)
    }
    /// Prefix of the per-order hashes.
    pub fn order_prefix(&self) -> String {
        self.key(Self::ORDER)
    }
    /// Hash: one order; its fields are [`order`]'s.
    pub fn order(&self, order_id: &str) -> String {
        format!("{}:{}{order_id}", self.tag, Self::ORDER)
    }
    /// Hash: what may happen once, each → the order it made: the first answer to an
    /// `Idempotency-Key` and a ticket's use (fields made by [`once`]). Written only with
    /// an order, so it holds no more entries than the partition has orders.
    pub fn once(&self) -> String {
        self.key(Self::ONCE)
    }
    /// List: holders of the passes used on this partition, in order of use.
    pub fn pass_log(&self) -> String {
        self.key(Self::PASS_LOG)
    }
    /// Hash: the provider's payment id → the payment as taken (JSON: `order_id`,
    /// `payment_id`, `amount_cents`, `currency`, `status`, `reason`, `ms`), for the
    /// partition's orders.
    pub fn payments(&self) -> String {
        self.key(Self::PAYMENTS)
    }
    /// Hash: `webhook-id` → the first answer to that webhook (JSON), for the
    /// partition's orders.
    pub fn webhooks(&self) -> String {
        self.key(Self::WEBHOOKS)
    }
}

/// The suffixes of a partition's keys after its tag, each a key's one spelling.
impl PartitionKeys {
    pub const PART: &'static str = "part";
    pub const BUYERS: &'static str = "buyers";
    pub const HOLDS: &'static str = "holds";
    pub const EVENTS: &'static str = "events";
    pub const TRANSFERS_OUT: &'static str = "xout";
    pub const TRANSFERS_IN: &'static str = "xin";
    /// Followed by the order id.
    pub const ORDER: &'static str = "order:";
    pub const ONCE: &'static str = "once";
    pub const PASS_LOG: &'static str = "passes";
    pub const PAYMENTS: &'static str = "payments";
    pub const WEBHOOKS: &'static str = "webhooks";
}

/// An order id names its campaign and partition: `<campaign>.<partition>.<seq>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderId<'a> {
    pub campaign: &'a str,
    pub partition: u32,
    pub seq: u64,
}

impl<'a> OrderId<'a> {
    /// Between an order id's parts.
    pub const SEP: char = '.';

    pub fn parse(s: &'a str) -> Option<Self> {
        let mut it = s.split(Self::SEP);
        let campaign = it.next().filter(|c| crate::campaign::valid_id(c))?;
        let partition = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(OrderId {
            campaign,
            partition,
            seq,
        })
    }

    /// The Lua function that makes an order id, as the purchase script names its orders.
    pub fn lua() -> String {
        let sep = Self::SEP;
        format!(
            "local function order_id(campaign, partition, seq) \
             return campaign .. '{sep}' .. partition .. '{sep}' .. seq end\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_is_stable_and_in_range() {
        assert_eq!(partition_of("alice", 8), partition_of("alice", 8));
        for p in [1, 2, 7, 8, 64] {
            for i in 0..1000 {
                assert!(partition_of(&format!("user{i}"), p) < p);
            }
        }
        assert_eq!(partition_of("anyone", 1), 0);
    }

    #[test]
    fn routing_spreads_users_evenly() {
        let mut counts = [0u32; 8];
        for i in 0..80_000 {
            counts[partition_of(&format!("u{i}"), 8) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "uneven spread: {counts:?}");
        }
    }

    #[test]
    fn partition_keys_share_one_hash_tag() {
        let k = PartitionKeys::new("demo", 3);
        for key in [
            k.part(),
            k.buyers(),
            k.holds(),
            k.events(),
            k.once(),
            k.order("demo.3.1"),
        ] {
            assert!(key.contains("{demo.3}"), "{key}");
        }
    }

    #[test]
    fn order_ids_round_trip() {
        let id = OrderId::parse("demo.3.42").expect("valid");
        assert_eq!((id.campaign, id.partition, id.seq), ("demo", 3, 42));
        for bad in [
            "",
            "demo",
            "demo.3",
            "demo.x.1",
            "demo.3.1.2",
            "De mo.1.1",
            "demo.-1.2",
        ] {
            assert!(OrderId::parse(bad).is_none(), "{bad}");
        }
    }
}
