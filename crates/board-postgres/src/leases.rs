//! Decomposition leases in `decomposition_leases`: one row per leased card, decided by
//! the core's rule (`decide_lease`) under the row's lock.

use board_core::{
    decide_lease, lease_expiry, DecompositionLease, StoreResult, TaskId, Timestamp, TriageLease,
};

use crate::apply::require_task;
use crate::rows::{get, task_id};
use crate::tx::Tx;

pub(crate) fn lease(
    tx: &mut Tx<'_>,
    id: &TaskId,
    holder: &str,
    ttl: i64,
    now: Timestamp,
    abandoned: Option<&str>,
) -> StoreResult<DecompositionLease> {
    require_task(tx, id)?;
    let expires = lease_expiry(ttl, now);
    // The first leaser of a card inserts its row; a concurrent one waits for that insert
    // to commit, does nothing, and reads the winner's row under its lock below.
    let inserted = tx.execute(
        "INSERT INTO decomposition_leases (task_id, holder, expires) VALUES ($1, $2, $3)
         ON CONFLICT (task_id) DO NOTHING",
        &[&id.as_str(), &holder, &expires],
    )?;
    if inserted == 1 {
        return Ok(DecompositionLease::Leased);
    }
    // One holder at a time: the row is locked while the lapsed lease is decided on.
    let row = tx.query_one(
        "SELECT holder, expires FROM decomposition_leases WHERE task_id = $1 FOR UPDATE",
        &[&id.as_str()],
    )?;
    let (current, until): (String, Timestamp) = (
        row.try_get(0).map_err(crate::backend)?,
        row.try_get(1).map_err(crate::backend)?,
    );
    let decision = decide_lease(Some((&current, until)), now, abandoned);
    if !matches!(decision, DecompositionLease::Held { .. }) {
        tx.execute(
            "UPDATE decomposition_leases SET holder = $2, expires = $3 WHERE task_id = $1",
            &[&id.as_str(), &holder, &expires],
        )?;
    }
    Ok(decision)
}

pub(crate) fn release(tx: &mut Tx<'_>, id: &TaskId, holder: &str) -> StoreResult<()> {
    tx.execute(
        "DELETE FROM decomposition_leases WHERE task_id = $1 AND holder = $2",
        &[&id.as_str(), &holder],
    )?;
    Ok(())
}

pub(crate) fn on_triage(tx: &mut Tx<'_>, limit: usize) -> StoreResult<Vec<TriageLease>> {
    let rows = tx.query(
        "SELECT l.task_id AS id, l.holder, l.expires FROM decomposition_leases l
         JOIN tasks t ON t.id = l.task_id WHERE t.status = 'triage' ORDER BY l.task_id LIMIT $1",
        &[&(limit as i64)],
    )?;
    let lease = |r: &postgres::Row| {
        Ok(TriageLease {
            card: task_id(r)?,
            holder: get(r, "holder")?,
            expires: get(r, "expires")?,
        })
    };
    rows.iter().map(lease).collect()
}
