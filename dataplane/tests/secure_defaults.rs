//! What ships is what gets deployed: a node started as the deployment guide says signs
//! no tokens and keeps its limits; settings that would open a node up refuse to start;
//! secrets and Redis passwords stay with their owners; each Redis user can do only what
//! its programs need.

mod common;

use common::{
    agent, answers, body_json, body_text, free_port, node_keys, open_sale, shopper_token, spec,
    status_of, wait_until, write_jwks, write_secret, Node, Redis, AUDIENCE, ISSUER, SECRET,
};
use seckill_core::auth::Secret;
use seckill_core::identity::Signer;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

/// A process killed when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `seckill-dataplane ARGS` run from `dir`, where no configuration file lies: the node
/// reads its built-in defaults.
fn dataplane(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seckill-dataplane"));
    cmd.current_dir(dir).args(args).env("RUST_LOG", "warn");
    cmd
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn node_url(redis: &Redis) -> String {
    format!("redis://seckill-node@127.0.0.1:{}", redis.port)
}

fn get(url: &str) -> common::Answer {
    match agent().get(url).call() {
        Ok(r) => (r.status().as_u16(), body_json(r)),
        Err(e) => panic!("transport error: {e}"),
    }
}

#[test]
fn a_node_started_as_the_deployment_guide_says_signs_no_tokens_and_keeps_its_limits() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    write_secret(dir.path());
    let (port, admin) = (free_port(), free_port());
    let password_file = redis.users().join("node.password");
    // The shop's key pair, as `keys new` makes it: the private key (mode 0600, never
    // written over) for the shop, its public key in the JWKS for the nodes.
    let new_key = || {
        dataplane(
            dir.path(),
            &[
                "keys", "new", "--alg", "EdDSA", "--kid", "shop-1", "--dir", ".",
            ],
        )
        .output()
        .expect("keys new")
    };
    let made = new_key();
    assert!(made.status.success(), "{}", stderr(&made));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("shop-1.pem"))
        .expect("shop-1.pem")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = new_key();
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--kid"), "{}", stderr(&again));
    let log = std::fs::File::create(dir.path().join("node.log")).expect("log");
    let _node = Proc(
        dataplane(
            dir.path(),
            &[
                "serve",
                "--listen",
                &format!("0.0.0.0:{port}"),
                "--redis",
                &node_url(&redis),
                "--redis-password-file",
                password_file.to_str().expect("utf-8"),
                "--secret-file",
                "secret",
                "--jwks-file",
                "jwks.json",
                "--token-issuer",
                "https://shop.example",
            ],
        )
        // Only so that tests in parallel do not share the default admin port.
        .env("SECKILL_ADMIN_LISTEN", format!("127.0.0.1:{admin}"))
        .env("RUST_LOG", "info")
        .stderr(log)
        .spawn()
        .expect("serve"),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_until("the node", Duration::from_secs(20), || {
        answers(&format!("{base}/api/time"))
    });

    // Nobody can mint a session for someone else.
    let (code, body) = match agent()
        .post(&format!("{base}/api/session"))
        .send(r#"{"user_id":"victim@example.com"}"#)
    {
        Ok(r) => (r.status().as_u16(), body_text(r)),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(code, 404, "{body}");
    assert!(!body.contains("token"), "{body}");

    // The shop's backend signs its shoppers' tokens with its private key.
    let mut con = redis.con();
    let s = spec("deploy", 10, 2, 1);
    seckill_core::control::create(&mut con, s).expect("create");
    seckill_core::control::arm(&mut con, "deploy").expect("arm");
    seckill_core::control::act(&mut con, "deploy", seckill_core::campaign::Action::Start)
        .expect("start");
    // Fresh connections land on any shard: 16 in a row that see the sale live.
    wait_until(
        "every shard to show the sale",
        Duration::from_secs(5),
        || (0..16).all(|_| get(&format!("{base}/api/campaigns/deploy")).1["state"] == "live"),
    );
    let now = seckill_core::now_ms();
    let buy = |token: &str| match agent()
        .post(&format!("{base}/api/campaigns/deploy/purchase"))
        .header("Authorization", &format!("Bearer {token}"))
        .send(r#"{"quantity":1}"#)
    {
        Ok(r) => (r.status().as_u16(), body_json(r)),
        Err(e) => panic!("{e}"),
    };
    // The API guide's example of a shop's backend: PyJWT signs with the key file.
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/shop_token.py"
        ))
        .args([
            "--key-file",
            "shop-1.pem",
            "--issuer",
            "https://shop.example",
            "--ttl-s",
            "600",
            "carol@example.com",
        ])
        .current_dir(dir.path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let (code, body) = buy(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(code, 200, "{body}");
    // However far its expiry, a token is worth max_token_ttl_s (a day) at most.
    let shop = Signer::read(&dir.path().join("shop-1.pem")).expect("the shop's key");
    let (code, body) = buy(&shop.shopper_token(
        "bob",
        "https://shop.example",
        "seckill",
        now + 7 * 86_400_000,
    ));
    assert_eq!(code, 401, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_token_ttl_s")),
        "{body}"
    );
    common::ledger_holds(&redis, "deploy");

    // The admin listener stays on loopback and answers there.
    wait_until("the node to report ready", Duration::from_secs(5), || {
        get(&format!("http://127.0.0.1:{admin}/readyz")).0 == 200
    });

    // The log names the Redis user, never its password.
    let password = std::fs::read_to_string(&password_file).expect("password");
    let logged = std::fs::read_to_string(dir.path().join("node.log")).expect("log");
    assert!(logged.contains("seckill-node"), "{logged}");
    assert!(!logged.contains(password.trim()), "the password was logged");

    // The per-IP limit is on: one address asking 400 times at once, on one keep-alive
    // connection (each answer read, so the connection is reused), is slowed down.
    let agent = agent();
    let limited = (0..400)
        .filter(|_| {
            agent
                .get(&format!("{base}/api/time"))
                .call()
                .is_ok_and(|r| status_of(r) == 429)
        })
        .count();
    assert!(limited > 0, "no request of 400 was rate limited");
}

#[test]
fn settings_that_would_open_a_node_up_refuse_to_start_and_say_why() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    write_secret(dir.path());
    write_jwks(dir.path());
    let password = redis.users().join("node.password");
    let without_keys = |listen: String| {
        vec![
            "serve".to_string(),
            "--listen".into(),
            listen,
            "--redis".into(),
            node_url(&redis),
            "--redis-password-file".into(),
            password.display().to_string(),
            "--secret-file".into(),
            "secret".into(),
        ]
    };
    let base_args = |listen: String| {
        let mut args = without_keys(listen);
        args.extend(["--jwks-file", "jwks.json", "--token-issuer", ISSUER].map(String::from));
        args
    };
    let run = |args: Vec<String>, envs: &[(&str, String)]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = dataplane(dir.path(), &args);
        cmd.env("SECKILL_ADMIN_LISTEN", format!("127.0.0.1:{}", free_port()));
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd
    };

    // No way to tell a shopper: neither the shop's keys nor the demo issuer.
    let o = run(without_keys(format!("127.0.0.1:{}", free_port())), &[])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("identity.jwks_file"), "{}", stderr(&o));

    // The demo issuer beyond loopback.
    let mut args = base_args(format!("0.0.0.0:{}", free_port()));
    args.push("--demo-issuer".into());
    let o = run(args, &[]).output().expect("run");
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("demo_issuer") && e.contains("loopback"), "{e}");

    // The admin listener beyond loopback without a token; with one, the node starts.
    let args = base_args(format!("127.0.0.1:{}", free_port()));
    let open_admin = [("SECKILL_ADMIN_LISTEN", format!("0.0.0.0:{}", free_port()))];
    let o = run(args.clone(), &open_admin).output().expect("run");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("admin.token"), "{}", stderr(&o));
    let port = args[2].rsplit(':').next().expect("port").to_string();
    let with_token = [
        open_admin[0].clone(),
        ("SECKILL_ADMIN_TOKEN", "a token".to_string()),
    ];
    let _started = Proc(run(args, &with_token).spawn().expect("serve"));
    wait_until("the node with a token", Duration::from_secs(20), || {
        answers(&format!("http://127.0.0.1:{port}/api/time"))
    });

    // A configuration that turns the issuer on can be overruled on the command line,
    // and the variable turns it on for a local run.
    std::fs::write(dir.path().join("demo.toml"), "demo_issuer = true\n").expect("config");
    let session = |port: &str| match agent()
        .post(&format!("http://127.0.0.1:{port}/api/session"))
        .send(r#"{"user_id":"alice"}"#)
    {
        Ok(r) => r.status().as_u16(),
        Err(e) => panic!("{e}"),
    };
    for (flag, env, expected) in [
        (Some("--demo-issuer=false"), None, 404),
        (None, Some("true"), 200),
    ] {
        let mut args = base_args(format!("127.0.0.1:{}", free_port()));
        let port = args[2].rsplit(':').next().expect("port").to_string();
        args.extend(["--config".to_string(), "demo.toml".to_string()]);
        if let Some(f) = flag {
            args.push(f.into());
        }
        let envs: Vec<(&str, String)> = env
            .map(|v| ("SECKILL_DEMO_ISSUER", v.to_string()))
            .into_iter()
            .collect();
        let _node = Proc(run(args, &envs).spawn().expect("serve"));
        wait_until("the node", Duration::from_secs(20), || {
            answers(&format!("http://127.0.0.1:{port}/api/time"))
        });
        assert_eq!(session(&port), expected, "{flag:?} {env:?}");
    }
}

#[test]
fn a_secret_others_can_read_or_a_short_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let open = dir.path().join("open");
    std::fs::write(&open, SECRET).expect("write");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // Six bytes of 0xff read as 18 bytes after a lossy conversion; they are six.
    let short = dir.path().join("short");
    seckill_core::secrets::create_private(&short, &[0xff; 31]).expect("write");
    for (file, says) in [(&open, "chmod 600"), (&short, "fewer than 32 bytes")] {
        let o = dataplane(dir.path(), &["serve", "--secret-file"])
            .arg(file)
            .output()
            .expect("run");
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(e.contains("secret_file") && e.contains(says), "{e}");
    }
}

#[test]
fn just_secret_writes_a_file_only_its_owner_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Command::new("just")
        .arg("--justfile")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../justfile"))
        .arg("--working-directory")
        .arg(dir.path())
        .arg("secret")
        .output()
        .expect("just is installed (pip install rust-just)");
    assert!(o.status.success(), "{}", stderr(&o));
    let secret = dir.path().join("data/secret");
    let mode = std::fs::metadata(&secret)
        .expect("secret")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(seckill_core::secrets::read_secret(&secret).is_ok());
}

#[test]
fn a_rotated_node_secret_leaves_the_shops_tokens_alone_and_signs_with_the_new_one() {
    let redis = Redis::start();
    let keys = tempfile::tempdir().expect("tempdir");
    let previous = keys.path().join("previous");
    let old = b"the node secret of the fleet until today";
    seckill_core::secrets::create_private(&previous, old).expect("write");
    let node = Node::start_with(
        &redis,
        1,
        &format!("verify_secret_files = [\"{}\"]\n", previous.display()),
    );
    open_sale(&redis, &node, spec("rot", 10, 1, 1));
    let c = node.client();
    let now = seckill_core::now_ms();
    // The shop's tokens are the shop's key's, whatever the nodes' secret.
    assert_eq!(
        c.purchase("rot", &shopper_token("shopper", now + 60_000), None)
            .0,
        200
    );
    // A token of the old format, signed with a node secret, is no token.
    let raw = seckill_core::auth::sign_download(
        &Secret::new(old.to_vec()).expect("secret"),
        "raw",
        now + 60_000,
    );
    assert_eq!(c.purchase("rot", &raw, None).0, 401);
    // What the node signs itself (the demo issuer's tokens here) uses the first secret.
    let own = c.token("own");
    let first = node_keys();
    let trusted = seckill_core::identity::KeySet::default().with(first.demo_issuer().public_key());
    let rules = seckill_core::identity::Rules {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        leeway_s: 30,
        max_ttl_s: 86_400,
    };
    assert!(seckill_core::identity::verify(&trusted, &rules, &own, now).is_ok());
    let l = common::ledger_holds(&redis, "rot");
    assert_eq!(l.held, 1, "{l}");
}

/// The error of one command, or "ok".
fn outcome(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(_) => "ok".into(),
        // The crate spells the code its own way (`NoPerm`): compare in upper case.
        Err(e) => e.to_string().to_uppercase(),
    }
}

#[test]
fn each_redis_user_can_do_only_what_its_programs_need() {
    use std::os::unix::fs::PermissionsExt;
    let redis = Redis::start();
    for who in ["node", "ops", "admin"] {
        let f = redis.users().join(format!("{who}.password"));
        let mode = std::fs::metadata(&f).expect("file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{who}.password");
    }
    // Without logging in, nothing.
    let mut anonymous = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port))
        .and_then(|c| c.get_connection())
        .expect("connects");
    assert!(outcome(&mut anonymous, &["GET", "sk:limits"]).contains("NOAUTH"));

    let connect = |user: &str| {
        redis::Client::open(common::url_as(&redis.users(), user, redis.port))
            .and_then(|c| c.get_connection())
            .expect("logs in")
    };
    let forbidden: [&[&str]; 7] = [
        &["FLUSHALL"],
        &["FLUSHDB"],
        &["CONFIG", "GET", "*"],
        &["DEBUG", "SLEEP", "0"],
        &["KEYS", "*"],
        &["SCRIPT", "FLUSH"],
        &["SHUTDOWN"],
    ];
    for user in ["seckill-node", "seckill-ops"] {
        let mut con = connect(user);
        for cmd in forbidden {
            let o = outcome(&mut con, cmd);
            assert!(o.contains("NOPERM"), "{user} {cmd:?}: {o}");
        }
    }
    // Nodes read the control plane but cannot rewrite it: a campaign's price, total or
    // state, the limits.
    let mut node = connect("seckill-node");
    assert_eq!(outcome(&mut node, &["HGETALL", "sk:campaign:x"]), "ok");
    for cmd in [
        &["HSET", "sk:campaign:x", "price_cents", "1"][..],
        &["HSET", "sk:limits", "ip_rate", "0"],
        &["SADD", "sk:campaigns", "x"],
        &["SET", "elsewhere", "1"],
    ] {
        let o = outcome(&mut node, cmd);
        assert!(o.contains("NOPERM"), "node {cmd:?}: {o}");
    }
    // What they write for a sale they may.
    assert_eq!(
        outcome(&mut node, &["HSET", "sk:{x.0}:part", "a", "1"]),
        "ok"
    );
    assert_eq!(
        outcome(&mut node, &["ZADD", "sk:fleet", "1", "node:a"]),
        "ok"
    );
    let mut ops = connect("seckill-ops");
    assert_eq!(
        outcome(&mut ops, &["HSET", "sk:limits", "ip_rate", "9"]),
        "ok"
    );
    assert!(outcome(&mut ops, &["SET", "elsewhere", "1"]).contains("NOPERM"));
}

#[test]
fn a_redis_password_never_shows_in_errors_or_help() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let wrong = dir.path().join("wrong");
    seckill_core::secrets::create_private(&wrong, b"not-the-password-4f2a").expect("write");
    let o = dataplane(dir.path(), &["campaign", "list"])
        .args([
            "--redis",
            &format!("redis://seckill-ops@127.0.0.1:{}", redis.port),
        ])
        .arg("--redis-password-file")
        .arg(&wrong)
        .output()
        .expect("run");
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("seckill-ops:***@"), "{e}");
    assert!(!e.contains("not-the-password-4f2a"), "{e}");

    let in_env = "redis://seckill-ops:hunter2-in-the-env@127.0.0.1:1";
    for args in [&["campaign", "--help"][..], &["serve", "--help"]] {
        let o = dataplane(dir.path(), args)
            .env("SECKILL_REDIS", in_env)
            .output()
            .expect("help");
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(all.contains("--redis-password-file"), "{all}");
        assert!(!all.contains("hunter2"), "{all}");
    }
}
