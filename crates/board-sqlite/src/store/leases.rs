//! Decomposition leases in `decomposition_leases`: one row per leased card, written in
//! one `BEGIN IMMEDIATE` transaction with the core's rule (`decide_lease`).

use board_core::{decide_lease, lease_expiry, DecompositionLease, StoreResult, TaskId, Timestamp};
use rusqlite::{params, OptionalExtension, Transaction};

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
