//! Scenarios of the reads: unknown ids, listings and the dispatcher's queues.

use super::{ready_task, Backend, T0};
use crate::store::StoreError;
use crate::types::{LlmCall, Status, Task, TaskId};
use crate::LlmPurpose;
use crate::{Completion, NewTask, Refusal};

/// Comments, runs and events read back in order; unknown ids are refused.
pub fn reads_and_unknown_ids(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "talked about");
    s.comment(&t.id, Some("ana"), "looks good", None, T0).unwrap();
    s.comment(&t.id, None, "second", None, T0 + 1).unwrap();
    let comments = s.comments(&t.id).unwrap();
    assert_eq!(
        comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(),
        ["looks good", "second"]
    );
    let unknown = TaskId::from_random([1, 2, 3, 4]);
    let missing = StoreError::Refused(Refusal::NoSuchTask(unknown.clone()));
    assert_eq!(s.get(&unknown).unwrap_err(), missing);
    assert_eq!(s.claim(&unknown, 900, T0).unwrap_err(), missing);
    assert_eq!(s.runs(&unknown).unwrap_err(), missing);
    assert_eq!(s.comment(&unknown, None, "x", None, T0).unwrap_err(), missing);
    let all = s.events(&crate::EventFilter::default()).unwrap();
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    let tail = s
        .events(&crate::EventFilter {
            after_id: all[1].id,
            limit: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(tail, vec![all[2].clone()]);
}

/// Listings filter and order as documented; the dispatcher's queues return what is due.
pub fn listings_and_queues(board: &dyn Backend) {
    let s = board.connect();
    let low = ready_task(&*s, "low");
    let high = s
        .create(
            &NewTask {
                priority: 5,
                assignee: Some("coder".into()),
                ..NewTask::titled("high")
            },
            T0 + 1,
        )
        .unwrap();
    let triage = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("rough")
            },
            T0 + 2,
        )
        .unwrap();
    let gone = ready_task(&*s, "gone");
    s.archive(&gone.id, T0).unwrap();
    let ids = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.list(&crate::TaskFilter::default()).unwrap()),
        vec![high.id.clone(), low.id.clone(), triage.id.clone()]
    );
    let archived = crate::TaskFilter {
        include_archived: true,
        ..Default::default()
    };
    assert_eq!(s.list(&archived).unwrap().len(), 4);
    let by_status = crate::TaskFilter {
        status: Some(Status::Archived),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&by_status).unwrap()), vec![gone.id.clone()]);
    let by_assignee = crate::TaskFilter {
        assignee: Some("coder".into()),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&by_assignee).unwrap()), vec![high.id.clone()]);
    let unassigned = crate::TaskFilter {
        unassigned: true,
        ..Default::default()
    };
    assert_eq!(
        ids(s.list(&unassigned).unwrap()),
        vec![low.id.clone(), triage.id.clone()]
    );
    let limited = crate::TaskFilter {
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&limited).unwrap()), vec![high.id.clone()]);
    assert_eq!(
        ids(s.claimable(10).unwrap()),
        vec![high.id.clone(), low.id.clone()]
    );
    assert_eq!(ids(s.claimable(1).unwrap()), vec![high.id.clone()]);
    s.claim(&high.id, 100, T0).unwrap();
    s.claim(&low.id, 10, T0).unwrap();
    assert_eq!(ids(s.running().unwrap()), vec![high.id.clone(), low.id.clone()]);
    assert!(s.expired_leases(T0 + 9, 10).unwrap().is_empty());
    assert_eq!(ids(s.expired_leases(T0 + 10, 10).unwrap()), vec![low.id.clone()]);
    assert_eq!(
        ids(s.expired_leases(T0 + 100, 10).unwrap()),
        vec![low.id, high.id]
    );
    assert_eq!(ids(s.due_triage(T0, 10).unwrap()), vec![triage.id]);
}

/// The tally counts tasks by status, ended runs by outcome, model requests by outcome and
/// their tokens (a request without a token count adds nothing), and the events that end
/// decompositions by kind.
pub fn tally_counts_the_board(board: &dyn Backend) {
    let s = board.connect();
    assert_eq!(s.tally().unwrap(), crate::Tally::default(), "an empty board");
    let done = ready_task(&*s, "done");
    let running = ready_task(&*s, "running");
    ready_task(&*s, "waiting");
    let rough = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("rough")
            },
            T0,
        )
        .unwrap();
    let policy = crate::RetryPolicy {
        base_seconds: 1,
        failure_limit: 2,
    };
    for at in [T0, T0 + 10] {
        s.record_decompose_failure(&rough.id, "no answer", policy, 0.0, at)
            .unwrap();
    }
    s.claim(&done.id, 900, T0).unwrap();
    assert!(s.complete(&done.id, &Completion::default(), T0 + 1).unwrap());
    s.claim(&running.id, 900, T0).unwrap();
    let call = |outcome: &str, tokens: Option<(i64, i64)>| LlmCall {
        task_id: None,
        purpose: LlmPurpose::Decompose,
        model: "m".into(),
        started_at: T0,
        duration_ms: 5,
        outcome: outcome.parse().expect("an outcome"),
        http_status: None,
        prompt_tokens: tokens.map(|t| t.0),
        completion_tokens: tokens.map(|t| t.1),
        error: None,
        cost: None,
        over_budget: false,
    };
    for c in [
        call("ok", Some((100, 20))),
        call("ok", Some((7, 3))),
        call("http_error", None),
    ] {
        s.record_llm_call(&c).unwrap();
    }
    let tally = s.tally().unwrap();
    let map = |pairs: &[(&str, u64)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(
        tally.tasks,
        map(&[("done", 1), ("ready", 1), ("running", 1), ("triage", 1)])
    );
    assert_eq!(tally.runs, map(&[("completed", 1)]));
    assert_eq!(tally.llm_calls, map(&[("http_error", 1), ("ok", 2)]));
    assert_eq!((tally.prompt_tokens, tally.completion_tokens), (107, 23));
    assert_eq!(
        tally.decompositions,
        map(&[("auto_decompose_failed", 2), ("auto_decompose_parked", 1)])
    );
}
