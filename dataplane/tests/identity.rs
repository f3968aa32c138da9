//! Shoppers' identity as a shop issues it: JWTs minted by PyJWT (a library nobody here
//! wrote) against the shop's JWKS, taken or refused as RFC 8725 says; the shop's keys
//! rotated through its JWKS file under a surge; and the node's own keys, which a shop's
//! token opens none of.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use seckill_core::identity::Signer;

const PYJWT_ISSUER: &str = "https://shop.pyjwt";

/// The shop's keys, its JWKS in `dir` and a token a case, from PyJWT.
fn pyjwt_cases(dir: &Path) -> BTreeMap<String, String> {
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/identity/pyjwt_cases.py"
        ))
        .arg(dir)
        .arg(PYJWT_ISSUER)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{} (just setup installs pyjwt[crypto])",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cases")
}

#[test]
fn tokens_minted_by_pyjwt_are_taken_or_refused_as_rfc_8725_says() {
    let redis = Redis::start();
    let keys = tempfile::tempdir().expect("tempdir");
    let cases = pyjwt_cases(keys.path());
    let node = Node::start_logging_with(
        &redis,
        2,
        &format!(
            "[identity]\njwks_file = \"{}\"\nissuer = \"{PYJWT_ISSUER}\"\n",
            keys.path().join("jwks.json").display()
        ),
        "json",
        "info",
    );
    open_sale(&redis, &node, spec("jwt", 10, 2, 1));
    let c = node.client();
    for (case, token) in &cases {
        let (code, body) = c.purchase("jwt", token, None);
        if case.starts_with("ok ") {
            assert_eq!(code, 200, "{case}: {body}");
        } else {
            assert_eq!(code, 401, "{case}: {body}");
            assert_eq!(body["error"], "unauthenticated", "{case}: {body}");
            assert!(body["message"].is_string(), "{case}: {body}");
        }
    }
    // Said again: a refused token is refused every time, a taken one (now from the
    // shard's cache) taken again, as the same purchase.
    for (case, token) in &cases {
        let code = c.purchase("jwt", token, Some("again")).0;
        assert_eq!(code == 401, !case.starts_with("ok "), "{case}: {code}");
    }
    // Three held, one each for the three good tokens; nothing for the others.
    let l = ledger_holds(&redis, "jwt");
    assert_eq!((l.held, l.buyers), (3, 3), "{l}");
    // No token in a log line.
    let log = node.log();
    for (case, token) in &cases {
        let sig = token.rsplit('.').next().unwrap_or(token);
        assert!(
            sig.len() < 8 || !log.contains(sig),
            "{case}: its token is in the log"
        );
    }
}

/// The node's JWKS file, rewritten as the shop's key rotation would: beside, then
/// renamed over it.
fn publish(node: &Node, keys: &[&Signer]) {
    let jwks = serde_json::json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    let dir = node.dir.path();
    std::fs::write(dir.join("jwks.tmp"), jwks.to_string()).expect("write");
    std::fs::rename(dir.join("jwks.tmp"), dir.join("jwks.json")).expect("rename");
}

#[test]
fn a_key_added_to_the_jwks_is_taken_and_one_removed_refused_within_the_reload_under_a_surge() {
    const STOCK: u64 = 100_000;
    let redis = Redis::start();
    let node = Node::start(&redis, 2);
    open_sale(&redis, &node, spec("rotate", STOCK, 4, 1));
    let old = shop();
    let (new, _) = Signer::generate(seckill_core::identity::Alg::ES256, "shop-2").expect("key");
    let sign = |k: &Signer, user: &str| {
        k.shopper_token(user, ISSUER, AUDIENCE, seckill_core::now_ms() + 600_000)
    };
    // The surge: shoppers of the old key buy, each once, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let (held, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let surge: Vec<_> = (0..6)
        .map(|t| {
            let (stop, held, refused) = (stop.clone(), held.clone(), refused.clone());
            let c = node.client();
            std::thread::spawn(move || {
                let old = shop();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let token = old.shopper_token(
                        &format!("surge-{t}-{n}"),
                        ISSUER,
                        AUDIENCE,
                        seckill_core::now_ms() + 600_000,
                    );
                    match c.purchase("rotate", &token, None).0 {
                        200 => held.fetch_add(1, Ordering::Relaxed),
                        401 => refused.fetch_add(1, Ordering::Relaxed),
                        other => panic!("surge: {other}"),
                    };
                    n += 1;
                }
            })
        })
        .collect();
    let c = node.client();
    // A shopper of the old key, verified (and cached) before the rotation.
    let early = sign(&old, "early");
    assert_eq!(c.purchase("rotate", &early, Some("1")).0, 200);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.purchase("rotate", &sign(&new, "before"), None).0, 401);

    // The new key is published beside the old: taken within the reload time.
    publish(&node, &[&old, &new]);
    let t0 = Instant::now();
    let mut n = 0;
    while c
        .purchase("rotate", &sign(&new, &format!("new-{n}")), None)
        .0
        != 200
    {
        assert!(
            t0.elapsed() < Duration::from_secs(6),
            "the new key not taken in 6 s"
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let added_in = t0.elapsed();

    // The old key is withdrawn: refused within the reload time, the cached token too.
    publish(&node, &[&new]);
    let t0 = Instant::now();
    while c.purchase("rotate", &early, Some("1")).0 != 401 {
        assert!(
            t0.elapsed() < Duration::from_secs(6),
            "the old key not dropped in 6 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let removed_in = t0.elapsed();
    // Every shard forgot it: fresh connections land on any.
    for _ in 0..16 {
        assert_eq!(node.client().purchase("rotate", &early, Some("1")).0, 401);
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    // A JWKS with no key left (the shop withdrew its last one, a leaked one): every token
    // refused, the new key's cached one too.
    let last = sign(&new, "last");
    assert_eq!(c.purchase("rotate", &last, Some("l")).0, 200);
    publish(&node, &[]);
    let t0 = Instant::now();
    while c.purchase("rotate", &last, Some("l")).0 != 401 {
        assert!(
            t0.elapsed() < Duration::from_secs(6),
            "the last key not withdrawn in 6 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for s in surge {
        s.join().expect("surge thread");
    }
    eprintln!(
        "key taken in {added_in:?}, dropped in {removed_in:?}; surge: {} held, {} refused",
        held.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "the surge met the withdrawn key"
    );
    let l = ledger_holds(&redis, "rotate");
    // The surge's holds, the early shopper's, the new key's one and the last one's.
    assert_eq!(l.held as usize, held.load(Ordering::Relaxed) + 3, "{l}");
    assert_eq!(l.buyers as i64, l.held, "one unit a shopper: {l}");
}

#[test]
fn a_shops_token_opens_none_of_the_nodes_own_keys() {
    let redis = Redis::start();
    let node = Node::start(&redis, 1);
    let mut s = spec("own", 5, 1, 1);
    s.content_file = Some("album.zip".into());
    open_sale(&redis, &node, s);
    std::fs::write(node.content_dir().join("album.zip"), b"content").expect("content");
    let c = node.client();
    let token = shopper_token("alice", seckill_core::now_ms() + 600_000);
    // As a download link's token.
    let (code, body) = c.get(&format!("/dl/{token}"), None);
    assert!(
        code == 403 || code == 404 || code == 401,
        "download: {code} {body}"
    );
    assert!(body["error"].is_string(), "{body}");
    // And signed with the old single secret, a link or a shopper's token of the old
    // format: nothing.
    let old = seckill_core::auth::Secret::new(SECRET.as_bytes().to_vec()).expect("secret");
    let link = seckill_core::auth::sign_download(&old, "own.0.1", seckill_core::now_ms() + 60_000);
    let (code, _) = c.get(&format!("/dl/{link}"), None);
    assert!(
        code == 403 || code == 404 || code == 401,
        "old-secret link: {code}"
    );
    assert_eq!(c.purchase("own", &link, None).0, 401);
    let l = ledger_holds(&redis, "own");
    assert_eq!(l.held, 0, "{l}");

    // A waiting room's pass: the shop's token, or a pass the old single secret signed
    // (the place `q999999` that an attacker holding it would sign), is no pass.
    open_sale(&redis, &node, queued("room", 5, 100, 60));
    let now = seckill_core::now_ms();
    let forged = seckill_core::queue::sign_pass(&old, "room", "alice", 999_999, now + 60_000);
    for ticket in [token.as_str(), forged.as_str()] {
        let body = serde_json::json!({"quantity": 1, "ticket": ticket}).to_string();
        let (code, answer) = c.post("/api/campaigns/room/purchase", Some(&token), &body);
        assert_eq!(code, 403, "{answer}");
        assert_eq!(answer["error"], "ticket_invalid", "{answer}");
    }
    let l = ledger_holds(&redis, "room");
    assert_eq!(l.held, 0, "{l}");
}

/// A local HTTPS server (Python's, with a certificate for 127.0.0.1 that openssl made
/// and signed with a CA of its own) serving `dir`; the CA's certificate and the port.
fn https_server(dir: &Path) -> (Process, std::path::PathBuf, u16) {
    let made = Command::new("bash")
        .args(["-euc", "cd \"$1\"\n\
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
              -subj /CN=seckill-test-ca -keyout ca.key -out ca.pem \
              -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign\n\
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
              -subj /CN=127.0.0.1 -keyout key.pem -out cert.csr\n\
            printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > ext\n\
            openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
              -extfile ext -out cert.pem", "-"])
        .arg(dir)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (ca, cert, key) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    let port = free_port();
    let script = "import http.server, ssl, sys\n\
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])\n\
        h = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=sys.argv[4], **k)\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), h)\n\
        s.socket = ctx.wrap_socket(s.socket, server_side=True)\n\
        s.serve_forever()\n";
    let server = Process::new(
        Command::new("python3")
            .args(["-c", script, &port.to_string()])
            .arg(&cert)
            .arg(&key)
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs"),
    );
    wait_until("the HTTPS server", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (server, ca, port)
}

#[test]
fn the_shops_keys_come_from_an_https_address_trusted_by_its_ca_and_a_new_kid_fetches_them_again() {
    let redis = Redis::start();
    let site = tempfile::tempdir().expect("tempdir");
    let (first, _) = Signer::generate(seckill_core::identity::Alg::EdDSA, "k1").expect("key");
    let (second, _) = Signer::generate(seckill_core::identity::Alg::ES256, "k2").expect("key");
    let publish = |keys: &[&Signer]| {
        let jwks = serde_json::json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
        std::fs::write(site.path().join("jwks.tmp"), jwks.to_string()).expect("write");
        std::fs::rename(site.path().join("jwks.tmp"), site.path().join("jwks.json")).expect("mv");
    };
    publish(&[&first]);
    let (mut server, cert, port) = https_server(site.path());
    let node = Node::start_with(
        &redis,
        1,
        &format!(
            "[identity]\njwks_url = \"https://127.0.0.1:{port}/jwks.json\"\n\
             jwks_ca_file = \"{}\"\nissuer = \"{ISSUER}\"\n",
            cert.display()
        ),
    );
    open_sale(&redis, &node, spec("url", 10, 1, 1));
    let c = node.client();
    let token = |k: &Signer, user: &str| {
        k.shopper_token(user, ISSUER, AUDIENCE, seckill_core::now_ms() + 600_000)
    };
    assert_eq!(c.purchase("url", &token(&first, "a"), None).0, 200);
    // The shop adds a key and signs with it at once: the first token naming it is
    // refused, and has the node fetch the keys again (at most every 5 s).
    publish(&[&first, &second]);
    let t0 = Instant::now();
    let mut n = 0;
    while c.purchase("url", &token(&second, &format!("b{n}")), None).0 != 200 {
        assert!(
            t0.elapsed() < Duration::from_secs(12),
            "the new kid not fetched in 12 s"
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("a new kid taken in {:?} ({n} refused before)", t0.elapsed());
    // The address fails: the keys in use stay.
    server.kill();
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(c.purchase("url", &token(&second, "c"), None).0, 200);
    assert_eq!(c.purchase("url", &token(&first, "d"), None).0, 200);
    let l = ledger_holds(&redis, "url");
    assert_eq!((l.held, l.buyers), (4, 4), "{l}");
}

#[test]
fn a_node_does_not_start_on_keys_from_a_server_it_does_not_trust() {
    let redis = Redis::start();
    let site = tempfile::tempdir().expect("tempdir");
    let k = shop();
    std::fs::write(
        site.path().join("jwks.json"),
        serde_json::json!({"keys": [k.jwk()]}).to_string(),
    )
    .expect("write");
    let (_server, _cert, port) = https_server(site.path());
    // The system's roots do not know the test's certificate.
    let dir = tempfile::tempdir().expect("tempdir");
    write_secret(dir.path());
    let out = Command::new(dataplane_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args([
            "--admin-listen",
            "",
            "--redis",
            &url_as(&redis.users(), "seckill-node", redis.port),
        ])
        .arg("--secret-file")
        .arg(dir.path().join("secret"))
        .args(["--jwks-url", &format!("https://127.0.0.1:{port}/jwks.json")])
        .args(["--token-issuer", ISSUER])
        .current_dir(dir.path())
        .output()
        .expect("serve runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("identity.jwks_url"), "{err}");
}
