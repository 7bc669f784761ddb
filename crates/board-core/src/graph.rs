//! Transitions that touch more than one task: create (with parents), link and unlink.
//!
//! The store supplies the facts it alone can compute cheaply (does a path already lead
//! from the child to the parent? does the link exist?); the core decides.

use serde_json::json;

use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::transition::{Change, NewEvent, TaskFacts};
use crate::types::{Link, Status, Task, TaskId, Timestamp};

/// The longest title the board stores, in characters.
pub const TITLE_MAX_CHARS: usize = 10_000;

/// A request to create a task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewTask {
    pub title: String,
    pub body: String,
    pub assignee: Option<String>,
    pub priority: i64,
    pub created_by: Option<String>,
    pub triage: bool,
    pub parents: Vec<TaskId>,
    pub idempotency_key: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    /// The profile that reviews the task's work.
    pub reviewer: Option<String>,
    /// The task's own verifiers (argv lists), overriding its profile's.
    pub verify: Option<Vec<Vec<String>>>,
    /// Start in `blocked`, for a person (Hermes' `--initial-status blocked`); `unblock`
    /// releases it. Not with `triage`.
    pub blocked: bool,
    /// The task's tenant ([`Task::tenant`]).
    pub tenant: Option<String>,
    /// Skills for its worker ([`Task::skills`]); blanks and repeats are dropped.
    pub skills: Vec<String>,
    /// Its own failure limit ([`Task::max_retries`]), at least 1.
    pub max_retries: Option<i64>,
}

impl NewTask {
    pub fn titled(title: impl Into<String>) -> NewTask {
        NewTask {
            title: title.into(),
            ..NewTask::default()
        }
    }

    /// Refuses a field over the board's limits ([`crate::limits`]).
    pub fn check_sizes(&self) -> Result<(), Refusal> {
        use crate::limits::{retries, some_name, some_short, steps, text};
        text("the body", &self.body)?;
        some_short("the assignee", &self.assignee)?;
        some_short("the creator", &self.created_by)?;
        some_short("the reviewer", &self.reviewer)?;
        some_name("the tenant", &self.tenant)?;
        retries(self.max_retries)?;
        self.verify
            .as_deref()
            .map_or(Ok(()), |v| steps("the verifiers", v))?;
        some_short("the idempotency key", &self.idempotency_key)
    }

    /// The request with `default` (`kanban.default_assignee`) as its assignee when it
    /// names none, as Hermes' dispatcher assigns an unassigned ready task. A triage card
    /// stays unassigned: the decomposer routes it and its children to profiles.
    pub fn or_assignee(mut self, default: &str) -> NewTask {
        if self.assignee.is_none() && !self.triage {
            self.assignee = Some(default.to_owned());
        }
        self
    }
}

/// A new task row with its links to its parents and its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    pub task: Task,
    pub links: Vec<Link>,
    pub events: Vec<NewEvent>,
}

/// A blank task row with every counter and lease field empty.
pub fn blank_task(id: TaskId, title: String, status: Status, now: Timestamp) -> Task {
    Task {
        id,
        title,
        body: String::new(),
        assignee: None,
        status,
        priority: 0,
        created_by: None,
        created_at: now,
        updated_at: now,
        started_at: None,
        completed_at: None,
        result: None,
        lease: None,
        block_kind: None,
        block_recurrences: 0,
        consecutive_failures: 0,
        last_failure_error: None,
        max_runtime_seconds: None,
        idempotency_key: None,
        revision: 0,
        decompose_failures: 0,
        decompose_next_attempt_at: None,
        decompose_parked: false,
        decompose_last_error: None,
        reviewer: None,
        verify_failures: 0,
        review_rounds: 0,
        verify: None,
        tenant: None,
        skills: Vec::new(),
        max_retries: None,
        scheduled_until: None,
        recurrence: None,
    }
}

/// A title as it is stored: line breaks and tabs become spaces, every other control
/// character (NUL, escape sequences, C1 codes) is dropped, and the ends are trimmed.
/// Titles reach terminals, argv elements and environment variables, none of which can
/// take these safely.
pub fn clean_title(title: &str) -> String {
    let spaced: String = title
        .chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\r' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    spaced.trim().to_owned()
}

/// Refuses a title a task cannot carry.
pub fn check_title(title: &str) -> Result<(), Refusal> {
    if title.trim().is_empty() {
        return Err(Refusal::BlankTitle);
    }
    if title.chars().count() > TITLE_MAX_CHARS {
        return Err(Refusal::Invalid(format!(
            "a title is at most {TITLE_MAX_CHARS} characters; use the body for long text"
        )));
    }
    Ok(())
}

/// Creates a task under `parents` (already resolved by the store, in request order).
pub fn create(request: &NewTask, id: TaskId, parents: &[Task], now: Timestamp) -> Result<Created, Refusal> {
    check_title(&request.title)?;
    request.check_sizes()?;
    if let (Some(reviewer), Some(_)) = (&request.reviewer, &request.assignee) {
        if request.assignee.as_ref() == Some(reviewer) {
            return Err(Refusal::SelfReview {
                id,
                profile: reviewer.clone(),
            });
        }
    }
    if let Some(max) = request.max_runtime_seconds {
        if max <= 0 {
            return Err(Refusal::Invalid(format!(
                "max runtime must be positive, got {max}"
            )));
        }
    }
    let skills = crate::limits::skills(&request.skills)?;
    let mut parent_ids: Vec<TaskId> = Vec::new();
    for parent in parents {
        if !parent_ids.contains(&parent.id) {
            parent_ids.push(parent.id.clone());
        }
    }
    let any_open = parents.iter().any(|p| !p.status.releases_children());
    let status = if request.triage {
        Status::Triage
    } else if request.blocked {
        Status::Blocked
    } else if any_open {
        Status::Todo
    } else {
        Status::Ready
    };
    let mut task = blank_task(id.clone(), request.title.clone(), status, now);
    task.body = request.body.clone();
    task.assignee = request.assignee.clone();
    task.priority = request.priority;
    task.created_by = request.created_by.clone();
    task.max_runtime_seconds = request.max_runtime_seconds;
    task.idempotency_key = request.idempotency_key.clone();
    task.reviewer = request.reviewer.clone();
    task.verify = request.verify.clone();
    task.tenant = request.tenant.clone();
    task.skills = skills;
    task.max_retries = request.max_retries;
    let mut events = vec![NewEvent::new(
        EventKind::Created,
        None,
        json!({ "status": status, "parents": parent_ids, "assignee": request.assignee }),
    )];
    let links = parent_ids
        .iter()
        .map(|p| {
            events.push(NewEvent::new(EventKind::Linked, None, json!({ "parent": p })));
            Link {
                parent_id: p.clone(),
                child_id: id.clone(),
            }
        })
        .collect();
    Ok(Created { task, links, events })
}

/// Links `parent -> child`. `child_reaches_parent` is whether a path of links already
/// leads from the child down to the parent (the new link would close a cycle).
/// The change is on the child, which goes back to `todo` when it was `ready` and the
/// parent is still open.
pub fn link(
    parent: &Task,
    child: &TaskFacts,
    child_reaches_parent: bool,
    exists: bool,
    now: Timestamp,
) -> Result<Change, Refusal> {
    let c = &child.task;
    if parent.id == c.id {
        return Err(Refusal::SelfLink(c.id.clone()));
    }
    if exists {
        return Err(Refusal::Unchanged(c.id.clone()));
    }
    if child_reaches_parent {
        return Err(Refusal::Cycle {
            parent: parent.id.clone(),
            child: c.id.clone(),
        });
    }
    if c.status == Status::Running {
        return Err(Refusal::Running {
            id: c.id.clone(),
            op: "link",
        });
    }
    let mut task = c.clone();
    if task.status == Status::Ready && !parent.status.releases_children() {
        task.status = Status::Todo;
    }
    task.updated_at = now;
    Ok(Change {
        events: vec![NewEvent::new(
            EventKind::Linked,
            None,
            json!({ "parent": parent.id, "status": task.status }),
        )],
        task,
        runs: Vec::new(),
        wake_children: false,
        hold_children: false,
        comment: None,
    })
}

/// Removes `parent -> child`. `child_after` holds the child's facts as they are once
/// the link is gone; a `todo` child with no open parent left is promoted.
pub fn unlink(
    parent_id: &TaskId,
    child_after: &TaskFacts,
    exists: bool,
    now: Timestamp,
) -> Result<Change, Refusal> {
    let c = &child_after.task;
    if !exists {
        return Err(Refusal::NoSuchLink {
            parent: parent_id.clone(),
            child: c.id.clone(),
        });
    }
    let mut task = c.clone();
    task.updated_at = now;
    let mut events = vec![NewEvent::new(
        EventKind::Unlinked,
        None,
        json!({ "parent": parent_id }),
    )];
    if task.status == Status::Todo && child_after.open_parents == 0 {
        task.status = Status::Ready;
        events.push(NewEvent::new(EventKind::Promoted, None, json!({})));
    }
    Ok(Change {
        task,
        runs: Vec::new(),
        events,
        wake_children: false,
        hold_children: false,
        comment: None,
    })
}
