//! The JSON API: read the board in the command line's `--json` shapes, and one `POST`
//! per action, each the same store call the command line makes.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use board_core::shapes::{comment_json, list_filter, list_json, task_json, Shown};
use board_core::{clean_title, Mode, NewTask, ReclaimOutcome, Request, Status, Store, Task, TaskId};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{blocking, ApiError, App};

type Body<T> = Result<Json<T>, JsonRejection>;
type Reply = Result<Json<Value>, ApiError>;

pub fn routes() -> Router<App> {
    Router::new()
        .route("/api/tasks", get(list).post(create))
        .route("/api/tasks/{id}", get(show))
        .route("/api/tasks/{id}/edit", post(edit))
        .route("/api/tasks/{id}/comment", post(comment))
        .route("/api/tasks/{id}/assign", post(assign))
        .route("/api/tasks/{id}/unblock", post(unblock))
        .route("/api/tasks/{id}/reclaim", post(reclaim))
        .route("/api/tasks/{id}/archive", post(archive))
        .route("/api/tasks/{id}/approve", post(approve))
        .route("/api/tasks/{id}/request-changes", post(request_changes))
        .route("/api/tasks/{id}/decompose", post(decompose_card))
        .route("/api/tasks/{id}/move", post(move_to))
}

/// A task id from the path, or a bad request.
pub fn task_id(raw: &str) -> Result<TaskId, ApiError> {
    raw.parse::<TaskId>()
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    status: Option<Status>,
    assignee: Option<String>,
    #[serde(default)]
    archived: bool,
}

async fn list(State(app): State<App>, query: Result<Query<ListQuery>, QueryRejection>) -> Reply {
    let Query(q) = query?;
    let filter = list_filter(q.status, q.assignee, q.archived);
    blocking(&app, move |s| Ok(Json(list_json(&s.list(&filter)?)))).await
}

async fn show(State(app): State<App>, Path(id): Path<String>) -> Reply {
    let id = task_id(&id)?;
    blocking(&app, move |s| Ok(Json(Shown::read(s, &id)?.to_json()))).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    title: String,
    #[serde(default)]
    body: String,
    assignee: Option<String>,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    triage: bool,
    #[serde(default)]
    parents: Vec<String>,
    idempotency_key: Option<String>,
    max_runtime_seconds: Option<i64>,
    tenant: Option<String>,
    #[serde(default)]
    skills: Vec<String>,
    max_retries: Option<i64>,
}

async fn create(
    State(app): State<App>,
    body: Body<CreateBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the body", &b.body)?;
    let parents = b
        .parents
        .iter()
        .map(|p| task_id(p))
        .collect::<Result<Vec<_>, _>>()?;
    let request = NewTask {
        title: clean_title(&b.title),
        body: b.body,
        assignee: b.assignee.filter(|a| !a.is_empty()),
        priority: b.priority,
        created_by: None,
        triage: b.triage,
        parents,
        idempotency_key: b.idempotency_key,
        max_runtime_seconds: b.max_runtime_seconds,
        tenant: b.tenant,
        skills: b.skills,
        max_retries: b.max_retries,
        ..NewTask::default()
    };
    let request = match &app.settings.default_assignee {
        Some(default) => request.or_assignee(default),
        None => request,
    };
    let task = blocking(&app, move |s| Ok(s.create(&request, (app.clock)())?)).await?;
    Ok((StatusCode::CREATED, Json(task_json(&task))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditBody {
    title: Option<String>,
    body: Option<String>,
    priority: Option<i64>,
}

async fn edit(State(app): State<App>, Path(id): Path<String>, body: Body<EditBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    if b.title.is_none() && b.body.is_none() && b.priority.is_none() {
        return Err(ApiError::bad_request(
            "edit needs at least one of title, body, priority",
        ));
    }
    if let Some(body) = &b.body {
        within_cap(&app, "the body", body)?;
    }
    let title = b.title.as_deref().map(clean_title);
    task_reply(&app, move |s| {
        s.edit(&id, title, b.body, b.priority, (app.clock)())
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommentBody {
    body: String,
    author: Option<String>,
}

async fn comment(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Body<CommentBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = task_id(&id)?;
    let Json(b) = body?;
    within_cap(&app, "the comment", &b.body)?;
    let c = blocking(&app, move |s| {
        Ok(s.comment(&id, b.author.as_deref(), &b.body, None, (app.clock)())?)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(comment_json(&c))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignBody {
    /// A profile name, or null to clear.
    assignee: Option<String>,
}

async fn assign(State(app): State<App>, Path(id): Path<String>, body: Body<AssignBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    no_empty_profile(&b.assignee)?;
    task_reply(&app, move |s| s.assign(&id, b.assignee, (app.clock)())).await
}

/// An assignee is a profile's name or null (none); an empty name is neither.
pub(crate) fn no_empty_profile(assignee: &Option<String>) -> Result<(), ApiError> {
    match assignee.as_deref() {
        Some("") => Err(ApiError::bad_request(
            "a profile name cannot be empty (send null to clear)",
        )),
        _ => Ok(()),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: Option<String>,
}

async fn unblock(State(app): State<App>, Path(id): Path<String>, body: Body<ReasonBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    task_reply(&app, move |s| s.unblock(&id, b.reason, (app.clock)())).await
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    summary: Option<String>,
}

/// A person approves the work of a task in review, as `kanban approve ID` does.
async fn approve(State(app): State<App>, Path(id): Path<String>, body: Body<ApproveBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    approved(&app, id, b.summary).await
}

/// A person's approval of the task in review `id`.
async fn approved(app: &App, id: TaskId, summary: Option<String>) -> Reply {
    let request = Request::Approve {
        expected_run_id: None,
        summary,
    };
    let clock = app.clock;
    task_reply(app, move |s| s.transition(&id, &request, clock())).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesBody {
    reason: String,
}

/// A person sends the work of a task in review back, as `kanban request-changes ID
/// REASON` does.
async fn request_changes(State(app): State<App>, Path(id): Path<String>, body: Body<ChangesBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    within_cap(&app, "the reason", &b.reason)?;
    let request = Request::RequestChanges {
        expected_run_id: None,
        author: None,
        reason: b.reason,
        round_limit: app.settings.review_round_limit,
    };
    task_reply(&app, move |s| s.transition(&id, &request, (app.clock)())).await
}

async fn archive(State(app): State<App>, Path(id): Path<String>) -> Reply {
    let id = task_id(&id)?;
    task_reply(&app, move |s| s.archive(&id, (app.clock)())).await
}

async fn reclaim(State(app): State<App>, Path(id): Path<String>, body: Body<ReasonBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(b) = body?;
    do_reclaim(&app, id, b.reason).await
}

/// The same call and refusals as `kanban reclaim`.
async fn do_reclaim(app: &App, id: TaskId, reason: Option<String>) -> Reply {
    let terminator = app.settings.terminator.clone();
    let (shown, clock) = (id.clone(), app.clock);
    let outcome = blocking(app, move |s| {
        Ok(s.reclaim(&id, None, reason, terminator.as_ref(), clock())?)
    })
    .await?;
    match outcome {
        ReclaimOutcome::Reclaimed => Ok(Json(
            json!({ "task_id": shown, "ok": true, "outcome": "reclaimed" }),
        )),
        ReclaimOutcome::Deferred => Err(ApiError::conflict(format!(
            "the worker of {shown} survived SIGTERM and SIGKILL; the claim stands (extended briefly)"
        ))),
        ReclaimOutcome::Lost => Err(ApiError::conflict(format!(
            "reclaim of {shown} lost: another run took over meanwhile; nothing changed"
        ))),
    }
}

/// `kanban decompose ID`: the same function, in the same (manual) mode, with the same
/// model settings and key, so the same ledger row and the same refusals. The outcome is
/// the line `kanban decompose --json` prints; one that committed nothing is 409 with
/// its reason, a server without a model 503.
async fn decompose_card(State(app): State<App>, Path(id): Path<String>) -> Reply {
    let id = task_id(&id)?;
    let model = app
        .settings
        .decomposer
        .clone()
        .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why))?;
    let read = id.clone();
    blocking(&app, move |s| Ok(s.get(&read).map(drop)?)).await?;
    let outcome = decompose::decompose(
        app.store.clone(),
        &model.client,
        &id,
        Mode::Manual,
        &model.settings,
        &app.clock,
    )
    .await;
    if let Some(refusal) = outcome.refusal() {
        return Err(ApiError::conflict(refusal));
    }
    serde_json::to_value(&outcome)
        .map(Json)
        .map_err(|e| ApiError::internal(format!("cannot encode the outcome: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveBody {
    to: Status,
}

/// A card dragged to another column: the one action that moves it there, or a refusal
/// that says why none does.
async fn move_to(State(app): State<App>, Path(id): Path<String>, body: Body<MoveBody>) -> Reply {
    let id = task_id(&id)?;
    let Json(MoveBody { to }) = body?;
    let read = id.clone();
    let from = blocking(&app, move |s| Ok(s.get(&read)?.status)).await?;
    match (from, to) {
        _ if from == to => Err(ApiError::conflict(format!("task {id} is already {to}"))),
        (_, Status::Archived) => task_reply(&app, move |s| s.archive(&id, (app.clock)())).await,
        (Status::Blocked | Status::Scheduled, Status::Ready | Status::Todo) => {
            task_reply(&app, move |s| s.unblock(&id, None, (app.clock)())).await
        }
        (Status::Running, Status::Ready) => do_reclaim(&app, id, Some("moved on the board".to_owned())).await,
        (Status::Review, Status::Done) => approved(&app, id, Some("approved on the board".to_owned())).await,
        _ => Err(ApiError::conflict(format!(
            "no action moves a card from {from} to {to}: the board moves it there itself, \
             or a worker does (archive, unblock, reclaim and approving a review are the moves a \
             person makes)"
        ))),
    }
}

/// Runs a store call that answers with a task, and answers with its JSON.
async fn task_reply<F>(app: &App, f: F) -> Reply
where
    F: FnOnce(&dyn Store) -> board_core::StoreResult<Task> + Send + 'static,
{
    let task = blocking(app, move |s| Ok(f(s)?)).await?;
    Ok(Json(task_json(&task)))
}

/// Refuses text over `kanban.max_text_bytes` before the board is touched.
pub(crate) fn within_cap(app: &App, what: &str, text: &str) -> Result<(), ApiError> {
    let cap = app.settings.max_text_bytes;
    if text.len() <= cap {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("{what} is over the {cap}-byte limit (kanban.max_text_bytes); shorten it or raise the limit"),
    ))
}
