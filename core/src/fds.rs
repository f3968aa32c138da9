//! The process's table of file descriptors, sized before the load arrives.
//!
//! Linux grows a process's descriptor table by doubling it when a new descriptor does not
//! fit, and in a process of more than one thread each doubling waits for an RCU grace
//! period (5 to 30 ms on a busy two-core machine, more on a loaded one). Every other
//! thread that opens a descriptor meanwhile (an `accept`, a `socket`) waits behind it.
//! A node that accepts a sale's crowd in its first second would stall its shard once
//! for every doubling, 64 to 128 to ... to 16,384, just when the crowd arrives; a load
//! generator opening its connections would stall the same way. [`reserve`], called at
//! start, grows the table once to what the process may hold, and it never grows again.

use std::io;

/// Descriptors a process holds beside its connections (listeners, rings, runtimes, timers,
/// Redis links, stores, logs): what a caller adds to its connections when it reserves.
pub const SPARE: u64 = 256;

/// What [`reserve`] left in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// Descriptors the table holds without growing.
    pub table: u64,
    /// The soft limit on open descriptors (`RLIMIT_NOFILE`), after raising it.
    pub limit: u64,
}

/// Raises the soft limit on open descriptors to `wanted` when it is lower (never past
/// the hard limit), and grows the descriptor table to hold `wanted` descriptors, or as
/// many as the limit allows. A `limit` below `wanted` in the answer means the process
/// cannot open as many as it was asked to plan for.
#[cfg(target_os = "linux")]
pub fn reserve(wanted: u64) -> io::Result<Reserved> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut rlimit = getrlimit(Resource::Nofile);
    // `None` is no limit.
    let soft = rlimit.current.unwrap_or(u64::MAX);
    let hard = rlimit.maximum.unwrap_or(u64::MAX);
    let limit = if soft < wanted && soft < hard {
        let raised = wanted.min(hard);
        rlimit.current = Some(raised);
        setrlimit(Resource::Nofile, rlimit)?;
        raised
    } else {
        soft
    };
    let table = wanted.min(limit).min(i32::MAX as u64);
    if table > 0 {
        // The lowest free descriptor from `table - 1` up, which makes the kernel size the
        // table to hold it; closing it leaves the table as it is.
        let anchor = std::fs::File::open("/dev/null")?;
        drop(rustix::io::fcntl_dupfd_cloexec(
            &anchor,
            (table - 1) as i32,
        )?);
    }
    Ok(Reserved { table, limit })
}

/// Elsewhere the table is left to the system.
#[cfg(not(target_os = "linux"))]
pub fn reserve(wanted: u64) -> io::Result<Reserved> {
    Ok(Reserved {
        table: 0,
        limit: wanted,
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The table's size as the kernel reports it.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("an FDSize line")
    }

    #[test]
    fn the_table_holds_what_was_reserved_before_any_descriptor_needs_it() {
        // A new process's table holds 64.
        let wanted = 4096;
        let r = reserve(wanted).expect("reserved");
        if r.limit < wanted {
            // A machine whose hard limit is lower: the table is as large as it allows.
            assert_eq!(r.table, r.limit);
        } else {
            assert_eq!(r.table, wanted);
        }
        assert!(
            table_size() >= r.table,
            "FDSize {} < {}",
            table_size(),
            r.table
        );
        // What was reserved is free for the process to use.
        let f = std::fs::File::open("/dev/null").expect("/dev/null");
        assert!(rustix::io::fcntl_dupfd_cloexec(&f, (r.table - 1) as i32).is_ok());
    }

    #[test]
    fn more_than_the_hard_limit_is_capped_at_it_without_an_error() {
        use rustix::process::{getrlimit, Resource};
        // Linux always has a hard limit on descriptors (at most `fs.nr_open`).
        let hard = getrlimit(Resource::Nofile).maximum.expect("a hard limit");
        let r = reserve(hard + 1).expect("reserved");
        assert_eq!(
            r,
            Reserved {
                table: hard,
                limit: hard
            }
        );
        assert!(table_size() >= hard);
    }
}
