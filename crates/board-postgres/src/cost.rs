//! The ledger's sums and the provider breaker's row (docs/storage.md): the spend of a
//! window in one aggregate query over `llm_calls_by_time`, and the breaker locked, read
//! and written whole with its event inside the caller's transaction.

use board_core::breaker::observe;
use board_core::{
    Breaker, BreakerSettings, BreakerSignal, EventKind, Spend, StoreError, StoreResult, Timestamp,
};

use crate::apply::require_task;
use crate::tx::Tx;

/// The ledger summed by outcome over the calls started at or after `since`.
pub(crate) fn spend(tx: &mut Tx<'_>, since: Timestamp) -> StoreResult<Spend> {
    // Served by llm_calls_by_time: proportional to the window's rows, not the ledger's.
    let rows = tx.query(
        "SELECT outcome, COUNT(*)::BIGINT, COALESCE(SUM(prompt_tokens), 0)::BIGINT, \
         COALESCE(SUM(completion_tokens), 0)::BIGINT, SUM(cost), \
         (COUNT(*) FILTER (WHERE over_budget))::BIGINT \
         FROM llm_calls WHERE started_at >= $1 GROUP BY outcome",
        &[&since],
    )?;
    let mut sum = Spend::default();
    for row in rows {
        let read = |e: postgres::Error| StoreError::Backend(format!("reading the ledger's sums: {e}"));
        let group = Spend {
            requests: row.try_get(1).map_err(read)?,
            prompt_tokens: row.try_get(2).map_err(read)?,
            completion_tokens: row.try_get(3).map_err(read)?,
            cost: row.try_get(4).map_err(read)?,
            over_budget: row.try_get(5).map_err(read)?,
            ..Spend::default()
        };
        sum.add(row.try_get(0).map_err(read)?, &group);
    }
    Ok(sum)
}

fn parse(state: &str) -> StoreResult<Breaker> {
    serde_json::from_str(state)
        .map_err(|e| StoreError::Backend(format!("unreadable provider_breaker row: {e}")))
}

/// The breaker's row.
pub(crate) fn breaker(tx: &mut Tx<'_>) -> StoreResult<Breaker> {
    match tx.query_opt("SELECT state FROM provider_breaker WHERE id = 1", &[])? {
        Some(row) => parse(&row.get::<_, String>(0)),
        None => Ok(Breaker::default()),
    }
}

/// Applies `signal` with the breaker's row locked, so concurrent signals apply one after
/// the other; the new state and its event commit together.
pub(crate) fn signal_breaker(
    tx: &mut Tx<'_>,
    signal: &BreakerSignal,
    settings: &BreakerSettings,
    now: Timestamp,
) -> StoreResult<(Breaker, Option<EventKind>)> {
    let state = match tx.query_opt("SELECT state FROM provider_breaker WHERE id = 1 FOR UPDATE", &[])? {
        Some(row) => parse(&row.get::<_, String>(0))?,
        None => return Err(StoreError::Backend("the provider_breaker row is missing".into())),
    };
    let Some(change) = observe(&state, signal, settings, now) else {
        return Ok((state, None));
    };
    require_task(tx, &change.card)?;
    let json = serde_json::to_string(&change.breaker).map_err(|e| StoreError::Backend(e.to_string()))?;
    tx.execute(
        "UPDATE provider_breaker SET state = $1, updated_at = $2 WHERE id = 1",
        &[&json, &now],
    )?;
    let kind = change.event.as_ref().map(|e| e.kind);
    tx.push_events(&change.card, &change.event.into_iter().collect::<Vec<_>>(), now);
    Ok((change.breaker, kind))
}
