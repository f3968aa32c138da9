//! The payment sections' checks (`[payments]`, `[shop_webhooks]`): the keys that verify
//! the provider's webhooks and the one that signs the shop's, each from a file of mode 0600.

use std::net::{IpAddr, SocketAddr};

use super::validate::positive;
use super::{bad, ConfigError};

/// The payment provider's webhook keys, each from a file of mode 0600; the demo
/// provider only where the demo issuer could serve (a loopback listener, no proxy).
pub(super) fn payments(
    p: &super::PaymentsConfig,
    secrets: &[Vec<u8>],
    listen: SocketAddr,
    trusted_proxies: &[IpAddr],
) -> Result<crate::payments::Payments, ConfigError> {
    use seckill_core::webhooks::{Verifier, WebhookKey};
    let demo = match p.provider.as_str() {
        "webhook" => false,
        "demo" => true,
        other => {
            return Err(bad(
                "payments.provider",
                format!("\"webhook\" or \"demo\", not {other:?}"),
            ))
        }
    };
    if demo && (!listen.ip().is_loopback() || !trusted_proxies.is_empty()) {
        return Err(bad(
            "payments.provider",
            format!(
                "the demo provider lets a shopper pay their own order, so it serves only on a loopback listener without proxies, not {listen}; use the shop's payment provider (provider = \"webhook\")"
            ),
        ));
    }
    let mut keys = Vec::new();
    for f in &p.webhook_secret_files {
        let text = seckill_core::secrets::read_private(f)
            .map_err(|e| bad("payments.webhook_secret_files", e))?;
        let text = std::str::from_utf8(&text).map_err(|_| {
            bad(
                "payments.webhook_secret_files",
                format!("{} is not text", f.display()),
            )
        })?;
        keys.push(WebhookKey::parse(text).map_err(|e| {
            bad(
                "payments.webhook_secret_files",
                format!("{}: {e}", f.display()),
            )
        })?);
    }
    let demo = demo.then(|| seckill_core::node_keys::demo_payments(&secrets[0]));
    if let Some(d) = &demo {
        keys.push(d.key());
    }
    if keys.is_empty() {
        tracing::warn!("payments: no webhook secret (payments.webhook_secret_files): no order can be paid until one is set");
    }
    if p.wait_timeout_ms == 0 || p.wait_timeout_ms > 10_000 {
        return Err(bad(
            "payments.wait_timeout_ms",
            "must be between 1 and 10000",
        ));
    }
    if p.pending_grace_s > 3600 {
        return Err(bad("payments.pending_grace_s", "must be at most 3600"));
    }
    if p.webhooks_per_s == 0 {
        return Err(bad("payments.webhooks_per_s", "must be greater than 0"));
    }
    Ok(crate::payments::Payments {
        verifier: Verifier::new(keys),
        demo,
        wait_replicas: p.wait_replicas,
        wait_timeout: std::time::Duration::from_millis(p.wait_timeout_ms),
        pending_grace: std::time::Duration::from_secs(p.pending_grace_s),
        webhooks_per_s: f64::from(p.webhooks_per_s),
    })
}

/// The shop's webhook endpoint and its secret: both or neither; `https://`, or
/// `http://` to a loopback address (a shop's own host), nothing else.
pub(super) fn shop_webhooks(
    c: &super::ShopWebhooksConfig,
) -> Result<Option<seckill_orders::shop::ShopOptions>, ConfigError> {
    use seckill_core::webhooks::{Signer, WebhookKey};
    let Some(url) = &c.url else {
        if c.secret_file.is_some() {
            return Err(bad(
                "shop_webhooks.url",
                "a secret file is set but no endpoint: set url too (--shop-webhook-url)",
            ));
        }
        return Ok(None);
    };
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| {
            url.strip_prefix(p)
                .is_some_and(|r| r.is_empty() || r.starts_with([':', '/']))
        });
    if !url.starts_with("https://") && !loopback {
        return Err(bad(
            "shop_webhooks.url",
            "an https:// address (http:// only to a loopback address)",
        ));
    }
    let Some(file) = &c.secret_file else {
        return Err(bad(
            "shop_webhooks.secret_file",
            "the shop's webhooks are signed: name the file of its whsec_ secret (--shop-webhook-secret-file)",
        ));
    };
    let text = seckill_core::secrets::read_private(file)
        .map_err(|e| bad("shop_webhooks.secret_file", e))?;
    let key = std::str::from_utf8(&text)
        .map_err(|_| "not text".to_string())
        .and_then(WebhookKey::parse)
        .map_err(|e| {
            bad(
                "shop_webhooks.secret_file",
                format!("{}: {e}", file.display()),
            )
        })?;
    let signer = Signer::new(&key).ok_or_else(|| {
        bad(
            "shop_webhooks.secret_file",
            "the node signs with a symmetric secret (whsec_), not a public key",
        )
    })?;
    positive("shop_webhooks.max_backlog", c.max_backlog)?;
    positive("shop_webhooks.max_backoff_s", c.max_backoff_s)?;
    positive("shop_webhooks.timeout_ms", c.timeout_ms)?;
    Ok(Some(seckill_orders::shop::ShopOptions {
        url: url.clone(),
        signer,
        ca_file: c.ca_file.clone(),
        cap: c.max_backlog,
        max_backoff: std::time::Duration::from_secs(c.max_backoff_s),
        timeout: std::time::Duration::from_millis(c.timeout_ms),
    }))
}
