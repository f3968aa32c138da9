//! The payment provider as the simulator plays it: its webhook secret (`whsec_…`, in a file
//! of mode 0600 that the nodes' `payments.webhook_secret_files` also name), and the
//! `payment.succeeded` events it sends for the buyers' orders, signed as Standard Webhooks
//! sign them, each with an id of its own that a retry sends again.

use anyhow::anyhow;
use std::path::{Path, PathBuf};

use seckill_core::webhooks::{Signer, WebhookKey};

/// The route the provider's webhooks go to.
pub const WEBHOOK_PATH: &str = "/api/payments/webhook";

/// The provider's webhook secret on the command line (`run`, `burst` and `flood`); for
/// `run`, it overrides the scenario's `webhook_secret_file`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PaymentArgs {
    /// The payment provider's webhook secret: a file of mode 0600 holding `whsec_…` (one
    /// of the nodes' payments.webhook_secret_files). Payments are then webhooks signed with
    /// it, sent to /api/payments/webhook; without it, the demo provider's pay route.
    #[arg(long, env = "SECKILL_PAYMENT_WEBHOOK_SECRET_FILE", value_name = "FILE")]
    pub payment_webhook_secret_file: Option<PathBuf>,
}

impl PaymentArgs {
    /// The signer of `--payment-webhook-secret-file`, if given.
    pub fn signer(&self) -> anyhow::Result<Option<Signer>> {
        self.payment_webhook_secret_file
            .as_deref()
            .map(|p| read_secret(p, "--payment-webhook-secret-file"))
            .transpose()
    }
}

/// The signer of the secret in `path`, a file readable by its owner only; errors name the
/// setting, `name` (a flag or a scenario field).
pub fn read_secret(path: &Path, name: &str) -> anyhow::Result<Signer> {
    let bytes = seckill_core::secrets::read_private(path).map_err(|e| anyhow!("{name}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("{name}: {} does not hold text", path.display()))?;
    let key = WebhookKey::parse(&text).map_err(|e| anyhow!("{name}: {e}"))?;
    Signer::new(&key).ok_or_else(|| {
        anyhow!(
            "{name}: a whpk_ key only verifies webhooks; the provider signs with its whsec_ secret"
        )
    })
}

/// What a unit costs, as the campaign's answer (`GET /api/campaigns/{id}`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    /// In the currency's minor units.
    pub unit_cents: u64,
    pub currency: String,
}

impl Price {
    /// From a campaign's answer to buyers (`GET /api/campaigns/{id}`).
    pub fn of_answer(body: &str) -> Result<Price, serde_json::Error> {
        let info: seckill_core::api::CampaignInfo = serde_json::from_str(body)?;
        Ok(Price {
            unit_cents: info.price_cents,
            currency: info.currency.into_owned(),
        })
    }
}

/// One payment as the provider sends it: sent again as it is (the same `webhook-id`, the
/// same body) until it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub id: String,
    pub payment_id: String,
    pub body: String,
}

/// The provider of a run: its signer, the price of the units sold, the run's stamp, which
/// makes its ids differ from every other run's, and the copies of each webhook it sends at
/// once as a retry storm does.
#[derive(Debug, Clone)]
pub struct Provider {
    signer: Signer,
    price: Price,
    run: String,
    copies: u32,
}

impl Provider {
    /// A provider that signs with `signer`, for units at `price`, its ids stamped `run`.
    pub fn new(signer: Signer, price: Price, run: i64) -> Provider {
        Provider {
            signer,
            price,
            run: run.to_string(),
            copies: 0,
        }
    }

    /// The same provider, sending `copies` copies of each webhook (the same `webhook-id`,
    /// the same body) at once with it, as a provider's retry storm does.
    pub fn with_copies(mut self, copies: u32) -> Provider {
        self.copies = copies;
        self
    }

    /// The copies of each webhook sent at once with it.
    pub fn copies(&self) -> u32 {
        self.copies
    }

    /// Payment `k` of buyer `n` for `units` of `order`: the right amount, or one minor unit
    /// more when `wrong`.
    pub fn payment(&self, n: usize, k: u32, order: &str, units: u64, wrong: bool) -> Webhook {
        let amount = self.price.unit_cents * units + u64::from(wrong);
        let payment_id = format!("pay_{}_{n}_{k}", self.run);
        let body = serde_json::json!({
            "type": "payment.succeeded",
            "timestamp": seckill_core::campaign::format_instant_ms(seckill_core::now_ms()),
            "data": {
                "order_id": order,
                "amount_cents": amount,
                "currency": self.price.currency,
                "payment_id": payment_id,
            },
        })
        .to_string();
        Webhook {
            id: format!("msg_{}_{n}_{k}", self.run),
            payment_id,
            body,
        }
    }

    /// The headers of `w` sent at `now_s` (Unix seconds): `webhook-id`,
    /// `webhook-timestamp` and `webhook-signature`. Each try is signed when it is sent, as
    /// providers sign their retries.
    pub fn headers(&self, w: &Webhook, now_s: i64) -> [(&'static str, String); 3] {
        [
            ("webhook-id", w.id.clone()),
            ("webhook-timestamp", now_s.to_string()),
            (
                "webhook-signature",
                self.signer.sign(&w.id, now_s, w.body.as_bytes()),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_core::webhooks::{Headers, Verifier};

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn provider() -> Provider {
        let key = WebhookKey::parse(SECRET).expect("a secret");
        let price = Price {
            unit_cents: 1250,
            currency: "EUR".into(),
        };
        Provider::new(Signer::new(&key).expect("symmetric"), price, 42)
    }

    #[test]
    fn payments_are_signed_webhooks_the_nodes_verify_each_with_ids_of_its_own() {
        let p = provider();
        let w = p.payment(7, 0, "c.1.3", 2, false);
        assert_eq!(
            (w.id.as_str(), w.payment_id.as_str()),
            ("msg_42_7_0", "pay_42_7_0")
        );
        let body: serde_json::Value = serde_json::from_str(&w.body).expect("json");
        assert_eq!(body["type"], "payment.succeeded");
        assert_eq!(body["data"]["order_id"], "c.1.3");
        assert_eq!(body["data"]["amount_cents"], 2500);
        assert_eq!(body["data"]["currency"], "EUR");
        assert_eq!(body["data"]["payment_id"], "pay_42_7_0");
        let now = seckill_core::now_ms() / 1000;
        let [id, ts, sig] = p.headers(&w, now);
        let verifier = Verifier::new(vec![WebhookKey::parse(SECRET).expect("a secret")]);
        let headers = Headers {
            id: Some(&id.1),
            timestamp: Some(&ts.1),
            signature: Some(&sig.1),
        };
        assert_eq!(
            verifier.verify(headers, w.body.as_bytes(), now),
            Ok("msg_42_7_0")
        );
        // A second payment and a wrong amount: other ids, one cent more.
        let again = p.payment(7, 1, "c.1.3", 2, true);
        assert_ne!(again.id, w.id);
        assert_ne!(again.payment_id, w.payment_id);
        let body: serde_json::Value = serde_json::from_str(&again.body).expect("json");
        assert_eq!(body["data"]["amount_cents"], 2501);
    }

    #[test]
    fn the_secret_is_read_from_a_private_file_and_must_sign() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("webhook.secret");
        seckill_core::secrets::create_private(&path, format!("{SECRET}\n").as_bytes())
            .expect("written");
        assert!(read_secret(&path, "webhook_secret_file").is_ok());
        let open = dir.path().join("open.secret");
        std::fs::write(&open, SECRET).expect("written");
        let mut perms = std::fs::metadata(&open).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
        std::fs::set_permissions(&open, perms).expect("chmod");
        let err = read_secret(&open, "webhook_secret_file").expect_err("mode 0644");
        assert!(
            err.to_string().starts_with("webhook_secret_file: "),
            "{err}"
        );
        // An Ed25519 public key verifies, but cannot sign.
        let public = dir.path().join("public.key");
        let whpk = format!("whpk_{}AQE=", "AQEB".repeat(10));
        seckill_core::secrets::create_private(&public, whpk.as_bytes()).expect("written");
        let err = read_secret(&public, "--payment-webhook-secret-file").expect_err("whpk_");
        assert!(err.to_string().contains("only verifies"), "{err}");
    }
}
