//! A card's worker log: its end as the card's page shows it, and `GET /api/tasks/{id}/log`,
//! the rest as it is appended, as Server-Sent Events. Each event's `data:` is a JSON
//! string of whole lines, control characters blanked and the server's secrets masked as
//! on the page, and its `id:` the byte offset in the log after them: a browser
//! reconnecting names it in `Last-Event-ID` and misses nothing (`?after=OFFSET` starts
//! there too). Without one the stream starts with the log's last [`LOG_TAIL_BYTES`] from a
//! line. A line still being written is held back until it ends or a second has passed,
//! so a secret is never split across two events and escapes the mask.
//!
//! The log is read through the caller's [`crate::LogRead`] (the home's own reader,
//! which never follows a link) at most [`CHUNK`] bytes at a time, once per poll interval
//! while the stream is open; a stream takes one of the server's stream places.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use board_core::shapes::plain;
use board_core::TaskId;
use decompose::mask_secret;
use futures_util::stream::{self, Stream};
use serde::Deserialize;

use crate::api::task_id;
use crate::events::{resume_point, stream_slot};
use crate::{blocking, ApiError, App, LogRead, LogSpan, LOG_TAIL_BYTES};

/// The most of a log one read takes: a stream far behind catches up in pieces.
pub const CHUNK: u64 = 64 * 1024;

/// How long a line without its end waits before it is sent as it is.
const HOLD: Duration = Duration::from_secs(1);

/// A worker's log as the pages show it: what a worker prints is untrusted, so every
/// control character but a line's end and a tab is blanked as the command line blanks
/// it, and every secret the server knows (or a piece of one) is masked.
pub fn shown(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(plain(text, true), |text, secret| mask_secret(&text, secret))
}

/// The end of a card's log as its page opens with it: the text from a line on, and the
/// offset after it, where the live stream goes on.
pub struct Tail {
    pub text: String,
    pub end: u64,
}

/// The log's last [`LOG_TAIL_BYTES`], from a line; `None` when the card has none.
pub fn tail(read: &LogRead, id: &TaskId, secrets: &[String]) -> Option<Tail> {
    let span = read(id, None, LOG_TAIL_BYTES)?;
    let (start, bytes) = from_a_line(&span, None);
    Some(Tail {
        text: shown(&String::from_utf8_lossy(bytes), secrets),
        end: start + bytes.len() as u64,
    })
}

/// A span read from `from` on (its tail for none), cut to start at a line when the read
/// began after the start of one: the tail of a longer log.
fn from_a_line(span: &LogSpan, from: Option<u64>) -> (u64, &[u8]) {
    let bytes = span.bytes.as_slice();
    if from.is_some() || span.start == 0 {
        return (span.start, bytes);
    }
    match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (span.start + i as u64 + 1, &bytes[i + 1..]),
        None => (span.start, bytes),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    after: Option<String>,
}

pub async fn stream(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    query: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = query?;
    let id = task_id(&id)?;
    let Some(read) = app.settings.log.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this server reads no worker logs",
        ));
    };
    let resume = resume_point(&headers, q.after.as_deref())?;
    let slot = stream_slot(&app)?;
    let known = id.clone();
    blocking(&app, move |s| Ok(s.get(&known).map(drop)?)).await?;
    let follower = Follower {
        id,
        read,
        secrets: app.settings.secrets.clone(),
        interval: app.settings.poll_interval,
        at: resume.map(|offset| offset as u64),
        said_none: false,
        held: None,
        _slot: slot,
    };
    let events = stream::unfold(follower, |mut f| async move {
        let next = f.next().await;
        Some((Ok(next), f))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Where one stream is in its log.
struct Follower {
    id: TaskId,
    read: LogRead,
    secrets: Vec<String>,
    interval: Duration,
    /// The offset after the last line sent; none before the first read (the tail).
    at: Option<u64>,
    /// Whether the stream has said the card has no log yet.
    said_none: bool,
    /// Since when a line without its end has waited, and where it starts.
    held: Option<(u64, Instant)>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Follower {
    /// The next piece of the log, waiting for one.
    async fn next(&mut self) -> SseEvent {
        loop {
            let (read, id) = (self.read.clone(), self.id.clone());
            let (from, max) = match self.at {
                Some(at) => (Some(at), CHUNK),
                None => (None, LOG_TAIL_BYTES),
            };
            let span = tokio::task::spawn_blocking(move || read(&id, from, max))
                .await
                .ok()
                .flatten();
            match span {
                None if !self.said_none => {
                    self.said_none = true;
                    return SseEvent::default().event("none").data("\"no log yet\"");
                }
                None => {}
                Some(span) => {
                    if let Some(event) = self.piece(&span, from, max) {
                        return event;
                    }
                }
            }
            tokio::time::sleep(self.interval).await;
        }
    }

    /// What of `span` (read from `from`, at most `max`) is sent now: its whole lines, or
    /// a line without its end that filled the read or has waited [`HOLD`].
    fn piece(&mut self, span: &LogSpan, from: Option<u64>, max: u64) -> Option<SseEvent> {
        let (start, bytes) = from_a_line(span, from);
        self.at = Some(start);
        if bytes.is_empty() {
            return None;
        }
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let waited = match self.held {
            Some((at, since)) if at == start => since.elapsed() >= HOLD,
            _ => {
                self.held = Some((start, Instant::now()));
                false
            }
        };
        let send = match whole {
            0 if span.bytes.len() as u64 >= max || waited => bytes.len(),
            n => n,
        };
        if send == 0 {
            return None;
        }
        self.held = None;
        let end = start + send as u64;
        self.at = Some(end);
        let text = shown(&String::from_utf8_lossy(&bytes[..send]), &self.secrets);
        Some(
            SseEvent::default()
                .event("log")
                .id(end.to_string())
                .data(serde_json::Value::String(text).to_string()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, bytes: &str) -> LogSpan {
        LogSpan {
            start,
            bytes: bytes.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_tail_of_a_longer_log_starts_at_a_line() {
        assert_eq!(from_a_line(&span(0, "a\nb\n"), None), (0, &b"a\nb\n"[..]));
        assert_eq!(from_a_line(&span(5, "rt\nb\n"), None), (8, &b"b\n"[..]));
        assert_eq!(from_a_line(&span(5, "rt\nb\n"), Some(5)), (5, &b"rt\nb\n"[..]));
        assert_eq!(from_a_line(&span(5, "no end"), None), (5, &b"no end"[..]));
    }
}
