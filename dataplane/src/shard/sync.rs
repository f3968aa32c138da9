//! How a shard keeps its copy fresh: the campaigns and limits from the control plane, the
//! blacklist, each selling campaign's stock, and the leases of the partitions of
//! campaigns proven empty.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::leases;
use super::view::CampaignView;
use super::Shard;
use crate::store::{self, StoreError};
use seckill_core::campaign::{Campaign, State};
use seckill_core::protocol;

impl Shard {
    /// Asks for the leases of the partitions of every campaign proven empty, so that a
    /// refused retry with an `Idempotency-Key` ends here; forgets those of the others. A
    /// waiting room's refusals do not end on the shard, so its campaigns are left out.
    pub(super) async fn renew_leases(&self) {
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
    pub(super) async fn sync(&self, announced: bool) -> Result<(), StoreError> {
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
