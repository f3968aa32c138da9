//! The Lua scripts: each runs atomically on one hash slot.

use redis::Script;
use std::sync::LazyLock;

pub static PURCHASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/purchase.lua")));
pub static TRANSFER_OUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/transfer_out.lua")));
pub static TRANSFER_IN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/transfer_in.lua")));
pub static TRANSFER_ACK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/transfer_ack.lua")));
pub static ARM_PARTITION: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/arm_partition.lua")));
pub static SET_STATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/set_state.lua")));

/// Every script the shards call, loaded on each new connection.
pub fn hot_path() -> [&'static Script; 4] {
    [&PURCHASE, &TRANSFER_OUT, &TRANSFER_IN, &TRANSFER_ACK]
}

/// The script's source, for `SCRIPT LOAD` after a `NOSCRIPT` reply.
pub fn source_of(hash: &str) -> Option<&'static str> {
    [
        (&*PURCHASE, include_str!("scripts/purchase.lua")),
        (&*TRANSFER_OUT, include_str!("scripts/transfer_out.lua")),
        (&*TRANSFER_IN, include_str!("scripts/transfer_in.lua")),
        (&*TRANSFER_ACK, include_str!("scripts/transfer_ack.lua")),
    ]
    .into_iter()
    .find(|(s, _)| s.get_hash() == hash)
    .map(|(_, src)| src)
}
