//! `GET /api/events`: the board's events as Server-Sent Events. Each event's `id:` is its
//! row id and its `data:` the event as `kanban events --json` prints it; a client that
//! reconnects with `Last-Event-ID` (or asks `?after=ID`) gets everything after that id,
//! so a dropped connection misses nothing. `Last-Event-ID` wins over `?after=`: a
//! browser reconnecting keeps the page's URL and names the last event it saw. An id past
//! the newest event resumes at the newest, so the next new event is sent.
//!
//! One poller reads the newest event id at a short interval, and at once on each of the
//! board's wake-ups when the server hears them, and publishes it; each stream sleeps
//! until it changes and then reads its own events after its own id. A hundred open
//! streams cost the board one query per interval while nothing happens.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use board_core::shapes::event_json;
use board_core::{BoardReads, EventFilter, TaskId};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use tokio::sync::watch;

use crate::api::task_id;
use crate::{blocking, ApiError, App};

/// The most events one read sends; a stream far behind catches up in batches.
const BATCH: usize = 500;

/// Starts the task that publishes the newest event id: read every `interval`, and at
/// once on each of the board's wake-ups when the caller hears them (`wakes`), so a
/// write that wakes the board reaches the pages without waiting out the interval.
pub fn start_poller(
    store: Arc<dyn BoardReads>,
    interval: Duration,
    mut wakes: Option<watch::Receiver<u64>>,
) -> watch::Receiver<i64> {
    let (tx, rx) = watch::channel(0);
    tokio::spawn(async move {
        let mut newest = 0;
        loop {
            let s = store.clone();
            let read = tokio::task::spawn_blocking(move || newest_after(s.as_ref(), newest)).await;
            if let Ok(Ok(Some(id))) = read {
                newest = id;
                if tx.send(id).is_err() {
                    return;
                }
            }
            if tx.is_closed() {
                return;
            }
            match wakes.as_mut() {
                Some(woken) => {
                    tokio::select! {
                        () = tokio::time::sleep(interval) => {}
                        changed = woken.changed() => if changed.is_err() { wakes = None },
                    }
                }
                None => tokio::time::sleep(interval).await,
            }
        }
    });
    rx
}

/// The id of the newest event above `after`: one read of the newest row.
fn newest_after(store: &dyn BoardReads, after: i64) -> board_core::StoreResult<Option<i64>> {
    let newest = store.events(&EventFilter {
        after_id: after,
        limit: Some(1),
        newest: true,
        ..EventFilter::default()
    })?;
    Ok(newest.last().map(|e| e.id))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    after: Option<String>,
    task: Option<String>,
}

/// One of the server's [`crate::Limits::streams`] places, held while a stream is open; a
/// 503 when every one is taken.
pub(crate) fn stream_slot(app: &App) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    app.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this server has {} event streams open, its most; close one or try again later",
                app.settings.limits.streams
            ),
        )
    })
}

/// Where a stream resumes: its `Last-Event-ID` (a browser reconnecting), else `?after=`.
pub(crate) fn resume_point(headers: &HeaderMap, after: Option<&str>) -> Result<Option<i64>, ApiError> {
    let after = after.map(|a| event_id(a.as_bytes(), "?after=")).transpose()?;
    let resume = headers
        .get("last-event-id")
        .map(|v| event_id(v.as_bytes(), "Last-Event-ID"))
        .transpose()?;
    Ok(resume.or(after))
}

/// A resume point as a client names it: digits only, an id from 0 up.
fn event_id(text: &[u8], named: &str) -> Result<i64, ApiError> {
    std::str::from_utf8(text)
        .ok()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{named} is not an event id: expected a whole number from 0 to {}",
                i64::MAX
            ))
        })
}

pub async fn stream(
    State(app): State<App>,
    headers: HeaderMap,
    query: Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(q) = query?;
    let stream_slot = stream_slot(&app)?;
    let resume = resume_point(&headers, q.after.as_deref())?;
    let task = q.task.as_deref().map(task_id).transpose()?;
    if let Some(id) = task.clone() {
        blocking(&app, move |s| Ok(s.get(&id).map(drop)?)).await?;
    }
    let wanted = resume.unwrap_or(0);
    let newest = blocking(&app, |s| Ok(newest_after(s, 0)?)).await?;
    let cursor = Cursor {
        after: wanted.min(newest.unwrap_or(0)),
        task,
        pending: Vec::new(),
        app,
        _slot: stream_slot,
    };
    let events = stream::unfold(cursor, |mut c| async move {
        let next = c.next().await?;
        Some((Ok(next), c))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Where one stream is: the last id sent and what is read but not yet sent.
struct Cursor {
    after: i64,
    task: Option<TaskId>,
    pending: Vec<board_core::Event>,
    app: App,
    /// The stream's place among [`crate::Limits::streams`], given back when it ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Cursor {
    /// The next event, waiting for one; `None` ends the stream (the server is stopping).
    async fn next(&mut self) -> Option<SseEvent> {
        let mut newest = self.app.newest_event.clone();
        loop {
            if !self.pending.is_empty() {
                let e = self.pending.remove(0);
                self.after = e.id;
                return Some(
                    SseEvent::default()
                        .id(e.id.to_string())
                        .data(event_json(&e).to_string()),
                );
            }
            let seen = *newest.borrow_and_update();
            if seen > self.after {
                let filter = EventFilter {
                    task_id: self.task.clone(),
                    after_id: self.after,
                    limit: Some(BATCH),
                    ..EventFilter::default()
                };
                match blocking(&self.app, move |s| Ok(s.events(&filter)?)).await {
                    Ok(events) if !events.is_empty() => {
                        self.pending = events;
                        continue;
                    }
                    // Nothing of this task's up to `seen`: wait for the next change.
                    Ok(_) => self.after = seen,
                    Err(e) => tracing::warn!("event stream read failed: {}", e.message),
                }
            }
            newest.changed().await.ok()?;
        }
    }
}
