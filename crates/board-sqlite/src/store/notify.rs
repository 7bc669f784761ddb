//! `NotifyDesk` for `SqliteStore`: the `notify_subscriptions` table; an attempt's record
//! is a compare-and-set on the cursor it was made from.

use board_core::notify::{attempted, resumed, Delivery, NewSubscription, NotifyDesk, Subscription};
use board_core::store::StoreResult;
use board_core::{Refusal, StoreError, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::backend;
use crate::SqliteStore;

const COLUMNS: &str = "id, task_id, kinds, url, secret, created_at, after_event, failures, \
                       next_attempt_at, paused, last_status, last_attempt_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Subscription> {
    let bad = |i: usize, e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e)
    };
    let task: Option<String> = r.get(1)?;
    let kinds: String = r.get(2)?;
    Ok(Subscription {
        id: r.get(0)?,
        task_id: task
            .map(|t| t.parse())
            .transpose()
            .map_err(|e| bad(1, Box::new(e)))?,
        kinds: serde_json::from_str(&kinds).map_err(|e| bad(2, Box::new(e)))?,
        url: r.get(3)?,
        secret: r.get(4)?,
        created_at: r.get(5)?,
        after_event: r.get(6)?,
        failures: r.get(7)?,
        next_attempt_at: r.get(8)?,
        paused: r.get(9)?,
        last_status: r.get(10)?,
        last_attempt_at: r.get(11)?,
    })
}

fn one(conn: &Connection, id: i64) -> StoreResult<Subscription> {
    let sql = format!("SELECT {COLUMNS} FROM notify_subscriptions WHERE id = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([id], from_row).optional())
        .map_err(backend)?
        .ok_or_else(|| no_such(id))
}

fn no_such(id: i64) -> StoreError {
    Refusal::NoSuchSubscription(id).into()
}

/// Writes a subscription's changing columns.
fn write_back(conn: &Connection, s: &Subscription) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE notify_subscriptions SET after_event = ?2, failures = ?3, next_attempt_at = ?4,
           paused = ?5, last_status = ?6, last_attempt_at = ?7 WHERE id = ?1",
    )
    .and_then(|mut st| {
        st.execute(params![
            s.id,
            s.after_event,
            s.failures,
            s.next_attempt_at,
            s.paused,
            s.last_status,
            s.last_attempt_at
        ])
    })
    .map_err(backend)?;
    Ok(())
}

impl NotifyDesk for SqliteStore {
    fn subscribe(&self, new: &NewSubscription, now: Timestamp) -> StoreResult<Subscription> {
        let new = new.clone().admit()?;
        self.write(|tx| {
            if let Some(task) = &new.task_id {
                SqliteStore::require_task(tx, task)?;
            }
            let kinds = serde_json::to_string(&new.kinds).map_err(|e| StoreError::Backend(e.to_string()))?;
            tx.prepare_cached(
                "INSERT INTO notify_subscriptions (task_id, kinds, url, secret, created_at, after_event)
                 VALUES (?1, ?2, ?3, ?4, ?5, (SELECT COALESCE(MAX(id), 0) FROM task_events))",
            )
            .and_then(|mut s| {
                s.execute(params![
                    new.task_id.as_ref().map(|t| t.as_str()),
                    kinds,
                    new.url,
                    new.secret,
                    now
                ])
            })
            .map_err(backend)?;
            one(tx, tx.last_insert_rowid())
        })
    }

    fn subscriptions(&self) -> StoreResult<Vec<Subscription>> {
        let conn = self.conn();
        let sql = format!("SELECT {COLUMNS} FROM notify_subscriptions ORDER BY id");
        let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
        let rows = stmt.query_map([], from_row).map_err(backend)?;
        rows.collect::<rusqlite::Result<_>>().map_err(backend)
    }

    fn unsubscribe(&self, id: i64) -> StoreResult<Subscription> {
        self.write(|tx| {
            let gone = one(tx, id)?;
            tx.prepare_cached("DELETE FROM notify_subscriptions WHERE id = ?1")
                .and_then(|mut s| s.execute([id]))
                .map_err(backend)?;
            Ok(gone)
        })
    }

    fn record_delivery(&self, id: i64, from: i64, delivery: &Delivery, now: Timestamp) -> StoreResult<bool> {
        self.write(|tx| match attempted(one(tx, id)?, from, delivery, now) {
            Some(next) => write_back(tx, &next).map(|()| true),
            None => Ok(false),
        })
    }

    fn resume_subscription(&self, id: i64) -> StoreResult<Subscription> {
        self.write(|tx| {
            let sub = resumed(one(tx, id)?);
            write_back(tx, &sub).map(|()| sub)
        })
    }
}
