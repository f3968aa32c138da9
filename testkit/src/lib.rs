//! What the workspace's black-box tests share, so that each crate's tests start the same
//! stack the same way:
//!
//! - [`users`]: the managed Redis's ACL users and a test's way to reach a Redis as one;
//! - [`server`]: one `redis-server` of the test's own; [`cluster`]: a Redis Cluster;
//! - [`node`]: data plane nodes and order workers, run as processes of its binary
//!   ([`process`]), so no crate's tests need the data plane's library (nor glommio);
//! - [`http`]: the agent and client the tests speak to a node with;
//! - [`campaign`]: campaigns set up in the control plane, and their ledger checked;
//! - [`tokens`]: the nodes' signing secret; [`ports`]: free ports; [`wait`]: polling;
//! - [`webdriver`]: a headless browser; [`shell`]: the command-line test every program
//!   passes.

pub mod campaign;
pub mod cluster;
pub mod http;
pub mod node;
pub mod ports;
pub mod process;
pub mod server;
pub mod shell;
pub mod tokens;
pub mod users;
pub mod wait;
pub mod webdriver;

pub use campaign::{
    arm, ledger_holds, limits, open_sale, queued, reconciled, remaining, spec, wait_state,
};
pub use cluster::Cluster;
pub use http::{
    agent, agent_with, answers, body_json, body_text, get_text, header, status_of, Answer, Client,
};
pub use node::{Node, WorkerProc};
pub use ports::free_port;
pub use process::{dataplane_bin, Process};
pub use server::Redis;
pub use tokens::{
    node_keys, shop, shopper_token, write_jwks, write_secret, write_shop_key, AUDIENCE, ISSUER,
    SECRET,
};
pub use users::{make_users, url_as, RedisUrl};
pub use wait::wait_until;
