//! A node sizes its table of file descriptors at start for every connection its shards
//! may hold: a table that grows while a crowd is accepted stalls the accepting shard for
//! an RCU grace period at each doubling.

mod common;

use common::{Node, Redis};

/// A line of `/proc/PID/status` or `/proc/PID/limits`, as a number.
fn field(pid: u32, file: &str, name: &str, column: usize) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).expect("/proc");
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l[name.len()..].split_whitespace().nth(column))
        .and_then(|v| v.parse().ok())
        .expect("the field")
}

#[test]
fn the_descriptor_table_holds_every_connection_the_shards_may_hold_before_any_arrives() {
    let redis = Redis::start();
    let node = Node::start_with(
        &redis,
        2,
        "[http]\nmax_connections_per_shard = 3000\nmax_event_streams_per_shard = 1000\n",
    );
    let pid = node.pid();
    let soft_limit = field(pid, "limits", "Max open files", 0);
    let wanted = 2 * 3000 + 256;
    // A node with a dozen descriptors open would otherwise hold a table of 64.
    let table = field(pid, "status", "FDSize:", 0);
    assert!(
        table >= wanted.min(soft_limit),
        "FDSize {table}, wanted {wanted} (soft limit {soft_limit})"
    );
    // The soft limit was raised to what the shards may hold, where the hard one allows.
    let hard_limit = field(pid, "limits", "Max open files", 1);
    assert!(soft_limit >= wanted.min(hard_limit));
}
