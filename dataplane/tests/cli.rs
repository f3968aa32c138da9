//! The `seckill-dataplane` command line as operators use it.

mod common;

use common::Redis;
use std::process::{Command, Output};

/// The CLI as an operator runs it: the operators' user in the URL, its password in its
/// file.
fn cli(redis: &Redis, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .arg("campaign")
        .args([
            "--redis",
            &format!("redis://seckill-ops@127.0.0.1:{}", redis.port),
        ])
        .arg("--redis-password-file")
        .arg(redis.users().join("ops.password"))
        .args(args)
        .output()
        .expect("run seckill-dataplane")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn campaigns_are_created_armed_once_and_driven_through_their_lifecycle() {
    let redis = Redis::start();
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/campaigns/demo.toml");
    let o = cli(&redis, &["create", "--file", demo]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli(&redis, &["create", "--file", demo]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));

    let o = cli(&redis, &["arm", "demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli(&redis, &["arm", "demo"]);
    assert!(!o.status.success(), "re-arming must be refused");
    assert!(stderr(&o).contains("cannot arm"), "{}", stderr(&o));

    for (action, state) in [
        ("start", "live"),
        ("pause", "paused"),
        ("resume", "live"),
        ("stop", "ended"),
    ] {
        let o = cli(&redis, &[action, "demo"]);
        assert!(o.status.success(), "{action}: {}", stderr(&o));
        assert!(stdout(&o).contains(state), "{action}: {}", stdout(&o));
    }
    let o = cli(&redis, &["start", "demo"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is ended: cannot start"),
        "{}",
        stderr(&o)
    );

    let o = cli(&redis, &["list"]);
    assert!(
        stdout(&o).contains("demo") && stdout(&o).contains("ended"),
        "{}",
        stdout(&o)
    );
    let o = cli(&redis, &["show", "demo", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["campaign"]["state"], "ended");
    assert_eq!(v["ledger"]["remaining"], 1000);
    assert_eq!(v["partitions"].as_array().map(Vec::len), Some(8));
    assert_eq!(v["ledger"]["violations"].as_array().map(Vec::len), Some(0));

    let o = cli(&redis, &["show", "nope"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no campaign 'nope'"), "{}", stderr(&o));
}

#[test]
fn an_invalid_campaign_file_is_refused_by_field() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("bad.toml");
    std::fs::write(
        &f,
        "id = \"bad\"\nname = \"x\"\ntotal = 10\npartitions = 0\nper_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 1\n",
    )
    .expect("write");
    let o = cli(&redis, &["create", "--file", f.to_str().expect("utf-8")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("partitions"), "{}", stderr(&o));
}

#[test]
fn serve_refuses_an_invalid_configuration_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::write_secret(dir.path());
    let secret = dir.path().join("secret");
    let run = |extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"));
        cmd.arg("serve").args(extra);
        if !extra.contains(&"--secret-file") {
            cmd.arg("--secret-file").arg(&secret);
        }
        cmd.output().expect("run")
    };
    for (args, field) in [
        (&["--listen", "not-an-address"][..], "listen"),
        (&["--redis", "http://example"][..], "redis"),
        (&["--shards", "0"][..], "shards"),
        (&["--secret-file", "/nonexistent"][..], "secret_file"),
        (&["--config", "/nonexistent.toml"][..], "config"),
        (&["--admin-listen", "nowhere"][..], "admin.listen"),
    ] {
        let o = run(args);
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(field), "{args:?}: {}", stderr(&o));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .args(["serve", "--listen", "127.0.0.1:1"])
        .arg("--secret-file")
        .arg(&secret)
        .env("SECKILL_SHARDS", "many")
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("shards"), "{}", stderr(&o));
}

#[test]
fn a_waiting_room_is_shown_its_rate_changed_and_its_draw_audited() {
    use redis::Commands;
    use seckill_core::control;
    use seckill_core::keys::QueueKeys;

    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/campaigns/demo.toml");
    let text = std::fs::read_to_string(demo).expect("demo campaign");
    let file = dir.path().join("doors.toml");
    std::fs::write(
        &file,
        format!("{text}\n[queue]\nadmit_per_s = 200\npass_ttl_s = 60\n"),
    )
    .expect("write");
    let file = file.to_str().expect("utf-8");
    for args in [
        &["create", "--file", file, "--id", "doors"][..],
        &["create", "--file", demo][..],
        &["arm", "doors"][..],
    ] {
        let o = cli(&redis, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }

    // Before the opening: the file's rate, and no seed to audit yet.
    let o = cli(&redis, &["queue", "doors"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for shown in ["rate         200 shoppers/s", "draw         at the opening"] {
        assert!(stdout(&o).contains(shown), "{shown}: {}", stdout(&o));
    }
    let o = cli(&redis, &["audit-draw", "doors"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not drawn yet"), "{}", stderr(&o));

    // The rate changes in the room's hash; a rate out of bounds or no number names the
    // flag and changes nothing.
    let o = cli(&redis, &["queue", "doors", "--admit-per-s", "350"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut con = redis.con();
    let meta = QueueKeys::new("doors").meta();
    let rate: String = con.hget(&meta, "admit_per_s").expect("rate");
    assert_eq!(rate, "350");
    for bad in ["0", "100001", "fast"] {
        let o = cli(&redis, &["queue", "doors", "--admit-per-s", bad]);
        assert!(!o.status.success(), "{bad}");
        assert!(
            stderr(&o).contains("--admit-per-s"),
            "{bad}: {}",
            stderr(&o)
        );
    }
    let o = cli(&redis, &["queue", "doors", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["admit_per_s"], 350);
    assert_eq!(v["pass_ttl_ms"], 60_000);
    assert_eq!(v["waiting"], 0);
    assert_eq!(v["seed"], serde_json::Value::Null);

    let o = cli(&redis, &["queue", "demo"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has no waiting room"), "{}", stderr(&o));

    // Three joiners drawn from the seed, then the opening: the audit finds them fair,
    // until one's place is moved.
    let k = QueueKeys::new("doors");
    let seed = "5eed0f0ddba11c0ffee5eed0f0ddba11";
    for user in ["ann", "bob", "cy"] {
        let _: () = con
            .zadd(k.pre(), user, control::draw(seed, user))
            .expect("join");
    }
    let _: () = con
        .hset_multiple(
            &meta,
            &[
                ("seed", seed.to_string()),
                (
                    "seed_sha1",
                    "899f4c78ac3a2e5a1d35297f2d75e43e17b3f2b9".to_string(),
                ),
                ("drawn_ms", seckill_core::now_ms().to_string()),
                ("pre", "3".into()),
            ],
        )
        .expect("draw");
    let o = cli(&redis, &["audit-draw", "doors"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for shown in [seed, "checked      3 pre-queue joiners", "mismatches   0"] {
        assert!(stdout(&o).contains(shown), "{shown}: {}", stdout(&o));
    }
    let o = cli(&redis, &["queue", "doors"]);
    assert!(
        stdout(&o).contains(&format!("seed {seed}")),
        "{}",
        stdout(&o)
    );

    let _: () = con.zadd(k.pre(), "bob", 1).expect("move bob");
    let o = cli(&redis, &["audit-draw", "doors"]);
    assert!(!o.status.success());
    assert!(
        stdout(&o).contains("mismatches   1\n    bob"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("1 of 3 shoppers off the seed"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn exit_codes_tell_a_failed_check_from_one_that_could_not_run() {
    let redis = Redis::start();
    // Nothing to check: 2, with the reason as `error: …`.
    let o = cli(&redis, &["show", "nowhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"))
        .args(["campaign", "--redis", "redis://127.0.0.1:1", "show", "any"])
        .output()
        .expect("run the cli");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // A ledger that does not hold: checked, and failed: 1.
    let mut con = redis.con();
    seckill_core::control::create(&mut con, common::spec("broken", 10, 2, 1)).expect("create");
    seckill_core::control::arm(&mut con, "broken").expect("arm");
    let _: i64 = redis::cmd("HINCRBY")
        .arg(seckill_core::keys::PartitionKeys::new("broken", 0).part())
        .arg("stock")
        .arg(3)
        .query(&mut con)
        .expect("tamper");
    let o = cli(&redis, &["show", "broken"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not hold"), "{}", stderr(&o));
}
