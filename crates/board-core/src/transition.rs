//! Every single-task transition of the board as a pure function.
//!
//! A store reads the [`TaskFacts`] of one task inside its write transaction, calls
//! [`decide`] with a [`Request`], `now` and any new ids, and applies the returned
//! [`Change`] atomically, or changes nothing when it gets a [`Refusal`].

use serde_json::{json, Value};

use crate::refusal::Refusal;
use crate::types::{BlockKind, Lease, Outcome, Run, RunId, Status, Task, Timestamp, RUN_ENDED, RUN_OPEN};

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
    pub kind: &'static str,
    pub run_id: Option<RunId>,
    pub payload: Value,
}

impl NewEvent {
    pub fn new(kind: &'static str, run_id: Option<RunId>, payload: Value) -> NewEvent {
        NewEvent {
            kind,
            run_id,
            payload,
        }
    }
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
}

/// A request about one existing task.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Open a run on a ready task, under the fresh run id and claim lock.
    Claim {
        ttl: i64,
    },
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
    /// Record the pid of the worker spawned for a run.
    SetWorker {
        run_id: RunId,
        claim_lock: String,
        pid: i64,
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
    /// Whether deciding this request may need a fresh run id and claim lock.
    pub fn opens_run(&self) -> bool {
        matches!(self, Request::Claim { .. } | Request::Complete(_))
    }

    /// The verb, for messages and logs.
    pub fn verb(&self) -> &'static str {
        match self {
            Request::Claim { .. } => "claim",
            Request::Heartbeat { .. } => "heartbeat",
            Request::Complete(_) => "complete",
            Request::Block { .. } => "block",
            Request::Unblock { .. } => "unblock",
            Request::Reclaim { .. } => "reclaim",
            Request::DeferReclaim { .. } => "reclaim",
            Request::EndRun { .. } => "end run",
            Request::ExtendClaim { .. } => "extend claim",
            Request::SetWorker { .. } => "set worker",
            Request::Archive => "archive",
            Request::Edit { .. } => "edit",
            Request::Assign { .. } => "assign",
            Request::Promote => "promote",
            Request::DecomposeFailed { .. } => "record decomposition failure",
            Request::ClearDecomposeFailures => "clear decomposition failures",
            Request::SkipNonspawnable { .. } => "skip",
        }
    }
}

/// Decides one request about one task.
pub fn decide(
    facts: &TaskFacts,
    request: &Request,
    fresh: &Fresh,
    now: Timestamp,
) -> Result<Change, Refusal> {
    let mut next = Next::new(facts, now);
    match request {
        Request::Claim { ttl } => next.claim(fresh.run_id, &fresh.claim_lock, *ttl)?,
        Request::Heartbeat { run_id, ttl, note } => next.heartbeat(*run_id, *ttl, note)?,
        Request::Complete(c) => next.complete(c, fresh.run_id)?,
        Request::Block {
            kind,
            reason,
            expected_run_id,
        } => next.block(*kind, reason, *expected_run_id)?,
        Request::Unblock { reason } => next.unblock(reason)?,
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
        } => next.set_worker(*run_id, claim_lock, *pid)?,
        Request::Archive => next.archive()?,
        Request::Edit {
            title,
            body,
            priority,
        } => next.edit(title, body, *priority)?,
        Request::Assign { assignee } => next.assign(assignee)?,
        Request::Promote => next.promote()?,
        Request::DecomposeFailed {
            error,
            base_seconds,
            limit,
            jitter,
        } => next.decompose_failed(error, *base_seconds, *limit, *jitter)?,
        Request::ClearDecomposeFailures => next.clear_decompose_failures()?,
        Request::SkipNonspawnable { profile } => {
            next.require(&[Status::Ready], "skip", "ready")?;
            next.event("skipped_nonspawnable", None, json!({ "profile": profile }));
        }
    }
    Ok(next.into_change())
}

/// The change being built for one task.
struct Next<'a> {
    facts: &'a TaskFacts,
    now: Timestamp,
    task: Task,
    runs: Vec<Run>,
    events: Vec<NewEvent>,
    wake_children: bool,
}

impl<'a> Next<'a> {
    fn new(facts: &'a TaskFacts, now: Timestamp) -> Next<'a> {
        Next {
            facts,
            now,
            task: facts.task.clone(),
            runs: Vec::new(),
            events: Vec::new(),
            wake_children: false,
        }
    }

    fn into_change(mut self) -> Change {
        self.task.updated_at = self.now;
        Change {
            task: self.task,
            runs: self.runs,
            events: self.events,
            wake_children: self.wake_children,
        }
    }

    fn event(&mut self, kind: &'static str, run_id: Option<RunId>, payload: Value) {
        self.events.push(NewEvent::new(kind, run_id, payload));
    }

    fn require(&self, allowed: &[Status], op: &'static str, wording: &'static str) -> Result<(), Refusal> {
        if allowed.contains(&self.task.status) {
            Ok(())
        } else {
            Err(Refusal::WrongStatus {
                id: self.task.id.clone(),
                status: self.task.status,
                op,
                allowed: wording,
            })
        }
    }

    /// Refuses unless `run_id` is the task's current run.
    fn require_current(&self, run_id: RunId) -> Result<(), Refusal> {
        if self.task.current_run_id() == Some(run_id) {
            Ok(())
        } else {
            Err(Refusal::StaleRun {
                id: self.task.id.clone(),
                expected: run_id,
                current: self.task.current_run_id(),
            })
        }
    }

    /// Refuses unless the task still runs `run_id` under `claim_lock`: the claim a
    /// supervisor observed before acting is the claim it finalises, or nothing happens.
    fn require_claim(&self, run_id: RunId, claim_lock: &str) -> Result<&'a Run, Refusal> {
        let unchanged = self.task.status == Status::Running
            && self
                .task
                .lease
                .as_ref()
                .is_some_and(|l| l.run_id == run_id && l.claim_lock == claim_lock);
        match self.facts.current_run() {
            Some(run) if unchanged => Ok(run),
            _ => Err(Refusal::ClaimChanged {
                id: self.task.id.clone(),
                run_id,
            }),
        }
    }

    /// Where a task goes when it becomes workable again.
    fn workable_status(&self) -> Status {
        if self.facts.open_parents > 0 {
            Status::Todo
        } else {
            Status::Ready
        }
    }

    fn release_claim(&mut self) {
        self.task.lease = None;
    }

    /// Closes the current run, if any, with `outcome`; returns its id.
    fn close_current_run(
        &mut self,
        outcome: Outcome,
        summary: Option<&String>,
        error: Option<&String>,
        metadata: Option<&Value>,
    ) -> Option<RunId> {
        let mut run = self.facts.current_run()?.clone();
        run.status = RUN_ENDED.to_owned();
        run.outcome = Some(outcome);
        run.ended_at = Some(self.now);
        run.claim_expires = None;
        if summary.is_some() {
            run.summary = summary.cloned();
        }
        if error.is_some() {
            run.error = error.cloned();
        }
        if metadata.is_some() {
            run.metadata = metadata.cloned();
        }
        let id = run.id;
        self.runs.push(run);
        self.release_claim();
        Some(id)
    }

    fn claim(&mut self, run_id: RunId, claim_lock: &str, ttl: i64) -> Result<(), Refusal> {
        self.require(&[Status::Ready], "claim", "ready")?;
        if self.task.lease.is_some() {
            return Err(Refusal::AlreadyClaimed {
                id: self.task.id.clone(),
            });
        }
        if self.facts.open_parents > 0 {
            return Err(Refusal::OpenParents {
                id: self.task.id.clone(),
                open: self.facts.open_parents,
            });
        }
        if ttl <= 0 {
            return Err(Refusal::Invalid(format!("claim ttl must be positive, got {ttl}")));
        }
        let expires = self.now.saturating_add(ttl);
        self.runs.push(Run {
            id: run_id,
            task_id: self.task.id.clone(),
            profile: self.task.assignee.clone(),
            status: RUN_OPEN.to_owned(),
            outcome: None,
            claim_lock: Some(claim_lock.to_owned()),
            claim_expires: Some(expires),
            worker_pid: None,
            last_heartbeat_at: None,
            started_at: self.now,
            ended_at: None,
            summary: None,
            error: None,
            metadata: None,
        });
        self.task.status = Status::Running;
        self.task.lease = Some(Lease {
            run_id,
            claim_lock: claim_lock.to_owned(),
            expires,
            worker_pid: None,
            last_heartbeat_at: None,
        });
        self.task.started_at = Some(self.now);
        self.event("claimed", Some(run_id), json!({ "claim_expires": expires }));
        Ok(())
    }

    fn heartbeat(&mut self, run_id: RunId, ttl: i64, note: &Option<String>) -> Result<(), Refusal> {
        self.require_current(run_id)?;
        self.require(&[Status::Running], "heartbeat", "running")?;
        let expires = self.now.saturating_add(ttl.max(1));
        self.extend_lease(expires);
        if let Some(lease) = self.task.lease.as_mut() {
            lease.last_heartbeat_at = Some(self.now);
        }
        if let Some(run) = self.runs.last_mut() {
            run.last_heartbeat_at = Some(self.now);
        }
        self.event(
            "heartbeat",
            Some(run_id),
            json!({ "note": note, "claim_expires": expires }),
        );
        Ok(())
    }

    /// Sets the lease of the task and of its current run to `expires`.
    fn extend_lease(&mut self, expires: Timestamp) {
        if let Some(lease) = self.task.lease.as_mut() {
            lease.expires = expires;
        }
        if let Some(run) = self.facts.current_run() {
            let mut run = run.clone();
            run.claim_expires = Some(expires);
            self.runs.push(run);
        }
    }

    fn complete(&mut self, c: &Completion, zero_run_id: RunId) -> Result<(), Refusal> {
        if let Some(replayed) = c.replay_ended_run_id {
            return self.complete_replay(replayed, c);
        }
        if let Some(expected) = c.expected_run_id {
            self.require_current(expected)?;
        }
        if c.refuse_running && self.task.status == Status::Running {
            return Err(Refusal::Running {
                id: self.task.id.clone(),
                op: "complete",
            });
        }
        self.require(
            &[Status::Running, Status::Ready, Status::Blocked],
            "complete",
            "running, ready or blocked",
        )?;
        let mut run_id =
            self.close_current_run(Outcome::Completed, c.summary.as_ref(), None, c.metadata.as_ref());
        if run_id.is_none() && c.summary.is_some() {
            self.runs.push(Run {
                id: zero_run_id,
                task_id: self.task.id.clone(),
                profile: self.task.assignee.clone(),
                status: RUN_ENDED.to_owned(),
                outcome: Some(Outcome::Completed),
                claim_lock: None,
                claim_expires: None,
                worker_pid: None,
                last_heartbeat_at: None,
                started_at: self.now,
                ended_at: Some(self.now),
                summary: c.summary.clone(),
                error: None,
                metadata: c.metadata.clone(),
            });
            run_id = Some(zero_run_id);
        }
        self.finish_done(c, run_id, false);
        Ok(())
    }

    /// A journaled completion landing after its run already ended.
    fn complete_replay(&mut self, replayed: RunId, c: &Completion) -> Result<(), Refusal> {
        let newest = self.facts.newest_run.as_ref();
        let newest_id = newest.map(|r| r.id);
        if self.task.lease.is_some() || newest_id != Some(replayed) {
            return Err(Refusal::NotNewestRun {
                id: self.task.id.clone(),
                run_id: replayed,
                newest: newest_id,
            });
        }
        self.require(
            &[Status::Blocked, Status::Triage, Status::Ready],
            "a replayed completion",
            "blocked, triage or ready",
        )?;
        let mut run = newest.cloned().expect("newest run checked above");
        run.status = RUN_ENDED.to_owned();
        run.outcome = Some(Outcome::Completed);
        run.ended_at = run.ended_at.or(Some(self.now));
        if c.summary.is_some() {
            run.summary = c.summary.clone();
        }
        if c.metadata.is_some() {
            run.metadata = c.metadata.clone();
        }
        self.runs.push(run);
        self.finish_done(c, Some(replayed), true);
        Ok(())
    }

    fn finish_done(&mut self, c: &Completion, run_id: Option<RunId>, replay: bool) {
        self.release_claim();
        self.task.status = Status::Done;
        self.task.completed_at = Some(self.now);
        if c.result.is_some() {
            self.task.result = c.result.clone();
        }
        self.task.consecutive_failures = 0;
        self.task.last_failure_error = None;
        self.task.block_kind = None;
        self.task.block_recurrences = 0;
        self.wake_children = true;
        let mut payload = json!({ "summary": c.summary });
        if replay {
            payload["replay"] = Value::Bool(true);
        }
        self.event("completed", run_id, payload);
    }

    fn block(
        &mut self,
        kind: Option<BlockKind>,
        reason: &Option<String>,
        expected_run_id: Option<RunId>,
    ) -> Result<(), Refusal> {
        if let Some(expected) = expected_run_id {
            self.require_current(expected)?;
        }
        self.require(&[Status::Running, Status::Ready], "block", "running or ready")?;
        let run_id = self.close_current_run(Outcome::Blocked, None, reason.as_ref(), None);
        let kind_word = kind.map(BlockKind::as_str);
        if kind == Some(BlockKind::Dependency) && self.facts.open_parents > 0 {
            self.task.status = Status::Todo;
            self.event(
                "dependency_wait",
                run_id,
                json!({ "reason": reason, "open_parents": self.facts.open_parents }),
            );
            return Ok(());
        }
        let recurrences = if self.task.block_kind == kind {
            self.task.block_recurrences + 1
        } else {
            1
        };
        self.task.block_kind = kind;
        self.task.block_recurrences = recurrences;
        let payload = json!({ "kind": kind_word, "reason": reason, "recurrences": recurrences });
        if recurrences >= BLOCK_RECURRENCE_LIMIT {
            self.task.status = Status::Triage;
            self.event("block_loop_detected", run_id, payload);
        } else {
            self.task.status = Status::Blocked;
            self.event("blocked", run_id, payload);
        }
        Ok(())
    }

    fn unblock(&mut self, reason: &Option<String>) -> Result<(), Refusal> {
        self.require(&[Status::Blocked], "unblock", "blocked")?;
        self.task.status = self.workable_status();
        self.event(
            "unblocked",
            None,
            json!({ "reason": reason, "to": self.task.status }),
        );
        Ok(())
    }

    fn reclaim(&mut self, run_id: RunId, claim_lock: &str, reason: &Option<String>) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        self.close_current_run(Outcome::Reclaimed, None, reason.as_ref(), None);
        self.task.status = self.workable_status();
        self.event("reclaimed", Some(run_id), json!({ "reason": reason }));
        Ok(())
    }

    fn defer_reclaim(
        &mut self,
        run_id: RunId,
        claim_lock: &str,
        reason: &Option<String>,
    ) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        let expires = self.now.saturating_add(RECLAIM_DEFER_SECONDS);
        self.extend_lease(expires);
        self.event(
            "reclaim_deferred",
            Some(run_id),
            json!({ "reason": reason, "claim_expires": expires }),
        );
        Ok(())
    }

    fn end_run(&mut self, end: &RunEnd) -> Result<(), Refusal> {
        let RunEnd {
            run_id,
            claim_lock,
            outcome,
            error,
            detail,
            failure_limit,
        } = end;
        let (run_id, outcome) = (*run_id, *outcome);
        if matches!(
            outcome,
            Outcome::Completed | Outcome::Blocked | Outcome::Reclaimed | Outcome::GaveUp
        ) {
            return Err(Refusal::Invalid(format!(
                "a supervisor cannot end a run as {outcome}"
            )));
        }
        self.require_claim(run_id, claim_lock)?;
        self.close_current_run(outcome, None, error.as_ref(), None);
        let mut payload = match detail {
            Value::Object(map) => Value::Object(map.clone()),
            _ => json!({}),
        };
        payload["error"] = json!(error);
        let mut gave_up = false;
        if outcome.counts_as_failure() {
            self.task.consecutive_failures += 1;
            self.task.last_failure_error = error.clone();
            gave_up = self.task.consecutive_failures >= (*failure_limit).max(1);
            payload["failures"] = json!(self.task.consecutive_failures);
        }
        self.event(outcome.as_str(), Some(run_id), payload);
        if gave_up {
            self.task.status = Status::Blocked;
            self.event(
                "gave_up",
                Some(run_id),
                json!({ "failures": self.task.consecutive_failures, "error": error }),
            );
        } else {
            self.task.status = self.workable_status();
        }
        Ok(())
    }

    fn extend_claim(&mut self, run_id: RunId, claim_lock: &str, ttl: i64) -> Result<(), Refusal> {
        self.require_claim(run_id, claim_lock)?;
        let expires = self.now.saturating_add(ttl.max(1));
        self.extend_lease(expires);
        self.event(
            "claim_extended",
            Some(run_id),
            json!({ "claim_expires": expires }),
        );
        Ok(())
    }

    fn set_worker(&mut self, run_id: RunId, claim_lock: &str, pid: i64) -> Result<(), Refusal> {
        let mut run = self.require_claim(run_id, claim_lock)?.clone();
        run.worker_pid = Some(pid);
        self.runs.push(run);
        if let Some(lease) = self.task.lease.as_mut() {
            lease.worker_pid = Some(pid);
        }
        self.event("spawned", Some(run_id), json!({ "pid": pid }));
        Ok(())
    }

    fn archive(&mut self) -> Result<(), Refusal> {
        if self.task.status == Status::Archived {
            return Err(Refusal::WrongStatus {
                id: self.task.id.clone(),
                status: Status::Archived,
                op: "archive",
                allowed: "any status but archived",
            });
        }
        let archived_from = self.task.status;
        let reason = Some("archived".to_owned());
        if let Some(run_id) = self.close_current_run(Outcome::Reclaimed, None, reason.as_ref(), None) {
            self.event("reclaimed", Some(run_id), json!({ "reason": reason }));
        }
        self.release_claim();
        self.task.status = Status::Archived;
        self.wake_children = true;
        self.event("archived", None, json!({ "from": archived_from }));
        Ok(())
    }

    fn edit(
        &mut self,
        title: &Option<String>,
        body: &Option<String>,
        priority: Option<i64>,
    ) -> Result<(), Refusal> {
        self.require(
            &[
                Status::Triage,
                Status::Todo,
                Status::Ready,
                Status::Running,
                Status::Blocked,
            ],
            "edit",
            "a task that is not done or archived",
        )?;
        if title.is_none() && body.is_none() && priority.is_none() {
            return Err(Refusal::Unchanged(self.task.id.clone()));
        }
        if let Some(title) = title {
            if title.trim().is_empty() {
                return Err(Refusal::BlankTitle);
            }
            self.task.title = title.clone();
        }
        if let Some(body) = body {
            self.task.body = body.clone();
        }
        if let Some(priority) = priority {
            self.task.priority = priority;
        }
        if title.is_some() || body.is_some() {
            self.task.revision += 1;
        }
        let fields: Vec<&str> = [
            title.as_ref().map(|_| "title"),
            body.as_ref().map(|_| "body"),
            priority.map(|_| "priority"),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.event(
            "edited",
            None,
            json!({ "fields": fields, "revision": self.task.revision }),
        );
        self.clear_decompose_state();
        Ok(())
    }

    fn assign(&mut self, assignee: &Option<String>) -> Result<(), Refusal> {
        if self.task.status == Status::Running {
            return Err(Refusal::Running {
                id: self.task.id.clone(),
                op: "assign",
            });
        }
        self.require(
            &[
                Status::Triage,
                Status::Todo,
                Status::Ready,
                Status::Blocked,
                Status::Done,
            ],
            "assign",
            "a task that is not running or archived",
        )?;
        let from = self.task.assignee.clone();
        self.task.assignee = assignee.clone();
        self.task.revision += 1;
        self.event("assigned", None, json!({ "from": from, "to": assignee }));
        Ok(())
    }

    fn promote(&mut self) -> Result<(), Refusal> {
        self.require(&[Status::Todo], "promote", "todo")?;
        if self.facts.open_parents > 0 {
            return Err(Refusal::OpenParents {
                id: self.task.id.clone(),
                open: self.facts.open_parents,
            });
        }
        self.task.status = Status::Ready;
        self.event("promoted", None, json!({}));
        Ok(())
    }

    fn decompose_failed(
        &mut self,
        error: &str,
        base_seconds: i64,
        limit: i64,
        jitter: f64,
    ) -> Result<(), Refusal> {
        self.require(&[Status::Triage], "recording a decomposition failure", "triage")?;
        let failures = self.task.decompose_failures + 1;
        let next_attempt_at = self.now + retry_delay(base_seconds, failures, jitter);
        let parked = failures >= limit.max(1);
        self.task.decompose_failures = failures;
        self.task.decompose_last_error = Some(error.to_owned());
        self.task.decompose_next_attempt_at = Some(next_attempt_at);
        self.task.decompose_parked = parked;
        self.event(
            "auto_decompose_failed",
            None,
            json!({
                "error": error,
                "failures": failures,
                "next_attempt_at": next_attempt_at,
                "parked": parked,
            }),
        );
        if parked {
            self.event(
                "auto_decompose_parked",
                None,
                json!({ "failures": failures, "error": error }),
            );
        }
        Ok(())
    }

    fn clear_decompose_failures(&mut self) -> Result<(), Refusal> {
        if !self.clear_decompose_state() {
            return Err(Refusal::Unchanged(self.task.id.clone()));
        }
        self.event("decompose_reset", None, json!({}));
        Ok(())
    }

    /// Clears the failure count and the park; returns whether there was anything to clear.
    fn clear_decompose_state(&mut self) -> bool {
        let t = &mut self.task;
        let had = t.decompose_failures != 0
            || t.decompose_parked
            || t.decompose_next_attempt_at.is_some()
            || t.decompose_last_error.is_some();
        t.decompose_failures = 0;
        t.decompose_parked = false;
        t.decompose_next_attempt_at = None;
        t.decompose_last_error = None;
        had
    }
}

/// Seconds to wait after the `failures`-th failed automatic decomposition:
/// `base * 2^(failures-1)`, capped at an hour, then scaled by `1 + jitter`.
pub fn retry_delay(base_seconds: i64, failures: i64, jitter: f64) -> i64 {
    let exponent = (failures - 1).clamp(0, 30) as u32;
    let raw = base_seconds.max(1).saturating_mul(1i64 << exponent);
    let capped = raw.min(DECOMPOSE_RETRY_CAP_SECONDS) as f64;
    let jittered = capped * (1.0 + jitter.clamp(-0.1, 0.1));
    (jittered.round() as i64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::blank_task;
    use crate::types::TaskId;

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
        let change = decide(&facts, &Request::Claim { ttl: 50 }, &fresh, T).unwrap();
        let t = &change.task;
        assert_eq!(t.status, Status::Running);
        assert_eq!(
            t.lease,
            Some(Lease {
                run_id: 7,
                claim_lock: "lock-7".into(),
                expires: T + 50,
                worker_pid: None,
                last_heartbeat_at: None,
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
}
