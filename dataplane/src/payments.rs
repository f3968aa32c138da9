//! Who pays orders: the payment provider's signed webhooks (Standard Webhooks), verified
//! with the keys of `payments.webhook_secret_files`; and, for demos, a provider inside
//! the node whose webhooks go through the same door.

use std::time::Duration;

use seckill_core::webhooks::{Signer, Verifier};

/// The payment settings a node runs with.
#[derive(Debug, Clone)]
pub struct Payments {
    /// The keys that verify the provider's webhooks (the demo provider's among them
    /// while it is on).
    pub verifier: Verifier,
    /// The demo provider's signer: `POST /api/orders/{id}/pay` exists only with it.
    pub demo: Option<Signer>,
    /// Replicas that must hold a payment's outcome before it is acknowledged, where the
    /// order's master has replicas.
    pub wait_replicas: u32,
    pub wait_timeout: Duration,
    /// How long a pending payment keeps a hold beyond its deadline.
    pub pending_grace: Duration,
    /// Webhooks a shard takes per second.
    pub webhooks_per_s: f64,
}

/// The kinds of event the provider sends, as Standard Webhooks' `type` names them.
pub const EVENT_TYPES: [(&str, &str); 4] = [
    ("payment.succeeded", "succeeded"),
    ("payment.pending", "pending"),
    ("payment.failed", "failed"),
    ("payment.refunded", "refunded"),
];
