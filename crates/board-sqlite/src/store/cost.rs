//! The ledger's sums and the provider breaker's row (docs/storage.md): the spend of a
//! window in one aggregate query over `llm_calls_by_time`, and the breaker read and
//! written whole, with its event, inside the caller's transaction.

use board_core::breaker::observe;
use board_core::{
    Breaker, BreakerSettings, BreakerSignal, EventKind, Spend, StoreError, StoreResult, Timestamp,
};
use rusqlite::{params, Connection, OptionalExtension};

use super::{backend, insert_events, SqliteStore};

/// The ledger summed by outcome over the calls started at or after `since`.
pub(super) fn spend(tx: &Connection, since: Timestamp) -> StoreResult<Spend> {
    // Served by llm_calls_by_time: proportional to the window's rows, not the ledger's.
    let mut stmt = tx
        .prepare_cached(
            "SELECT outcome, COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), \
             SUM(cost), COALESCE(SUM(over_budget), 0) FROM llm_calls WHERE started_at >= ?1 GROUP BY outcome",
        )
        .map_err(backend)?;
    let groups = stmt
        .query_map([since], |r| {
            let group = Spend {
                requests: r.get(1)?,
                prompt_tokens: r.get(2)?,
                completion_tokens: r.get(3)?,
                cost: r.get(4)?,
                over_budget: r.get(5)?,
                ..Spend::default()
            };
            Ok((r.get::<_, String>(0)?, group))
        })
        .map_err(backend)?;
    let mut sum = Spend::default();
    for group in groups {
        let (outcome, group) = group.map_err(backend)?;
        sum.add(outcome, &group);
    }
    Ok(sum)
}

/// The breaker's row; the default when none was ever written.
pub(super) fn breaker(tx: &Connection) -> StoreResult<Breaker> {
    let state: Option<String> = tx
        .prepare_cached("SELECT state FROM provider_breaker WHERE id = 1")
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(backend)?;
    match state {
        None => Ok(Breaker::default()),
        Some(json) => serde_json::from_str(&json)
            .map_err(|e| StoreError::Backend(format!("unreadable provider_breaker row: {e}"))),
    }
}

/// Applies `signal` under the write lock: the new state and its event commit together.
pub(super) fn signal_breaker(
    tx: &Connection,
    signal: &BreakerSignal,
    settings: &BreakerSettings,
    now: Timestamp,
) -> StoreResult<(Breaker, Option<EventKind>)> {
    let state = breaker(tx)?;
    let Some(change) = observe(&state, signal, settings, now) else {
        return Ok((state, None));
    };
    SqliteStore::require_task(tx, &change.card)?;
    let json = serde_json::to_string(&change.breaker).map_err(|e| StoreError::Backend(e.to_string()))?;
    tx.prepare_cached(
        "INSERT INTO provider_breaker (id, state, updated_at) VALUES (1, ?1, ?2) \
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
    )
    .and_then(|mut s| s.execute(params![json, now]))
    .map_err(backend)?;
    let kind = change.event.as_ref().map(|e| e.kind);
    insert_events(
        tx,
        &change.card,
        &change.event.into_iter().collect::<Vec<_>>(),
        now,
    )?;
    Ok((change.breaker, kind))
}
