use super::*;

const DEMO: &str = r#"
id = "demo"
name = "Demo album"
total = 1000
partitions = 8
per_user_limit = 1
hold_ttl_s = 300
price_cents = 999
starts_at = "2026-12-01T12:00:00Z"
codes_file = "config/campaigns/demo-codes.txt"
content_file = "demo-album.zip"
"#;

/// A campaign read back from the Redis fields it writes is the same campaign.
fn assert_round_trip(c: Campaign) {
    let h: HashMap<String, String> = c
        .to_fields()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(Campaign::from_fields(&h), Some(c));
}

#[test]
fn parses_and_round_trips_through_redis_fields() {
    let spec = CampaignSpec::from_toml(DEMO).expect("valid");
    assert_eq!(spec.starts_at_ms().expect("valid"), Some(1_796_126_400_000));
    assert_round_trip(Campaign::new(spec).expect("valid"));
    let queued = CampaignSpec::from_toml(&format!(
        "{DEMO}\n[queue]\nadmit_per_s = 200\npass_ttl_s = 60\n"
    ))
    .expect("valid");
    assert_eq!(
        queued.queue,
        Some(QueueSpec {
            admit_per_s: 200,
            pass_ttl_s: 60
        })
    );
    assert_round_trip(Campaign::new(queued).expect("valid"));
}

#[test]
fn allocation_splits_every_unit() {
    let mut spec = CampaignSpec::from_toml(DEMO).expect("valid");
    spec.total = 1003;
    let a = spec.allocation();
    assert_eq!(a.len(), 8);
    assert_eq!(a.iter().sum::<u64>(), 1003);
    assert_eq!(a.iter().max().expect("8") - a.iter().min().expect("8"), 1);
}

#[test]
fn invalid_specs_name_their_field() {
    let cases = [
        ("id = \"demo\"", "id = \"Demo Album\"", "id"),
        ("total = 1000", "total = 0", "total"),
        ("partitions = 8", "partitions = 0", "partitions"),
        ("per_user_limit = 1", "per_user_limit = 0", "per_user_limit"),
        ("hold_ttl_s = 300", "hold_ttl_s = 0", "hold_ttl_s"),
        (
            "content_file = \"demo-album.zip\"",
            "content_file = \"../etc/passwd\"",
            "content_file",
        ),
        (
            "starts_at = \"2026-12-01T12:00:00Z\"",
            "starts_at = \"tomorrow\"",
            "starts_at",
        ),
        (
            "starts_at = \"2026-12-01T12:00:00Z\"",
            "starts_at = \"2026-12-01T12:00:00Z\"\nends_at = \"2026-12-01T11:00:00Z\"",
            "ends_at",
        ),
    ];
    for (from, to, field) in cases {
        let err = CampaignSpec::from_toml(&DEMO.replace(from, to)).expect_err(to);
        assert_eq!(err.field, field, "{to}: {err}");
    }
    let queued = |q: &str| format!("{DEMO}\n[queue]\n{q}\n");
    for (q, field) in [
        ("admit_per_s = 0\npass_ttl_s = 60", "queue.admit_per_s"),
        ("admit_per_s = 100\npass_ttl_s = 1", "queue.pass_ttl_s"),
    ] {
        let err = CampaignSpec::from_toml(&queued(q)).expect_err(q);
        assert_eq!(err.field, field, "{q}: {err}");
    }
    let two_each = queued("admit_per_s = 100\npass_ttl_s = 60")
        .replace("per_user_limit = 1", "per_user_limit = 2");
    let err = CampaignSpec::from_toml(&two_each).expect_err("two per pass");
    assert_eq!(err.field, "per_user_limit", "{err}");
    let err = CampaignSpec::from_toml(&format!("{DEMO}\ncolour = \"red\"")).expect_err("unknown");
    assert!(err.to_string().contains("colour"), "{err}");
    let err =
        CampaignSpec::from_toml(&DEMO.replace("total = 1000", "total = -5")).expect_err("neg");
    assert!(
        err.to_string().contains("total") || err.to_string().contains("invalid"),
        "{err}"
    );
}

#[test]
fn actions_follow_the_lifecycle() {
    assert_eq!(Action::Start.transition().1, State::Live);
    assert!(!Action::Start.transition().0.contains(&State::Draft));
    assert!(Action::Stop.transition().0.contains(&State::Paused));
    assert!(!Action::Resume.transition().0.contains(&State::Ended));
}

#[test]
fn a_campaign_is_priced_in_euros_unless_it_says_otherwise() {
    let spec = CampaignSpec::from_toml(DEMO).expect("valid");
    assert_eq!((spec.currency.as_str(), &spec.payment_url), ("EUR", &None));
    let yen = CampaignSpec::from_toml(&format!(
        "currency = \"JPY\"\npayment_url = \"https://shop.example/pay/{{order_id}}\"\n{DEMO}"
    ))
    .expect("valid");
    assert_eq!(yen.currency, "JPY");
    assert_round_trip(Campaign::new(yen).expect("valid"));
    for (bad, field) in [
        ("currency = \"eur\"", "currency"),
        ("currency = \"EURO\"", "currency"),
        ("payment_url = \"https://shop.example/pay\"", "payment_url"),
        ("payment_url = \"javascript:{order_id}\"", "payment_url"),
    ] {
        let e = CampaignSpec::from_toml(&format!("{bad}\n{DEMO}")).expect_err(bad);
        assert!(e.to_string().contains(field), "{bad}: {e}");
    }
}
