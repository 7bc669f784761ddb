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
    /// `lanes.max_waiting`: claims waiting at once; one more is answered 503.
    pub max_waiting: usize,
    /// The checks a lane's work run must pass, as a gateway would fix them.
    pub checks: Arc<dyn Fn(&Task) -> Checks + Send + Sync>,
    /// What a claim hands over beside the task: its brief (`kanban context --json`).
    pub brief: Brief,
    /// Changes on each of the board's wake-ups (the caller listens for them).
    pub wakes: tokio::sync::watch::Receiver<u64>,
}

mod tools;

pub fn routes() -> Router<App> {
    Router::new()
        .route(
            "/api/lanes/mcp",
            post(tools::mcp).get(tools::mcp).delete(tools::mcp),
        )
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
    match claim_waiting(&app, &lane.name, q.wait).await? {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claim) => Ok(Json(claim).into_response()),
    }
}

/// The lane's claim of the next ready task of its profiles, waiting up to `wait`
/// seconds (at most `lanes.max_wait_seconds`) on the board's wake-ups; the lane is
/// shown as waiting meanwhile. `None`: nothing was ready before the wait ended.
pub(crate) async fn claim_waiting(app: &App, name: &str, wait: u32) -> Result<Option<Value>, ApiError> {
    let s = settings(app)?.clone();
    let wait = i64::from(wait).min(s.max_wait_seconds);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait as u64);
    // Subscribed before the first try: a wake-up after it is not missed.
    let mut wakes = s.wakes.clone();
    wakes.borrow_and_update();
    let first = try_claim(app, &s, name).await?;
    if first.is_some() || wait == 0 {
        return Ok(first);
    }
    let Ok(_waiting) = app.waiting.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} claims wait already (lanes.max_waiting); try again shortly",
                s.max_waiting
            ),
        ));
    };
    let (clock, lane) = (app.clock, name.to_owned());
    blocking(app, move |st| {
        Ok(st.see_lane(&lane, Some(clock() + wait), clock())?)
    })
    .await?;
    let found = loop {
        tokio::select! {
            changed = wakes.changed() => if changed.is_err() { break None },
            () = tokio::time::sleep_until(deadline) => break None,
        }
        wakes.borrow_and_update();
        if let Some(claim) = try_claim(app, &s, name).await? {
            break Some(claim);
        }
    };
    let (clock, lane) = (app.clock, name.to_owned());
    blocking(app, move |st| Ok(st.see_lane(&lane, None, clock())?)).await?;
    Ok(found)
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

/// Runs `act` with the run the lane holds of the task now (`run_id`, or its run when
/// `None`; else 403), in one blocking call.
async fn holding<T: Send + 'static>(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: Option<i64>,
    act: impl FnOnce(&dyn Store, &TaskId, i64, Timestamp) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let id = task_id(id)?;
    let clock = app.clock;
    blocking(app, move |s| {
        let task = s.get(&id).map_err(|e| match e {
            StoreError::Refused(Refusal::NoSuchTask(_)) => refused(not_held(&lane, &id, run_id)),
            e => e.into(),
        })?;
        let run_id = lanes::holds(&lane, &task, run_id).map_err(|r| refused(r.into()))?;
        act(s, &id, run_id, clock())
    })
    .await
}

fn not_held(lane: &Lane, id: &TaskId, run_id: Option<i64>) -> StoreError {
    Refusal::NotLanesRun {
        lane: lane.name.clone(),
        id: id.clone(),
        run_id,
    }
    .into()
}

/// A guarded write that lost (the run ended meanwhile) is the lane's loss: 409.
fn won(won: bool, id: &TaskId, run_id: i64) -> Result<Value, ApiError> {
    match won {
        true => Ok(json!({ "task_id": id, "run_id": run_id, "ok": true })),
        false => Err(lost(id, run_id)),
    }
}

fn lost(id: &TaskId, run_id: i64) -> ApiError {
    ApiError::conflict(format!("run {run_id} of {id} is no longer current"))
}

/// The brief of a task the lane holds.
pub(crate) async fn held_context(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: Option<i64>,
) -> Result<Value, ApiError> {
    let brief = settings(app)?.brief.clone();
    holding(app, lane, id, run_id, move |s, id, _, now| {
        brief(s, id, now).map_err(ApiError::internal)
    })
    .await
}

/// Extends the lease of a run the lane holds.
pub(crate) async fn beat(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: Option<i64>,
    note: Option<String>,
) -> Result<Value, ApiError> {
    within_cap(app, "the note", note.as_deref().unwrap_or(""))?;
    let ttl = settings(app)?.lease_seconds;
    holding(app, lane, id, run_id, move |s, id, run_id, now| {
        won(s.heartbeat(id, run_id, ttl, note, now)?, id, run_id)
    })
    .await
}

/// A comment on a task the lane holds, signed with the lane's name.
pub(crate) async fn remark(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: Option<i64>,
    body: String,
) -> Result<Value, ApiError> {
    within_cap(app, "the comment", &body)?;
    let author = lane.name.clone();
    let c = holding(app, lane, id, run_id, move |s, id, run_id, now| {
        Ok(s.comment(id, Some(&author), &body, Some(run_id), now)?)
    })
    .await?;
    Ok(board_core::shapes::comment_json(&c))
}

/// How a lane ends its run of a task.
pub(crate) enum Report {
    Complete(Completion),
    Block {
        kind: Option<BlockKind>,
        reason: Option<String>,
    },
    RequestReview {
        reviewer: Option<String>,
        summary: Option<String>,
        result: Option<String>,
    },
}

impl Report {
    /// Its texts, each with what it is, for the text cap.
    fn texts(&self) -> Vec<(&'static str, &Option<String>)> {
        match self {
            Report::Complete(c) => vec![("the result", &c.result), ("the summary", &c.summary)],
            Report::Block { reason, .. } => vec![("the reason", reason)],
            Report::RequestReview { summary, result, .. } => {
                vec![("the result", result), ("the summary", summary)]
            }
        }
    }

    /// The board's request, guarded by the run the lane holds.
    fn request(self, run_id: i64) -> Request {
        let expected_run_id = Some(run_id);
        match self {
            Report::Complete(c) => Request::Complete(Completion { expected_run_id, ..c }),
            Report::Block { kind, reason } => Request::Block {
                kind,
                reason,
                expected_run_id,
            },
            Report::RequestReview {
                reviewer,
                summary,
                result,
            } => Request::RequestReview {
                expected_run_id,
                reviewer,
                summary,
                result,
            },
        }
    }
}

/// Ends a run the lane holds; the answer carries the task's status after it (`done`, or
/// `verifying` or `review` while checks stand between the work and done), as the
/// transition left it.
pub(crate) async fn report(
    app: &App,
    lane: Lane,
    id: &str,
    run_id: Option<i64>,
    report: Report,
) -> Result<Value, ApiError> {
    for (what, text) in report.texts() {
        within_cap(app, what, text.as_deref().unwrap_or(""))?;
    }
    holding(app, lane, id, run_id, move |s, id, run_id, now| {
        match s.transition(id, &report.request(run_id), now) {
            Ok(task) => Ok(json!({
                "task_id": id,
                "run_id": run_id,
                "ok": true,
                "status": task.status.as_str(),
            })),
            Err(StoreError::Refused(r)) if r.is_lost_race() => Err(lost(id, run_id)),
            Err(e) => Err(e.into()),
        }
    })
    .await
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
    held_context(&app, lane, &id, Some(q.run_id)).await.map(Json)
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
    beat(&app, lane, &id, Some(b.run_id), b.note).await.map(Json)
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
    let c = remark(&app, lane, &id, Some(b.run_id), b.body).await?;
    Ok((StatusCode::CREATED, Json(c)))
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
    let c = Completion {
        result: b.result,
        summary: b.summary,
        metadata: b.metadata,
        evidence: b.evidence,
        ..Completion::default()
    };
    report(&app, lane, &id, Some(b.run_id), Report::Complete(c))
        .await
        .map(Json)
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
    let ended = Report::Block {
        kind: b.kind,
        reason: b.reason,
    };
    report(&app, lane, &id, Some(b.run_id), ended).await.map(Json)
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
    let ended = Report::RequestReview {
        reviewer: b.reviewer,
        summary: b.summary,
        result: b.result,
    };
    report(&app, lane, &id, Some(b.run_id), ended).await.map(Json)
}
