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
