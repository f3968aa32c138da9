//! One shard: what a pinned executor owns — its Redis connection, its copy of the
//! campaigns, and the tasks that keep that copy fresh. No locks: other shards and nodes
//! are reached only through Redis.

use glommio::channels::local_channel::{self, LocalSender};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::answer::{Endpoint, Outcome};
use crate::config::Settings;
use crate::guard::tokens::VerifiedTokens;
use crate::guard::{Client, Guard, Refusal};
use crate::metrics::ShardMetrics;
use crate::store::{self, Store};
use seckill_core::protocol;

mod demand;
pub mod leases;
mod live;
mod loops;
mod streams;
mod sync;
mod view;

use demand::Demand;
use live::LiveEvents;
use loops::{
    admission_loop, lease_loop, listen_for_changes, rebalance_loop, report_loop, sync_loop,
};
pub use streams::{StreamCap, StreamSlots};
pub use view::CampaignView;

/// A shard's state, reached through what it does: the routes ask it to admit a client, a
/// user or a purchase, to read a campaign, to look up a token or a first answer; only
/// its own tasks (`loops`, `sync`) touch the fields.
pub struct Shard {
    index: usize,
    settings: Rc<Settings>,
    store: Store,
    /// By id, hashed with foldhash: every request names a campaign, and the ids are the
    /// operators' own, not a client's to choose.
    campaigns: RefCell<HashMap<String, CampaignView, foldhash::fast::RandomState>>,
    version: Cell<Option<i64>>,
    /// Set once a sync has read everything: until then the shard's copy is empty, not
    /// true, and shopper routes answer 503.
    synced: Cell<bool>,
    /// When the campaigns were last read in full, whatever the version said.
    reloaded: Cell<Option<Instant>>,
    blacklist_version: Cell<Option<i64>>,
    wake: LocalSender<()>,
    guard: RefCell<Guard>,
    /// The empty partitions lent to this shard, with their first answers.
    leases: RefCell<leases::Leases>,
    /// Session tokens verified here, so a shopper's next request skips the signature.
    tokens: RefCell<VerifiedTokens>,
    /// Answers of the current second, for the fleet telemetry.
    stats: RefCell<crate::telemetry::Window>,
    /// Answers since the start, for `/metrics`.
    metrics: Arc<ShardMetrics>,
    /// The events stream's shared update per campaign.
    live_events: RefCell<LiveEvents>,
    /// Set when the node stops: event streams end.
    stopping: Cell<bool>,
    /// Event streams open on this shard, by client address and in all.
    streams: RefCell<StreamSlots>,
    /// Request ids: a prefix unique to this shard's run, and a counter.
    id_prefix: String,
    requests: Cell<u64>,
    /// The payment provider's webhooks taken here (`payments.webhooks_per_s`).
    webhooks: RefCell<crate::guard::bucket::Bucket>,
}

impl Shard {
    pub fn start(index: usize, settings: Rc<Settings>, metrics: Arc<ShardMetrics>) -> Rc<Self> {
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
        let tokens = RefCell::new(VerifiedTokens::new(settings.http.max_tracked_clients));
        let settings_webhooks_per_s = settings.payments.webhooks_per_s;
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
            webhooks: RefCell::new(crate::guard::bucket::Bucket::full(
                settings_webhooks_per_s,
                Instant::now(),
            )),
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

    /// Takes a place for one of the payment provider's webhooks, or says when to retry.
    pub fn admit_webhook(&self) -> Result<(), std::time::Duration> {
        let rate = self.settings.payments.webhooks_per_s;
        self.webhooks.borrow_mut().take(Instant::now(), rate, rate)
    }

    /// The node's settings, as this shard was started with them.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The shard's Redis: its purchase, payment, ticket and waiting-room operations.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// One read of Redis on the shard's connection (its breaker and its pipeline), for
    /// what the store has no operation of its own for: an order's fields, the admin
    /// listener's gauges.
    pub async fn read(&self, cmd: &redis::Cmd) -> store::Reply {
        self.store.conn.query(cmd).await
    }

    /// Ends the event streams: the node stops.
    pub fn stop(&self) {
        self.stopping.set(true);
    }

    /// Whether the node is stopping.
    pub fn stopping(&self) -> bool {
        self.stopping.get()
    }

    /// Closes the shard's Redis connection, once its connections are done.
    pub fn close(&self) {
        self.store.conn.close();
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
    pub fn refused(&self, client: Client<'_>, now: Instant) {
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

    /// The guard's verdict on a client address: blacklist and per-IP bucket.
    pub fn admit_client(&self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        self.guard.borrow_mut().check_ip(ip, now)
    }

    /// The guard's verdict on a user: blacklist and per-user bucket. A refusal counts
    /// against the user.
    pub fn admit_user(&self, user: &str, now: Instant) -> Result<(), Refusal> {
        let checked = self.guard.borrow_mut().check_user(user, now);
        if checked.is_err() {
            self.refused(Client::User(user), now);
        }
        checked
    }

    /// A purchase about to go to Redis: the shard's share of the campaign's admission.
    pub fn admit_purchase(&self, campaign: &str, now: Instant) -> Result<(), Refusal> {
        self.guard.borrow_mut().admit(campaign, now)
    }

    /// The user of a session token this shard verified before, unless it has expired by
    /// `now_ms` or a key was dropped from the shop's keys since.
    pub fn cached_user(&self, token: &[u8], now_ms: i64) -> Option<Rc<str>> {
        let mut tokens = self.tokens.borrow_mut();
        tokens.keys_dropped(self.settings.identity.keyring.drops());
        tokens.user(token, now_ms)
    }

    /// Keeps a token whose signature held, until `expires_ms`.
    pub fn remember_token(&self, token: &[u8], user: Rc<str>, expires_ms: i64) {
        self.tokens.borrow_mut().insert(token, user, expires_ms);
    }

    /// Whether `user`'s `key` may have a first answer in Redis for `campaign`: `false`
    /// only while the user's partition is lent to this shard and holds none for the key
    /// (see [`leases::Leases::may_have_first_answer`]).
    pub fn may_have_first_answer(
        &self,
        campaign: &str,
        partitions: u32,
        user: &str,
        key: &str,
    ) -> bool {
        self.leases
            .borrow()
            .may_have_first_answer(campaign, partitions, user, key)
    }

    /// Takes a slot for an event stream of `client`, within `http.max_event_streams_*`.
    pub fn take_stream_slot(&self, client: IpAddr) -> Result<(), StreamCap> {
        let h = &self.settings.http;
        self.streams.borrow_mut().take(
            client,
            h.max_event_streams_per_client,
            h.max_event_streams_per_shard,
        )
    }

    /// Gives back a slot [`Shard::take_stream_slot`] gave `client`.
    pub fn give_back_stream_slot(&self, client: IpAddr) {
        self.streams.borrow_mut().give_back(client);
    }

    /// The events stream's current update for campaign `id`, shared by all its streams
    /// on the shard: made by `render` when the campaign changed since the last one.
    pub fn live_event(
        &self,
        id: &str,
        render: impl FnOnce(&CampaignView) -> Option<String>,
    ) -> Option<Rc<str>> {
        let campaigns = self.campaigns.borrow();
        let v = campaigns.get(id)?;
        self.live_events.borrow_mut().of(id, v, render)
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
    fn request_ids_are_the_prefix_and_the_count_in_hex() {
        for n in [0, 1, 9, 10, 15, 16, 255, 4096, 0xdead_beef, u64::MAX] {
            assert_eq!(request_id("0a1b2c3d04", n), format!("0a1b2c3d04-{n:x}"));
        }
    }
}
