//! The API's errors: every refusal, bad request and failure as a JSON body
//! `{"error": message}` with a status code that says whose fault it was.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use board_core::{Refusal, StoreError};
use serde_json::json;

/// A request the server did not carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let status = match &e {
            StoreError::Backend(_) => StatusCode::INTERNAL_SERVER_ERROR,
            StoreError::Refused(r) => refusal_status(r),
        };
        ApiError::new(status, e.to_string())
    }
}

/// Not found for an unknown task, bad request for a request that can never succeed,
/// conflict for one the task's present state refuses.
fn refusal_status(r: &Refusal) -> StatusCode {
    match r {
        Refusal::NoSuchTask(_) | Refusal::NoSuchAttachment(_) | Refusal::NoSuchSubscription(_) => {
            StatusCode::NOT_FOUND
        }
        Refusal::BlankTitle | Refusal::Invalid(_) | Refusal::SelfLink(_) | Refusal::InvalidPlan(_) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::CONFLICT,
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        ApiError::new(r.status(), r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::new(r.status(), r.body_text())
    }
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such page or route")
}
