//! The deployment units as systemd reads them: `systemd-analyze verify` finds nothing
//! to say about any of them, with the binaries they start where they would be.

mod common;

use std::process::Command;

#[test]
fn the_systemd_units_verify() {
    let units = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for entry in std::fs::read_dir(units).expect("deploy/systemd") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("unit");
        // The binary as built here stands in for the installed one.
        let text = text.replace(
            "/usr/local/bin/seckill-dataplane",
            env!("CARGO_BIN_EXE_seckill-dataplane"),
        );
        let copy = dir.path().join(path.file_name().expect("name"));
        std::fs::write(&copy, text).expect("copy");
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&copy)
            .output()
            .expect("systemd-analyze (systemd) is installed");
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{}: {said}",
            path.display()
        );
        checked += 1;
    }
    assert_eq!(checked, 3, "Redis, node and worker");
}

/// `/proc/PID/task/TID` of each thread of `pid` whose name starts with `name`.
fn threads(pid: u32, name: &str) -> Vec<std::path::PathBuf> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc");
    tasks
        .filter_map(|t| t.ok().map(|t| t.path()))
        .filter(|dir| {
            std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim().starts_with(name))
        })
        .collect()
}

/// The CPUs each thread of `pid` named `name` may run on, as `/proc` lists them ("1", "0-3").
fn cpus_of_threads(pid: u32, name: &str) -> Vec<String> {
    threads(pid, name)
        .iter()
        .filter_map(|dir| {
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|l| l.trim().to_string())
        })
        .collect()
}

/// A node started on some of the machine's CPUs (`taskset`, systemd's `CPUAffinity=`, a
/// container's cpuset) pins its shards to those, not to the machine's first cores.
#[test]
fn pinned_shards_stay_on_the_cpus_the_node_was_given() {
    let redis = common::Redis::start();
    let mine = rustix::thread::sched_getaffinity(None).expect("this thread's affinity");
    let last = (0..rustix::thread::CpuSet::MAX_CPU)
        .rev()
        .find(|&cpu| mine.is_set(cpu))
        .expect("a CPU");
    // The node inherits this thread's affinity: its last CPU alone, which a node placing
    // its shard over every online CPU would not pick first.
    let mut only_last = rustix::thread::CpuSet::new();
    only_last.set(last);
    rustix::thread::sched_setaffinity(None, &only_last).expect("set this thread's affinity");
    // Pinning is the default; one shard a core it may use.
    let node = common::Node::start_with(&redis, 1, "");
    // The shard's executor and its helper thread.
    let threads = cpus_of_threads(node.pid(), "seckill-shard");
    assert!(!threads.is_empty(), "the shard's threads are listed");
    assert!(
        threads.iter().all(|cpus| *cpus == last.to_string()),
        "the shard's threads may run on {threads:?}, not on CPU {last} alone"
    );
}

/// The nice value of each thread of `pid` named `name`.
fn nice_of_threads(pid: u32, name: &str) -> Vec<i64> {
    threads(pid, name)
        .iter()
        .filter_map(|dir| {
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // `pid (comm) state ...`: field 19 is the nice value, the state (field 3) the
            // first after the name's ')'.
            let (_, fields) = stat.rsplit_once(')')?;
            fields.split_whitespace().nth(19 - 3)?.parse().ok()
        })
        .collect()
}

/// The order worker inside `serve` runs below the shards, whose cores it shares: writing
/// a sale's burst of orders must not take a shard's core from its requests.
#[test]
fn the_order_worker_runs_below_the_shards() {
    let redis = common::Redis::start();
    let mut node = common::Node::start(&redis, 1);
    let pid = node.pid();
    assert_eq!(
        nice_of_threads(pid, "seckill-worker"),
        vec![10],
        "the worker, by default"
    );
    let shards = nice_of_threads(pid, "seckill-shard");
    assert!(
        !shards.is_empty() && shards.iter().all(|n| *n == 0),
        "the shards: {shards:?}"
    );
    // Set in the file, and the node started again on it.
    node.kill();
    let file = node.dir.path().join("dataplane.toml");
    let text = std::fs::read_to_string(&file).expect("config");
    std::fs::write(&file, text.replace("[worker]\n", "[worker]\nnice = 3\n")).expect("config");
    node.restart();
    let url = node.url("/api/time");
    common::wait_until("the node again", std::time::Duration::from_secs(20), || {
        common::answers(&url)
    });
    assert_eq!(
        nice_of_threads(node.pid(), "seckill-worker"),
        vec![3],
        "as configured"
    );
}
