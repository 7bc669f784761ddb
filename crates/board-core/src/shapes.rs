//! The board's JSON shapes (and the one way an age is written, and the one filter of
//! untrusted text shown as text): a task, a run, a comment, an event, and the `list` and
//! `show` documents built from them. The command line's `--json` and the web API both
//! print these, so a script reads the same keys from either.
//!
//! The shapes are pure functions of board values; [`Shown::read`] gathers what `show`
//! prints through the `Store` trait, so both readers read the same rows.
//!
//! Objects are built key by key (serde_json keeps insertion order), so each shape is a
//! contract written down here rather than whatever the structs derive.

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::{json, Value};

use crate::kinds::EventKind;
use crate::store::{EventFilter, Store, StoreResult, TaskFilter};
use crate::types::{Comment, Event, Run, Status, Task, TaskId, Timestamp};

/// A task: every `tasks` column except the lease internals (`claim_lock`,
/// `claim_expires`, `worker_pid`, `last_heartbeat_at`), in column order. Serializing it
/// writes the object straight out, with no map built first (`list --json` streams a
/// board this way); [`task_json`] is the same object as a value.
pub struct TaskJson<'a>(pub &'a Task);

impl Serialize for TaskJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut o = s.serialize_struct("Task", 33)?;
        o.serialize_field("id", &t.id)?;
        o.serialize_field("title", &t.title)?;
        o.serialize_field("body", &t.body)?;
        o.serialize_field("assignee", &t.assignee)?;
        o.serialize_field("status", &t.status)?;
        o.serialize_field("priority", &t.priority)?;
        o.serialize_field("created_by", &t.created_by)?;
        o.serialize_field("created_at", &t.created_at)?;
        o.serialize_field("updated_at", &t.updated_at)?;
        o.serialize_field("started_at", &t.started_at)?;
        o.serialize_field("completed_at", &t.completed_at)?;
        o.serialize_field("result", &t.result)?;
        o.serialize_field("current_run_id", &t.current_run_id())?;
        o.serialize_field("block_kind", &t.block_kind)?;
        o.serialize_field("block_recurrences", &t.block_recurrences)?;
        o.serialize_field("consecutive_failures", &t.consecutive_failures)?;
        o.serialize_field("last_failure_error", &t.last_failure_error)?;
        o.serialize_field("max_runtime_seconds", &t.max_runtime_seconds)?;
        o.serialize_field("idempotency_key", &t.idempotency_key)?;
        o.serialize_field("revision", &t.revision)?;
        o.serialize_field("decompose_failures", &t.decompose_failures)?;
        o.serialize_field("decompose_next_attempt_at", &t.decompose_next_attempt_at)?;
        o.serialize_field("decompose_parked", &t.decompose_parked)?;
        o.serialize_field("decompose_last_error", &t.decompose_last_error)?;
        o.serialize_field("reviewer", &t.reviewer)?;
        o.serialize_field("verify_failures", &t.verify_failures)?;
        o.serialize_field("review_rounds", &t.review_rounds)?;
        o.serialize_field("verify", &t.verify)?;
        o.serialize_field("tenant", &t.tenant)?;
        o.serialize_field("skills", &t.skills)?;
        o.serialize_field("max_retries", &t.max_retries)?;
        o.serialize_field("scheduled_until", &t.scheduled_until)?;
        o.serialize_field("recurrence", &t.recurrence)?;
        o.end()
    }
}

/// [`TaskJson`] as a value.
pub fn task_json(t: &Task) -> Value {
    // Every field is a string, a number, a flag or null, which a value always holds.
    serde_json::to_value(TaskJson(t)).unwrap_or(Value::Null)
}

/// A run: every `task_runs` column except `claim_lock`, the token a guard compares and
/// nobody needs to read.
pub fn run_json(r: &Run) -> Value {
    json!({
        "id": r.id,
        "task_id": r.task_id,
        "profile": r.profile,
        "status": r.status,
        "outcome": r.outcome,
        "claim_expires": r.claim_expires,
        "worker_pid": r.worker_pid,
        "worker_host": r.worker_host,
        "lane": r.lane,
        "last_heartbeat_at": r.last_heartbeat_at,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "summary": r.summary,
        "error": r.error,
        "metadata": r.metadata,
        "kind": r.kind,
        "checks": r.checks,
        "evidence": r.evidence,
    })
}

pub fn comment_json(c: &Comment) -> Value {
    json!({
        "id": c.id,
        "task_id": c.task_id,
        "author": c.author,
        "body": c.body,
        "created_at": c.created_at,
    })
}

pub fn event_json(e: &Event) -> Value {
    json!({
        "id": e.id,
        "task_id": e.task_id,
        "run_id": e.run_id,
        "kind": e.kind,
        "payload": e.payload,
        "created_at": e.created_at,
    })
}

/// How long ago `then` was, in one short unit: `42s`, `5m`, `3h`, `2d`. Every reader
/// of the board (terminal and page) says ages this way.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = (now - then).max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// Text from the board as it may be shown. Card text, results, comments, authors and
/// worker logs are untrusted: an escape sequence in them could retitle a terminal, clear
/// it or fake output. Every control character (ESC, and so every CSI and OSC sequence;
/// BEL; CR; the rest of C0, DEL and C1) becomes a space; with `lines`, line feeds and
/// tabs are kept for text meant to span lines (a body, a result, a log). JSON output
/// never goes through here: its encoder escapes control characters itself.
///
/// ```
/// use board_core::shapes::plain;
///
/// assert_eq!(plain("a\x1b]0;owned\x07b\r\nc", true), "a ]0;owned b \nc");
/// assert_eq!(plain("a\tb\nc", false), "a b c");
/// ```
pub fn plain(text: &str, lines: bool) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' if lines => c,
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// A piece of a worker's log as read from its file (`board_home::safety::read_span`, read
/// by `kanban serve` for a card's live log): where it starts in the log, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSpan {
    pub start: u64,
    pub bytes: Vec<u8>,
}

/// The `list` document: the tasks in the order given.
pub fn list_json(tasks: &[Task]) -> Value {
    Value::Array(tasks.iter().map(task_json).collect())
}

/// The filter `list` applies: asking for archived tasks by status means wanting to see
/// them, and the assignee `none` means nobody (as `assign ID none` clears it).
pub fn list_filter(status: Option<Status>, assignee: Option<String>, archived: bool) -> TaskFilter {
    let unassigned = assignee.as_deref() == Some(NO_ASSIGNEE);
    TaskFilter {
        status,
        include_archived: archived || status == Some(Status::Archived),
        assignee: assignee.filter(|_| !unassigned),
        unassigned,
        tenant: None,
        order: Default::default(),
        limit: None,
        after: None,
    }
}

/// The word that stands for no assignee wherever a profile is named.
pub const NO_ASSIGNEE: &str = "none";

/// How many of a task's events `show` carries, newest kept.
pub const SHOW_EVENTS: usize = 20;

/// Everything `show` reads about one task.
#[derive(Clone, Debug)]
pub struct Shown {
    pub task: Task,
    pub parents: Vec<Task>,
    pub children: Vec<Task>,
    pub runs: Vec<Run>,
    pub comments: Vec<Comment>,
    /// Its files, without their bytes.
    pub attachments: Vec<crate::Attachment>,
    /// The newest [`SHOW_EVENTS`], oldest first.
    pub events: Vec<Event>,
    /// How many older events were left out.
    pub skipped: usize,
    /// Why a blocked task (or one a block loop sent to triage) waits, from the event
    /// that put it there.
    pub block_reason: Option<String>,
}

impl Shown {
    /// Reads the task and everything `show` prints about it; an unknown id is refused.
    pub fn read<S: Store + ?Sized>(store: &S, id: &TaskId) -> StoreResult<Shown> {
        let task = store.get(id)?;
        let all = EventFilter {
            task_id: Some(id.clone()),
            ..EventFilter::default()
        };
        let total = store.count_events(&all)?;
        let events = store.events(&EventFilter {
            limit: Some(SHOW_EVENTS),
            newest: true,
            ..all
        })?;
        let skipped = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .saturating_sub(events.len());
        let waits =
            task.status == Status::Blocked || (task.status == Status::Triage && task.block_recurrences > 0);
        let block_reason = match waits {
            true => block_reason(store, id)?,
            false => None,
        };
        Ok(Shown {
            block_reason,
            parents: store.parents(id)?,
            children: store.children(id)?,
            runs: store.runs(id)?,
            comments: store.comments(id)?,
            attachments: store.attachments(id)?,
            task,
            events,
            skipped,
        })
    }

    /// The `show` document.
    pub fn to_json(&self) -> Value {
        json!({
            "task": task_json(&self.task),
            "parents": list_json(&self.parents),
            "children": list_json(&self.children),
            "runs": self.runs.iter().map(run_json).collect::<Vec<_>>(),
            "comments": self.comments.iter().map(comment_json).collect::<Vec<_>>(),
            "attachments": self.attachments,
            "events": self.events.iter().map(event_json).collect::<Vec<_>>(),
            "events_omitted": self.skipped,
            "block_reason": self.block_reason,
            "latest_summary": self.latest_summary(),
        })
    }

    /// The summary of the newest run that left one: what the last worker handed on.
    pub fn latest_summary(&self) -> Option<&str> {
        self.runs.iter().rev().find_map(|r| r.summary.as_deref())
    }
}

/// The events that put a task in `blocked` (or, for a block loop, in `triage`).
const BLOCKING_EVENTS: [EventKind; 4] = [
    EventKind::Blocked,
    EventKind::GaveUp,
    EventKind::ReviewLoopDetected,
    EventKind::BlockLoopDetected,
];

/// Why the task was last blocked: the reason (or error) of its newest blocking event,
/// one indexed read.
fn block_reason<S: Store + ?Sized>(store: &S, id: &TaskId) -> StoreResult<Option<String>> {
    let newest = EventFilter {
        task_id: Some(id.clone()),
        kinds: BLOCKING_EVENTS.iter().map(|k| k.as_str().to_owned()).collect(),
        limit: Some(1),
        newest: true,
        ..EventFilter::default()
    };
    let Some(event) = store.events(&newest)?.pop() else {
        return Ok(None);
    };
    let said = |key: &str| event.payload.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(match event.kind == EventKind::GaveUp {
        true => Some(format!(
            "gave up after {} failed runs in a row{}",
            event.payload["failures"],
            said("error").map_or_else(String::new, |e| format!("; the last: {e}"))
        )),
        false => said("reason").or_else(|| Some(format!("{} (no reason given)", event.kind))),
    })
}
