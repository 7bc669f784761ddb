//! `GET /api/cards`: what the board page draws on a card, beyond the `list` shape: how
//! many runs the task had, whether its lease is stale, whether a triage card is parked
//! or cooling down after a failed decomposition. Each card is `{"task": <list item>, ...}`
//! so that the task itself keeps the command line's shape. Cards come in pages of at
//! most [`PAGE`], a column at a time, as `list --limit --after` pages tasks.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use board_core::shapes::{list_filter, task_json};
use board_core::{BoardReads, Status, StoreResult, Task, TaskFilter, Timestamp};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

use crate::api::task_id;
use crate::{blocking, ApiError, App};

pub fn routes() -> Router<App> {
    Router::new()
        .route("/api/cards", get(cards))
        .route("/api/cards/{id}", get(card))
        .route("/api/columns", get(columns))
        .route("/api/lane-list", get(lane_list))
}

/// The board's lanes as `kanban lane list --json` gives them (docs/lanes.md), for the
/// board page's strip of lanes: each one's state, what it holds and did, its profiles.
async fn lane_list(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    let now = (app.clock)();
    blocking(&app, move |s| {
        let lanes = s.lane_stats()?;
        Ok(Json(json!({
            "lanes": lanes.iter().map(|l| l.to_json(now)).collect::<Vec<_>>(),
        })))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CardsQuery {
    #[serde(default)]
    archived: bool,
    /// One column.
    status: Option<String>,
    /// Cards in a page [default and most: [`PAGE`]].
    limit: Option<usize>,
    /// The page after this card, in the list's order.
    after: Option<String>,
}

/// The largest page of cards, and the size of one when none is asked for.
pub const PAGE: usize = 200;

/// A page of cards in the list's order (one column with `status`), the id to ask the
/// next page `after` (`null` on the last page), the column's total when one was asked
/// for, and the newest event id read before the cards: a page that streams events after
/// that id misses no change made since.
async fn cards(
    State(app): State<App>,
    query: Result<Query<CardsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let newest_event = *app.newest_event.borrow();
    let status = q
        .status
        .as_deref()
        .map(|s| {
            s.parse::<Status>()
                .map_err(|e| ApiError::bad_request(e.to_string()))
        })
        .transpose()?;
    let after = q.after.as_deref().map(task_id).transpose()?;
    let limit = q.limit.unwrap_or(PAGE).clamp(1, PAGE);
    let filter = TaskFilter {
        limit: Some(limit),
        after,
        ..list_filter(status, None, q.archived)
    };
    let (clock, runnable) = (app.clock, app.settings.runnable.clone());
    blocking(&app, move |s| {
        let at = clock();
        let (cards, next) = page(s, &s.list(&filter)?, limit, at, runnable.as_ref())?;
        let total = match status {
            Some(status) => Some(column_totals(s)?.get(&status).copied().unwrap_or(0)),
            None => None,
        };
        Ok(Json(json!({
            "newest_event": newest_event,
            "now": at,
            "cards": cards,
            "next": next,
            "total": total,
        })))
    })
    .await
}

/// A page of `limit` tasks as cards, and the id to ask the next page `after` (none on
/// the last page, one shorter than `limit`).
fn page(
    s: &dyn BoardReads,
    tasks: &[Task],
    limit: usize,
    now: Timestamp,
    runnable: Option<&BTreeSet<String>>,
) -> StoreResult<(Vec<Value>, Option<board_core::TaskId>)> {
    let next = (tasks.len() == limit)
        .then(|| tasks.last().map(|t| t.id.clone()))
        .flatten();
    let cards = tasks
        .iter()
        .map(|t| card_json(s, t, now, runnable))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((cards, next))
}

/// Tasks per status, in one aggregate of the store; a status without tasks is absent.
fn column_totals(s: &dyn board_core::Store) -> StoreResult<BTreeMap<Status, u64>> {
    let mut totals = BTreeMap::new();
    for count in s.status_counts()? {
        *totals.entry(count.status).or_insert(0) += count.tasks;
    }
    Ok(totals)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ColumnsQuery {
    #[serde(default)]
    archived: bool,
    /// Cards in each column's page [default and most: [`PAGE`]].
    limit: Option<usize>,
}

/// `GET /api/columns`: the first page of every column at once, as the board page draws
/// it when it opens: one request and one count of the board rather than one of each per
/// column, and no read at all of a column the count says is empty. Each column is
/// `/api/cards?status=S`'s answer without its `newest_event` and `now`, which the whole
/// answer carries once; archived only with `archived=true`.
async fn columns(
    State(app): State<App>,
    query: Result<Query<ColumnsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let newest_event = *app.newest_event.borrow();
    let limit = q.limit.unwrap_or(PAGE).clamp(1, PAGE);
    let (clock, runnable) = (app.clock, app.settings.runnable.clone());
    blocking(&app, move |s| {
        let at = clock();
        let totals = column_totals(s)?;
        let mut columns = Vec::new();
        for &status in Status::ALL {
            if status == Status::Archived && !q.archived {
                continue;
            }
            let total = totals.get(&status).copied().unwrap_or(0);
            let tasks = match total {
                0 => Vec::new(),
                _ => s.list(&TaskFilter {
                    limit: Some(limit),
                    ..list_filter(Some(status), None, true)
                })?,
            };
            let (cards, next) = page(s, &tasks, limit, at, runnable.as_ref())?;
            columns.push(json!({ "status": status, "cards": cards, "next": next, "total": total }));
        }
        Ok(Json(
            json!({ "newest_event": newest_event, "now": at, "columns": columns }),
        ))
    })
    .await
}

async fn card(State(app): State<App>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = task_id(&id)?;
    let (clock, runnable) = (app.clock, app.settings.runnable.clone());
    blocking(&app, move |s| {
        let task = s.get(&id)?;
        Ok(Json(card_json(s, &task, clock(), runnable.as_ref())?))
    })
    .await
}

/// One card. `started_at` is set by a task's first claim and never cleared, so the runs
/// of a task without it are known to be none and are not read: most of a large board.
/// `unrunnable` names the profile of a ready card that `runnable` (what this home can
/// run) leaves out: the card waits until that profile has a command.
pub fn card_json(
    store: &dyn BoardReads,
    t: &Task,
    now: Timestamp,
    runnable: Option<&BTreeSet<String>>,
) -> StoreResult<Value> {
    let runs = if t.started_at.is_some() {
        store.runs(&t.id)?
    } else {
        Vec::new()
    };
    let stale_lease = t.status == Status::Running
        && runs
            .last()
            .and_then(|r| r.claim_expires)
            .is_some_and(|expires| expires < now);
    let cooling = t.status == Status::Triage
        && !t.decompose_parked
        && t.decompose_next_attempt_at.is_some_and(|at| at > now);
    let unrunnable = (t.status == Status::Ready)
        .then_some(t.assignee.as_ref())
        .flatten()
        .filter(|profile| runnable.is_some_and(|r| !r.contains(*profile)));
    Ok(json!({
        "task": task_json(t),
        "runs": runs.len(),
        "lane": t.lane(),
        "unrunnable": unrunnable,
        "stale_lease": stale_lease,
        "parked": t.status == Status::Triage && t.decompose_parked,
        "cooling": cooling,
    }))
}
