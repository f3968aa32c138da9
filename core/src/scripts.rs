//! The Lua scripts: each runs atomically on one hash slot.
//!
//! A script names the hashes' fields and the key schema's shared pieces as
//! [`crate::keys`] declares them (`PART.stock`, `ORDER.pay_by_ms`,
//! `first_answer_field(user, key)`, …): the fields are spelled into its text and the
//! functions it calls put before it (see `scripts/prelude.rs`). The assembled text is
//! what Redis loads, and what [`source_of`] and [`assembled`] give.

use redis::Script;
use std::sync::LazyLock;

mod prelude;

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub static $name: LazyLock<Script> =
                LazyLock::new(|| Script::new(&SOURCES[Name::$name as usize].1));
        )*
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Name { $($name),* }
        /// Each script's file name and assembled text.
        static SOURCES: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
            vec![$(($file, prelude::assemble($file, include_str!($file)))),*]
        });
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
    /// Takes a payment provider's event for an order.
    PAY => "scripts/pay.lua",
    /// Keeps a payment for an unknown order.
    RECORD_UNMATCHED => "scripts/record_unmatched.lua",
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

/// `EVALSHA <hash> <numkeys> <keys…> <args…>`: how any script is called.
pub fn call(script: &Script, keys: &[&str], args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash())
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    cmd
}

/// A script's source, for `SCRIPT LOAD` after a `NOSCRIPT` reply.
pub fn source_of(hash: &str) -> Option<&'static str> {
    SOURCES
        .iter()
        .find(|(_, src)| Script::new(src).get_hash() == hash)
        .map(|(_, src)| src.as_str())
}

/// Every script as Redis runs it, prelude and all, by its file's name (`purchase.lua`).
pub fn assembled() -> impl Iterator<Item = (&'static str, &'static str)> {
    SOURCES.iter().map(|(file, src)| {
        let name = file.rsplit('/').next().unwrap_or(file);
        (name, src.as_str())
    })
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

    #[test]
    fn every_script_assembles_with_the_fields_it_names() {
        // Assembling panics on a field or piece the key schema does not declare.
        let all: Vec<_> = assembled().collect();
        assert_eq!(all.len(), SOURCES.len());
        let purchase = all
            .iter()
            .find(|(n, _)| *n == "purchase.lua")
            .expect("purchase");
        assert!(!purchase.1.contains("PART."), "{}", purchase.1);
        assert!(
            purchase.1.contains("local function order_id"),
            "{}",
            purchase.1
        );
        assert!(
            !purchase.1.contains("draw_at_opening"),
            "only what it names"
        );
    }
}
