//! Work is checked before it counts: verification gates, the evidence contract and the
//! review lane, with the single-winner races of their verdicts.

use std::sync::Arc;

use serde_json::json;

use super::races::StartLine;
use super::{assert_board_ok, event_kinds, Backend, T0};
use crate::store::{Claim, Completion, Offer, Store, StoreError, Verdict};
use crate::transition::Request;
use crate::types::{Checks, Outcome, RunKind, Status, Task, TaskId};
use crate::{NewTask, Refusal};

const CODER: &str = "coder";
const REVIEWER: &str = "reviewer";

fn task_for(store: &dyn Store, title: &str, reviewer: Option<&str>) -> Task {
    let request = NewTask {
        assignee: Some(CODER.into()),
        reviewer: reviewer.map(str::to_owned),
        ..NewTask::titled(title)
    };
    store.create(&request, T0).expect("create")
}

/// A child of `parent`, waiting for it.
fn child_of(store: &dyn Store, parent: &TaskId) -> TaskId {
    let request = NewTask {
        parents: vec![parent.clone()],
        ..NewTask::titled("child")
    };
    store.create(&request, T0).expect("create child").id
}

fn claim(
    store: &dyn Store,
    id: &TaskId,
    kind: RunKind,
    checks: Checks,
    now: i64,
) -> Result<Claim, StoreError> {
    let offer = Offer {
        task: id.clone(),
        assign: None,
        kind,
        checks,
    };
    store.claim_offer(&offer, 60, Some("host-a"), now)
}

fn worker_completes(store: &dyn Store, id: &TaskId, run: i64, now: i64) -> bool {
    let c = Completion {
        expected_run_id: Some(run),
        result: Some("the work".into()),
        summary: Some("did it".into()),
        ..Completion::default()
    };
    store.complete(id, &c, now).expect("complete")
}

fn verdict(claim: &Claim, passed: bool, limit: i64) -> Request {
    Request::Verified(Verdict {
        run_id: claim.run_id,
        passed,
        evidence: json!([{ "argv": ["make", "test"], "exit_code": if passed { 0 } else { 1 } }]),
        failure: (!passed).then(|| "make test exited 1: 2 tests failed".to_owned()),
        failure_limit: limit,
    })
}

fn refusal(result: Result<impl std::fmt::Debug, StoreError>) -> Refusal {
    match result {
        Err(StoreError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn verify() -> Checks {
    Checks {
        verify: true,
        ..Checks::default()
    }
}

/// Reported work waits in `verifying`, never done, while its children wait; a failed
/// verification sends it back to `ready` with the failing output as a comment, counted;
/// a passing one makes it done, keeps the evidence on the run and releases the children.
pub fn verification_gates_reported_work(board: &dyn Backend) {
    let s = board.connect();
    let task = task_for(s.as_ref(), "gated", None);
    let child = child_of(s.as_ref(), &task.id);
    for round in 1..=3i64 {
        let now = T0 + round * 10;
        let work = claim(s.as_ref(), &task.id, RunKind::Work, verify(), now).unwrap();
        assert!(worker_completes(s.as_ref(), &task.id, work.run_id, now + 1));
        let t = s.get(&task.id).unwrap();
        assert_eq!(t.status, Status::Verifying, "reported work is not done yet");
        assert_eq!(s.checkable(10).unwrap().len(), 1);
        assert_eq!(
            s.get(&child).unwrap().status,
            Status::Todo,
            "children never start on unverified work"
        );
        let offered_as_work = refusal(claim(
            s.as_ref(),
            &task.id,
            RunKind::Work,
            Checks::default(),
            now + 2,
        ));
        assert!(
            matches!(offered_as_work, Refusal::WrongStatus { .. }),
            "{offered_as_work}"
        );
        let check = claim(s.as_ref(), &task.id, RunKind::Verify, Checks::default(), now + 2).unwrap();
        assert_eq!(s.get(&task.id).unwrap().status, Status::Running);
        let passed = round == 3;
        assert!(s
            .finalise(&task.id, &verdict(&check, passed, 3), now + 3)
            .unwrap());
        let t = s.get(&task.id).unwrap();
        let run = s.runs(&task.id).unwrap().pop().unwrap();
        assert_eq!(run.kind, RunKind::Verify);
        assert_eq!(run.evidence.as_ref().unwrap()[0]["argv"][0], "make");
        if passed {
            assert_eq!(t.status, Status::Done);
            assert_eq!((t.verify_failures, t.result.as_deref()), (0, Some("the work")));
            assert_eq!(run.outcome, Some(Outcome::Completed));
            assert_eq!(
                s.get(&child).unwrap().status,
                Status::Ready,
                "verified work releases"
            );
        } else {
            assert_eq!((t.status, t.verify_failures), (Status::Ready, round));
            assert_eq!(run.outcome, Some(Outcome::VerifyFailed));
            assert_eq!(t.result, None, "unverified work leaves no result");
            let comments = s.comments(&task.id).unwrap();
            let last = comments.last().expect("the failure is a comment");
            assert!(last.body.starts_with("VERIFICATION FAILED"), "{}", last.body);
            assert!(last.body.contains("2 tests failed"), "{}", last.body);
            assert_eq!(comments.len() as i64, round);
        }
        assert_board_ok(s.as_ref());
    }
    let kinds = event_kinds(s.as_ref(), &task.id);
    for kind in ["verifying", "verify_failed", "verified", "completed"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
}

/// Failed verifications up to the limit block the task with the reason; a stale
/// verdict changes nothing; a verifier that dies returns the work to `verifying`.
pub fn verification_failures_block_at_the_limit(board: &dyn Backend) {
    let s = board.connect();
    let task = task_for(s.as_ref(), "limited", None);
    for round in 1..=2i64 {
        let now = T0 + round * 10;
        let work = claim(s.as_ref(), &task.id, RunKind::Work, verify(), now).unwrap();
        assert!(worker_completes(s.as_ref(), &task.id, work.run_id, now + 1));
        let check = claim(s.as_ref(), &task.id, RunKind::Verify, Checks::default(), now + 2).unwrap();
        if round == 1 {
            // The verifier's gateway died: the run ends without a verdict, the work waits.
            let end = crate::store::RunEnd {
                run_id: check.run_id,
                claim_lock: check.claim_lock.clone(),
                outcome: Outcome::Stale,
                error: Some("lease expired".into()),
                detail: json!({}),
                failure_limit: 5,
            };
            assert!(s.end_run(&task.id, end, now + 3).unwrap());
            assert_eq!(s.get(&task.id).unwrap().status, Status::Verifying);
            let stale = verdict(&check, true, 2);
            assert!(
                !s.finalise(&task.id, &stale, now + 4).unwrap(),
                "a stale verdict loses"
            );
            let again = claim(s.as_ref(), &task.id, RunKind::Verify, Checks::default(), now + 5).unwrap();
            assert!(s.finalise(&task.id, &verdict(&again, false, 2), now + 6).unwrap());
        } else {
            assert!(s.finalise(&task.id, &verdict(&check, false, 2), now + 6).unwrap());
        }
    }
    let t = s.get(&task.id).unwrap();
    assert_eq!((t.status, t.verify_failures), (Status::Blocked, 2));
    let verdicts = s.verdicts().unwrap();
    assert_eq!(verdicts.get("verify_failed"), Some(&2), "{verdicts:?}");
    assert_eq!(verdicts.get("changes_requested"), None, "{verdicts:?}");
    assert!(t
        .last_failure_error
        .as_deref()
        .unwrap()
        .contains("verification failed 2 times"));
    assert_board_ok(s.as_ref());
}

/// A profile whose contract is `evidence` refuses a completion without evidence and
/// changes nothing; with evidence, the evidence is kept on the run.
pub fn the_evidence_contract_refuses_a_bare_completion(board: &dyn Backend) {
    let s = board.connect();
    let task = task_for(s.as_ref(), "evidenced", None);
    let checks = Checks {
        evidence: true,
        ..Checks::default()
    };
    let work = claim(s.as_ref(), &task.id, RunKind::Work, checks, T0 + 1).unwrap();
    let bare = Completion {
        expected_run_id: Some(work.run_id),
        ..Completion::default()
    };
    let refused = refusal(s.complete(&task.id, &bare, T0 + 2));
    assert!(matches!(refused, Refusal::EvidenceRequired { .. }), "{refused}");
    assert_eq!(s.get(&task.id).unwrap().current_run_id(), Some(work.run_id));
    let backed = Completion {
        evidence: Some(json!({ "tests": 42 })),
        ..bare
    };
    assert!(s.complete(&task.id, &backed, T0 + 3).unwrap());
    assert_eq!(s.get(&task.id).unwrap().status, Status::Done);
    let run = s.runs(&task.id).unwrap().pop().unwrap();
    assert_eq!(run.evidence, Some(json!({ "tests": 42 })));
}

/// Work goes to review, the reviewer's run sends it back once with a comment, the next
/// round is approved and the task is done, releasing its children.
pub fn the_review_lane_goes_round_and_closes(board: &dyn Backend) {
    let s = board.connect();
    let task = task_for(s.as_ref(), "reviewed", None);
    let child = child_of(s.as_ref(), &task.id);
    let checks = Checks {
        review: true,
        reviewer: Some(REVIEWER.into()),
        ..Checks::default()
    };
    for round in 1..=2i64 {
        let now = T0 + round * 10;
        let work = claim(s.as_ref(), &task.id, RunKind::Work, checks.clone(), now).unwrap();
        assert!(worker_completes(s.as_ref(), &task.id, work.run_id, now + 1));
        let t = s.get(&task.id).unwrap();
        assert_eq!(
            (t.status, t.reviewer.as_deref()),
            (Status::Review, Some(REVIEWER))
        );
        let waiting: Vec<TaskId> = s.checkable(10).unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(
            waiting.as_slice(),
            std::slice::from_ref(&task.id),
            "the dispatcher's read of work waiting for a check"
        );
        assert!(s.claimable(10).unwrap().iter().all(|t| t.id != task.id));
        assert_eq!(s.get(&child).unwrap().status, Status::Todo);
        let review = claim(s.as_ref(), &task.id, RunKind::Review, Checks::default(), now + 2).unwrap();
        let run = s.runs(&task.id).unwrap().pop().unwrap();
        assert_eq!(
            (run.kind, run.profile.as_deref()),
            (RunKind::Review, Some(REVIEWER))
        );
        let verdict = if round == 1 {
            Request::RequestChanges {
                expected_run_id: Some(review.run_id),
                author: None,
                reason: "the tests do not cover the error path".into(),
                round_limit: 3,
            }
        } else {
            Request::Approve {
                expected_run_id: Some(review.run_id),
                summary: Some("looks right".into()),
            }
        };
        assert!(s.finalise(&task.id, &verdict, now + 3).unwrap());
        let t = s.get(&task.id).unwrap();
        if round == 1 {
            assert_eq!((t.status, t.review_rounds), (Status::Ready, 1));
            let comment = s.comments(&task.id).unwrap().pop().unwrap();
            assert_eq!(
                comment.body,
                "CHANGES REQUESTED: the tests do not cover the error path"
            );
            assert_eq!(comment.author.as_deref(), Some(REVIEWER));
            let run = s.runs(&task.id).unwrap().pop().unwrap();
            assert_eq!(run.outcome, Some(Outcome::ChangesRequested));
        } else {
            assert_eq!((t.status, t.review_rounds), (Status::Done, 0));
            assert_eq!(s.get(&child).unwrap().status, Status::Ready);
        }
        assert_board_ok(s.as_ref());
    }
    let kinds = event_kinds(s.as_ref(), &task.id);
    for kind in ["review_requested", "changes_requested", "approved", "completed"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
}

/// Nobody passes their own work: a reviewer that is the task's profile is refused when
/// named and when claimed, and a worker cannot approve inside its own work run.
pub fn no_one_reviews_their_own_work(board: &dyn Backend) {
    let s = board.connect();
    let same = NewTask {
        assignee: Some(CODER.into()),
        reviewer: Some(CODER.into()),
        ..NewTask::titled("self")
    };
    assert!(matches!(refusal(s.create(&same, T0)), Refusal::SelfReview { .. }));
    let task = task_for(s.as_ref(), "own work", None);
    let named = Request::RequestReview {
        expected_run_id: None,
        reviewer: Some(CODER.into()),
        summary: None,
        result: None,
    };
    assert!(matches!(
        refusal(s.transition(&task.id, &named, T0 + 1)),
        Refusal::SelfReview { .. }
    ));
    let work = claim(s.as_ref(), &task.id, RunKind::Work, Checks::default(), T0 + 2).unwrap();
    let own = Request::Approve {
        expected_run_id: Some(work.run_id),
        summary: None,
    };
    assert!(matches!(
        refusal(s.transition(&task.id, &own, T0 + 3)),
        Refusal::SelfReview { .. }
    ));
    let changes = Request::RequestChanges {
        expected_run_id: Some(work.run_id),
        author: None,
        reason: "mine".into(),
        round_limit: 3,
    };
    assert!(matches!(
        refusal(s.transition(&task.id, &changes, T0 + 3)),
        Refusal::SelfReview { .. }
    ));
    assert_eq!(
        s.get(&task.id).unwrap().current_run_id(),
        Some(work.run_id),
        "nothing changed"
    );
    // The worker asks for review itself, naming nobody: a person reviews it.
    let asked = Request::RequestReview {
        expected_run_id: Some(work.run_id),
        reviewer: None,
        summary: Some("please look".into()),
        result: Some("the work".into()),
    };
    assert!(s.finalise(&task.id, &asked, T0 + 4).unwrap());
    assert_eq!(s.get(&task.id).unwrap().status, Status::Review);
    let nobody = refusal(claim(
        s.as_ref(),
        &task.id,
        RunKind::Review,
        Checks::default(),
        T0 + 5,
    ));
    assert!(matches!(nobody, Refusal::NoReviewer { .. }), "{nobody}");
    let approve = Request::Approve {
        expected_run_id: None,
        summary: None,
    };
    assert!(s.finalise(&task.id, &approve, T0 + 6).unwrap());
    let t = s.get(&task.id).unwrap();
    assert_eq!((t.status, t.result.as_deref()), (Status::Done, Some("the work")));
}

/// Changes requested up to the limit block the task as a review loop; a person reopens
/// the review, and the count starts again.
pub fn a_review_loop_blocks_and_a_person_reopens_it(board: &dyn Backend) {
    let s = board.connect();
    let task = task_for(s.as_ref(), "looping", Some(REVIEWER));
    for round in 1..=2i64 {
        let now = T0 + round * 10;
        let work = claim(s.as_ref(), &task.id, RunKind::Work, Checks::default(), now).unwrap();
        assert!(worker_completes(s.as_ref(), &task.id, work.run_id, now + 1));
        let review = claim(s.as_ref(), &task.id, RunKind::Review, Checks::default(), now + 2).unwrap();
        let changes = Request::RequestChanges {
            expected_run_id: Some(review.run_id),
            author: None,
            reason: format!("round {round}"),
            round_limit: 2,
        };
        assert!(s.finalise(&task.id, &changes, now + 3).unwrap());
    }
    let t = s.get(&task.id).unwrap();
    assert_eq!((t.status, t.review_rounds), (Status::Blocked, 2));
    assert_eq!(s.verdicts().unwrap().get("changes_requested"), Some(&2));
    assert!(event_kinds(s.as_ref(), &task.id)
        .iter()
        .any(|k| k == "review_loop_detected"));
    let reopen = Request::ReopenReview {
        reason: Some("one more look".into()),
    };
    assert!(s.finalise(&task.id, &reopen, T0 + 40).unwrap());
    let t = s.get(&task.id).unwrap();
    assert_eq!((t.status, t.review_rounds), (Status::Review, 0));
    // A reviewer that dies returns the task to review, not to its worker.
    let review = claim(s.as_ref(), &task.id, RunKind::Review, Checks::default(), T0 + 41).unwrap();
    let end = crate::store::RunEnd {
        run_id: review.run_id,
        claim_lock: review.claim_lock,
        outcome: Outcome::Crashed,
        error: None,
        detail: json!({}),
        failure_limit: 5,
    };
    assert!(s.end_run(&task.id, end, T0 + 42).unwrap());
    assert_eq!(s.get(&task.id).unwrap().status, Status::Review);
    assert_board_ok(s.as_ref());
}

/// A person's approve, a person's request-changes and a stale worker's completion race
/// on a task in review from three threads on three connections: exactly one verdict
/// lands, the stale worker never does, and the board stays consistent.
pub fn review_verdicts_race_to_one_winner(board: &dyn Backend, rounds: usize) {
    let s = board.connect();
    let (mut approved, mut sent_back) = (0, 0);
    for round in 0..rounds {
        let now = T0 + round as i64 * 10;
        let task = task_for(s.as_ref(), "contested", None);
        let work = claim(s.as_ref(), &task.id, RunKind::Work, Checks::default(), now).unwrap();
        let ask = Request::RequestReview {
            expected_run_id: Some(work.run_id),
            reviewer: None,
            summary: None,
            result: None,
        };
        assert!(s.finalise(&task.id, &ask, now + 1).unwrap());
        let start = Arc::new(StartLine::new(3));
        let racers: Vec<Request> = vec![
            Request::Approve {
                expected_run_id: None,
                summary: None,
            },
            Request::RequestChanges {
                expected_run_id: None,
                author: Some("ann".into()),
                reason: "not yet".into(),
                round_limit: 3,
            },
            Request::Complete(Completion {
                expected_run_id: Some(work.run_id),
                ..Completion::default()
            }),
        ];
        let handles: Vec<_> = racers
            .into_iter()
            .map(|request| {
                let (store, start, id) = (board.connect(), start.clone(), task.id.clone());
                std::thread::spawn(move || {
                    start.wait();
                    store.transition(&id, &request, now + 2).is_ok()
                })
            })
            .collect();
        let won: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(!won[2], "the stale worker's completion never lands");
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "one verdict: {won:?}");
        let t = s.get(&task.id).unwrap();
        if won[0] {
            approved += 1;
            assert_eq!(t.status, Status::Done);
        } else {
            sent_back += 1;
            assert_eq!((t.status, t.review_rounds), (Status::Ready, 1));
        }
    }
    assert_eq!(approved + sent_back, rounds);
    assert_board_ok(s.as_ref());
}

fn event_payload(store: &dyn Store, id: &TaskId, kind: &str) -> serde_json::Value {
    let filter = crate::EventFilter {
        task_id: Some(id.clone()),
        kinds: vec![kind.to_owned()],
        ..Default::default()
    };
    store.events(&filter).unwrap().pop().expect(kind).payload
}

/// Where reported work goes follows its checks and the task's reviewer: a reviewer named
/// without a required review leaves it done; the task's own reviewer reviews it once
/// verified; a worker's request for review waits for its verifiers first, then for a
/// person when nobody is named; a person sends a ready task to review, and cannot pass a
/// review a reviewer is running.
pub fn reported_work_goes_where_its_checks_say(board: &dyn Backend) {
    let s = board.connect();
    let s = s.as_ref();
    // A reviewer named, review not required: done.
    let optional = task_for(s, "optional review", None);
    let checks = Checks {
        reviewer: Some(REVIEWER.into()),
        ..Checks::default()
    };
    let work = claim(s, &optional.id, RunKind::Work, checks, T0 + 1).unwrap();
    assert!(worker_completes(s, &optional.id, work.run_id, T0 + 2));
    assert_eq!(s.get(&optional.id).unwrap().status, Status::Done);

    // The task's own reviewer reviews its verified work.
    let own = task_for(s, "own reviewer", Some(REVIEWER));
    let work = claim(s, &own.id, RunKind::Work, verify(), T0 + 3).unwrap();
    assert!(worker_completes(s, &own.id, work.run_id, T0 + 4));
    let check = claim(s, &own.id, RunKind::Verify, Checks::default(), T0 + 5).unwrap();
    assert!(s.finalise(&own.id, &verdict(&check, true, 3), T0 + 6).unwrap());
    assert_eq!(s.get(&own.id).unwrap().status, Status::Review);

    // A worker asks for review under verifiers, naming nobody.
    let asked = task_for(s, "asked", None);
    let work = claim(s, &asked.id, RunKind::Work, verify(), T0 + 7).unwrap();
    let ask = Request::RequestReview {
        expected_run_id: Some(work.run_id),
        reviewer: None,
        summary: Some("please look".into()),
        result: Some("the work".into()),
    };
    assert!(s.finalise(&asked.id, &ask, T0 + 8).unwrap());
    let t = s.get(&asked.id).unwrap();
    assert_eq!(
        (t.status, t.result.as_deref()),
        (Status::Verifying, Some("the work"))
    );
    assert_eq!(event_payload(s, &asked.id, "verifying")["summary"], "please look");
    let check = claim(s, &asked.id, RunKind::Verify, Checks::default(), T0 + 9).unwrap();
    assert!(s.finalise(&asked.id, &verdict(&check, true, 3), T0 + 10).unwrap());
    let t = s.get(&asked.id).unwrap();
    assert_eq!(
        (t.status, t.reviewer.as_deref()),
        (Status::Review, None),
        "a person reviews it"
    );

    // A person sends a ready task to review; a running review is the reviewer's.
    let by_hand = task_for(s, "by hand", Some(REVIEWER));
    let ask = Request::RequestReview {
        expected_run_id: None,
        reviewer: None,
        summary: None,
        result: None,
    };
    assert!(s.finalise(&by_hand.id, &ask, T0 + 11).unwrap());
    assert_eq!(s.get(&by_hand.id).unwrap().status, Status::Review);
    let review = claim(s, &by_hand.id, RunKind::Review, Checks::default(), T0 + 12).unwrap();
    let person = Request::Approve {
        expected_run_id: None,
        summary: None,
    };
    let refused = refusal(s.transition(&by_hand.id, &person, T0 + 13));
    assert!(matches!(refused, Refusal::Running { .. }), "{refused}");
    let reviewer = Request::Approve {
        expected_run_id: Some(review.run_id),
        summary: Some("looks right".into()),
    };
    assert!(s.finalise(&by_hand.id, &reviewer, T0 + 14).unwrap());
    assert_eq!(
        event_payload(s, &by_hand.id, "completed")["summary"],
        "looks right"
    );
    assert_board_ok(s);
}
