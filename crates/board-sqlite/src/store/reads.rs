//! The streamed and aggregate reads: `list` and `events` row by row as SQLite yields
//! them, and the counts of `stats` and the web board's charts, each one statement
//! (a page after a cursor: two, `board_core::store::after_cursor`).

use std::collections::BTreeMap;

use board_core::store::{after_cursor, CursorRange, EventFilter, StoreResult, TaskFilter, Visit};
use board_core::{DaySpend, Event, Finished, Status, StatusCount, Task, TaskId, TaskOrder};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::tasks::{each_decoded, query_tasks};
use super::{backend, no_such};
use crate::rows::{event_from_row, task_from_row, Word, EVENT_COLUMNS, TASK_COLUMNS};

/// Where a page's cursor task sits in the claim order: priority, created_at, rowid.
fn cursor(conn: &Connection, after: Option<&TaskId>) -> StoreResult<Option<(i64, i64, i64)>> {
    let Some(id) = after else {
        return Ok(None);
    };
    conn.prepare_cached("SELECT priority, created_at, rowid FROM tasks WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(backend)?
        .map(Some)
        .ok_or_else(|| no_such(id))
}

/// The `WHERE` of a listing: ?1 status, ?2 assignee, the tenant at `tenant_at`. One
/// statement per shape of filter, so that a status filter is an index range of
/// tasks_by_status rather than a scan of the whole board.
fn list_clause(filter: &TaskFilter, tenant_at: u8) -> String {
    let status_clause = match (filter.status, filter.include_archived) {
        (Some(_), _) => "status = ?1",
        (None, true) => "?1 IS NULL",
        (None, false) => "?1 IS NULL AND status <> 'archived'",
    };
    let assignee_clause = match (&filter.assignee, filter.unassigned) {
        (Some(_), _) => "assignee = ?2",
        (None, true) => "?2 IS NULL AND assignee IS NULL",
        (None, false) => "?2 IS NULL",
    };
    format!(
        "{status_clause} AND {assignee_clause} AND {}",
        tenant_clause(filter, tenant_at)
    )
}

/// The first page of a listing in claim order: ?3 the limit, ?4 the tenant.
fn first_page_sql(filter: &TaskFilter) -> String {
    format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE {} ORDER BY priority DESC, created_at, rowid LIMIT ?3",
        list_clause(filter, 4)
    )
}

/// A whole listing (no limit, no cursor) as one statement and its parameters, owned so
/// that a thread of its own can read it (`pipeline`); `None` for a page.
pub(super) fn whole_listing(filter: &TaskFilter) -> Option<(String, Vec<Value>)> {
    if filter.limit.is_some() || filter.after.is_some() {
        return None;
    }
    let text = |t: Option<&str>| t.map_or(Value::Null, |t| Value::Text(t.to_owned()));
    let status = text(filter.status.map(|s| s.as_str()));
    let (assignee, tenant) = (text(filter.assignee.as_deref()), text(filter.tenant.as_deref()));
    let none = Value::Integer(limit_of(None));
    Some(match filter.order {
        TaskOrder::Priority => (first_page_sql(filter), vec![status, assignee, none, tenant]),
        _ => (
            sorted_sql(filter),
            vec![status, assignee, none, Value::Null, tenant],
        ),
    })
}

pub(super) fn for_each_task(
    conn: &Connection,
    filter: &TaskFilter,
    visit: &mut dyn FnMut(Task) -> Visit,
) -> StoreResult<()> {
    if filter.order != TaskOrder::Priority {
        return for_each_sorted(conn, filter, visit);
    }
    let (status, limit) = (filter.status.map(|s| s.as_str()), limit_of(filter.limit));
    let head = |tenant_at: u8| {
        format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE {}",
            list_clause(filter, tenant_at)
        )
    };
    let tenant = &filter.tenant;
    let Some((priority, created_at, rowid)) = cursor(conn, filter.after.as_ref())? else {
        let sql = first_page_sql(filter);
        return visit_tasks(conn, &sql, params![status, filter.assignee, limit, tenant], visit);
    };
    after_cursor(filter.limit, visit, |range, limit, visit| {
        let limit = limit_of(limit);
        match range {
            CursorRange::Rest => visit_tasks(
                conn,
                &format!(
                    "{} AND priority = ?4 AND (created_at > ?5 OR (created_at = ?5 AND rowid > ?6))
                     ORDER BY created_at, rowid LIMIT ?3",
                    head(7)
                ),
                params![
                    status,
                    filter.assignee,
                    limit,
                    priority,
                    created_at,
                    rowid,
                    tenant
                ],
                visit,
            ),
            CursorRange::Lower => visit_tasks(
                conn,
                &format!(
                    "{} AND priority < ?4 ORDER BY priority DESC, created_at, rowid LIMIT ?3",
                    head(5)
                ),
                params![status, filter.assignee, limit, priority, tenant],
                visit,
            ),
        }
    })
}

/// The tenant's part of a list's `WHERE`, its parameter at `at` (after the statement's
/// others): an index range of tasks_by_tenant when given.
fn tenant_clause(filter: &TaskFilter, at: u8) -> String {
    match filter.tenant.is_some() {
        true => format!("tenant = ?{at}"),
        false => format!("?{at} IS NULL"),
    }
}

/// A list's limit as SQLite's (-1 for none).
fn limit_of(limit: Option<usize>) -> i64 {
    limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX))
}

/// Runs one statement of `tasks` rows, handing `visit` each row as it is decoded.
fn visit_tasks(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
    visit: &mut dyn FnMut(Task) -> Visit,
) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(sql).map_err(backend)?;
    let rows = stmt.query(params).map_err(backend)?;
    each_decoded(rows, task_from_row, visit)
}

/// `list --sort`: the filter's rows ordered by the query; a cursor is the row value of its
/// task. ?1 status, ?2 assignee, ?3 limit, ?4 the cursor's id, ?5 the tenant.
fn for_each_sorted(
    conn: &Connection,
    filter: &TaskFilter,
    visit: &mut dyn FnMut(Task) -> Visit,
) -> StoreResult<()> {
    cursor(conn, filter.after.as_ref())?;
    let sql = sorted_sql(filter);
    let (status, limit) = (filter.status.map(|s| s.as_str()), limit_of(filter.limit));
    let after = filter.after.as_ref().map(TaskId::as_str);
    visit_tasks(
        conn,
        &sql,
        params![status, filter.assignee, limit, after, filter.tenant],
        visit,
    )
}

/// The statement of `list --sort`; rowid breaks the ties that remain.
fn sorted_sql(filter: &TaskFilter) -> String {
    let key = filter.order.sql_key("");
    format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE {}
           AND (?4 IS NULL OR ({key}, rowid) > (SELECT {key}, rowid FROM tasks WHERE id = ?4))
         ORDER BY {key}, rowid LIMIT ?3",
        list_clause(filter, 5)
    )
}

/// The `WHERE` of an events read, and its parameters: ?1 task, ?2 after id, ?3 the
/// kinds (a JSON array, or NULL for any), ?4 since, and the assignee at
/// `assignee_at` (after a read's limit) and the tenant after it. A task filter is its own
/// statement, an index range of task_events_by_task; an assignee or a tenant is checked
/// per event, by the task's primary key.
fn event_clause(filter: &EventFilter, assignee_at: u8) -> String {
    let rest = "id > ?2 AND (?3 IS NULL OR kind IN (SELECT value FROM json_each(?3))) AND (?4 IS NULL OR created_at >= ?4)";
    let task = match filter.task_id.is_some() {
        true => "task_id = ?1",
        false => "?1 IS NULL",
    };
    let assignee = match filter.assignee.is_some() {
        true => format!(" AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_events.task_id AND t.assignee = ?{assignee_at})"),
        false => format!(" AND ?{assignee_at} IS NULL"),
    };
    let tenant_at = assignee_at + 1;
    let tenant = match filter.tenant.is_some() {
        true => format!(" AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_events.task_id AND t.tenant = ?{tenant_at})"),
        false => format!(" AND ?{tenant_at} IS NULL"),
    };
    format!("{task} AND {rest}{assignee}{tenant}")
}

/// The kinds of an events read as SQLite binds them: a JSON array, or NULL for any.
fn kinds_param(filter: &EventFilter) -> Option<String> {
    (!filter.kinds.is_empty()).then(|| serde_json::Value::from(filter.kinds.clone()).to_string())
}

pub(super) fn for_each_event(
    conn: &Connection,
    filter: &EventFilter,
    visit: &mut dyn FnMut(Event) -> Visit,
) -> StoreResult<()> {
    if let Some(id) = &filter.task_id {
        super::SqliteStore::require_task(conn, id)?;
    }
    let clause = event_clause(filter, 6);
    let sql = if filter.newest {
        format!(
            "SELECT {EVENT_COLUMNS} FROM (SELECT {EVENT_COLUMNS} FROM task_events WHERE {clause}
             ORDER BY id DESC LIMIT ?5) ORDER BY id"
        )
    } else {
        format!("SELECT {EVENT_COLUMNS} FROM task_events WHERE {clause} ORDER BY id LIMIT ?5")
    };
    let limit = filter.limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    let task = filter.task_id.as_ref().map(TaskId::as_str);
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let mut rows = stmt
        .query(params![
            task,
            filter.after_id,
            kinds_param(filter),
            filter.since,
            limit,
            filter.assignee,
            filter.tenant
        ])
        .map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        if visit(event_from_row(row).map_err(backend)?).is_break() {
            break;
        }
    }
    Ok(())
}

pub(super) fn count_events(conn: &Connection, filter: &EventFilter) -> StoreResult<u64> {
    if let Some(id) = &filter.task_id {
        super::SqliteStore::require_task(conn, id)?;
    }
    let sql = format!(
        "SELECT COUNT(*) FROM task_events WHERE {}",
        event_clause(filter, 5)
    );
    let task = filter.task_id.as_ref().map(TaskId::as_str);
    let n: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_row(
                params![
                    task,
                    filter.after_id,
                    kinds_param(filter),
                    filter.since,
                    filter.assignee,
                    filter.tenant
                ],
                |r| r.get(0),
            )
        })
        .map_err(backend)?;
    Ok(n.max(0) as u64)
}

pub(super) fn status_counts(conn: &Connection) -> StoreResult<Vec<StatusCount>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT CASE WHEN assigned THEN assignee END, status, tasks FROM task_counts
             WHERE tasks > 0 ORDER BY assigned, assignee, status",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([], |r| {
            Ok(StatusCount {
                assignee: r.get(0)?,
                status: r.get::<_, Word<Status>>(1)?.0,
                tasks: r.get::<_, i64>(2)?.max(0) as u64,
            })
        })
        .map_err(backend)?;
    rows.collect::<Result<_, _>>().map_err(backend)
}

/// Verdict events per kind, read through the partial index task_events_verdicts, whose
/// WHERE this repeats (board_core::VERDICT_EVENTS).
pub(super) fn verdicts(conn: &Connection) -> StoreResult<BTreeMap<String, u64>> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT kind, COUNT(*) FROM task_events WHERE kind IN (",
            board_core::verdict_events_sql!(),
            ") GROUP BY kind"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })
        .map_err(backend)?;
    rows.collect::<Result<_, _>>().map_err(backend)
}

pub(super) fn oldest(conn: &Connection, status: Status) -> StoreResult<Option<Task>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE status = ?1 ORDER BY created_at, id LIMIT 1");
    Ok(query_tasks(conn, &sql, [status.as_str()])?.pop())
}

pub(super) fn finished(
    conn: &Connection,
    since: i64,
    slot: i64,
    bounds: &[i64],
) -> StoreResult<Vec<Finished>> {
    // Rows are counted as they stream: the memory held is one counter per slot and bucket.
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT (t.completed_at - ?1) / ?2, t.completed_at - COALESCE((
                     SELECT MAX(e.created_at) FROM task_events e
                     WHERE e.task_id = t.id AND e.kind IN (",
            board_core::ready_again_events_sql!(),
            ") AND e.created_at <= t.completed_at
                 ), t.created_at)
                 FROM tasks t WHERE t.completed_at >= ?1"
        ))
        .map_err(backend)?;
    let mut rows = stmt.query(params![since, slot.max(1)]).map_err(backend)?;
    let mut counts: BTreeMap<(i64, usize), u64> = BTreeMap::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let (slot, took): (i64, i64) = (row.get(0).map_err(backend)?, row.get(1).map_err(backend)?);
        let bucket = bounds.iter().position(|b| took < *b).unwrap_or(bounds.len());
        *counts.entry((slot, bucket)).or_default() += 1;
    }
    Ok(counts
        .into_iter()
        .map(|((slot, bucket), tasks)| Finished { slot, bucket, tasks })
        .collect())
}

pub(super) fn daily_spend(conn: &Connection, since: i64) -> StoreResult<Vec<DaySpend>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT started_at / 86400, COUNT(*),
                    SUM(MAX(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0), 0)),
                    SUM(outcome <> 'ok')
             FROM llm_calls WHERE started_at >= ?1 GROUP BY 1 ORDER BY 1",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([since], |r| {
            Ok(DaySpend {
                day: r.get(0)?,
                requests: r.get::<_, i64>(1)?.max(0) as u64,
                tokens: r.get::<_, i64>(2)?.max(0) as u64,
                failures: r.get::<_, i64>(3)?.max(0) as u64,
            })
        })
        .map_err(backend)?;
    rows.collect::<Result<_, _>>().map_err(backend)
}

/// Scheduled tasks due at `now`, earliest first: an index range of tasks_scheduled_due,
/// whose WHERE this repeats.
pub(super) fn due_scheduled(conn: &Connection, now: i64, limit: usize) -> StoreResult<Vec<TaskId>> {
    super::apply::query_ids(
        conn,
        "SELECT id FROM tasks WHERE status = 'scheduled' AND scheduled_until IS NOT NULL
           AND scheduled_until <= ?1 ORDER BY scheduled_until, id LIMIT ?2",
        params![now, i64::try_from(limit).unwrap_or(i64::MAX)],
    )
}

/// The earliest scheduled time after `after`: the first entry of tasks_scheduled_due past it.
pub(super) fn next_scheduled(conn: &Connection, after: i64) -> StoreResult<Option<i64>> {
    conn.prepare_cached(
        "SELECT MIN(scheduled_until) FROM tasks WHERE status = 'scheduled'
           AND scheduled_until IS NOT NULL AND scheduled_until > ?1",
    )
    .and_then(|mut s| s.query_row([after], |r| r.get(0)))
    .map_err(backend)
}
