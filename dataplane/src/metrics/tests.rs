use super::*;

#[test]
fn counts_from_every_shard_add_up_in_the_exposition() {
    let m = Metrics::new("n1", 1_700_000_000_000, 2, true);
    let req = |s: usize, r, o, took| m.shards[s].request(r, o, took);
    req(
        0,
        Endpoint::Purchase,
        Outcome::Ok,
        Duration::from_micros(300),
    );
    req(1, Endpoint::Purchase, Outcome::Ok, Duration::from_millis(3));
    req(
        1,
        Endpoint::Purchase,
        Outcome::RateLimited,
        Duration::from_micros(50),
    );
    req(
        0,
        Endpoint::Other,
        Outcome::NotFound,
        Duration::from_micros(50),
    );
    if let Some(w) = &m.worker {
        w.delivered_after(Duration::from_millis(20));
    }
    let text = render(
        &m,
        &[CampaignGauges {
            id: "c1".into(),
            state: "live",
            total: 10,
            remaining: 4,
            held: 5,
            sold: 1,
            ..Default::default()
        }],
    );
    for line in [
        "seckill_http_requests_total{route=\"purchase\",outcome=\"ok\"} 2",
        "seckill_http_requests_total{route=\"purchase\",outcome=\"rate_limited\"} 1",
        "seckill_http_requests_total{route=\"other\",outcome=\"not_found\"} 1",
        "seckill_rate_limited_total 1",
        "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"0.0001\"} 1",
        "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"0.0005\"} 2",
        "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"+Inf\"} 3",
        "seckill_http_request_duration_seconds_count{route=\"purchase\"} 3",
        "seckill_campaign_remaining_units{campaign=\"c1\"} 4",
        "seckill_campaign_state{campaign=\"c1\",state=\"live\"} 1",
        "seckill_campaign_state{campaign=\"c1\",state=\"ended\"} 0",
        "seckill_worker_delivered_total 1",
        "seckill_worker_pay_to_delivered_seconds_bucket{le=\"0.025\"} 1",
        "seckill_redis_up{shard=\"1\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    // Every sample line is `name{labels} value` or `name value`, with a number.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let v = l.rsplit(' ').next().expect("a value");
        assert!(v.parse::<f64>().is_ok(), "{l}");
    }
}

#[test]
fn build_and_process_metrics_are_exposed() {
    let text = render(&Metrics::new("n1", 0, 1, false), &[]);
    let version = env!("CARGO_PKG_VERSION");
    assert!(text.contains(&format!("seckill_build_info{{version=\"{version}\"}} 1\n")));
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        let v: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("missing {name}\n{text}"))
            .parse()
            .expect("a number");
        // A test process may not have used a whole clock tick of CPU yet.
        let least = if name == "process_cpu_seconds_total" {
            0.0
        } else {
            1.0
        };
        assert!(v >= least, "{name} {v}");
    }
}

#[test]
fn process_figures_come_from_proc() {
    let stat = "4242 (a (odd) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                250 50 0 0 20 0 3 0 12300 1000000 500 18446744073709551615";
    let status = "Name:\tseckill\nVmRSS:\t   2048 kB\nThreads:\t3\n";
    let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
    assert_eq!(
        Process::parse(stat, status, boot, 17),
        Some(Process {
            cpu_seconds: 3.0,
            resident_bytes: 2048 * 1024,
            open_fds: 17,
            start_time_seconds: 1_700_000_123.0,
        })
    );
    assert_eq!(Process::parse("garbage", status, boot, 1), None);
}

#[test]
fn an_ended_campaign_leaves_after_its_ttl() {
    let m = Metrics::new("n1", 0, 1, false);
    let hour = 3_600_000;
    assert!(m.shows("c1", "live", 0, hour));
    assert!(m.shows("c1", "ended", 1_000, hour), "just ended");
    assert!(m.shows("c1", "ended", 1_000 + hour - 1, hour));
    assert!(
        !m.shows("c1", "ended", 1_000 + hour, hour),
        "gone after the ttl"
    );
    // Started again (a campaign reopened): shown, and its clock starts over.
    assert!(m.shows("c1", "live", 2 * hour, hour));
    assert!(m.shows("c1", "ended", 3 * hour, hour));
    assert!(!m.shows("c2", "ended", 0, 0), "a zero ttl hides at once");
    m.forget_except(&["c2"]);
    assert!(
        m.shows("c1", "ended", 10 * hour, hour),
        "forgotten, seen anew"
    );
}
