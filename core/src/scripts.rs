//! The Lua scripts: each runs atomically on one hash slot.

use redis::Script;
use std::sync::LazyLock;

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub static $name: LazyLock<Script> =
                LazyLock::new(|| Script::new(include_str!($file)));
        )*
        const SOURCES: &[&str] = &[$(include_str!($file)),*];
    };
}

scripts! {
    /// One purchase on one partition.
    PURCHASE => "scripts/purchase.lua",
    /// Transfer step 1, on the source.
    TRANSFER_OUT => "scripts/transfer_out.lua",
    /// Transfer step 2, on the target.
    TRANSFER_IN => "scripts/transfer_in.lua",
    /// Transfer step 3, on the source.
    TRANSFER_ACK => "scripts/transfer_ack.lua",
    /// Lends an empty partition to a shard, with its first answers.
    LEASE => "scripts/lease.lua",
    /// Pays a held order.
    PAY => "scripts/pay.lua",
    /// Releases holds past their deadline.
    RELEASE => "scripts/release.lua",
    /// Marks a paid order delivered.
    DELIVER => "scripts/deliver.lua",
    /// Binds a code of the pool to an order.
    BIND_CODE => "scripts/bind_code.lua",
    /// Publishes a staged code pool.
    LOAD_CODES => "scripts/load_codes.lua",
    /// Loads a partition's stock at arm time.
    ARM_PARTITION => "scripts/arm_partition.lua",
    /// Trades a challenge for a ticket: one live per user, within the cap.
    ISSUE_TICKET => "scripts/issue_ticket.lua",
    /// Joins a waiting room, or looks up a place in it.
    QUEUE_JOIN => "scripts/queue_join.lua",
    /// Reads a partition's units taken and passes used, for the admission.
    QUEUE_USAGE => "scripts/queue_usage.lua",
    /// One round of a waiting room's admission.
    QUEUE_ADMIT => "scripts/queue_admit.lua",
    /// Compare-and-set of a campaign's state.
    SET_STATE => "scripts/set_state.lua",
    /// Releases a lock its holder still has.
    UNLOCK => "scripts/unlock.lua",
    /// Reads a partition's counters, buyers, hold index and orders at one instant.
    PARTITION_BOOKS => "scripts/partition_books.lua",
    /// Reads what the ledger judges of a partition against its counters, at one instant.
    PARTITION_LEDGER => "scripts/partition_ledger.lua",
}

/// The scripts the shards call, loaded on each new connection.
pub fn hot_path() -> [&'static Script; 11] {
    [
        &PURCHASE,
        &ISSUE_TICKET,
        &QUEUE_JOIN,
        &QUEUE_USAGE,
        &QUEUE_ADMIT,
        &TRANSFER_OUT,
        &TRANSFER_IN,
        &TRANSFER_ACK,
        &PAY,
        &RELEASE,
        &LEASE,
    ]
}

/// A script's source, for `SCRIPT LOAD` after a `NOSCRIPT` reply.
pub fn source_of(hash: &str) -> Option<&'static str> {
    SOURCES
        .iter()
        .find(|src| Script::new(src).get_hash() == hash)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hot_script_has_its_source() {
        for s in hot_path() {
            let src = source_of(s.get_hash()).expect("source");
            assert_eq!(Script::new(src).get_hash(), s.get_hash());
        }
        assert!(source_of("0000").is_none());
    }
}
