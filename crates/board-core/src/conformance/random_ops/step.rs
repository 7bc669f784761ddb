//! One step of a case: an operation applied to the store against the board as it was before it.

use super::ops::{EditKind, Guard, Op, Pick};
use crate::plan::{Mode, Plan, PlanBasis, PlanSettings, PlannedTask};
use crate::store::{
    Completion, ReclaimOutcome, RetryPolicy, RunEnd, Store, StoreError, Termination, Terminator,
};
use crate::transition::Request;
use crate::types::{BlockKind, BoardSnapshot, LlmCall, Outcome, Status, Task, TaskId};
use crate::{LlmOutcome, LlmPurpose};
use crate::{NewTask, NoWorkers};
use std::collections::BTreeMap;

/// A worker that outlives every attempt to stop it.
struct Survivor;

impl Terminator for Survivor {
    fn terminate(&self, _task: &Task) -> Termination {
        Termination::Survived
    }
}

/// Why a step was not applied.
#[derive(Debug)]
pub(super) enum Stop {
    /// The operation wanted a task in a state no task is in: it is skipped, as a model's
    /// transition is skipped when its precondition does not hold.
    NoTarget,
    Store(StoreError),
    /// The store answered, but not as the `Store` trait promises.
    Broken(String),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Stop {
        Stop::Store(e)
    }
}

/// `Ok(false)` for a refusal or a lost guard; storage failures stay errors.
pub(super) fn accepted<T>(result: Result<T, StoreError>, won: impl FnOnce(T) -> bool) -> Result<bool, Stop> {
    match result {
        Ok(value) => Ok(won(value)),
        Err(StoreError::Refused(_)) => Ok(false),
        Err(e) => Err(Stop::Store(e)),
    }
}

pub(super) fn ok<T>(_: T) -> bool {
    true
}

pub(super) fn is_running(t: &Task) -> bool {
    t.status == Status::Running
}

pub(super) fn in_status(statuses: &'static [Status]) -> impl Fn(&Task) -> bool {
    move |t| statuses.contains(&t.status)
}

/// One step: the store, the board as it was before the step, and every task id in
/// creation order.
pub(super) struct Step<'a> {
    pub(super) s: &'a dyn Store,
    pub(super) before: BTreeMap<&'a TaskId, &'a Task>,
    pub(super) board: &'a BoardSnapshot,
    pub(super) ids: &'a mut Vec<TaskId>,
    pub(super) now: i64,
}

impl Step<'_> {
    pub(super) fn task(&self, id: &TaskId) -> &Task {
        self.before[id]
    }

    /// The task `pick` names: among those `fits` accepts when the pick is fitting (none
    /// is `NoTarget`), else among all.
    pub(super) fn target(&self, pick: Pick, fits: impl Fn(&Task) -> bool) -> Result<TaskId, Stop> {
        let pool: Vec<&TaskId> = match pick.fitting {
            true => self.ids.iter().filter(|id| fits(self.task(id))).collect(),
            false => self.ids.iter().collect(),
        };
        match pool.len() {
            0 => Err(Stop::NoTarget),
            n => Ok(pool[pick.index % n].clone()),
        }
    }

    pub(super) fn run_guard(&self, id: &TaskId, guard: Guard) -> Option<i64> {
        let current = self.task(id).current_run_id();
        match guard {
            Guard::None => None,
            Guard::Current => current,
            Guard::Stale => Some(current.unwrap_or(0) + 7),
        }
    }

    /// A `todo` task whose parents are all done or archived.
    /// A sweep promotes exactly what `promotable` listed just before it.
    fn promote_ready(&self) -> Result<bool, Stop> {
        let listed = self.s.promotable().map_err(Stop::Store)?;
        let promoted = self.s.promote_ready(self.now).map_err(Stop::Store)?;
        if listed != promoted {
            return Err(Stop::Broken(format!(
                "promotable listed {listed:?}, promote_ready promoted {promoted:?}"
            )));
        }
        Ok(!promoted.is_empty())
    }

    fn promotable(&self, t: &Task) -> bool {
        let mut parents = self.board.links.iter().filter(|l| l.child_id == t.id);
        t.status == Status::Todo && parents.all(|l| self.task(&l.parent_id).status.releases_children())
    }

    /// The claim a supervisor observed: the current one, or a lock that is not it.
    pub(super) fn claim(&self, id: &TaskId, stale: bool) -> (i64, String) {
        let t = self.task(id);
        match (stale, &t.lease) {
            (false, Some(lease)) => (lease.run_id, lease.claim_lock.clone()),
            (_, lease) => (
                lease.as_ref().map_or(0, |l| l.run_id),
                "a lock never handed out".to_owned(),
            ),
        }
    }

    /// Applies `op`; `Ok(true)` when the board accepted it and changed, `Ok(false)` when
    /// it refused, a guard lost, or there was nothing to do.
    pub(super) fn apply(&mut self, op: &Op) -> Result<bool, Stop> {
        match op {
            Op::Create {
                parents,
                triage,
                priority,
                key,
            } => self.create(parents, *triage, *priority, *key),
            Op::Claim(p) => self.claim_task(*p),
            Op::ClaimChecked(p, verify, review) => self.claim_checked(*p, *verify, *review),
            Op::ClaimCheck(p) => self.claim_check(*p),
            Op::Verdict(p, passed, stale) => self.verdict(*p, *passed, *stale),
            Op::ReviewVerdict(p, verdict, g) => self.review_verdict(*p, *verdict, *g),
            Op::RequestReview(p, g) => self.request_review(*p, *g),
            Op::ReopenReview(p) => self.reopen_review(*p),
            Op::Heartbeat(p, stale) => self.heartbeat(*p, *stale),
            Op::Complete(p, g, summary) => self.complete(*p, *g, *summary),
            Op::Replay(p) => self.replay(*p),
            Op::Block(p, kind, g) => self.block(*p, *kind, *g),
            Op::Unblock(p) => self.unblock(*p),
            Op::Reclaim(p, g) => self.reclaim(*p, *g, &NoWorkers, ReclaimOutcome::Reclaimed),
            Op::DeferReclaim(p, g) => self.reclaim(*p, *g, &Survivor, ReclaimOutcome::Deferred),
            Op::EndRun {
                task,
                outcome,
                failure_limit,
                stale,
            } => self.end_run(*task, *outcome, *failure_limit, *stale),
            Op::ExtendClaim(p, stale) => {
                self.supervise(*p, *stale, |run_id, claim_lock| Request::ExtendClaim {
                    run_id,
                    claim_lock,
                    ttl: 100,
                })
            }
            Op::SetWorker(p, stale) => self.supervise(*p, *stale, |run_id, claim_lock| Request::SetWorker {
                run_id,
                claim_lock,
                pid: 4000 + run_id,
                host: "host-a".into(),
            }),
            Op::SkipNonspawnable(p) => self.on_task(
                *p,
                in_status(&[Status::Ready]),
                &Request::SkipNonspawnable {
                    profile: "reviewer".into(),
                },
            ),
            Op::Archive(p) => self.archive(*p),
            Op::Edit(p, kind) => self.edit(*p, *kind),
            Op::Assign(p, some) => self.assign(*p, *some),
            Op::Comment(p, blank, g) => self.comment(*p, *blank, *g),
            Op::Link(a, b) => self.link(*a, *b),
            Op::Unlink(p) => self.unlink(*p),
            Op::Promote(p) => self.on_task(*p, |t| self.promotable(t), &Request::Promote),
            Op::PromoteReady => self.promote_ready(),
            Op::Decompose {
                task,
                children,
                edge,
                mode,
                auto_promote,
                stale_basis,
            } => self.decompose(*task, *children, *edge, *mode, *auto_promote, *stale_basis),
            Op::DecomposeFailed(p, limit) => self.decompose_failed(*p, *limit),
            Op::ClearDecomposeFailures(p) => self.clear_decompose_failures(*p),
            Op::RecordLlmCall(p) => self.record_llm_call(*p),
        }
    }

    fn create(
        &mut self,
        parents: &[Pick],
        triage: bool,
        priority: i64,
        key: Option<u8>,
    ) -> Result<bool, Stop> {
        let parents = match self.ids.is_empty() {
            true => Vec::new(),
            false => parents
                .iter()
                .map(|p| self.target(*p, |_| true))
                .collect::<Result<_, _>>()?,
        };
        let request = NewTask {
            parents,
            triage,
            priority,
            idempotency_key: key.map(|k| format!("key {k}")),
            ..NewTask::titled(format!("task {}", self.ids.len()))
        };
        let task = match self.s.create(&request, self.now) {
            Ok(task) => task,
            Err(e) => return accepted(Err::<(), _>(e), ok),
        };
        // A known idempotency key returns the first task and creates nothing.
        if self.ids.contains(&task.id) {
            return Ok(false);
        }
        self.ids.push(task.id);
        Ok(true)
    }

    fn claim_task(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Ready]))?;
        accepted(self.s.claim(&id, 100, self.now), ok)
    }

    fn heartbeat(&self, p: Pick, stale: bool) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let (run_id, _) = self.claim(&id, stale);
        let run_id = if stale { run_id + 7 } else { run_id };
        accepted(
            self.s.heartbeat(&id, run_id, 100, Some("alive".into()), self.now),
            |won| won,
        )
    }

    fn complete(&self, p: Pick, g: Guard, summary: bool) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let completion = Completion {
            expected_run_id: self.run_guard(&id, g),
            result: Some("done".into()),
            summary: summary.then(|| "ok".into()),
            ..Completion::default()
        };
        accepted(self.s.complete(&id, &completion, self.now), |won| won)
    }

    fn replay(&self, p: Pick) -> Result<bool, Stop> {
        let newest = |id: &TaskId| {
            self.board
                .runs
                .iter()
                .filter(|r| &r.task_id == id)
                .map(|r| r.id)
                .max()
        };
        let id = self.target(p, |t| {
            let after_a_run = matches!(t.status, Status::Blocked | Status::Triage | Status::Ready);
            after_a_run && t.lease.is_none() && newest(&t.id).is_some()
        })?;
        let completion = Completion {
            replay_ended_run_id: Some(newest(&id).unwrap_or(1)),
            ..Completion::default()
        };
        accepted(self.s.complete(&id, &completion, self.now), |won| won)
    }

    fn block(&self, p: Pick, kind: Option<BlockKind>, g: Guard) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let expected = self.run_guard(&id, g);
        accepted(
            self.s.block(&id, kind, Some("stuck".into()), expected, self.now),
            |won| won,
        )
    }

    fn unblock(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Blocked]))?;
        accepted(self.s.unblock(&id, None, self.now), ok)
    }

    fn reclaim(
        &self,
        p: Pick,
        g: Guard,
        worker: &dyn Terminator,
        wins: ReclaimOutcome,
    ) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let result = self
            .s
            .reclaim(&id, self.run_guard(&id, g), None, worker, self.now);
        accepted(result, |outcome| outcome == wins)
    }

    fn end_run(&self, p: Pick, outcome: Outcome, failure_limit: i64, stale: bool) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let (run_id, lock) = self.claim(&id, stale);
        let detail = serde_json::json!({ "exit_code": 1 });
        let end = RunEnd {
            run_id,
            claim_lock: lock,
            outcome,
            error: Some("exit".into()),
            detail,
            failure_limit,
        };
        let result = self.s.end_run(&id, end, self.now);
        accepted(result, |won| won)
    }

    /// A dispatcher's request on a running task's claim, as it observed the claim.
    fn supervise(
        &self,
        p: Pick,
        stale: bool,
        request: impl FnOnce(i64, String) -> Request,
    ) -> Result<bool, Stop> {
        let id = self.target(p, is_running)?;
        let (run_id, lock) = self.claim(&id, stale);
        accepted(self.s.transition(&id, &request(run_id, lock), self.now), ok)
    }

    fn on_task(&self, p: Pick, fits: impl Fn(&Task) -> bool, request: &Request) -> Result<bool, Stop> {
        let id = self.target(p, fits)?;
        accepted(self.s.transition(&id, request, self.now), ok)
    }

    fn archive(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, |t| t.status != Status::Archived)?;
        accepted(self.s.archive(&id, self.now), ok)
    }

    fn edit(&self, p: Pick, kind: EditKind) -> Result<bool, Stop> {
        let id = self.target(p, |t| !t.status.is_terminal())?;
        let text = |s: &str| Some(format!("{s} {}", self.now));
        let (title, body, priority) = match kind {
            EditKind::Title => (text("title"), None, None),
            EditKind::Body => (None, text("body"), None),
            EditKind::Priority => (None, None, Some(self.now % 5)),
            EditKind::Nothing => (None, None, None),
            EditKind::BlankTitle => (Some("  ".into()), None, None),
        };
        accepted(self.s.edit(&id, title, body, priority, self.now), ok)
    }

    fn assign(&self, p: Pick, some: bool) -> Result<bool, Stop> {
        let id = self.target(p, |t| !matches!(t.status, Status::Running | Status::Archived))?;
        accepted(self.s.assign(&id, some.then(|| "coder".into()), self.now), ok)
    }

    fn comment(&self, p: Pick, blank: bool, g: Guard) -> Result<bool, Stop> {
        let id = self.target(p, |_| true)?;
        let body = if blank { " " } else { "a remark" };
        let guard = self.run_guard(&id, g);
        let landed = accepted(self.s.comment(&id, Some("ana"), body, guard, self.now), ok)?;
        if landed && matches!(g, Guard::Stale) {
            return Err(Stop::Broken(format!(
                "a comment guarded by run {guard:?}, not the current run of {id}, landed"
            )));
        }
        Ok(landed)
    }

    fn link(&self, parent: Pick, child: Pick) -> Result<bool, Stop> {
        let parent = self.target(parent, |_| true)?;
        let child = self.target(child, |t| !is_running(t))?;
        accepted(self.s.link(&parent, &child, self.now), ok)
    }

    /// Removes an existing link when the pick fits and there is one, else tries a pair.
    fn unlink(&self, p: Pick) -> Result<bool, Stop> {
        let links = &self.board.links;
        let (parent, child) = match (p.fitting, links.is_empty()) {
            (true, false) => {
                let l = &links[p.index % links.len()];
                (l.parent_id.clone(), l.child_id.clone())
            }
            _ => (
                self.target(p, |_| true)?,
                self.target(
                    Pick {
                        index: p.index / 2,
                        ..p
                    },
                    |_| true,
                )?,
            ),
        };
        accepted(self.s.unlink(&parent, &child, self.now), ok)
    }

    fn decompose(
        &mut self,
        p: Pick,
        children: usize,
        edge: bool,
        mode: Mode,
        auto_promote: bool,
        stale_basis: bool,
    ) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Triage]))?;
        let mut basis = PlanBasis::of(&self.s.facts(&id)?);
        if stale_basis {
            basis.revision -= 1;
        }
        let settings = PlanSettings {
            auto_promote_children: auto_promote,
            ..PlanSettings::default()
        };
        let plan = plan(children, edge);
        match self.s.commit_plan(&id, &basis, mode, &plan, &settings, self.now) {
            Ok(committed) => {
                self.ids.extend(committed.child_ids);
                Ok(true)
            }
            Err(e) => accepted(Err::<(), _>(e), ok),
        }
    }

    fn decompose_failed(&self, p: Pick, failure_limit: i64) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Triage]))?;
        let policy = RetryPolicy {
            base_seconds: 30,
            failure_limit,
        };
        accepted(
            self.s
                .record_decompose_failure(&id, "bad reply", policy, 0.0, self.now),
            ok,
        )
    }

    /// Accepted when the card had a failure or a park to clear (the store's call answers
    /// `Ok` either way).
    fn clear_decompose_failures(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, |t| t.status == Status::Triage && t.decompose_failures > 0)?;
        let cleared = accepted(self.s.clear_decompose_failures(&id, self.now), ok)?;
        Ok(cleared && self.s.get(&id)? != *self.task(&id))
    }

    /// Bills a model call; the bill is not part of a snapshot, so it is read back here.
    fn record_llm_call(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, |_| true)?;
        let billed = self.s.llm_calls(Some(&id))?.len();
        let call = LlmCall {
            task_id: Some(id.clone()),
            purpose: LlmPurpose::Decompose,
            model: "fake".into(),
            started_at: self.now,
            outcome: LlmOutcome::Ok,
            ..LlmCall::default()
        };
        let call_id = self.s.record_llm_call(&call)?;
        let calls = self.s.llm_calls(Some(&id))?;
        let recorded = calls.last() == Some(&call);
        match recorded && calls.len() == billed + 1 {
            true => Ok(true),
            false => Err(Stop::Broken(format!(
                "call {call_id} billed, then read back as {calls:?}"
            ))),
        }
    }
}

/// A decomposer's reply: an empty fan-out (refused), one tightened task, or a fan-out
/// whose children form a chain when `edge` is set.
fn plan(children: usize, edge: bool) -> Plan {
    match children {
        1 => Plan::Single {
            title: "tightened".into(),
            body: "b".into(),
            assignee: Some("coder".into()),
        },
        n => Plan::Fanout {
            rationale: None,
            tasks: (0..n)
                .map(|c| PlannedTask {
                    title: format!("child {c}"),
                    body: String::new(),
                    assignee: "default".into(),
                    parents: if edge && c > 0 { vec![c - 1] } else { vec![] },
                })
                .collect(),
        },
    }
}
