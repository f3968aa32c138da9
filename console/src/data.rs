//! What the console shows, read from the control plane in one pass: every campaign with
//! its partitions (read in one transaction, so the live ledger line is exact even during
//! a surge) and its waiting room, the fleet's telemetry, the limit overrides and the
//! blacklist.

use seckill_core::connection::Connection;
use std::collections::HashMap;

use seckill_core::blacklist;
use seckill_core::campaign::Campaign;
use seckill_core::control::{self, PartitionStock, QueueProgress};
use seckill_core::telemetry::{self, Fleet};

/// One campaign, its stock and its waiting room, as of one read.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRow {
    pub campaign: Campaign,
    pub partitions: Vec<PartitionStock>,
    /// The waiting room's counters, for a campaign with a `[queue]`.
    pub queue: Option<QueueProgress>,
}

impl CampaignRow {
    pub fn id(&self) -> &str {
        &self.campaign.spec.id
    }

    pub fn total(&self) -> i64 {
        self.campaign.spec.total as i64
    }

    pub fn remaining(&self) -> i64 {
        self.partitions.iter().map(|p| p.stock).sum()
    }

    pub fn in_transit(&self) -> i64 {
        self.partitions.iter().map(|p| p.transit).sum()
    }

    pub fn held(&self) -> i64 {
        self.partitions.iter().map(|p| p.held).sum()
    }

    pub fn sold(&self) -> i64 {
        self.partitions.iter().map(|p| p.sold).sum()
    }

    /// Units taken by buyers: held or sold.
    pub fn taken(&self) -> i64 {
        self.held() + self.sold()
    }

    /// Whether the stock has been armed into partitions (drafts have none).
    pub fn armed(&self) -> bool {
        self.partitions.iter().any(|p| p.initial > 0)
    }

    /// The live ledger: remaining + in transit + held + sold = total, and held + sold ≤
    /// total. `None` when it holds; otherwise what is wrong.
    pub fn ledger_problem(&self) -> Option<String> {
        if !self.armed() {
            return None;
        }
        let sum = self.remaining() + self.in_transit() + self.held() + self.sold();
        let mut problems = Vec::new();
        if sum != self.total() {
            problems.push(format!("sum {sum} ≠ total {}", self.total()));
        }
        if self.taken() > self.total() {
            problems.push(format!(
                "oversold: held + sold {} > total {}",
                self.taken(),
                self.total()
            ));
        }
        if let Some(p) = self
            .partitions
            .iter()
            .find(|p| p.stock < 0 || p.held < 0 || p.sold < 0 || p.transit < 0)
        {
            problems.push(format!("partition {} has a negative counter", p.partition));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// How many shoppers the waiting room lets through per second: an operator's rate,
    /// else the campaign file's (Redis holds none until the campaign is armed).
    pub fn admit_per_s(&self) -> Option<u32> {
        let spec = self.campaign.spec.queue?;
        Some(match &self.queue {
            Some(q) if q.admit_per_s > 0 => q.admit_per_s,
            _ => spec.admit_per_s,
        })
    }

    /// The state a shopper sees: live with nothing left and nothing moving is sold out.
    pub fn shown_state(&self) -> &'static str {
        use seckill_core::campaign::State;
        match self.campaign.state {
            State::Live if self.armed() && self.remaining() + self.in_transit() == 0 => "sold_out",
            s => s.as_str(),
        }
    }
}

/// Everything one refresh read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// When it was read (ms since the epoch).
    pub at_ms: i64,
    pub campaigns: Vec<CampaignRow>,
    pub fleet: Fleet,
    /// Limit overrides every node applies (`sk:limits`).
    pub limits: Vec<(String, String)>,
    /// Blacklist entries and when they expire (ms).
    pub blacklist: Vec<(String, i64)>,
}

/// Reads a snapshot of the control plane.
pub fn fetch(con: &mut Connection) -> anyhow::Result<Snapshot> {
    let mut campaigns = Vec::new();
    for campaign in control::list(con)? {
        let partitions = control::partitions(con, &campaign)?;
        let queue = match campaign.spec.queue {
            Some(_) => Some(control::queue_progress(con, &campaign.spec.id)?),
            None => None,
        };
        campaigns.push(CampaignRow {
            campaign,
            partitions,
            queue,
        });
    }
    let overrides: HashMap<String, String> = control::limit_overrides(con)?;
    let mut limits: Vec<(String, String)> = overrides.into_iter().collect();
    limits.sort();
    Ok(Snapshot {
        at_ms: seckill_core::now_ms(),
        campaigns,
        fleet: telemetry::read_fleet(con)?,
        limits,
        blacklist: blacklist::list(con)?,
    })
}

/// Opens a connection that gives up quickly, so a missing Redis shows at once.
pub fn connect(url: &str) -> anyhow::Result<Connection> {
    let mut con = Connection::open(
        url,
        std::time::Duration::from_millis(500),
        Some(std::time::Duration::from_secs(3)),
    )?;
    seckill_core::clock::sync(&mut con);
    Ok(con)
}
