//! `POST /api/bulk`: one action on several cards at once (the board's selection), each
//! card the same store call its own action makes, in its own transaction: what the
//! board refuses for one card is reported for that card and the others go on.

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use board_core::{ByHand, Request, Store, TaskId, Timestamp};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{blocking, ApiError, App};

/// The most cards one request acts on.
pub const MAX_BULK: usize = 500;

pub fn routes() -> Router<App> {
    Router::new().route("/api/bulk", post(bulk))
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Action {
    Archive,
    Assign,
    Block,
    Unblock,
    Promote,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    ids: Vec<String>,
    action: Action,
    /// The profile for `assign` (null clears it).
    #[serde(default)]
    assignee: Option<String>,
    /// The reason a block, unblock or promotion records.
    #[serde(default)]
    reason: Option<String>,
}

async fn bulk(
    State(app): State<App>,
    body: Result<Json<BulkBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    if b.ids.is_empty() || b.ids.len() > MAX_BULK {
        return Err(ApiError::bad_request(format!(
            "send 1 to {MAX_BULK} task ids, not {}",
            b.ids.len()
        )));
    }
    let ids = b
        .ids
        .iter()
        .map(|raw| crate::api::task_id(raw))
        .collect::<Result<Vec<TaskId>, _>>()?;
    crate::api::no_empty_profile(&b.assignee)?;
    if let Some(reason) = &b.reason {
        crate::api::within_cap(&app, "the reason", reason)?;
    }
    let now = (app.clock)();
    blocking(&app, move |s| {
        let mut refused = Vec::new();
        for id in &ids {
            if let Err(e) = act(s, id, &b, now) {
                refused.push(json!({ "task_id": id, "error": ApiError::from(e).message }));
            }
        }
        Ok(Json(json!({
            "action": format!("{:?}", b.action).to_lowercase(),
            "done": ids.len() - refused.len(),
            "refused": refused,
        })))
    })
    .await
}

/// One card's action, as its own route (or the command line) makes it.
fn act(s: &dyn Store, id: &TaskId, b: &BulkBody, now: Timestamp) -> board_core::StoreResult<()> {
    let by_hand = || ByHand {
        by: Some("web".to_owned()),
        reason: b.reason.clone(),
    };
    match b.action {
        Action::Archive => s.archive(id, now).map(drop),
        Action::Assign => s.assign(id, b.assignee.clone(), now).map(drop),
        Action::Block => s.block(id, None, b.reason.clone(), None, now).map(drop),
        Action::Unblock => s.unblock(id, b.reason.clone(), now).map(drop),
        Action::Promote => s
            .transition(id, &Request::PromoteByHand(by_hand()), now)
            .map(drop),
    }
}
