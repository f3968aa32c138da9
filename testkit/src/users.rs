//! The managed Redis's ACL users, as `just redis` makes them (`scripts/redis-users.sh`),
//! and what a test needs to reach a Redis as one of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use seckill_core::control;

/// A script of the repository's `scripts/`.
pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(name)
}

/// Creates the managed Redis's ACL users in `dir`: passwords in files of mode 0600, and
/// `users.acl`.
pub fn make_users(dir: &Path) {
    let status = Command::new(script("redis-users.sh"))
        .arg(dir)
        .status()
        .expect("scripts/redis-users.sh runs");
    assert!(status.success(), "the Redis users were made");
}

/// `redis://USER:PASSWORD@127.0.0.1:PORT`, the password read from `users`.
pub fn url_as(users: &Path, user: &str, port: u16) -> String {
    let who = user.trim_start_matches("seckill-");
    let pw = seckill_core::secrets::read_password(&users.join(format!("{who}.password")))
        .expect("password file");
    seckill_core::secrets::with_password(&format!("redis://{user}@127.0.0.1:{port}"), &pw)
}

/// What the helpers need of a Redis: where it is and its users. One server or a cluster.
pub trait RedisUrl {
    /// The operators' URL, password in it: what the tests' own control-plane calls use.
    fn url(&self) -> String;
    /// Where the users' password files are.
    fn users(&self) -> PathBuf;
    /// The port of the first seed.
    fn seed_port(&self) -> u16;
    fn con(&self) -> seckill_core::connection::Connection {
        control::connect(&self.url()).expect("connect to the test redis")
    }
    /// A node's or worker's configuration lines: the nodes' user in the URL, its
    /// password in its file, as a deployment would have them.
    fn node_config(&self) -> String {
        format!(
            "redis = \"redis://seckill-node@127.0.0.1:{}\"\nredis_password_file = \"{}\"\n",
            self.seed_port(),
            self.users().join("node.password").display()
        )
    }
}
