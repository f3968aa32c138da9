//! A stack of its own for each test: a redis-server with the managed users on a free
//! port in a temporary directory, and data plane nodes with their order workers, set up
//! as the simulator's scenarios expect them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use seckill_testkit::tokens::write_webhook_secret;
use seckill_testkit::{
    answers, dataplane_bin, free_port, wait_until, write_jwks, write_shop_key, Process, Redis,
    ISSUER,
};

/// Redis and the nodes, stopped when dropped: the nodes first, then Redis and its
/// directory (fields drop in order).
pub struct Stack {
    nodes: Vec<Process>,
    server: Redis,
    /// The operators' URL (its password in `users/ops.password`).
    pub redis: String,
    /// The nodes' URLs, separated by commas.
    pub target: String,
}

impl Stack {
    /// Redis and one node per name, each with 2 shards, its order worker and store
    /// (`orders-{name}.sqlite`), per-IP limits of 50/s (burst 100), the data plane
    /// secret in `secret`, and the demo provider beside the test provider, whose webhook
    /// secret is in `webhook.secret` ([`Stack::webhook_secret`]).
    pub fn start(names: &[&str]) -> Stack {
        // Load, and no restart: nothing need reach the disk.
        let server = Redis::start_in_memory();
        let dir = server.dir();
        // The simulator talks to the control plane as the operators' user, the nodes as
        // theirs; each password stays in its file.
        let redis = format!("redis://seckill-ops@127.0.0.1:{}", server.port);
        seckill_core::secrets::create_private(
            &dir.join("secret"),
            b"simulator test secret, long enough",
        )
        .expect("secret");
        // The shop: its key signs the simulator's tokens, its JWKS the nodes read.
        write_shop_key(dir);
        write_jwks(dir);
        // The payment provider: its secret signs the simulator's webhooks; the demo
        // provider's pay route stays for runs without it.
        let payments = write_webhook_secret(dir, true);
        // Each source address talks to one node.
        std::fs::create_dir_all(dir.join("content")).expect("content dir");
        std::fs::write(dir.join("content/album.zip"), vec![7u8; 10_000]).expect("content");
        let mut nodes = Vec::new();
        let mut targets = Vec::new();
        for name in names {
            let (node, target) = start_node(dir, server.port, name, &payments);
            nodes.push(node);
            targets.push(target);
        }
        Stack {
            nodes,
            server,
            redis,
            target: targets.join(","),
        }
    }

    /// The stack's directory: Redis's users in `users/`, the secret, the content, the
    /// nodes' configurations and order stores.
    pub fn path(&self) -> &Path {
        self.server.dir()
    }

    /// The payment provider's webhook secret (`whsec_…`, mode 0600), which the nodes
    /// verify its webhooks with.
    pub fn webhook_secret(&self) -> PathBuf {
        self.path().join("webhook.secret")
    }
}

/// A node named `name` on a free port, with its configuration in `dir` and the
/// `[payments]` section `payments`; and its URL, once it answers.
fn start_node(dir: &Path, redis_port: u16, name: &str, payments: &str) -> (Process, String) {
    let port = free_port();
    let config = dir.join(format!("dp-{name}.toml"));
    let d = dir.display();
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nredis = \"redis://seckill-node@127.0.0.1:{redis_port}\"\n\
             redis_password_file = \"{d}/users/node.password\"\nshards = 2\nsecret_file = \"{d}/secret\"\n\
             content_dir = \"{d}/content\"\n\
             [identity]\njwks_file = \"{d}/jwks.json\"\nissuer = \"{ISSUER}\"\n\
             [worker]\nname = \"{name}\"\ndb = \"{d}/orders-{name}.sqlite\"\n[limits]\nip_rate = 50\nip_burst = 100\n\
             [tickets]\ndifficulty = 8\n[admin]\nlisten = \"\"\n{payments}"
        ),
    )
    .expect("config");
    let node = Process::new(
        Command::new(dataplane_bin())
            .args(["serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("data plane"),
    );
    let target = format!("http://127.0.0.1:{port}");
    wait_until("the data plane", Duration::from_secs(20), || {
        answers(&format!("{target}/api/time"))
    });
    (node, target)
}
