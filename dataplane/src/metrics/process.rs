//! The process metrics every Prometheus client exports, read from `/proc` (Linux).

/// The process's CPU time, memory, descriptors and start, as `/proc/self` tells them.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: u64,
    pub start_time_seconds: f64,
}

/// Clock ticks per second of `/proc` times: `USER_HZ`, 100 in Linux's user ABI.
const TICKS_PER_S: f64 = 100.0;

impl Process {
    pub fn read() -> Option<Process> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Process::parse(&stat, &status, &boot, fds)
    }

    /// From the texts of `/proc/self/stat`, `/proc/self/status` and `/proc/stat`.
    pub fn parse(stat: &str, status: &str, boot: &str, open_fds: u64) -> Option<Process> {
        // The command name in parentheses may hold spaces: fields count from after it.
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        // After the name: state is field 3 of stat(5), so field n sits at index n - 3.
        let tick = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        let cpu_seconds = (tick(14)? + tick(15)?) / TICKS_PER_S;
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let btime: f64 = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        Some(Process {
            cpu_seconds,
            resident_bytes: rss_kb * 1024,
            open_fds,
            start_time_seconds: btime + tick(22)? / TICKS_PER_S,
        })
    }
}
