//! The order store: one SQLite file per worker (WAL), its schema created and migrated by
//! the program. Applying an event is idempotent: each stream entry is recorded once, and
//! an order's row only ever moves forward (held → paid → delivered, held → expired).

use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

use super::event::{Event, Kind};

/// Each entry migrates the schema from its index to the next version.
const MIGRATIONS: &[&str] = &[
    // 1: orders and the events that made them.
    "CREATE TABLE orders (
        order_id     TEXT PRIMARY KEY,
        campaign     TEXT NOT NULL,
        partition    INTEGER NOT NULL,
        user_id      TEXT NOT NULL,
        quantity     INTEGER NOT NULL,
        status       TEXT NOT NULL,
        pay_by_ms    INTEGER NOT NULL,
        paid_ms      INTEGER,
        expired_ms   INTEGER,
        delivered_ms INTEGER,
        license_key  TEXT
    );
    CREATE INDEX orders_by_campaign ON orders (campaign, status);
    CREATE TABLE events (
        stream    TEXT NOT NULL,
        entry_id  TEXT NOT NULL,
        order_id  TEXT NOT NULL,
        kind      TEXT NOT NULL,
        PRIMARY KEY (stream, entry_id)
    );
    CREATE INDEX events_by_order ON events (order_id, kind);",
    // 2: one stream entry may carry several orders (a purchase call's holds), so an
    // event is recorded once per entry and order.
    "CREATE TABLE events_v2 (
        stream    TEXT NOT NULL,
        entry_id  TEXT NOT NULL,
        order_id  TEXT NOT NULL,
        kind      TEXT NOT NULL,
        PRIMARY KEY (stream, entry_id, order_id)
    );
    INSERT INTO events_v2 SELECT stream, entry_id, order_id, kind FROM events;
    DROP TABLE events;
    ALTER TABLE events_v2 RENAME TO events;
    CREATE INDEX events_by_order ON events (order_id, kind);",
    // 3: money owed back (a payment after the hold, or a second one), and given back.
    "CREATE TABLE refunds (
        order_id     TEXT NOT NULL,
        payment_id   TEXT NOT NULL,
        campaign     TEXT NOT NULL,
        amount_cents INTEGER NOT NULL,
        currency     TEXT NOT NULL,
        reason       TEXT NOT NULL,
        status       TEXT NOT NULL,
        PRIMARY KEY (order_id, payment_id)
    );
    CREATE INDEX refunds_by_status ON refunds (status);",
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How far along its life an order is; a row never moves back.
const RANK: &str = "CASE {} WHEN 'held' THEN 1 WHEN 'paid' THEN 2 WHEN 'expired' THEN 2 \
                    WHEN 'delivered' THEN 3 WHEN 'refund_due' THEN 3 WHEN 'refunded' THEN 4 \
                    ELSE 0 END";

pub struct OrderDb {
    conn: Connection,
}

/// An order as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOrder {
    pub order_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub status: String,
    pub license_key: Option<String>,
}

impl OrderDb {
    pub fn open(path: &Path) -> rusqlite::Result<OrderDb> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // A missing directory shows up as SQLite's own "unable to open" error.
            let _ = std::fs::create_dir_all(dir);
        }
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut conn, MIGRATIONS)?;
        Ok(OrderDb { conn })
    }

    /// Opens an existing store without creating or migrating it (reconciliation).
    pub fn open_existing(path: &Path) -> rusqlite::Result<OrderDb> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(OrderDb { conn })
    }

    /// Whether a worker has made this store: its tables are made in one transaction,
    /// so they are all there once the schema's version is.
    pub fn is_made(&self) -> rusqlite::Result<bool> {
        self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version')",
            [],
            |r| r.get(0),
        )
    }

    pub fn version(&self) -> rusqlite::Result<i64> {
        self.conn
            .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
    }

    /// Applies a batch of events in one transaction.
    pub fn apply(&mut self, events: &[Event]) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut seen = tx.prepare_cached(
                "INSERT OR IGNORE INTO events (stream, entry_id, order_id, kind) VALUES (?1, ?2, ?3, ?4)",
            )?;
            let upsert = format!(
                "INSERT INTO orders (order_id, campaign, partition, user_id, quantity, status,
                     pay_by_ms, paid_ms, expired_ms, delivered_ms, license_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (order_id) DO UPDATE SET
                     status = excluded.status,
                     paid_ms = COALESCE(excluded.paid_ms, orders.paid_ms),
                     expired_ms = COALESCE(excluded.expired_ms, orders.expired_ms),
                     delivered_ms = COALESCE(excluded.delivered_ms, orders.delivered_ms),
                     license_key = COALESCE(excluded.license_key, orders.license_key)
                 WHERE {} > {}",
                RANK.replace("{}", "excluded.status"),
                RANK.replace("{}", "orders.status"),
            );
            let mut upsert = tx.prepare_cached(&upsert)?;
            // A refund done never goes back to due, whatever order the events come in.
            const REFUND: &str = "INSERT INTO refunds (order_id, payment_id, campaign, amount_cents, currency, reason, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (order_id, payment_id) DO UPDATE SET status = excluded.status
                 WHERE excluded.status = 'refunded'";
            for e in events {
                if seen.execute(params![e.stream, e.entry_id, e.order_id, e.kind.as_str()])? == 0 {
                    continue;
                }
                if let (Some(p), Kind::RefundDue | Kind::Refunded) = (&e.payment, e.kind) {
                    tx.prepare_cached(REFUND)?.execute(params![
                        e.order_id,
                        p.payment_id,
                        e.campaign,
                        p.amount_cents,
                        p.currency,
                        p.reason.as_deref().unwrap_or(""),
                        e.kind.as_str(),
                    ])?;
                }
                upsert.execute(params![
                    e.order_id,
                    e.campaign,
                    e.partition,
                    e.user,
                    e.quantity,
                    e.status(),
                    e.pay_by_ms,
                    e.paid_ms,
                    e.expired_ms,
                    e.delivered_ms,
                    e.license_key,
                ])?;
            }
        }
        tx.commit()
    }

    /// Payments this store knows to be owed back still.
    pub fn refunds_due(&self) -> rusqlite::Result<u64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM refunds WHERE status = 'refund_due'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
    }

    /// Every order of a campaign this store holds.
    pub fn orders(&self, campaign: &str) -> rusqlite::Result<Vec<StoredOrder>> {
        let mut q = self.conn.prepare(
            "SELECT order_id, user_id, quantity, status, license_key
             FROM orders WHERE campaign = ?1 ORDER BY order_id",
        )?;
        let rows = q.query_map([campaign], |r| {
            Ok(StoredOrder {
                order_id: r.get(0)?,
                user_id: r.get(1)?,
                quantity: r.get(2)?,
                status: r.get(3)?,
                license_key: r.get(4)?,
            })
        })?;
        rows.collect()
    }

    pub fn order(&self, order_id: &str) -> rusqlite::Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT status FROM orders WHERE order_id = ?1",
                [order_id],
                |r| r.get(0),
            )
            .optional()
    }

    /// Removes an order (reconciliation tests plant this fault).
    pub fn delete(&self, order_id: &str) -> rusqlite::Result<usize> {
        self.conn
            .execute("DELETE FROM orders WHERE order_id = ?1", [order_id])
    }
}

/// Brings the schema up to `migrations.len()`, each step once.
fn migrate(conn: &mut Connection, migrations: &[&str]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    let current: Option<i64> = tx
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .optional()?;
    if current.is_none() {
        tx.execute("INSERT INTO schema_version (version) VALUES (0)", [])?;
    }
    let current = current.unwrap_or(0);
    for (i, sql) in migrations.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.execute("UPDATE schema_version SET version = ?1", [i as i64 + 1])?;
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;

    fn event(entry: &str, kind: Kind) -> Event {
        order_event(entry, "c.0.1", kind)
    }

    fn order_event(entry: &str, order: &str, kind: Kind) -> Event {
        Event {
            stream: "s".into(),
            entry_id: entry.into(),
            kind,
            order_id: order.into(),
            campaign: "c".into(),
            partition: 0,
            user: "alice".into(),
            quantity: 1,
            pay_by_ms: 10,
            paid_ms: (kind != Kind::Held).then_some(5),
            expired_ms: None,
            delivered_ms: (kind == Kind::Delivered).then_some(6),
            license_key: (kind == Kind::Delivered).then(|| "KEY".to_string()),
            order_status: None,
            payment: None,
        }
    }

    #[test]
    fn the_schema_is_created_once_and_versioned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("orders/w.sqlite");
        // A file no worker has opened yet is not a store; once one has, it is.
        std::fs::create_dir_all(p.parent().expect("dir")).expect("dir");
        std::fs::write(&p, b"").expect("blank");
        let blank = OrderDb::open_existing(&p).expect("open blank");
        assert!(!blank.is_made().expect("read"));
        drop(blank);
        assert_eq!(
            OrderDb::open(&p).expect("open").version().expect("v"),
            SCHEMA_VERSION
        );
        assert_eq!(
            OrderDb::open(&p).expect("reopen").version().expect("v"),
            SCHEMA_VERSION
        );
        assert!(OrderDb::open_existing(&p)
            .expect("open")
            .is_made()
            .expect("read"));
    }

    #[test]
    fn events_apply_once_and_orders_only_move_forward() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = OrderDb::open(&dir.path().join("w.sqlite")).expect("open");
        db.apply(&[event("1-0", Kind::Held), event("2-0", Kind::Paid)])
            .expect("apply");
        db.apply(&[event("3-0", Kind::Delivered)]).expect("apply");
        // Replays, and an out-of-order older event, change nothing.
        db.apply(&[event("1-0", Kind::Held), event("3-0", Kind::Delivered)])
            .expect("replay");
        db.apply(&[event("9-0", Kind::Held)]).expect("stale");
        let o = db.orders("c").expect("orders");
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].status, "delivered");
        assert_eq!(o[0].license_key.as_deref(), Some("KEY"));
    }

    #[test]
    fn every_order_of_one_entry_is_stored_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = OrderDb::open(&dir.path().join("w.sqlite")).expect("open");
        let held = [
            order_event("1-0", "c.0.1", Kind::Held),
            order_event("1-0", "c.0.2", Kind::Held),
        ];
        db.apply(&held).expect("apply");
        db.apply(&held).expect("replay");
        let o = db.orders("c").expect("orders");
        let ids: Vec<_> = o.iter().map(|o| o.order_id.as_str()).collect();
        assert_eq!(ids, ["c.0.1", "c.0.2"]);
        let recorded: i64 = db
            .conn
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .expect("count");
        assert_eq!(recorded, 2);
    }

    #[test]
    fn a_store_of_the_first_schema_keeps_its_orders_and_events_when_migrated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("w.sqlite");
        {
            let mut conn = Connection::open(&p).expect("open");
            migrate(&mut conn, &MIGRATIONS[..1]).expect("schema 1");
            let mut db = OrderDb { conn };
            assert_eq!(db.version().expect("v"), 1);
            db.apply(&[event("1-0", Kind::Held), event("2-0", Kind::Paid)])
                .expect("apply");
        }
        let mut db = OrderDb::open(&p).expect("migrate");
        assert_eq!(db.version().expect("v"), SCHEMA_VERSION);
        // The entry seen before the migration is still seen: its replay moves nothing.
        db.apply(&[order_event("1-0", "c.0.1", Kind::Held)])
            .expect("replay");
        let o = db.orders("c").expect("orders");
        assert_eq!((o.len(), o[0].status.as_str()), (1, "paid"));
        let recorded: i64 = db
            .conn
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .expect("count");
        assert_eq!(recorded, 2);
    }

    #[test]
    fn a_refund_is_due_until_done_whatever_order_its_events_come_in() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = OrderDb::open(&dir.path().join("w.sqlite")).expect("open");
        let refund = |entry: &str, kind: Kind| Event {
            payment: Some(crate::event::Payment {
                payment_id: "pi_2".into(),
                amount_cents: 500,
                currency: "EUR".into(),
                reason: Some("duplicate".into()),
            }),
            order_status: Some("delivered".into()),
            ..order_event(entry, "c.0.1", kind)
        };
        db.apply(&[event("1-0", Kind::Held), refund("2-0", Kind::RefundDue)])
            .expect("apply");
        assert_eq!(db.refunds_due().expect("count"), 1);
        // The order is at the status the event says (a second payment of a delivered
        // order leaves it delivered), not `refund_due`.
        assert_eq!(db.orders("c").expect("orders")[0].status, "delivered");
        db.apply(&[refund("3-0", Kind::Refunded)]).expect("apply");
        assert_eq!(db.refunds_due().expect("count"), 0);
        // A due seen again (a replay under another entry) does not make it due again.
        db.apply(&[refund("4-0", Kind::RefundDue)]).expect("apply");
        assert_eq!(db.refunds_due().expect("count"), 0);
    }
}
