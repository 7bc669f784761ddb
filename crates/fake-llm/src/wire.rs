//! The OpenAI wire shapes the server writes: `chat.completion` objects, SSE
//! `chat.completion.chunk` events, the models list and error bodies. Pure values, no I/O.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::reply::Usage;

/// The model id listed by `GET /v1/models` and reported when a request names none.
pub const MODEL_ID: &str = "fake-llm";

/// The SSE event that ends every complete stream.
pub(crate) const DONE_EVENT: &[u8] = b"data: [DONE]\n\n";

/// What every object of one completion shares.
pub(crate) struct Completion {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

impl Completion {
    pub(crate) fn message(&self, content: &str, usage: Usage) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": usage_json(usage),
        })
    }

    /// A content chunk; the first one also carries the role, as OpenAI's does.
    pub(crate) fn content_chunk(&self, piece: &str, first: bool) -> Value {
        let delta = if first {
            json!({"role": "assistant", "content": piece})
        } else {
            json!({"content": piece})
        };
        self.chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]))
    }

    pub(crate) fn finish_chunk(&self) -> Value {
        self.chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    }

    /// The extra chunk sent when the request set `stream_options.include_usage`.
    pub(crate) fn usage_chunk(&self, usage: Usage) -> Value {
        let mut chunk = self.chunk(json!([]));
        chunk["usage"] = usage_json(usage);
        chunk
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens.saturating_add(usage.completion_tokens),
    })
}

/// One SSE event carrying a JSON object.
pub(crate) fn sse_event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// Cuts `content` into pieces of `size` characters (not bytes, so no piece splits a
/// UTF-8 sequence). Empty content is one empty piece, so a stream always has a chunk.
pub(crate) fn split_chars(content: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (at, _) in content.char_indices() {
        if count == size {
            pieces.push(&content[start..at]);
            start = at;
            count = 0;
        }
        count += 1;
    }
    pieces.push(&content[start..]);
    pieces
}

/// A rough token count: one token per 4 characters, rounded up.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// `{"error": {"message", "type", "code", "param"}}` with the type and code OpenAI
/// uses for that status.
pub(crate) fn error_body(status: StatusCode, message: &str) -> Value {
    let (kind, code) = match status.as_u16() {
        401 => ("invalid_request_error", "invalid_api_key"),
        404 => ("invalid_request_error", "not_found"),
        429 => ("requests", "rate_limit_exceeded"),
        400..=499 => ("invalid_request_error", "invalid_request"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": message, "type": kind, "code": code, "param": null}})
}

pub(crate) fn models_list() -> Value {
    json!({
        "object": "list",
        "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fake-llm"}],
    })
}
