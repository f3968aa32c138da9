//! Micro-benchmarks of the pieces every request runs on its shard: the guard's token
//! buckets, token and ticket verification, routing, and the purchase script's call.
//!
//!     cargo bench -p seckill-dataplane --bench hot

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use hyper::Method;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use seckill_core::auth::{issue_token, verify_token, Secret};
use seckill_core::keys::{partition_of, PartitionKeys};
use seckill_core::purchase::{call as purchase_call, Queued};
use seckill_dataplane::guard::pow::{sign_ticket, verify_ticket, Ticket};
use seckill_dataplane::guard::{Guard, Limits};
use seckill_dataplane::request::Route;

const FAR: i64 = 4_000_000_000_000;

fn guard(c: &mut Criterion) {
    let limits = Limits {
        ip_rate: 1e9,
        ip_burst: 1e9,
        user_rate: 1e9,
        user_burst: 1e9,
        ..Limits::default()
    };
    let mut g = c.benchmark_group("guard");
    g.bench_function("ip and user, one shopper", |b| {
        let mut guard = Guard::new(limits, 1, 1 << 20);
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let now = Instant::now();
        b.iter(|| {
            black_box(guard.check_ip(black_box(ip), now).is_ok());
            black_box(guard.check_user(black_box("shopper-42"), now).is_ok());
        })
    });
    g.bench_function("ip and user, 100k shoppers", |b| {
        let mut guard = Guard::new(limits, 1, 1 << 20);
        let users: Vec<String> = (0..100_000).map(|i| format!("u{i}")).collect();
        let now = Instant::now();
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) % users.len();
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i as u32));
            black_box(guard.check_ip(ip, now).is_ok());
            black_box(guard.check_user(&users[i], now).is_ok());
        })
    });
    g.bench_function("admission", |b| {
        let mut guard = Guard::new(limits, 1, 1 << 20);
        let now = Instant::now();
        b.iter(|| black_box(guard.admit(black_box("spring-drop"), now).is_ok()))
    });
    g.finish();
}

fn tokens(c: &mut Criterion) {
    let secret = Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).expect("secret");
    let token = issue_token(&secret, "shopper-42", FAR);
    let ticket = sign_ticket(
        &secret,
        &Ticket {
            campaign: "spring-drop".into(),
            user: "shopper-42".into(),
            id: "t-9f3a".into(),
        },
        FAR,
    );
    let mut g = c.benchmark_group("tokens");
    g.bench_function("verify session token", |b| {
        b.iter(|| verify_token(&secret, black_box(&token), 1, i64::MAX).expect("valid"))
    });
    g.bench_function("refuse forged token", |b| {
        let forged = format!("{}A", &token[..token.len() - 1]);
        b.iter(|| verify_token(&secret, black_box(&forged), 1, i64::MAX).is_err())
    });
    g.bench_function("verify ticket", |b| {
        b.iter(|| verify_ticket(&secret, black_box(&ticket), 1).expect("valid"))
    });
    g.finish();
}

fn routing(c: &mut Criterion) {
    let mut g = c.benchmark_group("routing");
    for (name, method, path) in [
        (
            "purchase",
            Method::POST,
            "/api/campaigns/spring-drop/purchase",
        ),
        ("time", Method::GET, "/api/time"),
        ("unknown", Method::GET, "/wp-admin/setup-config.php"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(Route::of(black_box(&method), black_box(path)).is_ok()))
        });
    }
    g.bench_function("partition of user", |b| {
        b.iter(|| partition_of(black_box("shopper-1234567"), black_box(8)))
    });
    g.finish();
}

fn script_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("purchase call");
    let req = Queued {
        user: "shopper-1234567".into(),
        quantity: 1,
        idempotency_key: Some("9b2f6c1e-4d7a".into()),
        ticket: None,
        pass_expires_ms: None,
    };
    let (campaign, partitions) = ("spring-drop", 8);
    g.bench_function("keys, arguments and RESP bytes", |b| {
        b.iter(|| {
            let p = partition_of(&req.user, partitions);
            let keys = PartitionKeys::new(campaign, p);
            purchase_call(&keys, p, campaign, std::slice::from_ref(black_box(&req)))
                .get_packed_command()
        })
    });
    g.bench_function("RESP bytes of a built call", |b| {
        let keys = PartitionKeys::new(campaign, 3);
        b.iter_batched(
            || purchase_call(&keys, 3, campaign, std::slice::from_ref(&req)),
            |cmd| cmd.get_packed_command(),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = hot;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = guard, tokens, routing, script_call
}
criterion_main!(hot);
