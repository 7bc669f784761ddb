//! Typed refusals: every reason the board says no, with a message a person can act on.

use crate::types::{RunId, Status, TaskId};

/// Why the board refused a request. A refusal changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no such task: {0}")]
    NoSuchTask(TaskId),
    #[error("task {id} is {status}; {op} needs {allowed}")]
    WrongStatus {
        id: TaskId,
        status: Status,
        op: &'static str,
        allowed: &'static str,
    },
    #[error("run {expected} is not the current run of {id} (current: {})", show_run(*.current))]
    StaleRun {
        id: TaskId,
        expected: RunId,
        current: Option<RunId>,
    },
    #[error("the claim on {id} changed while the request was in flight (run {run_id} is no longer current)")]
    ClaimChanged { id: TaskId, run_id: RunId },
    #[error("run {run_id} is not the newest run of {id} (newest: {}); a replacement run took over", show_run(*.newest))]
    NotNewestRun {
        id: TaskId,
        run_id: RunId,
        newest: Option<RunId>,
    },
    #[error("task {id} is already claimed")]
    AlreadyClaimed { id: TaskId },
    #[error("task {id} waits for {open} parent(s) that are not done")]
    OpenParents { id: TaskId, open: i64 },
    #[error("task {0} has no completed run to hold a summary or metadata; give --result alone")]
    NoCompletedRun(TaskId),
    #[error("cannot reopen {parent}: its child {child} is running (reclaim it or let it finish first)")]
    ChildStarted { parent: TaskId, child: TaskId },
    #[error("cannot link {0} to itself")]
    SelfLink(TaskId),
    #[error("linking {parent} -> {child} would make a cycle")]
    Cycle { parent: TaskId, child: TaskId },
    #[error("{parent} -> {child} is not a link")]
    NoSuchLink { parent: TaskId, child: TaskId },
    #[error("task {id} is running; {op} is refused while a worker holds it (reclaim it first)")]
    Running { id: TaskId, op: &'static str },
    #[error("a task title cannot be blank")]
    BlankTitle,
    #[error("nothing to change on {0}")]
    Unchanged(TaskId),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("task {0} has execution history; automatic decomposition never touches it")]
    ExecutionHistory(TaskId),
    #[error("task {0} gained execution history during decomposition; the reply was discarded")]
    GainedHistory(TaskId),
    #[error("task {0}: input changed during decomposition; the reply was discarded")]
    InputChanged(TaskId),
    #[error("task {0}: the decomposition lease lapsed before the commit (another gateway may hold the card now); the reply was discarded")]
    LeaseLapsed(TaskId),
    #[error("task {0} is parked after repeated decomposition failures (edit it or decompose it by hand)")]
    Parked(TaskId),
    #[error("task {id} is cooling down after a failed decomposition until {at}")]
    NotDue { id: TaskId, at: i64 },
    #[error("task {0} was already decomposed")]
    AlreadyDecomposed(TaskId),
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    #[error("task {0} is not archived; only an archived task can be deleted (archive it first)")]
    NotArchived(TaskId),
    #[error("task {id}: {profile} did the work and cannot review it; a reviewer is another profile")]
    SelfReview { id: TaskId, profile: String },
    #[error(
        "task {id}: its profile's contract needs evidence with the completion (complete --evidence JSON)"
    )]
    EvidenceRequired { id: TaskId },
    #[error("run {run_id} of {id} is a {kind} run; {op} needs a {needs} run")]
    WrongRunKind {
        id: TaskId,
        run_id: RunId,
        kind: crate::types::RunKind,
        op: &'static str,
        needs: &'static str,
    },
    #[error("task {id} has no reviewer; request review with --reviewer PROFILE, or review it yourself")]
    NoReviewer { id: TaskId },
    #[error("task {id} is linked (directly or through others) to {other}, which is not archived; archive it too first")]
    LinkedToLive { id: TaskId, other: TaskId },
    #[error("no such attachment: {0} (kanban attachments ID lists a task's files)")]
    NoSuchAttachment(i64),
    #[error("no such subscription: {0} (kanban notify-list lists them)")]
    NoSuchSubscription(i64),
    #[error("no such lane: {0} (kanban lane list shows the lanes)")]
    NoSuchLane(String),
    #[error("lane {0} exists already; pick another name")]
    LaneExists(String),
    #[error("lane {0} is revoked")]
    LaneRevoked(String),
    #[error("lane {lane} holds {held} task(s), its cap (lanes.max_held); finish one first")]
    LaneFull { lane: String, held: u64 },
    #[error("lane {lane} does not hold {} of {id}", run_id.map_or_else(|| "a run".to_owned(), |r| format!("run {r}")))]
    NotLanesRun {
        lane: String,
        id: TaskId,
        run_id: Option<RunId>,
    },
}

fn show_run(run: Option<RunId>) -> String {
    run.map_or_else(|| "none".to_owned(), |r| r.to_string())
}

impl Refusal {
    /// A task a dispatcher offered that cannot be claimed now (another status, a parent
    /// open, claimed meanwhile, no reviewer but its own profile): skipped, not an error.
    pub fn not_claimable_now(&self) -> bool {
        matches!(
            self,
            Refusal::WrongStatus { .. }
                | Refusal::NoSuchTask(_)
                | Refusal::OpenParents { .. }
                | Refusal::AlreadyClaimed { .. }
                | Refusal::SelfReview { .. }
                | Refusal::NoReviewer { .. }
        )
    }

    /// A lost race or a stale guard: the caller gets `false` (exit 1) and nobody is signalled.
    pub fn is_lost_race(&self) -> bool {
        matches!(
            self,
            Refusal::StaleRun { .. } | Refusal::ClaimChanged { .. } | Refusal::NotNewestRun { .. }
        )
    }
}
