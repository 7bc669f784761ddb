//! Decomposition leases in `decomposition_leases`: one row per leased card, written in
//! one `BEGIN IMMEDIATE` transaction with the core's rule (`decide_lease`).

use board_core::{
    decide_lease, lease_expiry, DecompositionLease, StoreResult, TaskId, Timestamp, TriageLease,
};
use rusqlite::{params, OptionalExtension, Transaction};

use crate::rows::Word;

use super::backend;
use super::tasks::get_task;

pub(crate) fn lease(
    tx: &Transaction<'_>,
    id: &TaskId,
    holder: &str,
    ttl: i64,
    now: Timestamp,
    abandoned: Option<&str>,
) -> StoreResult<DecompositionLease> {
    get_task(tx, id)?;
    let current: Option<(String, Timestamp)> = tx
        .prepare_cached("SELECT holder, expires FROM decomposition_leases WHERE task_id = ?1")
        .and_then(|mut s| {
            s.query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(backend)?;
    let decision = decide_lease(current.as_ref().map(|(h, e)| (h.as_str(), *e)), now, abandoned);
    if !matches!(decision, DecompositionLease::Held { .. }) {
        tx.prepare_cached(
            "INSERT INTO decomposition_leases (task_id, holder, expires) VALUES (?1, ?2, ?3)
             ON CONFLICT (task_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), holder, lease_expiry(ttl, now)]))
        .map_err(backend)?;
    }
    Ok(decision)
}

pub(crate) fn release(tx: &Transaction<'_>, id: &TaskId, holder: &str) -> StoreResult<()> {
    tx.prepare_cached("DELETE FROM decomposition_leases WHERE task_id = ?1 AND holder = ?2")
        .and_then(|mut s| s.execute(params![id.as_str(), holder]))
        .map_err(backend)?;
    Ok(())
}

pub(crate) fn on_triage(conn: &rusqlite::Connection, limit: usize) -> StoreResult<Vec<TriageLease>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT l.task_id, l.holder, l.expires FROM decomposition_leases l
             JOIN tasks t ON t.id = l.task_id WHERE t.status = 'triage' ORDER BY l.task_id LIMIT ?1",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([limit as i64], |r| {
            Ok(TriageLease {
                card: r.get::<_, Word<TaskId>>(0)?.0,
                holder: r.get(1)?,
                expires: r.get(2)?,
            })
        })
        .map_err(backend)?;
    rows.collect::<rusqlite::Result<_>>().map_err(backend)
}
