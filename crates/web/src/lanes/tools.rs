//! A lane's MCP tools at `/api/lanes/mcp` (streamable HTTP, stateless): `claim_next`
//! with a wait, and the reports of [`super`] bound to the runs the lane holds. The lane's
//! token is checked before the MCP server sees the request; the server made for it
//! answers for that lane only.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use board_core::lanes::Lane;
use board_core::{BlockKind, Completion};
use mcp::Call;
use serde_json::Value;

use super::{beat, claim_waiting, held_context, remark, report, Caller, Report};
use crate::{ApiError, App};

/// One MCP request of the lane; its body is read up to the server's request cap first.
pub(super) async fn mcp(State(app): State<App>, Caller(lane): Caller, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, app.settings.max_request_bytes).await else {
        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "the request is too large").into_response();
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let verbs = Arc::new(LaneTools { app, lane });
    mcp::lane_http_service(verbs).handle(request).await.map(Body::new)
}

/// The tools' answers, for one lane.
struct LaneTools {
    app: App,
    lane: Lane,
}

impl mcp::LaneVerbs for LaneTools {
    fn call(&self, call: Call) -> mcp::Answer {
        let (app, lane) = (self.app.clone(), self.lane.clone());
        Box::pin(async move { answer(&app, lane, call).await.map_err(|e| e.message) })
    }
}

async fn answer(app: &App, lane: Lane, call: Call) -> Result<Value, ApiError> {
    match call {
        Call::ClaimNext(a) => Ok(claim_waiting(app, &lane.name, a.wait_seconds)
            .await?
            .unwrap_or(Value::Null)),
        Call::HeldContext(a) => held_context(app, lane, &a.task_id, a.run_id).await,
        Call::Heartbeat(a) => beat(app, lane, &needed(a.task_id)?, a.run_id, a.note).await,
        Call::Comment(a) if a.author.is_some() => Err(ApiError::bad_request(
            "a lane's comments are signed with the lane's name: leave author out",
        )),
        Call::Comment(a) => remark(app, lane, &needed(a.task_id)?, None, a.text).await,
        Call::CompleteTask(a) => {
            let c = Completion {
                result: a.result,
                summary: a.summary,
                metadata: a.metadata,
                evidence: a.evidence,
                ..Completion::default()
            };
            report(app, lane, &needed(a.task_id)?, a.run_id, Report::Complete(c)).await
        }
        Call::BlockTask(a) => {
            let kind = a
                .kind
                .as_deref()
                .map(str::parse::<BlockKind>)
                .transpose()
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let ended = Report::Block {
                kind,
                reason: a.reason,
            };
            report(app, lane, &needed(a.task_id)?, a.run_id, ended).await
        }
        Call::RequestReview(a) => {
            let ended = Report::RequestReview {
                reviewer: a.reviewer,
                summary: a.summary,
                result: a.result,
            };
            report(app, lane, &needed(a.task_id)?, a.run_id, ended).await
        }
        // The lane's tool set lists no other tool, so none parses.
        _ => Err(ApiError::bad_request("this tool is not a lane's")),
    }
}

/// A lane may hold several tasks: its reports name one.
fn needed(task_id: Option<String>) -> Result<String, ApiError> {
    task_id.ok_or_else(|| ApiError::bad_request("task_id is needed: name the task claim_next gave"))
}
