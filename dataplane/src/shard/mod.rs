//! One shard: what a pinned executor owns — its Redis connection, its copy of the
//! campaigns, and the tasks that keep that copy fresh. No locks: other shards and nodes
//! are reached only through Redis.

use glommio::channels::local_channel::{self, LocalSender};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::answer::{Endpoint, Outcome};
use crate::config::Settings;
use crate::guard::Guard;
use crate::store::{self, Store, StoreError};
use seckill_core::campaign::{Campaign, State};
use seckill_core::protocol::{self, QueueProgress};

mod demand;
pub mod leases;
use demand::Demand;
mod loops;
use loops::{
    admission_loop, lease_loop, listen_for_changes, rebalance_loop, report_loop, sync_loop,
};

/// What a campaign's event is made from: state, remaining, start and end, and the
/// waiting room's rate, whether its seed is committed to, whether it is drawn, its
/// admissions and its sold-out flag.
pub type LiveKey = (
    &'static str,
    i64,
    Option<i64>,
    Option<i64>,
    Option<(u32, bool, bool, u64, bool)>,
);

/// Which cap refused an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamCap {
    /// The client address has `http.max_event_streams_per_client` open.
    Client,
    /// The shard has `http.max_event_streams_per_shard` open.
    Shard,
}

/// The event streams a shard holds open. A stream stays open for as long as its client
/// likes and holds a connection all that time: without caps, idle streams from a few
/// addresses could take every connection a shard accepts.
#[derive(Debug, Default)]
pub struct StreamSlots {
    by_client: HashMap<IpAddr, u32>,
    open: usize,
}

impl StreamSlots {
    /// Takes a slot for a stream of `client`, unless it or the shard is at its cap.
    pub fn take(
        &mut self,
        client: IpAddr,
        per_client: u32,
        per_shard: usize,
    ) -> Result<(), StreamCap> {
        if self
            .by_client
            .get(&client)
            .is_some_and(|n| *n >= per_client)
        {
            return Err(StreamCap::Client);
        }
        if self.open >= per_shard {
            return Err(StreamCap::Shard);
        }
        *self.by_client.entry(client).or_insert(0) += 1;
        self.open += 1;
        Ok(())
    }

    /// Gives back a slot `take` gave `client`.
    pub fn give_back(&mut self, client: IpAddr) {
        if let Some(n) = self.by_client.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                self.by_client.remove(&client);
            }
            self.open -= 1;
        }
    }

    /// Streams open on the shard.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Streams `client` has open on the shard.
    pub fn of(&self, client: IpAddr) -> u32 {
        self.by_client.get(&client).copied().unwrap_or(0)
    }
}

/// A campaign as this shard sees it.
#[derive(Debug, Clone)]
pub struct CampaignView {
    pub campaign: Campaign,
    /// Units in the partitions or moving between them, as of the last poll.
    pub remaining: i64,
    /// Proven empty: purchases are answered here, without Redis.
    pub sold_out: bool,
    /// How many polls have found units: a purchase's proof of emptiness begun before the
    /// last of them may predate those units (see [`Shard::mark_sold_out`]).
    pub restocks: u64,
    /// Arrival counters of the last poll that found every partition empty.
    empty_inflows: Option<Vec<i64>>,
    /// The waiting room's counters as of the last poll, for a campaign with one.
    pub queue: Option<QueueProgress>,
    /// Purchases refused here as sold out, counted by the polls that find it so.
    demand: Demand,
    /// When a poll last read the campaign's stock.
    read_at: Option<Instant>,
}

impl CampaignView {
    fn new(campaign: Campaign) -> Self {
        CampaignView {
            campaign,
            remaining: 0,
            sold_out: false,
            restocks: 0,
            empty_inflows: None,
            queue: None,
            demand: Demand::default(),
            read_at: None,
        }
    }

    /// What a poll read of the stock: the units in the partitions or moving between them,
    /// and the partitions' arrival counters. Two polls in a row that find nothing, with
    /// no arrival in between, prove the campaign empty (see `Store::refill`).
    fn stock_read(&mut self, remaining: i64, inflows: Vec<i64>) {
        self.remaining = remaining;
        if remaining > 0 {
            self.sold_out = false;
            self.restocks += 1;
            self.empty_inflows = None;
        } else {
            if self.empty_inflows.as_ref() == Some(&inflows) {
                self.sold_out = true;
            }
            self.empty_inflows = Some(inflows);
        }
    }

    /// A purchase proved every partition empty. It began when the polls had found units
    /// `restocks` times: if one has found units since, the proof may be older than those
    /// units (holds expired, an announcement, the poll, and only then the proof's
    /// answer), and it is not taken: two empty polls, or a later proof, will tell.
    fn proven_empty(&mut self, restocks: u64) {
        if self.restocks == restocks {
            self.sold_out = true;
            self.remaining = 0;
        }
    }

    /// The state shoppers see: a live campaign with nothing left (or, with a waiting
    /// room, nothing left to reserve and nothing reserved) reports `sold_out`.
    pub fn public_state(&self) -> &'static str {
        match self.campaign.state {
            State::Live if self.sold_out || self.queue.as_ref().is_some_and(|q| q.sold_out) => {
                "sold_out"
            }
            State::Arming => "draft",
            s => s.as_str(),
        }
    }

    /// Whether the shard answers the campaign's purchases sold out: live, proven empty,
    /// and with no waiting room (a pass reserves a unit: its holder hears `sold_out` from
    /// no one, and the script has the last word for anyone). When it does, notes that
    /// someone still asks, which keeps its stock read at every poll.
    pub fn refuses_as_sold_out(&self) -> bool {
        let refuses = self.sold_out
            && self.campaign.state == State::Live
            && self.campaign.spec.queue.is_none();
        if refuses {
            self.demand.mark();
        }
        refuses
    }

    /// Whether this poll reads the campaign's stock. One proven empty, without a waiting
    /// room, that no purchase asked for in [`QUIET_POLLS`] polls is read once every
    /// [`QUIET_READ_EVERY`] only. Units come back to it when holds run out and are
    /// released, which is announced, and a poll an announcement woke reads every
    /// campaign; a lost announcement is made up by that read. The first purchase refused
    /// after the quiet has the campaign read at the next poll.
    fn due(&mut self, announced: bool, now: Instant) -> bool {
        let quiet = if self.sold_out && self.campaign.spec.queue.is_none() {
            self.demand.quiet_for(QUIET_POLLS)
        } else {
            self.demand.reset();
            false
        };
        let due = announced
            || !quiet
            || self
                .read_at
                .is_none_or(|t| now.duration_since(t) >= QUIET_READ_EVERY);
        if due {
            self.read_at = Some(now);
        }
        due
    }
}

/// Polls with nobody asking after which a sold-out campaign's stock is read less often.
const QUIET_POLLS: u32 = 40;
/// How often a quiet sold-out campaign's stock is read.
const QUIET_READ_EVERY: Duration = Duration::from_secs(1);

pub struct Shard {
    pub index: usize,
    pub settings: Rc<Settings>,
    pub store: Store,
    /// By id, hashed with foldhash: every request names a campaign, and the ids are the
    /// operators' own, not a client's to choose.
    campaigns: RefCell<HashMap<String, CampaignView, foldhash::fast::RandomState>>,
    version: Cell<Option<i64>>,
    /// Set once a sync has read everything: until then the shard's copy is empty, not
    /// true, and shopper routes answer 503.
    synced: Cell<bool>,
    /// When the campaigns were last read in full, whatever the version said.
    reloaded: Cell<Option<std::time::Instant>>,
    blacklist_version: Cell<Option<i64>>,
    wake: LocalSender<()>,
    pub guard: RefCell<Guard>,
    /// The empty partitions lent to this shard, with their first answers.
    pub leases: RefCell<leases::Leases>,
    /// Session tokens verified here, so a shopper's next request skips the signature.
    pub tokens: RefCell<crate::guard::tokens::VerifiedTokens>,
    /// Answers of the current second, for the fleet telemetry.
    pub stats: RefCell<crate::telemetry::Window>,
    /// Answers since the start, for `/metrics`.
    pub metrics: std::sync::Arc<crate::metrics::ShardMetrics>,
    /// The events stream's shared update per campaign: what it was made from, and the
    /// `data:` every client of this shard gets.
    pub live_events: RefCell<HashMap<String, (LiveKey, Rc<str>)>>,
    /// Set when the node stops: event streams end.
    pub stopping: Cell<bool>,
    /// Event streams open on this shard, by client address and in all.
    pub streams: RefCell<StreamSlots>,
    /// Request ids: a prefix unique to this shard's run, and a counter.
    id_prefix: String,
    requests: Cell<u64>,
}

impl Shard {
    pub fn start(
        index: usize,
        settings: Rc<Settings>,
        metrics: std::sync::Arc<crate::metrics::ShardMetrics>,
    ) -> Rc<Self> {
        let mut on_connect: Vec<redis::Cmd> = seckill_core::scripts::hot_path()
            .iter()
            .map(|s| {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(seckill_core::scripts::source_of(s.get_hash()).unwrap_or_default())
                    .clone()
            })
            .collect();
        on_connect.push(
            redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(format!("seckill-shard-{index}"))
                .clone(),
        );
        let conn = store::RedisConn::start(
            settings.redis.clone(),
            settings.redis_client.clone(),
            settings.breaker.clone(),
            on_connect,
        );
        let (wake, wake_rx) = local_channel::new_bounded(1);
        let guard = RefCell::new(Guard::new(
            settings.limits,
            settings.shards,
            settings.http.max_tracked_clients,
        ));
        let tokens = RefCell::new(crate::guard::tokens::VerifiedTokens::new(
            settings.http.max_tracked_clients,
        ));
        let shard = Rc::new(Shard {
            index,
            store: Store::new(conn),
            settings,
            campaigns: RefCell::default(),
            version: Cell::new(None),
            synced: Cell::new(false),
            reloaded: Cell::new(None),
            blacklist_version: Cell::new(None),
            wake,
            guard,
            leases: RefCell::default(),
            tokens,
            stats: RefCell::default(),
            metrics,
            live_events: RefCell::default(),
            stopping: Cell::new(false),
            streams: RefCell::default(),
            id_prefix: format!("{:08x}{index:02x}", rand::random::<u32>()),
            requests: Cell::new(0),
        });
        shard.store.conn.observe_round_trips(shard.metrics.clone());
        shard.store.observe_purchase_calls(shard.metrics.clone());
        glommio::spawn_local(sync_loop(shard.clone(), wake_rx)).detach();
        glommio::spawn_local(listen_for_changes(shard.clone())).detach();
        glommio::spawn_local(lease_loop(shard.clone())).detach();
        glommio::spawn_local(report_loop(shard.clone())).detach();
        if index == 0 {
            glommio::spawn_local(rebalance_loop(shard.clone())).detach();
            glommio::spawn_local(admission_loop(shard.clone())).detach();
        }
        shard
    }

    /// A fresh request id: unique over shards, nodes and restarts (with near certainty).
    pub fn next_request_id(&self) -> String {
        let n = self.requests.get() + 1;
        self.requests.set(n);
        request_id(&self.id_prefix, n)
    }

    /// Counts an answer for the telemetry and the metrics.
    pub fn answered(&self, route: Endpoint, outcome: Outcome, took: std::time::Duration) {
        self.stats.borrow_mut().record(route, outcome, took);
        self.metrics.request(route, outcome, took);
    }

    /// Reads one campaign without cloning it.
    pub fn with_campaign<T>(&self, id: &str, f: impl FnOnce(&CampaignView) -> T) -> Option<T> {
        self.campaigns.borrow().get(id).map(f)
    }

    pub fn campaigns(&self) -> Vec<CampaignView> {
        let mut v: Vec<CampaignView> = self.campaigns.borrow().values().cloned().collect();
        v.sort_by(|a, b| a.campaign.spec.id.cmp(&b.campaign.spec.id));
        v
    }

    /// Asks for the leases of the partitions of every campaign proven empty, so that a
    /// refused retry with an `Idempotency-Key` ends here; forgets those of the others. A
    /// waiting room's refusals do not end on the shard, so its campaigns are left out.
    async fn renew_leases(&self) {
        let lendable: Vec<(String, u32)> = self
            .campaigns
            .borrow()
            .values()
            .filter(|v| v.campaign.state == State::Live && v.sold_out)
            .filter(|v| v.campaign.spec.queue.is_none())
            .map(|v| (v.campaign.spec.id.clone(), v.campaign.spec.partitions))
            .collect();
        self.leases
            .borrow_mut()
            .retain(|id| lendable.iter().any(|(l, _)| l == id));
        for (id, partitions) in &lendable {
            if !self.leases.borrow_mut().wanted(id) {
                continue;
            }
            if let Err(e) = leases::renew(&self.store, &self.leases, id, *partitions).await {
                tracing::debug!(campaign = %id, error = %e, "a partition's lease was not renewed");
            }
        }
    }

    /// Whether the shard answers campaign `id`'s purchases sold out now (see
    /// [`CampaignView::refuses_as_sold_out`]).
    pub fn refuses_as_sold_out(&self, id: &str) -> bool {
        self.campaigns
            .borrow()
            .get(id)
            .is_some_and(CampaignView::refuses_as_sold_out)
    }

    /// A purchase proved every partition empty (see [`CampaignView::proven_empty`]).
    pub fn mark_sold_out(&self, id: &str, restocks: u64) {
        if let Some(v) = self.campaigns.borrow_mut().get_mut(id) {
            v.proven_empty(restocks);
        }
    }

    /// Counts a refusal against a client; one that crosses the automatic threshold is
    /// blacklisted on every node.
    pub fn refused(&self, client: crate::guard::Client<'_>, now: std::time::Instant) {
        let mut guard = self.guard.borrow_mut();
        if !guard.refused(client, now) {
            return;
        }
        let key = client.key();
        let ttl_ms = guard.limits.auto_block_ttl_s as i64 * 1000;
        let expires = seckill_core::now_ms() + ttl_ms;
        guard.blacklist.insert(key.clone(), expires);
        drop(guard);
        tracing::warn!(shard = self.index, key = %key, ttl_s = ttl_ms / 1000, "blocking a client that keeps getting refused");
        let store = self.store.clone();
        glommio::spawn_local(async move {
            for cmd in protocol::block(&key, expires) {
                let _ = store.conn.query(&cmd).await;
            }
        })
        .detach();
    }

    /// Whether the campaigns, and their stock, were read in full at least once.
    pub fn synced(&self) -> bool {
        self.synced.get()
    }

    /// Replaces the campaign definitions, keeping what the shard learned of their stock.
    fn apply_campaigns(&self, fresh: HashMap<String, Campaign>) {
        let mut map = self.campaigns.borrow_mut();
        map.retain(|id, _| fresh.contains_key(id));
        for (id, c) in fresh {
            match map.get_mut(&id) {
                Some(v) => v.campaign = c,
                None => {
                    map.insert(id, CampaignView::new(c));
                }
            }
        }
    }

    /// Reads what changed in the control plane, then the stock of the campaigns that
    /// sell (see [`CampaignView::due`]); `announced`: an announcement woke this poll.
    async fn sync(&self, announced: bool) -> Result<(), StoreError> {
        let conn = &self.store.conn;
        let version = store::int(Some(&conn.query(&protocol::version()).await?)).unwrap_or(0);
        // A change whose announcement was lost (a writer that died half-way) is still
        // picked up by a full reload every few seconds.
        let stale = self
            .reloaded
            .get()
            .is_none_or(|t| t.elapsed() > Duration::from_secs(5));
        if self.version.get() != Some(version) || stale {
            let ids = protocol::read_strings(&conn.query(&protocol::campaign_ids()).await?);
            let mut fresh = HashMap::new();
            for id in ids {
                let record = conn.query(&protocol::campaign(&id)).await?;
                match protocol::read_campaign(&record) {
                    Some(c) => {
                        fresh.insert(id, c);
                    }
                    None => tracing::warn!(campaign = %id, "skipping a damaged campaign record"),
                }
            }
            let overrides = protocol::read_fields(&conn.query(&protocol::limits()).await?);
            self.apply_campaigns(fresh);
            self.guard.borrow_mut().limits = self.settings.limits.with_overrides(&overrides);
            self.version.set(Some(version));
            self.reloaded.set(Some(std::time::Instant::now()));
        }
        let bl_version =
            store::int(Some(&conn.query(&protocol::blacklist_version()).await?)).unwrap_or(0);
        if self.blacklist_version.get() != Some(bl_version) {
            let now_ms = seckill_core::now_ms();
            let entries =
                protocol::read_blacklist(&conn.query(&protocol::blacklist(now_ms)).await?);
            self.guard
                .borrow_mut()
                .blacklist
                .replace(entries, now_ms, std::time::Instant::now());
            self.blacklist_version.set(Some(bl_version));
        }
        let now = Instant::now();
        let stocked: Vec<(String, u32, bool)> = self
            .campaigns
            .borrow_mut()
            .values_mut()
            .filter(|v| matches!(v.campaign.state, State::Armed | State::Live | State::Paused))
            .filter_map(|v| {
                v.due(announced, now).then(|| {
                    let s = &v.campaign.spec;
                    (s.id.clone(), s.partitions, s.queue.is_some())
                })
            })
            .collect();
        for (id, partitions, queued) in stocked {
            let probes = self.store.probe_all(&id, partitions).await?;
            let queue = if queued {
                let v = conn.query(&protocol::queue_counters(&id)).await?;
                Some(protocol::read_queue_counters(&v))
            } else {
                None
            };
            let mut map = self.campaigns.borrow_mut();
            let Some(v) = map.get_mut(&id) else { continue };
            v.queue = queue;
            v.stock_read(
                probes.iter().map(|p| p.stock + p.transit).sum(),
                probes.iter().map(|p| p.inflow).collect(),
            );
        }
        self.synced.set(true);
        Ok(())
    }
}

/// `{prefix}-{n in hex}`, written by hand: every request gets one, and `format!`'s
/// machinery costs several times the copy.
fn request_id(prefix: &str, n: u64) -> String {
    let mut id = String::with_capacity(prefix.len() + 17);
    id.push_str(prefix);
    id.push('-');
    let digits = (u64::BITS - n.leading_zeros()).div_ceil(4).max(1);
    for d in (0..digits).rev() {
        id.push(char::from(
            b"0123456789abcdef"[(n >> (4 * d)) as usize & 0xf],
        ));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_of_emptiness_older_than_units_a_poll_found_is_not_taken() {
        let spec = seckill_core::campaign::CampaignSpec::from_toml(
            "id = \"c\"\nname = \"c\"\ntotal = 4\npartitions = 2\nper_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 1\n",
        )
        .expect("spec");
        let mut v = CampaignView::new(Campaign::new(spec).expect("campaign"));
        v.campaign.state = State::Live;
        v.stock_read(4, vec![0, 0]);
        // A purchase comes, and proves the campaign empty: the shard refuses from then on.
        let began = v.restocks;
        v.proven_empty(began);
        assert!(v.refuses_as_sold_out());
        // Holds expire, a poll finds their units, and then a purchase that began before
        // that poll comes back with its proof: the units stay on sale.
        let began = v.restocks;
        v.stock_read(2, vec![0, 2]);
        assert!(!v.refuses_as_sold_out());
        v.proven_empty(began);
        assert!(!v.refuses_as_sold_out());
        assert_eq!(v.remaining, 2);
        // A proof begun after the poll is taken, as are two empty polls with no arrival
        // in between.
        v.proven_empty(v.restocks);
        assert!(v.refuses_as_sold_out());
        v.stock_read(1, vec![0, 3]);
        v.stock_read(0, vec![1, 3]);
        assert!(!v.refuses_as_sold_out());
        v.stock_read(0, vec![1, 3]);
        assert!(v.refuses_as_sold_out());
    }

    #[test]
    fn request_ids_are_the_prefix_and_the_count_in_hex() {
        for n in [0, 1, 9, 10, 15, 16, 255, 4096, 0xdead_beef, u64::MAX] {
            assert_eq!(request_id("0a1b2c3d04", n), format!("0a1b2c3d04-{n:x}"));
        }
    }

    #[test]
    fn stream_slots_cap_each_client_and_the_shard_and_come_back_when_given_back() {
        let ip = |n: u8| IpAddr::from([127, 0, 0, n]);
        let mut slots = StreamSlots::default();
        assert_eq!(slots.take(ip(1), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(1), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(1), 2, 3), Err(StreamCap::Client));
        assert_eq!(slots.take(ip(2), 2, 3), Ok(()));
        assert_eq!(slots.take(ip(3), 2, 3), Err(StreamCap::Shard));
        // A refusal takes nothing.
        assert_eq!((slots.open(), slots.of(ip(1)), slots.of(ip(3))), (3, 2, 0));
        slots.give_back(ip(1));
        assert_eq!(slots.take(ip(3), 2, 3), Ok(()));
        for n in [1, 2, 3] {
            slots.give_back(ip(n));
        }
        // Giving back what was never taken changes nothing.
        slots.give_back(ip(9));
        assert_eq!(slots.open(), 0);
        assert!(slots.by_client.is_empty(), "{:?}", slots.by_client);
    }
}
