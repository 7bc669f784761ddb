//! The streamed and aggregate reads: `list` and `events` row by row as the server sends
//! them, and the counts of `stats` and the web board's charts, each one statement
//! (a page after a cursor: two, `board_core::store::after_cursor`).

use std::collections::BTreeMap;

use board_core::store::{after_cursor, CursorRange, EventFilter, StoreResult, TaskFilter, Visit};
use board_core::{DaySpend, Event, Finished, Status, StatusCount, StoreError, Task, TaskId, TaskOrder};

use crate::apply::require_task;
use crate::rows::{self, event_columns, get, task_columns, word};
use crate::tx::{Params, Tx};

/// A read's limit as a query parameter (NULL: none).
pub(crate) fn sql_limit(limit: Option<usize>) -> Option<i64> {
    limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Where a page's cursor task sits in the claim order: priority, created_at, seq.
fn cursor(tx: &mut Tx<'_>, id: &TaskId) -> StoreResult<(i64, i64, i64)> {
    let found = tx.query_opt(
        "SELECT priority, created_at, seq FROM tasks WHERE id = $1",
        &[&id.as_str()],
    )?;
    let row = found.ok_or_else(|| StoreError::from(board_core::Refusal::NoSuchTask(id.clone())))?;
    Ok((
        get(&row, "priority")?,
        get(&row, "created_at")?,
        get(&row, "seq")?,
    ))
}

pub(crate) fn for_each_task(
    tx: &mut Tx<'_>,
    filter: &TaskFilter,
    visit: &mut dyn FnMut(Task) -> Visit,
) -> StoreResult<()> {
    // A status filter is an index range of tasks_by_status, never a scan of the board.
    let status_clause = match (filter.status.is_some(), filter.include_archived) {
        (true, _) => "status = $1",
        (false, true) => "$1::text IS NULL",
        (false, false) => "$1::text IS NULL AND status <> 'archived'",
    };
    let assignee_clause = match (&filter.assignee, filter.unassigned) {
        (Some(_), _) => "assignee = $2",
        (None, true) => "$2::text IS NULL AND assignee IS NULL",
        (None, false) => "$2::text IS NULL",
    };
    let clause = |tenant_at: u8| {
        format!(
            "{status_clause} AND {assignee_clause} AND {}",
            tenant_clause(filter, tenant_at)
        )
    };
    if filter.order != TaskOrder::Priority {
        return for_each_sorted(tx, filter, &clause(5), visit);
    }
    let status = filter.status.map(|s| s.as_str());
    let limit = sql_limit(filter.limit);
    let tenant = &filter.tenant;
    let head = |tenant_at: u8| {
        format!(
            "SELECT {} FROM tasks WHERE {}",
            task_columns!(),
            clause(tenant_at)
        )
    };
    let Some(id) = &filter.after else {
        let sql = format!("{} ORDER BY priority DESC, created_at, seq LIMIT $3", head(4));
        return tx.each_row(&sql, &[&status, &filter.assignee, &limit, tenant], |row| {
            Ok(visit(rows::task(row)?))
        });
    };
    let (priority, created_at, seq) = cursor(tx, id)?;
    after_cursor(filter.limit, visit, |range, limit, visit| {
        let limit = sql_limit(limit);
        let each = |row: &postgres::Row| Ok(visit(rows::task(row)?));
        match range {
            CursorRange::Rest => tx.each_row(
                &format!(
                    "{} AND priority = $4 AND (created_at, seq) > ($5, $6) ORDER BY created_at, seq LIMIT $3",
                    head(7)
                ),
                &[
                    &status,
                    &filter.assignee,
                    &limit,
                    &priority,
                    &created_at,
                    &seq,
                    tenant,
                ],
                each,
            ),
            CursorRange::Lower => tx.each_row(
                &format!(
                    "{} AND priority < $4 ORDER BY priority DESC, created_at, seq LIMIT $3",
                    head(5)
                ),
                &[&status, &filter.assignee, &limit, &priority, tenant],
                each,
            ),
        }
    })
}

/// The tenant's part of a list's `WHERE`, its parameter at `at` (after the statement's
/// others): an index range of tasks_by_tenant when given.
fn tenant_clause(filter: &TaskFilter, at: u8) -> String {
    match filter.tenant.is_some() {
        true => format!("tenant = ${at}"),
        false => format!("${at}::text IS NULL"),
    }
}

/// `list --sort`: the filter's rows ordered by the query; a cursor is the row value of its
/// task. $1 status, $2 assignee, $3 limit, $4 the cursor's id, $5 the tenant.
fn for_each_sorted(
    tx: &mut Tx<'_>,
    filter: &TaskFilter,
    clause: &str,
    visit: &mut dyn FnMut(Task) -> Visit,
) -> StoreResult<()> {
    if let Some(id) = &filter.after {
        cursor(tx, id)?;
    }
    // Titles compare byte by byte (`COLLATE "C"`), as SQLite's do; seq breaks ties.
    let key = filter.order.sql_key(" COLLATE \"C\"");
    let sql = format!(
        "SELECT {} FROM tasks WHERE {clause}
           AND ($4::text IS NULL OR ROW({key}, seq) > (SELECT {key}, seq FROM tasks WHERE id = $4))
         ORDER BY {key}, seq LIMIT $3",
        task_columns!()
    );
    let status = filter.status.map(|s| s.as_str());
    let limit = sql_limit(filter.limit);
    let after = filter.after.as_ref().map(TaskId::as_str);
    let params: Params<'_> = &[&status, &filter.assignee, &limit, &after, &filter.tenant];
    tx.each_row(&sql, params, |row| Ok(visit(rows::task(row)?)))
}

/// The `WHERE` of an events read: $1 task, $2 after id, $3 kind, $4 since, and the
/// assignee at `assignee_at` (after a read's limit) and the tenant after it. A task filter
/// is its own statement, an index range of task_events_by_task; an assignee or a tenant
/// is checked per event, by the task's primary key.
fn event_clause(filter: &EventFilter, assignee_at: u8) -> String {
    let rest =
        "id > $2 AND ($3::text[] IS NULL OR kind = ANY($3)) AND ($4::bigint IS NULL OR created_at >= $4)";
    let task = match filter.task_id.is_some() {
        true => "task_id = $1",
        false => "$1::text IS NULL",
    };
    let assignee = match filter.assignee.is_some() {
        true => format!(" AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_events.task_id AND t.assignee = ${assignee_at})"),
        false => format!(" AND ${assignee_at}::text IS NULL"),
    };
    let tenant_at = assignee_at + 1;
    let tenant = match filter.tenant.is_some() {
        true => format!(" AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_events.task_id AND t.tenant = ${tenant_at})"),
        false => format!(" AND ${tenant_at}::text IS NULL"),
    };
    format!("{task} AND {rest}{assignee}{tenant}")
}

/// The kinds of an events read as PostgreSQL binds them: a text array, or NULL for any.
fn kinds_param(filter: &EventFilter) -> Option<&[String]> {
    (!filter.kinds.is_empty()).then_some(filter.kinds.as_slice())
}

pub(crate) fn for_each_event(
    tx: &mut Tx<'_>,
    filter: &EventFilter,
    visit: &mut dyn FnMut(Event) -> Visit,
) -> StoreResult<()> {
    if let Some(id) = &filter.task_id {
        require_task(tx, id)?;
    }
    let clause = event_clause(filter, 6);
    let columns = event_columns!();
    let sql = if filter.newest {
        format!(
            "SELECT {columns} FROM (SELECT {columns} FROM task_events WHERE {clause}
             ORDER BY id DESC LIMIT $5) newest ORDER BY id"
        )
    } else {
        format!("SELECT {columns} FROM task_events WHERE {clause} ORDER BY id LIMIT $5")
    };
    let task = filter.task_id.as_ref().map(TaskId::as_str);
    let limit = sql_limit(filter.limit);
    let kinds = kinds_param(filter);
    let params: Params<'_> = &[
        &task,
        &filter.after_id,
        &kinds,
        &filter.since,
        &limit,
        &filter.assignee,
        &filter.tenant,
    ];
    tx.each_row(&sql, params, |row| Ok(visit(rows::event(row)?)))
}

pub(crate) fn count_events(tx: &mut Tx<'_>, filter: &EventFilter) -> StoreResult<u64> {
    if let Some(id) = &filter.task_id {
        require_task(tx, id)?;
    }
    let sql = format!(
        "SELECT count(*) AS n FROM task_events WHERE {}",
        event_clause(filter, 5)
    );
    let task = filter.task_id.as_ref().map(TaskId::as_str);
    let kinds = kinds_param(filter);
    let params: Params<'_> = &[
        &task,
        &filter.after_id,
        &kinds,
        &filter.since,
        &filter.assignee,
        &filter.tenant,
    ];
    let found = tx.query_uncached(&sql, params)?;
    let row = found
        .first()
        .ok_or_else(|| StoreError::Backend("the event count returned no row".into()))?;
    Ok(get::<i64>(row, "n")?.max(0) as u64)
}

pub(crate) fn status_counts(tx: &mut Tx<'_>) -> StoreResult<Vec<StatusCount>> {
    let found = tx.query(
        "SELECT assignee, status, count(*) AS n FROM tasks GROUP BY assignee, status
         ORDER BY assignee NULLS FIRST, status",
        &[],
    )?;
    found
        .iter()
        .map(|r| {
            Ok(StatusCount {
                assignee: get(r, "assignee")?,
                status: word::<Status>(r, "status")?,
                tasks: get::<i64>(r, "n")?.max(0) as u64,
            })
        })
        .collect()
}

/// Verdict events per kind, read through the partial index task_events_verdicts, whose
/// WHERE this repeats (board_core::VERDICT_EVENTS).
pub(crate) fn verdicts(tx: &mut Tx<'_>) -> StoreResult<BTreeMap<String, u64>> {
    let found = tx.query(
        concat!(
            "SELECT kind AS key, COUNT(*) AS n FROM task_events WHERE kind IN (",
            board_core::verdict_events_sql!(),
            ") GROUP BY kind"
        ),
        &[],
    )?;
    rows::counts(&found)
}

pub(crate) fn oldest(tx: &mut Tx<'_>, status: Status) -> StoreResult<Option<Task>> {
    let sql = concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE status = $1 ORDER BY created_at, id LIMIT 1"
    );
    tx.query_opt(sql, &[&status.as_str()])?
        .map(|r| rows::task(&r))
        .transpose()
}

pub(crate) fn finished(tx: &mut Tx<'_>, since: i64, slot: i64, bounds: &[i64]) -> StoreResult<Vec<Finished>> {
    // Rows are counted as they stream: the memory held is one counter per slot and bucket.
    let sql = concat!(
        "SELECT (t.completed_at - $1) / $2 AS slot, t.completed_at - COALESCE((
             SELECT max(e.created_at) FROM task_events e
             WHERE e.task_id = t.id AND e.kind IN (",
        board_core::ready_again_events_sql!(),
        ") AND e.created_at <= t.completed_at
         ), t.created_at) AS took
         FROM tasks t WHERE t.completed_at >= $1"
    );
    let mut counts: BTreeMap<(i64, usize), u64> = BTreeMap::new();
    tx.each_row(sql, &[&since, &slot.max(1)], |row| {
        let took: i64 = get(row, "took")?;
        let bucket = bounds.iter().position(|b| took < *b).unwrap_or(bounds.len());
        *counts.entry((get(row, "slot")?, bucket)).or_default() += 1;
        Ok(Visit::Continue(()))
    })?;
    Ok(counts
        .into_iter()
        .map(|((slot, bucket), tasks)| Finished { slot, bucket, tasks })
        .collect())
}

pub(crate) fn daily_spend(tx: &mut Tx<'_>, since: i64) -> StoreResult<Vec<DaySpend>> {
    let found = tx.query(
        "SELECT started_at / 86400 AS day, count(*) AS requests,
                COALESCE(sum(GREATEST(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0), 0)), 0)::bigint AS tokens,
                count(*) FILTER (WHERE outcome <> 'ok') AS failures
         FROM llm_calls WHERE started_at >= $1 GROUP BY 1 ORDER BY 1",
        &[&since],
    )?;
    found
        .iter()
        .map(|r| {
            Ok(DaySpend {
                day: get(r, "day")?,
                requests: get::<i64>(r, "requests")?.max(0) as u64,
                tokens: get::<i64>(r, "tokens")?.max(0) as u64,
                failures: get::<i64>(r, "failures")?.max(0) as u64,
            })
        })
        .collect()
}

/// Scheduled tasks due at `now`, earliest first: an index range of tasks_scheduled_due,
/// whose WHERE this repeats.
pub(crate) fn due_scheduled(tx: &mut Tx<'_>, now: i64, limit: usize) -> StoreResult<Vec<TaskId>> {
    let rows = tx.query(
        "SELECT id FROM tasks WHERE status = 'scheduled' AND scheduled_until IS NOT NULL
           AND scheduled_until <= $1 ORDER BY scheduled_until, id LIMIT $2",
        &[&now, &sql_limit(Some(limit))],
    )?;
    rows.iter().map(rows::task_id).collect()
}

/// The earliest scheduled time after `after`: the first entry of tasks_scheduled_due past it.
pub(crate) fn next_scheduled(tx: &mut Tx<'_>, after: i64) -> StoreResult<Option<i64>> {
    let rows = tx.query(
        "SELECT MIN(scheduled_until) AS next FROM tasks WHERE status = 'scheduled'
           AND scheduled_until IS NOT NULL AND scheduled_until > $1",
        &[&after],
    )?;
    match rows.first() {
        Some(row) => get(row, "next"),
        None => Ok(None),
    }
}
