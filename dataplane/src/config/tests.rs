use super::*;

fn with_secret(text: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    seckill_core::secrets::create_private(&secret, b"a secret of more than thirty-two bytes\n")
        .expect("write");
    let mut c = Config::from_toml(text).expect("parses");
    c.secret_file = secret;
    (dir, c)
}

#[test]
fn defaults_are_valid() {
    let (_d, c) = with_secret("");
    let s = c.validate().expect("valid");
    assert_eq!(s.redis[0].port, 6390);
    assert!(s.shards >= 1);
}

#[test]
fn the_file_sets_nested_fields() {
    let (_d, c) =
        with_secret("listen = \"127.0.0.1:9000\"\nshards = 2\n[http]\nmax_body_bytes = 1000\n");
    let s = c.validate().expect("valid");
    assert_eq!(s.listen.port(), 9000);
    assert_eq!(s.shards, 2);
    assert_eq!(s.http.max_body_bytes, 1000);
}

#[test]
fn invalid_values_name_their_field() {
    let cases = [
        ("listen = \"nowhere\"", "listen"),
        ("redis = \"http://x\"", "redis"),
        ("shards = 0", "shards"),
        ("[control]\npoll_ms = 5000", "control.poll_ms"),
        ("[http]\nmax_body_bytes = 1", "http.max_body_bytes"),
        (
            "[redis_client]\ncommand_timeout_ms = 0",
            "redis_client.command_timeout_ms",
        ),
        ("[breaker]\nmin_calls = 0", "breaker.min_calls"),
        (
            "[redis_client]\ncommand_timeout_ms = 200",
            "breaker.slow_call_ms",
        ),
        (
            "[control]\nmax_clock_skew_ms = 10",
            "control.max_clock_skew_ms",
        ),
        (
            "[http]\nmax_connections_per_shard = 100\nmax_event_streams_per_shard = 100",
            "http.max_event_streams_per_shard",
        ),
        (
            "[http]\nmax_event_streams_per_client = 0",
            "http.max_event_streams_per_client",
        ),
        ("[worker]\nnice = 20", "worker.nice"),
    ];
    for (text, field) in cases {
        let (_d, c) = with_secret(text);
        let err = c.validate().expect_err(text);
        assert_eq!(err.field, field, "{text}: {err}");
    }
}

#[test]
fn unknown_or_mistyped_fields_are_refused_by_name() {
    let err = Config::from_toml("shards = \"two\"").expect_err("type");
    assert_eq!(err.field, "shards", "{err}");
    let err = Config::from_toml("[http]\nmax_headers = -1").expect_err("type");
    assert_eq!(err.field, "http.max_headers", "{err}");
    let err = Config::from_toml("lisen = \"x\"").expect_err("unknown");
    assert!(err.to_string().contains("lisen"), "{err}");
}

#[test]
fn a_missing_short_or_shared_secret_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, mut c) = with_secret("");
    c.secret_file = dir.path().join("absent");
    assert_eq!(c.validate().expect_err("absent").field, "secret_file");
    // Six bytes of 0xff are six bytes, however a lossy conversion would count them.
    for short in [&b"short"[..], &[0xff; 6], &[0xff; 31]] {
        let p = dir.path().join(format!("short{}", short.len()));
        seckill_core::secrets::create_private(&p, short).expect("write");
        c.secret_file = p;
        assert_eq!(c.validate().expect_err("short").field, "secret_file");
    }
    let p = dir.path().join("raw");
    seckill_core::secrets::create_private(&p, &[0xff; 32]).expect("write");
    c.secret_file = p.clone();
    assert!(c.validate().is_ok(), "32 raw bytes are enough");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = c.validate().expect_err("world-readable");
    assert_eq!(err.field, "secret_file");
    assert!(err.problem.contains("chmod 600"), "{err}");
}

#[test]
fn the_demo_issuer_and_an_open_admin_listener_stay_on_loopback() {
    let (_d, c) = with_secret("listen = \"0.0.0.0:8080\"\ndemo_issuer = true");
    let err = c.validate().expect_err("demo issuer beyond loopback");
    assert_eq!(err.field, "demo_issuer");
    assert!(err.problem.contains("loopback"), "{err}");
    let (_d, c) = with_secret("listen = \"127.0.0.1:8080\"\ndemo_issuer = true");
    assert!(c.validate().is_ok());
    // Nor behind a proxy, which would bring it requests from anywhere.
    let (_d, c) = with_secret(
        "listen = \"127.0.0.1:8080\"\ndemo_issuer = true\n[http]\ntrusted_proxies = [\"127.0.0.1\"]",
    );
    let err = c.validate().expect_err("demo issuer behind a proxy");
    assert_eq!(err.field, "demo_issuer");
    assert!(err.problem.contains("http.trusted_proxies"), "{err}");
    let (_d, c) = with_secret("[metrics]\nended_campaign_ttl_s = 2592001");
    assert_eq!(
        c.validate().expect_err("too long").field,
        "metrics.ended_campaign_ttl_s"
    );
    let (_d, c) = with_secret("");
    assert_eq!(c.metrics.ended_campaign_ttl_s, 3600);
    let (_d, c) = with_secret("[admin]\nlisten = \"0.0.0.0:9090\"");
    assert_eq!(c.validate().expect_err("no token").field, "admin.token");
    let (_d, c) = with_secret("[admin]\nlisten = \"0.0.0.0:9090\"\ntoken = \"t0ken\"");
    assert!(c.validate().is_ok());
}

#[test]
fn the_built_in_defaults_are_the_production_ones() {
    let c = Config::default();
    assert!(!c.demo_issuer);
    assert!(c.limits.ip_rate > 0.0 && c.limits.user_rate > 0.0);
    assert_eq!(c.admin.listen, "127.0.0.1:9090");
    // And so is the file a node reads when given none.
    let shipped = Config::from_toml(include_str!("../../../config/dataplane.toml"))
        .expect("config/dataplane.toml parses");
    assert!(!shipped.demo_issuer);
    assert!(shipped.limits.ip_rate > 0.0 && shipped.limits.user_rate > 0.0);
    assert!(shipped
        .admin
        .listen
        .parse::<SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback()));
}

#[test]
fn a_missing_default_file_means_defaults() {
    let p = Path::new("/nonexistent/dataplane.toml");
    assert!(Config::load(p, false).is_ok());
    assert_eq!(Config::load(p, true).expect_err("named").field, "config");
}

#[test]
fn the_shops_keys_are_one_source_read_at_start_with_its_issuer() {
    let jwks = |dir: &tempfile::TempDir, text: &str| {
        let p = dir.path().join("jwks.json");
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    };
    let signer = seckill_core::identity::Signer::ed25519(&[1; 32], "k1");
    let good = serde_json::json!({"keys": [signer.jwk()]}).to_string();
    let (d, c) = with_secret("");
    let file = jwks(&d, &good);
    // Neither the shop's keys nor the demo issuer: a worker may, a node serving may not.
    let s = c.validate().expect("a worker's settings");
    assert_eq!(
        s.identity.load_keys().expect_err("no keys").field,
        "identity.jwks_file"
    );
    let with = |extra: &str| with_secret(&format!("[identity]\n{extra}"));
    // A worker reads the file too, and takes none of it.
    let (_x, c) = with("jwks_file = \"/nonexistent/jwks.json\"");
    let s = c.validate().expect("a worker's settings");
    assert_eq!(
        s.identity.load_keys().expect_err("no issuer").field,
        "identity.issuer"
    );
    let (_x, c) = with("jwks_file = \"/nonexistent/jwks.json\"\nissuer = \"i\"");
    let s = c.validate().expect("a worker's settings");
    assert_eq!(
        s.identity.load_keys().expect_err("no file").field,
        "identity.jwks_file"
    );
    let (_x, c) = with(&format!(
        "jwks_file = \"{file}\"\nissuer = \"https://shop.example\""
    ));
    let s = c.validate().expect("valid");
    s.identity.load_keys().expect("the keys");
    assert_eq!(s.identity.keyring.keys().kids().collect::<Vec<_>>(), ["k1"]);
    assert_eq!(s.identity.rules.audience, "seckill");
    let (_x, c) = with(&format!(
        "jwks_file = \"{file}\"\njwks_url = \"https://id.example/jwks\"\nissuer = \"i\""
    ));
    assert_eq!(c.validate().expect_err("both").field, "identity.jwks_url");
    let (_x, c) = with("jwks_url = \"http://id.example/jwks\"\nissuer = \"i\"");
    let err = c.validate().expect_err("plain http");
    assert_eq!(err.field, "identity.jwks_url");
    assert!(err.problem.contains("https"), "{err}");
    let (_x, c) = with("jwks_ca_file = \"/etc/ca.pem\"");
    assert_eq!(
        c.validate().expect_err("ca alone").field,
        "identity.jwks_ca_file"
    );
    for bad in [
        "nope",
        "{}",
        r#"{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}"#,
    ] {
        let (d2, _) = with_secret("");
        let f = jwks(&d2, bad);
        let (_x, c) = with(&format!("jwks_file = \"{f}\"\nissuer = \"i\""));
        let err = c
            .validate()
            .expect("valid settings")
            .identity
            .load_keys()
            .expect_err(bad);
        assert_eq!(err.field, "identity.jwks_file", "{bad}");
    }
    let (_x, c) = with(&format!(
        "jwks_file = \"{file}\"\nissuer = \"i\"\nleeway_s = 301"
    ));
    assert_eq!(c.validate().expect_err("leeway").field, "identity.leeway_s");
    // The demo issuer alone: its key, and an issuer of its own.
    let (_x, c) = with_secret("demo_issuer = true");
    let s = c.validate().expect("valid");
    s.identity.load_keys().expect("the demo issuer's key");
    assert_eq!(s.identity.rules.issuer, "seckill-demo");
    assert_eq!(
        s.identity.keyring.keys().kids().collect::<Vec<_>>(),
        [seckill_core::node_keys::DEMO_KID]
    );
}

#[test]
fn payments_are_checked_and_the_demo_provider_stays_on_loopback() {
    let (d, c) = with_secret("");
    let s = c.validate().expect("valid");
    assert!(s.payments.demo.is_none() && s.payments.verifier.is_empty());
    assert_eq!(s.payments.wait_replicas, 1);
    let (_d, c) = with_secret("[payments]\nprovider = \"paypal\"");
    assert_eq!(
        c.validate().expect_err("provider").field,
        "payments.provider"
    );
    let (_d, c) = with_secret("listen = \"0.0.0.0:8080\"\n[payments]\nprovider = \"demo\"");
    let e = c.validate().expect_err("demo beyond loopback");
    assert_eq!(e.field, "payments.provider");
    let (_d, c) = with_secret("[payments]\nprovider = \"demo\"");
    assert!(c.validate().expect("demo").payments.demo.is_some());
    // A secret file must be private and hold a key as the spec writes it.
    let loose = d.path().join("loose.secret");
    std::fs::write(&loose, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("write");
    let (_d2, c) = with_secret(&format!(
        "[payments]\nwebhook_secret_files = [\"{}\"]",
        loose.display()
    ));
    let e = c.validate().expect_err("mode 0644");
    assert_eq!(e.field, "payments.webhook_secret_files");
    assert!(e.problem.contains("chmod 600"), "{e}");
    let bad = d.path().join("bad.secret");
    seckill_core::secrets::create_private(&bad, b"hunter2").expect("write");
    let (_d2, c) = with_secret(&format!(
        "[payments]\nwebhook_secret_files = [\"{}\"]",
        bad.display()
    ));
    assert!(c
        .validate()
        .expect_err("not whsec")
        .problem
        .contains("whsec_"));
    let good = d.path().join("good.secret");
    seckill_core::secrets::create_private(&good, b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        .expect("write");
    let (_d2, c) = with_secret(&format!(
        "[payments]\nwebhook_secret_files = [\"{}\"]",
        good.display()
    ));
    assert!(!c.validate().expect("valid").payments.verifier.is_empty());
}

#[test]
fn the_shops_webhooks_need_an_https_endpoint_and_a_private_secret() {
    let (d, c) = with_secret("");
    assert!(c.validate().expect("valid").shop.is_none());
    let secret = d.path().join("shop.secret");
    seckill_core::secrets::create_private(&secret, b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .expect("write");
    let with = |url: &str, file: Option<&Path>| {
        let file = file.map_or(String::new(), |f| {
            format!("secret_file = \"{}\"\n", f.display())
        });
        with_secret(&format!("[shop_webhooks]\nurl = \"{url}\"\n{file}"))
    };
    for ok in [
        "https://shop.example/hooks",
        "http://127.0.0.1:9000/hooks",
        "http://localhost/h",
    ] {
        let (_d, c) = with(ok, Some(&secret));
        assert!(c.validate().expect(ok).shop.is_some(), "{ok}");
    }
    for bad in [
        "http://shop.example/hooks",
        "http://127.0.0.1.evil.example/",
        "ftp://x",
    ] {
        let (_d, c) = with(bad, Some(&secret));
        assert_eq!(
            c.validate().expect_err(bad).field,
            "shop_webhooks.url",
            "{bad}"
        );
    }
    let (_d, c) = with("https://shop.example/hooks", None);
    assert_eq!(
        c.validate().expect_err("no secret").field,
        "shop_webhooks.secret_file"
    );
    let public = d.path().join("shop.pub");
    seckill_core::secrets::create_private(
        &public,
        b"whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
    )
    .expect("write");
    let (_d, c) = with("https://shop.example/hooks", Some(&public));
    assert!(c
        .validate()
        .expect_err("public key")
        .problem
        .contains("whsec_"));
}
