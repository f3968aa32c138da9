//! Micro-benchmarks of the pieces every request runs on its shard: the guard's token
//! buckets, shoppers' JWTs (each algorithm) and tickets verified, routing, and the purchase script's call.
//!
//!     cargo bench -p seckill-dataplane --bench hot

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use hyper::Method;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use seckill_core::auth::Secret;
use seckill_core::identity::{self, Alg, KeySet, Rules, Signer};
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

/// A shopper's first request: the shop's JWT verified in full, for each algorithm a node
/// takes (after it, the shard's cache answers; see `guard::tokens`). The RSA key is a
/// test key of 2048 bits, kept beside this file.
fn tokens(c: &mut Criterion) {
    let rules = Rules {
        issuer: "https://shop.example".into(),
        audience: "seckill".into(),
        leeway_s: 30,
        max_ttl_s: 86_400,
    };
    let now = seckill_core::now_ms();
    let signers = [
        Signer::generate(Alg::EdDSA, "ed").expect("key").0,
        Signer::generate(Alg::ES256, "ec").expect("key").0,
        Signer::from_pem(include_bytes!("keys/rsa-2048.pem"), "rsa").expect("key"),
    ];
    let keys = signers
        .iter()
        .fold(KeySet::default(), |k, s| k.with(s.public_key()));
    let mut g = c.benchmark_group("tokens");
    for s in &signers {
        let token = s.shopper_token(
            "shopper-42",
            &rules.issuer,
            &rules.audience,
            now + 3_600_000,
        );
        g.bench_function(format!("verify shopper's JWT {}", s.alg().name()), |b| {
            b.iter(|| identity::verify(&keys, &rules, black_box(&token), now).expect("valid"))
        });
    }
    let token = signers[0].shopper_token(
        "shopper-42",
        &rules.issuer,
        &rules.audience,
        now + 3_600_000,
    );
    g.bench_function("refuse forged JWT EdDSA", |b| {
        let forged = format!("{}A", &token[..token.len() - 1]);
        b.iter(|| identity::verify(&keys, &rules, black_box(&forged), now).is_err())
    });
    let secret = Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).expect("secret");
    let ticket = sign_ticket(
        &secret,
        &Ticket {
            campaign: "spring-drop".into(),
            user: "shopper-42".into(),
            id: "t-9f3a".into(),
        },
        FAR,
    );
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
