//! Every single-task transition of the board as a pure function.
//!
//! A store reads the [`TaskFacts`] of one task inside its write transaction, calls
//! [`decide`] with a [`Request`], `now` and any new ids, and applies the returned
//! [`Change`] atomically, or changes nothing when it gets a [`Refusal`].

use serde_json::Value;

use crate::recurrence::{Recurrence, Recurring};
use crate::refusal::Refusal;
use crate::types::{BlockKind, Checks, Outcome, Run, RunId, RunKind, Task, TaskId, Timestamp};

mod card;
mod checks;
mod next;
mod runs;

use crate::kinds::EventKind;
use next::Next;

/// A task that blocks with the same kind this many times in a row goes back to triage.
pub const BLOCK_RECURRENCE_LIMIT: i64 = 2;

/// How long a reclaim whose worker survived termination extends the claim.
pub const RECLAIM_DEFER_SECONDS: i64 = 60;

/// The longest a failed automatic decomposition waits before its next attempt.
pub const DECOMPOSE_RETRY_CAP_SECONDS: i64 = 3600;

/// What the core needs to know about one task to decide a request on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFacts {
    pub task: Task,
    /// The task's newest run (the open one, when it is running).
    pub newest_run: Option<Run>,
    /// How many runs the task has ever had: its execution history.
    pub run_count: i64,
    /// Parents that are neither `done` nor `archived`.
    pub open_parents: i64,
    /// Whether a `decomposed` event exists for the task.
    pub decomposed: bool,
}

impl TaskFacts {
    /// The open run, when the task is running.
    fn current_run(&self) -> Option<&Run> {
        let current = self.task.current_run_id()?;
        self.newest_run
            .as_ref()
            .filter(|r| r.id == current && r.is_open())
    }
}

/// An event to append, in the same transaction as the change it records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub kind: EventKind,
    pub run_id: Option<RunId>,
    pub payload: Value,
}

impl NewEvent {
    pub fn new(kind: EventKind, run_id: Option<RunId>, payload: Value) -> NewEvent {
        NewEvent {
            kind,
            run_id,
            payload,
        }
    }
}

/// The event kinds after which any dispatcher may have work at once: a task became
/// ready (`created`, `promoted`, `unblocked`, `reclaimed`, `reopened`, and sent back by a check:
/// `verify_failed`, `changes_requested`), reported work waits for a check
/// (`verifying`, `review_requested`, `review_reopened`), or a card entered triage or
/// became due again (`created`, `decompose_reset`), or a task waits for a time the
/// dispatcher keeps (`scheduled`: it ticks again then). A store wakes the gateways sharing
/// the board when a write that appends one of these commits (docs/gateway.md#wake-ups).
/// A run that ended frees a slot on one gateway only, once its worker has exited: that
/// gateway learns it from the worker's report channel, and no other is woken for it.
/// But a run that ended without a report (`crashed`, `timed_out`, `stale`,
/// `spawn_failed`, `protocol_violation`) puts its task back in `ready`, which a lane
/// waiting for work (docs/lanes.md) must hear of.
pub const WAKING_EVENTS: &[EventKind] = &[
    EventKind::Created,
    EventKind::Crashed,
    EventKind::TimedOut,
    EventKind::Stale,
    EventKind::SpawnFailed,
    EventKind::ProtocolViolation,
    EventKind::Promoted,
    EventKind::Unblocked,
    EventKind::Reclaimed,
    EventKind::DecomposeReset,
    EventKind::Verifying,
    EventKind::VerifyFailed,
    EventKind::ReviewRequested,
    EventKind::ChangesRequested,
    EventKind::ReviewReopened,
    EventKind::Reopened,
    EventKind::Scheduled,
];

/// Whether an event of `kind` may give a dispatcher work at once ([`WAKING_EVENTS`]).
pub fn wakes_dispatcher(kind: EventKind) -> bool {
    WAKING_EVENTS.contains(&kind)
}

/// The effects of an accepted request on one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The task's new row.
    pub task: Task,
    /// Run rows to insert or overwrite (by id).
    pub runs: Vec<Run>,
    pub events: Vec<NewEvent>,
    /// The task left a status that held its children back: promote those now ready.
    pub wake_children: bool,
    /// The task holds its children back again (a reopen): each child that is ready is
    /// asked to [`Request::Hold`], in the same transaction; one that is running refuses,
    /// and the whole change with it.
    pub hold_children: bool,
    /// A comment the change adds to the card (a failed verification's output, a
    /// reviewer's requested changes), written in the same transaction.
    pub comment: Option<NewComment>,
}

/// A comment a transition writes: what the next worker reads in its context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewComment {
    pub author: Option<String>,
    pub body: String,
}

/// What a claim asks for: a run of `kind` on a task waiting in that kind's status
/// (`ready` for work, `verifying`, `review`), under the fresh run id and claim lock; a
/// gateway names its host, recorded on the run from the claim on; a lane
/// (docs/lanes.md) names itself, and holds the run. `checks` are what a work run's
/// completion must pass. `assign` names the profile that takes an unassigned task's work
/// (the gateway's `kanban.default_assignee`): the claim assigns the task to it, with an
/// `assigned` event, so every view shows who runs it, as Hermes' dispatcher does.
#[derive(Clone, Debug, PartialEq)]
pub struct Claiming {
    pub ttl: i64,
    pub host: Option<String>,
    pub kind: RunKind,
    pub checks: Checks,
    pub lane: Option<String>,
    pub assign: Option<String>,
}

/// A request about one existing task.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Open a run ([`Claiming`]).
    Claim(Claiming),
    /// A live worker extends its lease.
    Heartbeat {
        run_id: RunId,
        ttl: i64,
        note: Option<String>,
    },
    Complete(Completion),
    Block {
        kind: Option<BlockKind>,
        reason: Option<String>,
        expected_run_id: Option<RunId>,
    },
    Unblock {
        reason: Option<String>,
    },
    /// Park a `todo`, `ready`, `running` or `blocked` task in `scheduled` (ending its run,
    /// guarded by it when given): waiting on time, not on a person; `until` is when the
    /// gateway puts it back to work (none: a person's `unblock`). With a time, a
    /// `scheduled` task is scheduled anew. With `every` (and a time, its first), the task
    /// becomes a recurring task's template ([`crate::recurrence`]); a template scheduled
    /// anew without one keeps its rule.
    Schedule {
        reason: Option<String>,
        expected_run_id: Option<RunId>,
        until: Option<Timestamp>,
        every: Option<Recurrence>,
    },
    /// The gateway's: a scheduled task whose time has come goes back to work (`ready`, or
    /// `todo` while a parent is open).
    Resume,
    /// The gateway's: a recurring task's time came; it made the copy named (see
    /// [`Recurring`]) and the template waits for its next time.
    Recur(Recurring),
    /// Release a claim after the worker was stopped. `run_id` and `claim_lock` are what
    /// the reclaimer observed before terminating; any change since refuses.
    Reclaim {
        run_id: RunId,
        claim_lock: String,
        reason: Option<String>,
    },
    /// The worker survived termination: keep the claim, extend it briefly.
    DeferReclaim {
        run_id: RunId,
        claim_lock: String,
        reason: Option<String>,
    },
    /// The dispatcher ends a run it supervises (crash, timeout, stale lease, ...).
    EndRun(RunEnd),
    /// The dispatcher proved the worker alive: extend its lease.
    ExtendClaim {
        run_id: RunId,
        claim_lock: String,
        ttl: i64,
    },
    /// The verifiers of a verify run finished: the verdict, guarded by that run.
    Verified(Verdict),
    /// The work waits for a reviewer: a worker's request in its run (which ends it), or
    /// a person's on a task nobody works on.
    RequestReview {
        expected_run_id: Option<RunId>,
        reviewer: Option<String>,
        summary: Option<String>,
        result: Option<String>,
    },
    /// A reviewer (in its run) or a person sends the work back with a reason.
    RequestChanges {
        expected_run_id: Option<RunId>,
        author: Option<String>,
        reason: String,
        /// Rounds of requested changes at which the task is blocked as a review loop.
        round_limit: i64,
    },
    /// A reviewer (in its run) or a person approves the work: the task is done.
    Approve {
        expected_run_id: Option<RunId>,
        summary: Option<String>,
    },
    /// A person sends a task back to review (after changes were requested, or after a
    /// review loop blocked it).
    ReopenReview {
        reason: Option<String>,
    },
    /// Record the pid of the worker spawned for a run, and the host it runs on.
    SetWorker {
        run_id: RunId,
        claim_lock: String,
        pid: i64,
        host: String,
    },
    Archive,
    Edit {
        title: Option<String>,
        body: Option<String>,
        priority: Option<i64>,
    },
    Assign {
        assignee: Option<String>,
    },
    /// `todo` -> `ready` once every parent is done.
    Promote,
    /// A person moves a `todo` or `blocked` task whose parents are all done to `ready`.
    PromoteByHand(ByHand),
    /// A person takes a `done` or `archived` task back into work.
    Reopen(ByHand),
    /// A parent of this task was reopened: a ready task waits in `todo` again; a running
    /// one refuses (its parent's reopen is refused with it).
    Hold {
        parent: TaskId,
    },
    /// A person fills in what a done task handed on (`edit --result`): its result, and
    /// the summary (the result when not given) and metadata of its completed run.
    Backfill(Backfill),
    /// An automatic decomposition failed.
    DecomposeFailed {
        error: String,
        base_seconds: i64,
        limit: i64,
        /// Jitter as a fraction in [-0.1, 0.1], drawn by the caller.
        jitter: f64,
    },
    /// Clear the decomposition failure count and park (manual decompose).
    ClearDecomposeFailures,
    /// The dispatcher cannot start a worker for this ready task: its profile has no
    /// command. Recorded so a person sees why the task waits; the task is unchanged.
    SkipNonspawnable {
        profile: String,
    },
}

/// What `edit --result` fills in on a done task.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Backfill {
    pub result: String,
    /// Kept on the completed run; the result when not given.
    pub summary: Option<String>,
    /// Kept on the completed run.
    pub metadata: Option<Value>,
}

/// Who asks for a change made by hand, and why: recorded in its event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ByHand {
    pub by: Option<String>,
    pub reason: Option<String>,
}

/// A completion, as a worker or a person asks for it. A task completed without a run but
/// with a summary gets a zero-length run under the fresh run id to record it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub expected_run_id: Option<RunId>,
    /// The caller holds no run: a running task is refused rather than completed under
    /// its worker (an agent finishing a task nobody works on; a person may override).
    pub refuse_running: bool,
    pub replay_ended_run_id: Option<RunId>,
    pub result: Option<String>,
    pub summary: Option<String>,
    pub metadata: Option<Value>,
    /// What backs the completion (`complete --evidence`): kept on the run.
    pub evidence: Option<Value>,
}

/// The verdict of a verify run's verifiers.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The verify run the verdict is on: its worker's own, the guard of its report.
    pub run_id: RunId,
    pub passed: bool,
    /// Each command, its exit code, duration and output tail: kept on the run.
    pub evidence: Value,
    /// What failed, as the next worker reads it (the failing command and its output).
    pub failure: Option<String>,
    /// Failed verifications at which the task is blocked.
    pub failure_limit: i64,
}

/// How a supervisor ends a run it watched: the claim it observed before acting (any
/// change since refuses), and why the run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEnd {
    pub run_id: RunId,
    pub claim_lock: String,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// Extra fields for the event payload (`exit_code`, `signal`, ...).
    pub detail: Value,
    /// Failures in a row at which the task is given up on.
    pub failure_limit: i64,
}

/// Fresh ids a store draws for a request that may open a run (see [`Request::opens_run`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fresh {
    pub run_id: RunId,
    pub claim_lock: String,
}

impl Request {
    /// Refuses a field over the board's limits ([`crate::limits`]). The errors the
    /// gateway writes itself (a run's end, a failed decomposition) come from bounded
    /// text of its own and are not checked: a refusal there would leave a run unended.
    pub fn check_sizes(&self) -> Result<(), Refusal> {
        use crate::limits::{json, short, some_short, some_text};
        match self {
            Request::Heartbeat { note, .. } => some_text("a heartbeat note", note),
            Request::Complete(c) => {
                some_text("the result", &c.result)?;
                some_text("the summary", &c.summary)?;
                c.evidence.as_ref().map_or(Ok(()), |e| json("the evidence", e))?;
                c.metadata.as_ref().map_or(Ok(()), |m| json("the metadata", m))
            }
            Request::Verified(v) => {
                some_text("the verifier output", &v.failure)?;
                json("the evidence", &v.evidence)
            }
            Request::RequestReview {
                reviewer,
                summary,
                result,
                ..
            } => {
                some_short("the reviewer", reviewer)?;
                some_text("the summary", summary)?;
                some_text("the result", result)
            }
            Request::RequestChanges { author, reason, .. } => {
                some_short("the author", author)?;
                crate::limits::text("the reason", reason)
            }
            Request::Approve { summary, .. } => some_text("the summary", summary),
            Request::ReopenReview { reason } => some_text("the reason", reason),
            Request::Schedule { reason, every, .. } => {
                every.as_ref().map_or(Ok(()), Recurrence::check)?;
                some_text("the reason", reason)
            }
            Request::Block { reason, .. }
            | Request::Unblock { reason }
            | Request::Reclaim { reason, .. }
            | Request::DeferReclaim { reason, .. } => some_text("the reason", reason),
            Request::SetWorker { host, .. } => short("the host id", host),
            Request::Edit { body, .. } => some_text("the body", body),
            Request::Assign { assignee } => some_short("the assignee", assignee),
            Request::SkipNonspawnable { profile } => short("the profile", profile),
            Request::Backfill(b) => {
                crate::limits::text("the result", &b.result)?;
                some_text("the summary", &b.summary)?;
                b.metadata.as_ref().map_or(Ok(()), |m| json("the metadata", m))
            }
            Request::PromoteByHand(hand) | Request::Reopen(hand) => {
                some_short("the author", &hand.by)?;
                some_text("the reason", &hand.reason)
            }
            Request::Claim(c) => {
                some_short("the lane", &c.lane)?;
                some_short("the assignee", &c.assign)
            }
            Request::EndRun(_)
            | Request::Hold { .. }
            | Request::ExtendClaim { .. }
            | Request::Archive
            | Request::Resume
            | Request::Recur(_)
            | Request::Promote
            | Request::DecomposeFailed { .. }
            | Request::ClearDecomposeFailures => Ok(()),
        }
    }

    /// Whether deciding this request may need a fresh run id and claim lock.
    pub fn opens_run(&self) -> bool {
        matches!(self, Request::Claim(_) | Request::Complete(_))
    }

    /// The verb, for messages and logs.
    pub fn verb(&self) -> &'static str {
        match self {
            Request::Claim(_) => "claim",
            Request::Heartbeat { .. } => "heartbeat",
            Request::Complete(_) => "complete",
            Request::Block { .. } => "block",
            Request::Unblock { .. } => "unblock",
            Request::Schedule { .. } => "schedule",
            Request::Resume => "resume",
            Request::Recur(_) => "recur",
            Request::Reclaim { .. } => "reclaim",
            Request::DeferReclaim { .. } => "reclaim",
            Request::EndRun { .. } => "end run",
            Request::ExtendClaim { .. } => "extend claim",
            Request::SetWorker { .. } => "set worker",
            Request::Verified(_) => "record a verification",
            Request::RequestReview { .. } => "request review",
            Request::RequestChanges { .. } => "request changes",
            Request::Approve { .. } => "approve",
            Request::ReopenReview { .. } => "reopen review",
            Request::Archive => "archive",
            Request::Edit { .. } => "edit",
            Request::Assign { .. } => "assign",
            Request::Promote | Request::PromoteByHand(_) => "promote",
            Request::Reopen(_) => "reopen",
            Request::Backfill(_) => "edit the result of",
            Request::Hold { .. } => "hold",
            Request::DecomposeFailed { .. } => "record decomposition failure",
            Request::ClearDecomposeFailures => "clear decomposition failures",
            Request::SkipNonspawnable { .. } => "skip",
        }
    }
}

impl Request {
    /// A claim of a ready task's work with no checks: what a person or a worker's own
    /// `kanban claim` asks for.
    pub fn claim(ttl: i64, host: Option<String>) -> Request {
        Request::Claim(Claiming {
            ttl,
            host,
            kind: RunKind::Work,
            checks: Checks::default(),
            lane: None,
            assign: None,
        })
    }
}

/// Decides one request about one task.
pub fn decide(
    facts: &TaskFacts,
    request: &Request,
    fresh: &Fresh,
    now: Timestamp,
) -> Result<Change, Refusal> {
    request.check_sizes()?;
    let mut next = Next::new(facts, now);
    match request {
        Request::Claim(claiming) => next.claim(fresh, claiming)?,
        Request::Heartbeat { run_id, ttl, note } => next.heartbeat(*run_id, *ttl, note)?,
        Request::Complete(c) => next.complete(c, fresh.run_id)?,
        Request::Block {
            kind,
            reason,
            expected_run_id,
        } => next.block(*kind, reason, *expected_run_id)?,
        Request::Unblock { reason } => next.unblock(reason)?,
        Request::Schedule {
            reason,
            expected_run_id,
            until,
            every,
        } => next.schedule(reason, *expected_run_id, *until, every)?,
        Request::Resume => next.resume()?,
        Request::Recur(recurring) => next.recur(recurring)?,
        Request::Reclaim {
            run_id,
            claim_lock,
            reason,
        } => next.reclaim(*run_id, claim_lock, reason)?,
        Request::DeferReclaim {
            run_id,
            claim_lock,
            reason,
        } => next.defer_reclaim(*run_id, claim_lock, reason)?,
        Request::EndRun(end) => next.end_run(end)?,
        Request::ExtendClaim {
            run_id,
            claim_lock,
            ttl,
        } => next.extend_claim(*run_id, claim_lock, *ttl)?,
        Request::SetWorker {
            run_id,
            claim_lock,
            pid,
            host,
        } => next.set_worker(*run_id, claim_lock, *pid, host)?,
        Request::Verified(_)
        | Request::RequestReview { .. }
        | Request::RequestChanges { .. }
        | Request::Approve { .. }
        | Request::ReopenReview { .. } => next.check(request)?,
        Request::Archive => next.archive()?,
        Request::Edit {
            title,
            body,
            priority,
        } => next.edit(title, body, *priority)?,
        Request::Assign { assignee } => next.assign(assignee)?,
        Request::Promote => next.promote()?,
        Request::PromoteByHand(hand) => next.promote_by_hand(hand)?,
        Request::Reopen(hand) => next.reopen(hand)?,
        Request::Hold { parent } => next.hold(parent)?,
        Request::Backfill(filled) => next.backfill(filled)?,
        Request::DecomposeFailed {
            error,
            base_seconds,
            limit,
            jitter,
        } => next.decompose_failed(error, *base_seconds, *limit, *jitter)?,
        Request::ClearDecomposeFailures => next.clear_decompose_failures()?,
        Request::SkipNonspawnable { profile } => next.skip_nonspawnable(profile)?,
    }
    Ok(next.into_change())
}

/// Seconds to wait after the `failures`-th failed automatic decomposition:
/// `base * 2^(failures-1)`, capped at an hour, then scaled by `1 + jitter`.
pub fn retry_delay(base_seconds: i64, failures: i64, jitter: f64) -> i64 {
    capped_delay(base_seconds, failures, DECOMPOSE_RETRY_CAP_SECONDS, jitter)
}

/// The `n`-th wait of a doubling backoff: `base * 2^(n-1)`, at most `cap`, then scaled
/// by `1 + jitter` (jitter in [-0.1, 0.1]); at least one second.
pub fn capped_delay(base_seconds: i64, n: i64, cap: i64, jitter: f64) -> i64 {
    let exponent = (n - 1).clamp(0, 30) as u32;
    let raw = base_seconds.max(1).saturating_mul(1i64 << exponent);
    let capped = raw.min(cap.max(1)) as f64;
    let jittered = capped * (1.0 + jitter.clamp(-0.1, 0.1));
    (jittered.round() as i64).max(1)
}

/// The facts of a fresh task in `status`, with no run, created 100 s before `now`: what
/// the core's tests decide on.
#[cfg(test)]
pub(crate) fn facts_of(status: crate::types::Status, now: Timestamp) -> TaskFacts {
    TaskFacts {
        task: crate::graph::blank_task(
            crate::types::TaskId::from_random([0, 0, 0, 2]),
            "t".into(),
            status,
            now - 100,
        ),
        newest_run: None,
        run_count: 0,
        open_parents: 0,
        decomposed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::blank_task;
    use crate::types::{Lease, Status, TaskId};
    use serde_json::json;

    const T: Timestamp = 1_750_000_000;

    #[test]
    fn claim_takes_a_fresh_lease() {
        // A ready row is built by hand, as one the core did not write itself would be,
        // with an earlier run's worker fields left in its columns: they make no lease.
        let mut task = blank_task(
            TaskId::from_random([0, 0, 0, 1]),
            "leases".into(),
            Status::Ready,
            T - 100,
        );
        task.lease = crate::types::LeaseColumns {
            claim_expires: Some(T - 5),
            worker_pid: Some(4242),
            last_heartbeat_at: Some(T - 10),
            ..Default::default()
        }
        .into_lease()
        .unwrap();
        task.started_at = Some(T - 100);
        let facts = TaskFacts {
            task,
            newest_run: None,
            run_count: 1,
            open_parents: 0,
            decomposed: false,
        };
        let fresh = Fresh {
            run_id: 7,
            claim_lock: "lock-7".into(),
        };
        let change = decide(&facts, &Request::claim(50, None), &fresh, T).unwrap();
        let t = &change.task;
        assert_eq!(t.status, Status::Running);
        assert_eq!(
            t.lease,
            Some(Lease {
                run_id: 7,
                claim_lock: "lock-7".into(),
                expires: T + 50,
                worker_pid: None,
                worker_host: None,
                last_heartbeat_at: None,
                lane: None,
            })
        );
        assert_eq!(t.started_at, Some(T));
        let [run] = change.runs.as_slice() else {
            panic!("one run opened: {:?}", change.runs);
        };
        assert_eq!((run.id, run.worker_pid, run.last_heartbeat_at), (7, None, None));
        assert_eq!(
            (run.claim_expires, run.started_at, run.ended_at),
            (Some(T + 50), T, None)
        );
    }

    #[test]
    fn retry_delay_doubles_and_caps() {
        assert_eq!(retry_delay(30, 1, 0.0), 30);
        assert_eq!(retry_delay(30, 2, 0.0), 60);
        assert_eq!(retry_delay(30, 3, 0.0), 120);
        assert_eq!(retry_delay(30, 20, 0.0), 3600);
        assert_eq!(retry_delay(30, 1, 0.1), 33);
        assert_eq!(retry_delay(30, 1, 5.0), 33, "jitter is clamped to 10%");
    }

    #[test]
    fn an_unrunnable_task_is_noted_only_while_ready_and_left_as_it_is() {
        let skip = Request::SkipNonspawnable {
            profile: "writer".into(),
        };
        let change = decide(&facts_of(Status::Ready, T), &skip, &Fresh::default(), T).unwrap();
        assert_eq!(change.task.status, Status::Ready);
        let [event] = change.events.as_slice() else {
            panic!("{:?}", change.events)
        };
        assert_eq!(
            (event.kind, &event.payload["profile"]),
            (EventKind::SkippedNonspawnable, &json!("writer"))
        );
        let running = decide(&facts_of(Status::Running, T), &skip, &Fresh::default(), T);
        assert!(matches!(running, Err(Refusal::WrongStatus { .. })), "{running:?}");
    }

    #[test]
    fn clearing_decomposition_failures_needs_one_of_its_four_marks() {
        let clear = Request::ClearDecomposeFailures;
        let nothing = decide(&facts_of(Status::Triage, T), &clear, &Fresh::default(), T);
        assert!(matches!(nothing, Err(Refusal::Unchanged(_))), "{nothing:?}");
        let marks: [fn(&mut Task); 4] = [
            |t| t.decompose_failures = 1,
            |t| t.decompose_parked = true,
            |t| t.decompose_next_attempt_at = Some(T),
            |t| t.decompose_last_error = Some("no reply".into()),
        ];
        for mark in marks {
            let mut facts = facts_of(Status::Triage, T);
            mark(&mut facts.task);
            let t = decide(&facts, &clear, &Fresh::default(), T).unwrap().task;
            assert_eq!(
                (
                    t.decompose_failures,
                    t.decompose_parked,
                    t.decompose_next_attempt_at,
                    t.decompose_last_error
                ),
                (0, false, None, None)
            );
        }
    }
}
