//! The checks' operations in the property test (docs/board.md#checks): work claimed with
//! checks, verifications and reviews claimed, verdicts (current or stale), requests for
//! review, and reopened reviews.

use serde_json::json;

use super::ops::{Guard, Op, Pick};
use super::step::{accepted, in_status, is_running, ok, Step, Stop};
use crate::store::{Offer, Verdict};
use crate::transition::Request;
use crate::types::{Checks, RunKind, Status};
use proptest::prelude::*;

/// The reviewer the property test's checks name: no task is assigned to it.
const REVIEWER: &str = "critic";

/// The checks' operations, each on a picked task.
pub(super) fn check_op() -> impl Strategy<Value = Op> {
    let verdict = prop_oneof![Just(CheckVerdict::Approve), Just(CheckVerdict::Changes)];
    let guard = prop_oneof![2 => Just(Guard::None), 4 => Just(Guard::Current), 1 => Just(Guard::Stale)];
    prop_oneof![
        4 => (pick(), proptest::bool::weighted(0.8), any::<bool>())
            .prop_map(|(p, verify, review)| Op::ClaimChecked(p, verify, review)),
        2 => pick().prop_map(Op::ClaimCheck),
        6 => (pick(), any::<bool>(), proptest::bool::weighted(0.15)).prop_map(|(p, passed, stale)| Op::Verdict(p, passed, stale)),
        3 => (pick(), verdict, guard.clone()).prop_map(|(p, v, g)| Op::ReviewVerdict(p, v, g)),
        1 => (pick(), guard).prop_map(|(p, g)| Op::RequestReview(p, g)),
        1 => pick().prop_map(Op::ReopenReview),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    (proptest::bool::weighted(0.85), 0usize..64).prop_map(|(fitting, index)| Pick { fitting, index })
}

/// A review's verdict.
#[derive(Clone, Copy, Debug)]
pub enum CheckVerdict {
    Approve,
    Changes,
}

impl Step<'_> {
    pub(super) fn claim_checked(&self, p: Pick, verify: bool, review: bool) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Ready]))?;
        let offer = Offer {
            task: id.clone(),
            assign: Some("auto".to_owned()),
            kind: RunKind::Work,
            checks: Checks {
                verify,
                review,
                reviewer: review.then(|| REVIEWER.to_owned()),
                evidence: false,
            },
        };
        accepted(self.s.claim_offer(&offer, 100, None, self.now), ok)
    }

    pub(super) fn claim_check(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Verifying, Status::Review]))?;
        let kind = match self.task(&id).status {
            Status::Review => RunKind::Review,
            _ => RunKind::Verify,
        };
        let offer = Offer {
            task: id.clone(),
            assign: None,
            kind,
            checks: Checks::default(),
        };
        accepted(self.s.claim_offer(&offer, 100, None, self.now), ok)
    }

    /// The kind of a running task's open run.
    fn running_kind(&self, t: &crate::types::Task) -> Option<RunKind> {
        let run = t.current_run_id()?;
        self.board.runs.iter().find(|r| r.id == run).map(|r| r.kind)
    }

    /// A verify run's verdict: on a task being verified, or (as a gateway does in one
    /// tick and the next) on a task waiting in `verifying`, claimed first.
    pub(super) fn verdict(&self, p: Pick, passed: bool, stale: bool) -> Result<bool, Stop> {
        let id = self.target(p, |t| {
            t.status == Status::Verifying || (is_running(t) && self.running_kind(t) == Some(RunKind::Verify))
        })?;
        let run_id = match self.task(&id).status {
            Status::Verifying => {
                let offer = Offer {
                    task: id.clone(),
                    assign: None,
                    kind: RunKind::Verify,
                    checks: Checks::default(),
                };
                // A step that changes the board must be accepted: a claim's verdict is
                // never stale.
                match self.s.claim_offer(&offer, 100, None, self.now) {
                    Ok(claim) => claim.run_id,
                    Err(e) => return accepted(Err::<(), _>(e), ok),
                }
            }
            // A stale verdict names a run that is not current.
            _ => self.claim(&id, false).0 + if stale { 7 } else { 0 },
        };
        let request = Request::Verified(Verdict {
            run_id,
            passed,
            evidence: json!([{ "argv": ["true"], "exit_code": if passed { 0 } else { 1 } }]),
            failure: (!passed).then(|| "exited 1".to_owned()),
            failure_limit: 2,
        });
        accepted(self.s.finalise(&id, &request, self.now), |won| won)
    }

    pub(super) fn review_verdict(&self, p: Pick, verdict: CheckVerdict, g: Guard) -> Result<bool, Stop> {
        let reviewing = |t: &crate::types::Task| match t.status {
            Status::Running => self.running_kind(t) == Some(RunKind::Review),
            status => status == Status::Review,
        };
        let id = self.target(p, reviewing)?;
        let expected_run_id = self.run_guard(&id, g);
        let request = match verdict {
            CheckVerdict::Approve => Request::Approve {
                expected_run_id,
                summary: Some("fine".into()),
            },
            CheckVerdict::Changes => Request::RequestChanges {
                expected_run_id,
                author: None,
                reason: "again".into(),
                round_limit: 2,
            },
        };
        accepted(self.s.finalise(&id, &request, self.now), |won| won)
    }

    pub(super) fn request_review(&self, p: Pick, g: Guard) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Running, Status::Ready, Status::Blocked]))?;
        let request = Request::RequestReview {
            expected_run_id: self.run_guard(&id, g),
            reviewer: Some(REVIEWER.to_owned()),
            summary: None,
            result: Some("the work".into()),
        };
        accepted(self.s.finalise(&id, &request, self.now), |won| won)
    }

    pub(super) fn reopen_review(&self, p: Pick) -> Result<bool, Stop> {
        let id = self.target(p, in_status(&[Status::Ready, Status::Blocked]))?;
        let request = Request::ReopenReview { reason: None };
        accepted(self.s.finalise(&id, &request, self.now), ok)
    }
}
