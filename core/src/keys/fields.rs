//! The fields of the system's Redis hashes, each declared once. Rust names them by these
//! constants; the Lua scripts as `PART.stock`, which their assembly spells from the same
//! lists (see [`crate::scripts`]): `PART.stock` in a script is [`part::STOCK`] here.

/// Declares a hash's fields as constants, and `ALL`: each field by its constant's name,
/// for the scripts' assembly.
macro_rules! fields {
    ($($(#[$doc:meta])* $name:ident = $value:literal,)*) => {
        $($(#[$doc])* pub const $name: &str = $value;)*
        /// Every field, by its constant's name, as the scripts name them.
        pub const ALL: &[(&str, &str)] = &[$((stringify!($name), $value)),*];
    };
}

/// The `part` hash of a partition ([`super::PartitionKeys::part`]): its counters, and the
/// campaign's rules mirrored for the purchase script.
pub mod part {
    fields! {
        /// Units the partition was armed with; set once, by the arming.
        INITIAL = "initial",
        /// Units free to hold.
        STOCK = "stock",
        /// Units held, waiting for payment.
        HELD = "held",
        /// Units paid for.
        SOLD = "sold",
        /// Units on their way out to another partition.
        TRANSIT = "transit",
        /// Count of the times units came in (transfers applied, holds released).
        INFLOW = "inflow",
        /// The last order's sequence number.
        SEQ = "seq",
        /// The last outgoing transfer's sequence number.
        XSEQ = "xseq",
        /// The campaign's state, mirrored.
        STATE = "state",
        /// The key layout the partition was armed with (see [`super::super::PartitionKeys::LAYOUT`]).
        LAYOUT = "layout",
        /// The most units one buyer may have.
        LIMIT = "limit",
        /// How long a hold waits for payment (ms).
        HOLD_TTL_MS = "hold_ttl_ms",
        /// The opening (ms; 0: none).
        STARTS_AT_MS = "starts_at_ms",
        /// The end (ms; 0: none).
        ENDS_AT_MS = "ends_at_ms",
        /// `1` when the campaign sells through a waiting room: only to pass holders.
        QUEUED = "queued",
        /// Until when the partition is lent to a shard (ms).
        LEASE_MS = "lease_ms",
        /// `1` while units wait for the lease to end to come back.
        RETURNING = "returning",
    }
}

/// The hash of one order ([`super::PartitionKeys::order`]).
pub mod order {
    fields! {
        USER = "user",
        QTY = "qty",
        /// `held`, `paid`, `delivered`, `expired`, `refund_due` (money came after the
        /// hold expired) or `refunded` (and went back).
        STATUS = "status",
        /// The payment deadline (ms): the hold's, or its grace while a payment is pending.
        PAY_BY_MS = "pay_by_ms",
        /// The hold's own deadline, while a pending payment's grace stands in `pay_by_ms`.
        HOLD_BY_MS = "hold_by_ms",
        CREATED_MS = "created_ms",
        PAID_MS = "paid_ms",
        DELIVERED_MS = "delivered_ms",
        EXPIRED_MS = "expired_ms",
        /// The licence code bound to the order once delivered (its first unit's).
        LICENSE_KEY = "license_key",
        /// Every unit's licence code, a line each.
        LICENSE_KEYS = "license_keys",
        /// The payment that paid it: the provider's id, the amount and its currency.
        PAYMENT_ID = "payment_id",
        AMOUNT_CENTS = "amount_cents",
        CURRENCY = "currency",
        /// Payments owed back (late or second ones), their ids separated by spaces.
        REFUNDS = "refunds",
    }
}

/// The fields of an entry of a partition's order event stream
/// ([`super::PartitionKeys::events`]), which the order workers read.
pub mod event {
    fields! {
        /// `held`, `paid`, `expired`, `delivered`, `refund_due` or `refunded`.
        TYPE = "type",
        /// A `held` entry's orders, a line each: `<order_id> <user> <qty> <pay_by_ms>`.
        ORDERS = "orders",
        /// The order of any other entry, with its fields below.
        ORDER_ID = "order_id",
        USER = "user",
        QTY = "qty",
        PAY_BY_MS = "pay_by_ms",
        PAID_MS = "paid_ms",
        EXPIRED_MS = "expired_ms",
        DELIVERED_MS = "delivered_ms",
        /// A `delivered` entry's codes: the first, and every unit's, a line each.
        LICENSE_KEY = "license_key",
        LICENSE_KEYS = "license_keys",
        /// A payment's, in `paid`, `refund_due` and `refunded` entries.
        PAYMENT_ID = "payment_id",
        AMOUNT_CENTS = "amount_cents",
        CURRENCY = "currency",
        /// Why money is owed back: `expired` or `duplicate`.
        REASON = "reason",
        /// The order's status after a `refund_due` or `refunded` entry (a second payment
        /// of a delivered order leaves it delivered).
        STATUS = "status",
    }
}

/// The `meta` hash of a waiting room ([`super::QueueKeys::meta`]).
pub mod meta {
    fields! {
        /// The campaign's state, mirrored.
        STATE = "state",
        STARTS_AT_MS = "starts_at_ms",
        ENDS_AT_MS = "ends_at_ms",
        /// The campaign's units, mirrored.
        TOTAL = "total",
        PASS_TTL_MS = "pass_ttl_ms",
        /// Shoppers let through per second, the campaign's until an operator changes it.
        ADMIT_PER_S = "admit_per_s",
        /// The draw's seed, and its SHA-1 shown before the opening.
        SEED = "seed",
        SEED_SHA1 = "seed_sha1",
        /// When the pre-queue was drawn (ms), and how many it held.
        DRAWN_MS = "drawn_ms",
        PRE = "pre",
        /// Turns handed to later joiners.
        SEQ = "seq",
        /// Shoppers let through so far.
        ADMITTED = "admitted",
        /// Passes used, and passes expired unused.
        USED = "used",
        EXPIRED = "expired",
        /// `1` when no unit is left nor reserved.
        SOLD_OUT = "sold_out",
        /// Prefix of `cur:<p>`: how much of partition `p`'s pass log is counted.
        CURSOR = "cur:",
    }
}

/// The `rules` hash of a campaign's tickets ([`super::TicketKeys::rules`]): what the
/// ticket script checks, mirrored from the campaign.
pub mod rules {
    fields! {
        /// The campaign's state.
        STATE = "state",
        /// The opening (ms; 0: none).
        STARTS_AT_MS = "starts_at_ms",
        /// Most tickets live at once.
        CAP = "cap",
    }
}

/// The fields of a partition's `once` hash ([`super::PartitionKeys::once`]) are made by
/// these, in Rust and in the scripts' prelude alike.
pub mod once {
    /// Prefix of `i:<user>:<key>`: the first answer to an `Idempotency-Key`.
    pub const FIRST_ANSWER: &str = "i:";
    /// Prefix of `t:<ticket>`: a ticket's use.
    pub const TICKET: &str = "t:";

    /// The field that holds the first answer to `user`'s `key`.
    pub fn first_answer(user: &str, key: &str) -> String {
        format!("{FIRST_ANSWER}{user}:{key}")
    }

    /// The field that holds the order a ticket was used for.
    pub fn ticket(ticket: &str) -> String {
        format!("{TICKET}{ticket}")
    }

    /// The Lua functions that make the same fields.
    pub fn lua() -> String {
        format!(
            "local function first_answer_field(user, key) return '{FIRST_ANSWER}' .. user .. ':' .. key end\n\
             local function ticket_field(ticket) return '{TICKET}' .. ticket end\n"
        )
    }
}
