//! Lanes over HTTP (docs/lanes.md): an agent outside the gateway claims the next ready
//! task of its profiles with a long poll (`POST /api/lanes/claim?wait=60`), then
//! heartbeats, comments and reports on the runs it holds, and only those. Every route
//! takes the lane's token (`Authorization: Bearer kl_...`), not the board's: a lane is
//! let in by its own credential, checked against the digest the board keeps.
//!
//! A waiting claim sleeps on the board's wake-ups (given by the caller as a counter
//! that changes on each), so a thousand idle lanes cost a task each and no queries.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use board_core::lanes::{self, token_hash, Lane, LaneClaim};
use board_core::{
    BlockKind, Checks, Claim, Completion, Refusal, Request, Store, StoreError, Task, TaskId, Timestamp,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{task_id, within_cap};
use crate::{blocking, ApiError, App};

/// A task's brief as a lane gets it with its claim (`kanban context --json`).
pub type Brief = Arc<dyn Fn(&dyn Store, &TaskId, Timestamp) -> Result<Value, String> + Send + Sync>;

/// What `kanban serve` answers lanes with (none: the lane routes answer 404).
#[derive(Clone)]
pub struct LaneSettings {
    /// `lanes.max_held`: tasks one lane holds at once.
    pub max_held: u64,
    /// `lanes.lease_seconds`: a claim's lease, extended by heartbeats.
    pub lease_seconds: i64,
    /// `lanes.max_wait_seconds`: the longest a claim waits.
    pub max_wait_seconds: i64,
    /// The checks a lane's work run must pass, as a gateway would fix them.
    pub checks: Arc<dyn Fn(&Task) -> Checks + Send + Sync>,
    /// What a claim hands over beside the task: its brief (`kanban context --json`).
    pub brief: Brief,
    /// Changes on each of the board's wake-ups (the caller listens for them).
    pub wakes: tokio::sync::watch::Receiver<u64>,
}

pub fn routes() -> Router<App> {
    Router::new()
        .route("/api/lanes/claim", post(claim))
        .route("/api/lanes/tasks/{id}", get(context))
        .route("/api/lanes/tasks/{id}/heartbeat", post(heartbeat))
        .route("/api/lanes/tasks/{id}/comment", post(comment))
        .route("/api/lanes/tasks/{id}/complete", post(complete))
        .route("/api/lanes/tasks/{id}/block", post(block))
        .route("/api/lanes/tasks/{id}/request-review", post(request_review))
}

/// The lane a request's bearer token names; 401 for none, an unknown one or a revoked
/// lane's, before anything else is read.
pub struct Caller(pub Lane);

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

impl FromRequestParts<App> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Caller, Response> {
        if app.settings.lanes.is_none() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "this server takes no lanes").into_response());
        }
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| t.starts_with(lanes::TOKEN_PREFIX));
        let Some(token) = token else {
            return Err(unauthorized(
                "a lane's token is needed: Authorization: Bearer kl_...",
            ));
        };
        let digest = token_hash(token);
        let found = blocking(app, move |s| Ok(s.lane_by_token(&digest)?))
            .await
            .map_err(IntoResponse::into_response)?;
        match found {
            Some(lane) if lane.revoked_at.is_none() => Ok(Caller(lane)),
            Some(lane) => Err(unauthorized(&format!("lane {} is revoked", lane.name))),
            None => Err(unauthorized("no lane has this token")),
        }
    }
}

fn settings(app: &App) -> Result<&LaneSettings, ApiError> {
    app.settings
        .lanes
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "this server takes no lanes"))
}

/// A refusal of a lane's request: 403 for a run or task it does not hold, else as the
/// API says.
fn refused(e: StoreError) -> ApiError {
    match &e {
        StoreError::Refused(Refusal::NotLanesRun { .. }) => {
            ApiError::new(StatusCode::FORBIDDEN, e.to_string())
        }
        StoreError::Refused(Refusal::LaneFull { .. }) => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string())
        }
        StoreError::Refused(Refusal::LaneRevoked(_)) => {
            ApiError::new(StatusCode::UNAUTHORIZED, e.to_string())
        }
        _ => e.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    /// Seconds to wait for a ready task; 0 (the default) answers at once.
    #[serde(default)]
    wait: u32,
}

/// `POST /api/lanes/claim?wait=N`: 200 with the claim, 204 when nothing was ready
/// before the wait ended.
async fn claim(
    State(app): State<App>,
    Caller(lane): Caller,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    let s = settings(&app)?.clone();
    let wait = i64::from(q.wait).min(s.max_wait_seconds);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait as u64);
    let mut wakes = s.wakes.clone();
    let name = lane.name.clone();
    if wait > 0 {
        let (clock, name) = (app.clock, name.clone());
        blocking(&app, move |st| {
            Ok(st.see_lane(&name, Some(clock() + wait), clock())?)
        })
        .await?;
    }
    let found = loop {
        wakes.borrow_and_update();
        if let Some(claim) = try_claim(&app, &s, &name).await? {
            break Some(claim);
        }
        tokio::select! {
            changed = wakes.changed() => if changed.is_err() { break None },
            () = tokio::time::sleep_until(deadline) => break None,
        }
    };
    if wait > 0 {
        let (clock, name) = (app.clock, name.clone());
        blocking(&app, move |st| Ok(st.see_lane(&name, None, clock())?)).await?;
    }
    match found {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claim) => Ok(Json(claim).into_response()),
    }
}

/// One claim for the lane, with its brief; `None` when nothing of its profiles is ready.
async fn try_claim(app: &App, s: &LaneSettings, name: &str) -> Result<Option<Value>, ApiError> {
    let (s, name, clock) = (s.clone(), name.to_owned(), app.clock);
    blocking(app, move |st| {
        let claimed = st
            .claim_for_lane(&name, s.lease_seconds, s.max_held, &*s.checks, clock())
            .map_err(refused)?;
        let LaneClaim::Claimed(claim) = claimed else {
            return Ok(None);
        };
        let brief = (s.brief)(st, &claim.task.id, clock()).unwrap_or_else(|e| json!({ "error": e }));
        Ok(Some(claim_json(&claim, brief)))
    })
    .await
}

/// What a lane's claim hands over: the task, its brief, the run and its lease.
pub fn claim_json(claim: &Claim, brief: Value) -> Value {
    json!({
        "task_id": claim.task.id,
        "run_id": claim.run_id,
        "lease_expires": claim.task.lease.as_ref().map(|l| l.expires),
        "task": board_core::shapes::task_json(&claim.task),
        "context": brief,
    })
}

/// Runs `act` on the task if the lane holds its run `run_id` now (else 403), in one
/// blocking call.
async fn holding<T: Send + 'static>(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: i64,
    act: impl FnOnce(&dyn Store, &TaskId, Timestamp) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let id = task_id(id)?;
    let clock = app.clock;
    blocking(app, move |s| {
        let task = s.get(&id).map_err(|e| match e {
            StoreError::Refused(Refusal::NoSuchTask(_)) => refused(not_held(&lane, &id, run_id)),
            e => e.into(),
        })?;
        lanes::holds(&lane, &task, run_id).map_err(|r| refused(r.into()))?;
        act(s, &id, clock())
    })
    .await
}

fn not_held(lane: &Lane, id: &TaskId, run_id: i64) -> StoreError {
    Refusal::NotLanesRun {
        lane: lane.name.clone(),
        id: id.clone(),
        run_id,
    }
    .into()
}

/// A guarded write that lost (the run ended meanwhile) is the lane's loss: 409.
fn won(won: bool, id: &TaskId, run_id: i64) -> Result<Json<Value>, ApiError> {
    match won {
        true => Ok(Json(json!({ "task_id": id, "run_id": run_id, "ok": true }))),
        false => Err(ApiError::conflict(format!(
            "run {run_id} of {id} is no longer current"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunQuery {
    run_id: i64,
}

/// `GET /api/lanes/tasks/{id}?run_id=N`: the brief of a task the lane holds.
async fn context(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    query: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let brief = settings(&app)?.brief.clone();
    holding(&app, lane, &id, q.run_id, move |s, id, now| {
        brief(s, id, now).map(Json).map_err(ApiError::internal)
    })
    .await
}

type Body<T> = Result<Json<T>, JsonRejection>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    run_id: i64,
    note: Option<String>,
}

async fn heartbeat(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    body: Body<HeartbeatBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the note", b.note.as_deref().unwrap_or(""))?;
    let ttl = settings(&app)?.lease_seconds;
    holding(&app, lane, &id, b.run_id, move |s, id, now| {
        won(s.heartbeat(id, b.run_id, ttl, b.note, now)?, id, b.run_id)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommentBody {
    run_id: i64,
    body: String,
}

async fn comment(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    body: Body<CommentBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the comment", &b.body)?;
    let author = lane.name.clone();
    let c = holding(&app, lane, &id, b.run_id, move |s, id, now| {
        Ok(s.comment(id, Some(&author), &b.body, Some(b.run_id), now)?)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(board_core::shapes::comment_json(&c))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    run_id: i64,
    result: Option<String>,
    summary: Option<String>,
    metadata: Option<Value>,
    evidence: Option<Value>,
}

async fn complete(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    body: Body<CompleteBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the result", b.result.as_deref().unwrap_or(""))?;
    within_cap(&app, "the summary", b.summary.as_deref().unwrap_or(""))?;
    holding(&app, lane, &id, b.run_id, move |s, id, now| {
        let c = Completion {
            expected_run_id: Some(b.run_id),
            result: b.result,
            summary: b.summary,
            metadata: b.metadata,
            evidence: b.evidence,
            ..Completion::default()
        };
        won(s.complete(id, &c, now)?, id, b.run_id).map(|reply| with_status(s, id, reply))
    })
    .await
}

/// A report's answer with the task's status after it (`done`, or `verifying` or
/// `review` when its checks still stand between the work and done).
fn with_status(s: &dyn Store, id: &TaskId, mut reply: Json<Value>) -> Json<Value> {
    if let Ok(task) = s.get(id) {
        reply.0["status"] = json!(task.status.as_str());
    }
    reply
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockBody {
    run_id: i64,
    reason: Option<String>,
    kind: Option<BlockKind>,
}

async fn block(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    body: Body<BlockBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the reason", b.reason.as_deref().unwrap_or(""))?;
    holding(&app, lane, &id, b.run_id, move |s, id, now| {
        won(s.block(id, b.kind, b.reason, Some(b.run_id), now)?, id, b.run_id)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewBody {
    run_id: i64,
    reviewer: Option<String>,
    summary: Option<String>,
    result: Option<String>,
}

async fn request_review(
    State(app): State<App>,
    Caller(lane): Caller,
    Path(id): Path<String>,
    body: Body<ReviewBody>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    within_cap(&app, "the result", b.result.as_deref().unwrap_or(""))?;
    within_cap(&app, "the summary", b.summary.as_deref().unwrap_or(""))?;
    holding(&app, lane, &id, b.run_id, move |s, id, now| {
        let request = Request::RequestReview {
            expected_run_id: Some(b.run_id),
            reviewer: b.reviewer,
            summary: b.summary,
            result: b.result,
        };
        won(s.finalise(id, &request, now)?, id, b.run_id).map(|reply| with_status(s, id, reply))
    })
    .await
}
