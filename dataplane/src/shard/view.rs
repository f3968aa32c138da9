//! A campaign as one shard sees it: the control plane's definition, the stock its polls
//! read, and whether it is proven sold out, which lets the shard refuse purchases alone.

use std::time::{Duration, Instant};

use super::demand::Demand;
use seckill_core::campaign::{Campaign, State};
use seckill_core::protocol::QueueProgress;

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
    pub(super) fn new(campaign: Campaign) -> Self {
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
    pub(super) fn stock_read(&mut self, remaining: i64, inflows: Vec<i64>) {
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
    pub(super) fn proven_empty(&mut self, restocks: u64) {
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
    pub(super) fn due(&mut self, announced: bool, now: Instant) -> bool {
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
}
