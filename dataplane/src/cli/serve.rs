//! `serve`: a node, its shards and (unless told not to) its order worker, until a signal.

use std::process::ExitCode;

use seckill_dataplane::server;
use seckill_orders as orders;

use super::CommonArgs;

#[derive(clap::Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (every shard binds it with SO_REUSEPORT).
    #[arg(long, env = "SECKILL_LISTEN")]
    listen: Option<String>,
    /// Number of shards (default: one per core).
    #[arg(long, env = "SECKILL_SHARDS")]
    shards: Option<usize>,
    /// Let the kernel place the shards instead of pinning each to a core.
    #[arg(long, env = "SECKILL_NO_PIN")]
    no_pin: bool,
    /// Serve POST /api/session, which signs a token for any user id: demos and tests
    /// only, and only on a loopback listener. `--demo-issuer=false` turns it off.
    #[arg(
        long,
        env = "SECKILL_DEMO_ISSUER",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    demo_issuer: Option<bool>,
    /// The demo payment provider ([payments] provider = "demo"): a shopper's own
    /// POST /api/orders/{id}/pay has the node sign a payment webhook to itself. Demos and
    /// tests only, and only on a loopback listener.
    #[arg(long, env = "SECKILL_DEMO_PAYMENTS")]
    demo_payments: bool,
    /// A file holding the payment provider's webhook secret (whsec_…, mode 0600); may be
    /// given more than once, for a rotation ([payments] webhook_secret_files).
    #[arg(
        long = "payment-webhook-secret-file",
        env = "SECKILL_PAYMENT_WEBHOOK_SECRET_FILE"
    )]
    payment_webhook_secret_files: Vec<std::path::PathBuf>,
    /// The shop's JWKS file, re-read when it changes ([identity] jwks_file).
    #[arg(long, env = "SECKILL_JWKS_FILE")]
    jwks_file: Option<std::path::PathBuf>,
    /// The shop's JWKS at an https:// address ([identity] jwks_url).
    #[arg(long, env = "SECKILL_JWKS_URL")]
    jwks_url: Option<String>,
    /// The `iss` shoppers' tokens must carry ([identity] issuer).
    #[arg(long, env = "SECKILL_TOKEN_ISSUER")]
    token_issuer: Option<String>,
    /// The `aud` shoppers' tokens must carry ([identity] audience).
    #[arg(long, env = "SECKILL_TOKEN_AUDIENCE")]
    token_audience: Option<String>,
    /// Do not run the order worker in this process (run `worker` processes instead).
    #[arg(long, env = "SECKILL_NO_WORKER")]
    no_worker: bool,
    /// Address of the admin listener (/metrics, /healthz, /readyz); "" turns it off.
    #[arg(long, env = "SECKILL_ADMIN_LISTEN")]
    admin_listen: Option<String>,
    /// Bearer token every admin request must carry.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
}

pub(super) fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.common.load()?;
    if let Some(v) = a.listen {
        config.listen = v;
    }
    if let Some(v) = a.shards {
        config.shards = Some(v);
    }
    if a.no_pin {
        config.pin_shards = false;
    }
    if let Some(v) = a.demo_issuer {
        config.demo_issuer = v;
    }
    if a.no_worker {
        config.worker.enabled = false;
    }
    if a.demo_payments {
        config.payments.provider = "demo".into();
    }
    if !a.payment_webhook_secret_files.is_empty() {
        config.payments.webhook_secret_files = a.payment_webhook_secret_files;
    }
    if let Some(v) = a.jwks_file {
        config.identity.jwks_file = Some(v);
    }
    if let Some(v) = a.jwks_url {
        config.identity.jwks_url = Some(v);
    }
    if let Some(v) = a.token_issuer {
        config.identity.issuer = Some(v);
    }
    if let Some(v) = a.token_audience {
        config.identity.audience = v;
    }
    if let Some(v) = a.admin_listen {
        config.admin.listen = v;
    }
    if let Some(v) = a.admin_token {
        config.admin.token = Some(v);
    }
    let settings = config.validate()?;
    settings.identity.load_keys()?;
    settings.identity.watch()?;
    let stop = server::stop_on_signals()?;
    let metrics = std::sync::Arc::new(seckill_dataplane::metrics::Metrics::new(
        &settings.node,
        settings.started_ms,
        settings.shards,
        settings.worker.enabled,
    ));
    let worker = settings.worker.enabled.then(|| {
        let (mut opts, stop) = (settings.worker_options(), stop.clone());
        let nice = settings.worker.nice;
        opts.metrics = metrics.worker.clone();
        std::thread::Builder::new()
            .name("seckill-worker".into())
            .spawn(move || {
                lower_priority(nice);
                orders::worker::run(opts, &stop)
            })
    });
    let served = server::run_until(settings, stop.clone(), metrics);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(w) = worker {
        let _ = w?.join();
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Sets the calling thread's nice value (on Linux a thread's own, not its process's).
fn lower_priority(nice: u8) {
    if let Err(e) = rustix::process::setpriority_process(None, i32::from(nice)) {
        tracing::warn!(nice, error = %e, "cannot lower the order worker's priority; it shares the shards' cores as their equal");
    }
}
