//! The request log: what every request looked like when it arrived, how it is
//! classified (`main` or `aux`, its task id), and waiting for requests to arrive.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

/// The marker the decomposer puts at the start of its user message (docs/decomposer.md#the-call).
const TASK_ID_MARKER: &str = "Task id: t_";

/// One request as the server received it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// 0 for the first request the server recorded, then 1, 2, ...
    pub seq: u64,
    /// The HTTP method, e.g. `POST`.
    pub method: String,
    /// The path without the query string, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names (lowercase) to values; repeated headers are joined with `", "`,
    /// and bytes that are not UTF-8 are replaced.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: RecordedBody,
    /// When the request was recorded, in milliseconds since the Unix epoch.
    pub received_at_ms: u64,
    /// The first `Task id: t_<hex>` found in the messages' content, as `t_<hex>`.
    pub task_id: Option<String>,
    /// `main` when the body has a non-empty `tools` array, else `aux`.
    pub kind: RequestKind,
}

impl RecordedRequest {
    /// The body as JSON, when it parsed as JSON.
    pub fn json(&self) -> Option<&Value> {
        match &self.body {
            RecordedBody::Json(value) => Some(value),
            RecordedBody::Text(_) => None,
        }
    }

    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

/// A request body: JSON when it parses as JSON, else its text.
///
/// Serialized as `{"json": <value>}` or `{"text": "<text>"}` so the two never look alike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedBody {
    /// The body parsed as JSON.
    Json(Value),
    /// The body did not parse as JSON (or was empty); bytes that are not UTF-8 are
    /// replaced.
    Text(String),
}

/// Whether a request is an agent's main call or an auxiliary one (docs/testing.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// The body has a non-empty `tools` array.
    Main,
    /// Every other request, including the decomposer's calls.
    Aux,
}

impl RequestKind {
    /// Classifies a parsed request body.
    pub(crate) fn of_body(body: &RecordedBody) -> RequestKind {
        let has_tools = match body {
            RecordedBody::Json(value) => value
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| !tools.is_empty()),
            RecordedBody::Text(_) => false,
        };
        if has_tools {
            RequestKind::Main
        } else {
            RequestKind::Aux
        }
    }
}

impl RecordedBody {
    /// Parses raw bytes: JSON when they parse, else (lossy) text.
    pub(crate) fn from_bytes(bytes: &[u8]) -> RecordedBody {
        match serde_json::from_slice(bytes) {
            Ok(value) => RecordedBody::Json(value),
            Err(_) => RecordedBody::Text(String::from_utf8_lossy(bytes).into_owned()),
        }
    }
}

/// The text of every message's content, in order. Content is either a string or an
/// array of parts (`{"type": "text", "text": ...}`), as OpenAI accepts both.
pub(crate) fn message_texts(body: &Value) -> Vec<&str> {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut texts = Vec::new();
    for message in messages {
        match message.get("content") {
            Some(Value::String(text)) => texts.push(text.as_str()),
            Some(Value::Array(parts)) => texts.extend(
                parts
                    .iter()
                    .filter_map(|part| part.get("text").and_then(Value::as_str)),
            ),
            _ => {}
        }
    }
    texts
}

/// The first `Task id: t_<hex>` in the messages' content, as `t_<hex>`. Lenient about
/// length (one hex digit is enough) so hand-written test ids work; lowercase only, like
/// real task ids.
pub(crate) fn find_task_id(body: &Value) -> Option<String> {
    for text in message_texts(body) {
        let mut rest = text;
        while let Some(at) = rest.find(TASK_ID_MARKER) {
            let after = &rest[at + TASK_ID_MARKER.len()..];
            let hex_len = after
                .bytes()
                .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                .count();
            if hex_len > 0 {
                return Some(format!("t_{}", &after[..hex_len]));
            }
            rest = after;
        }
    }
    None
}

/// Every recorded request, plus a counter that waiters watch.
pub(crate) struct RequestLog {
    entries: Mutex<Vec<RecordedRequest>>,
    count: watch::Sender<usize>,
}

impl RequestLog {
    pub(crate) fn new() -> RequestLog {
        RequestLog {
            entries: Mutex::new(Vec::new()),
            count: watch::Sender::new(0),
        }
    }

    /// Appends a request, giving it the next sequence number, and returns the stored copy.
    pub(crate) fn record(&self, mut request: RecordedRequest) -> RecordedRequest {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        request.seq = entries.len() as u64;
        entries.push(request.clone());
        let count = entries.len();
        drop(entries);
        self.count.send_replace(count);
        request
    }

    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) async fn wait_for(&self, count: usize) -> Vec<RecordedRequest> {
        let mut seen = self.count.subscribe();
        // The sender lives in `self`, so the wait can only end by reaching the count.
        let _ = seen.wait_for(|recorded| *recorded >= count).await;
        self.snapshot()
    }
}
