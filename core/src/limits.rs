//! The rate limits and automatic blocking every node applies: configured per node, and
//! overridden live through the control plane (`sk:limits`).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Rates are per second and per shard (admission: per campaign and node, split over the
/// node's shards). A rate of 0 turns that limit off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub ip_rate: f64,
    pub ip_burst: f64,
    pub user_rate: f64,
    pub user_burst: f64,
    /// Purchases per second one node lets through to Redis, per campaign.
    pub admission_rate: f64,
    pub admission_burst: f64,
    /// A client IP or user refused this many times within the window is blacklisted
    /// for `auto_block_ttl_s`. 0 turns the rule off.
    pub auto_block_refusals: u32,
    pub auto_block_window_s: u64,
    pub auto_block_ttl_s: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            ip_rate: 100.0,
            ip_burst: 200.0,
            user_rate: 5.0,
            user_burst: 10.0,
            admission_rate: 100_000.0,
            admission_burst: 20_000.0,
            auto_block_refusals: 1000,
            auto_block_window_s: 10,
            auto_block_ttl_s: 600,
        }
    }
}

impl Limits {
    pub const FIELDS: [&'static str; 9] = [
        "ip_rate",
        "ip_burst",
        "user_rate",
        "user_burst",
        "admission_rate",
        "admission_burst",
        "auto_block_refusals",
        "auto_block_window_s",
        "auto_block_ttl_s",
    ];

    /// Sets one field from its name and text value, checking it.
    pub fn set(&mut self, field: &str, value: &str) -> Result<(), String> {
        let num: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("{field}: '{value}' is not a number of 0 or more"))?;
        let whole = || -> Result<u64, String> {
            (num.fract() == 0.0 && num <= 1e12)
                .then_some(num as u64)
                .ok_or_else(|| format!("{field}: '{value}' is not a whole number"))
        };
        match field {
            "ip_rate" => self.ip_rate = num,
            "ip_burst" => self.ip_burst = num,
            "user_rate" => self.user_rate = num,
            "user_burst" => self.user_burst = num,
            "admission_rate" => self.admission_rate = num,
            "admission_burst" => self.admission_burst = num,
            "auto_block_refusals" => {
                self.auto_block_refusals = whole()?.min(u64::from(u32::MAX)) as u32
            }
            "auto_block_window_s" => self.auto_block_window_s = whole()?,
            "auto_block_ttl_s" => self.auto_block_ttl_s = whole()?,
            other => {
                return Err(format!(
                    "{other}: unknown limit (known: {})",
                    Self::FIELDS.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Every rate and burst a finite number of 0 or more.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (field, v) in [
            ("ip_rate", self.ip_rate),
            ("ip_burst", self.ip_burst),
            ("user_rate", self.user_rate),
            ("user_burst", self.user_burst),
            ("admission_rate", self.admission_rate),
            ("admission_burst", self.admission_burst),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err((field, "must be a number of 0 or more".into()));
            }
        }
        Ok(())
    }

    /// These limits with the control plane's overrides applied; bad overrides are skipped.
    pub fn with_overrides(mut self, overrides: &HashMap<String, String>) -> Self {
        for (k, v) in overrides {
            if let Err(e) = self.set(k, v) {
                tracing::warn!(error = %e, "ignoring a bad limit override");
            }
        }
        self
    }
}
